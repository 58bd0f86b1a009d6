"""Verdicts: is the change between two fusion signatures a regression, an improvement, or a rename?

`classify(before, after)` compares two signatures (a `Signature`, a full signature
dict, or a partial golden dict that states only some fields) and gives every
differing field one or more classified `Line`s, and the change as a whole a class:

- `regression`: the GPU does more work or moves more bytes than before;
- `improvement`: the reverse of a regression rule;
- `neutral`: nothing that costs time changed (a renamed custom-call target or
  Triton fusion kind with the same structure, a fusion kind kInput -> kLoop with the
  same ops, dimension numbers, ...);
- `mixed` (whole change only): at least one regression and one improvement.

The rules, each grounded in what costs time on the GPU, state what they call a regression and an
improvement next to their code (`@explained`); docs/verdicts.md generates its table from them.
The gemm-field rules live in harness/fp8_check/verdict/verdict_rules.py. Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from fp8_check.verdict.collective_rules import COLLECTIVE_RULES, collective_field, is_collective_path
from fp8_check.verdict import comparator, device_validity
from fp8_check.signature import identity
from fp8_check.verdict.comparator import MISSING
from fp8_check.cost.cost import CostDelta
from fp8_check.verdict.layer_rules import classify as classify_layer
from fp8_check.signature.signature import Signature
from fp8_check.verdict.verdict_rules import (BLOCK_RULES, CLASSES, GEMM_RULES, IMPROVEMENT, LINE_CLASSES,  # noqa: F401
                                   MIXED, NEUTRAL as NEUTRAL, REGRESSION, Neutral, _SIGNATURE_KEYS, _family, _narrow_lost,
                                   block_field, explained, gemm_field)


@dataclass(frozen=True)
class Line:
    """One classified difference. `before`/`after` are the field's values (MISSING if absent)."""

    path: str
    before: Any
    after: Any
    cls: str
    why: str

    def to_dict(self) -> dict:
        return {"path": self.path, "before": _plain(self.before), "after": _plain(self.after), "class": self.cls,
                "why": self.why}

    @classmethod
    def from_dict(cls, d: dict) -> "Line":
        return cls(d["path"], d.get("before"), d.get("after"), d["class"], d.get("why", ""))


@dataclass(frozen=True)
class Verdict:
    cls: str
    lines: tuple[Line, ...] = field(default_factory=tuple)
    cost: CostDelta | None = None  # what the change costs per call (harness/fp8_check/cost/cost.py); None: not priced

    @property
    def regressions(self) -> list[Line]:
        return [x for x in self.lines if x.cls == REGRESSION]

    @property
    def improvements(self) -> list[Line]:
        return [x for x in self.lines if x.cls == IMPROVEMENT]

    @property
    def is_regression(self) -> bool:
        """A regression or a mixed change: something got worse."""
        return self.cls in (REGRESSION, MIXED)

    def for_path(self, path: str) -> list[Line]:
        return [x for x in self.lines if x.path == path]

    def summary(self, limit: int = 3) -> str:
        """One phrase: what got worse (and better) — for titles and grid tooltips."""
        worse = _unique(x.why for x in self.regressions)
        better = _unique(x.why for x in self.improvements)
        parts = []
        if worse:
            parts.append("worse: " + "; ".join(worse[:limit]) + (" …" if len(worse) > limit else ""))
        if better:
            parts.append("better: " + "; ".join(better[:limit]) + (" …" if len(better) > limit else ""))
        if not parts:
            neutral = _unique(x.why for x in self.lines)
            parts.append("no cost change: " + "; ".join(neutral[:limit]) if neutral else "no change")
        return " / ".join(parts)

    def to_dict(self) -> dict:
        d: dict = {"class": self.cls, "lines": [x.to_dict() for x in self.lines]}
        if self.cost is not None:
            d["cost"] = self.cost.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "Verdict | None":
        if not d:
            return None
        return cls(d["class"], tuple(Line.from_dict(x) for x in d.get("lines", [])), CostDelta.from_dict(d.get("cost")))


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _plain(value: Any) -> Any:
    return None if value is MISSING else value


def overall(classes: Iterable[str]) -> str:
    seen = set(classes)
    if REGRESSION in seen and IMPROVEMENT in seen:
        return MIXED
    if REGRESSION in seen:
        return REGRESSION
    if IMPROVEMENT in seen:
        return IMPROVEMENT
    return NEUTRAL


# ------------------------------------------------------------------ diffing


def as_dict(sig: Signature | dict | None) -> dict:
    if sig is None:
        return {}
    if isinstance(sig, Signature):
        return sig.to_dict()
    if not isinstance(sig, dict):
        raise TypeError(f"a signature is a Signature or a dict, not {type(sig).__name__}")
    return sig


def is_full(sig: dict) -> bool:
    """A whole signature (from `Signature.to_dict`), not a golden stating only some fields."""
    return all(k in sig for k in _SIGNATURE_KEYS)


# ------------------------------------------------------------------ the rules


def classify(before: Signature | dict | None, after: Signature | dict | None) -> Verdict:
    """The verdict on the change `before` -> `after`.

    `before` may be a partial golden: then only the fields it states are compared
    (as the judge does). Two full signatures are compared both ways, so a field
    that appears (a new operand role, say) counts too.
    """
    b, a = as_dict(before), as_dict(after)
    symmetric = is_full(b) and is_full(a)
    lines: list[Line] = []
    a_by_label = _by_label(b, a)  # `gemms[i]` in a path is the golden's i-th gemm and its counterpart
    for d in comparator.compare(b, a, symmetric=symmetric):
        lines += classify_field(d.path, d.expected, d.found, b, a_by_label)
    # An FP8 gemm that became a wider one (the other FP8 family on AMD, a lost fusion on NVIDIA) decides:
    # whatever else XLA dropped meanwhile, the FP8 matmul is gone.
    lost_fp8 = any(x.cls == REGRESSION and x.path.endswith(".target") and "FP8 gemm ->" in x.why for x in lines)
    return Verdict(REGRESSION if lost_fp8 else overall(x.cls for x in lines), tuple(lines))


def _by_label(b: dict, a: dict) -> dict:
    """`a` with its gemms (a list indexed by label: {} where the golden's gemm has no counterpart) paired to `b`'s."""
    gb, ga = b.get("gemms"), a.get("gemms")
    if not (isinstance(gb, list) and isinstance(ga, list)
            and all(isinstance(x, dict) for x in gb + ga)):
        return a
    found = identity.found_by_label("gemms", gb, ga)
    size = max(found, default=-1) + 1
    return {**a, "gemms": [found.get(i, {}) for i in range(size)]}


@explained('always: wrong numbers (`numerics`), a violated FileCheck pattern (`filecheck`), an FP8 gemm the '
           "platform's library has no kernel for (`gemms[i].device`: compiles deviceless, fails on the device)", '—')
def classify_extra(verdict: Verdict, path: str, before: Any, after: Any) -> Verdict:
    """`verdict` plus a line for a non-signature failure (`numerics`, `filecheck`, `gemms[i].device`)."""
    lines = verdict.lines + tuple(classify_field(path, before, after, {}, {}))
    return Verdict(overall(x.cls for x in lines), lines, verdict.cost)


_GEMM_FIELD = re.compile(r"^gemms\[(\d+)\](?:\.(\w+)(?:\.(\w+))?)?$")
_BLOCK_FIELD = re.compile(r"^block_scaled(?:\.(\w+))?$")


def classify_field(path: str, before: Any, after: Any, b_sig: dict, a_sig: dict) -> list[Line]:
    lines = _classify_field(path, before, after, b_sig, a_sig)
    # One rule for every field: a narrow dtype (FP8, FP4, E8M0) replaced by a wider one is an upcast,
    # whatever the field (a field whose own rule says less is overruled).
    if not any(x.cls == REGRESSION for x in lines):
        lost = [x for x in _narrow_lost(before, after, path) if x[0] == REGRESSION]
        if lost:
            return [Line(path, before, after, REGRESSION, lost[0][1])]
    return lines


def _classify_field(path: str, before: Any, after: Any, b_sig: dict, a_sig: dict) -> list[Line]:
    def line(cls: str, why: str) -> Line:
        return Line(path, before, after, cls, why)

    if path in ("numerics", "filecheck"):
        return [line(REGRESSION, "wrong numbers" if path == "numerics" else "FileCheck patterns no longer match")]
    if path.startswith("layers["):
        return [line(*classify_layer(path, before, after))]
    if device_validity.is_device_field(path):  # the library has no kernel for it (device_validity.py)
        return [line(REGRESSION, device_validity.reason(before))]
    if path == "kernels":
        return _kernels(before, after, line)
    if path == "launches":
        return [line(c, w) for c, w in _launches(_list(before), _list(after))]
    if path == "unfused":
        return [line(c, w) for c, w in _unfused(_list(before), _list(after))]
    if is_collective_path(path):
        return [line(c, w) for c, w in collective_field(path, before, after)]
    m = _GEMM_FIELD.match(path)
    if m:
        i, key, sub = int(m.group(1)), m.group(2), m.group(3)
        gemm_b = _gemm_at(b_sig, i, before if key is None else None)
        gemm_a = _gemm_at(a_sig, i, after if key is None else None)
        return [line(c, w) for c, w in gemm_field(key, sub, before, after, gemm_b, gemm_a)]
    m = _BLOCK_FIELD.match(path)
    if m:
        return [line(c, w) for c, w in block_field(m.group(1), before, after)]
    return [line(NEUTRAL, f"{path} changed (no cost rule for this field)")]


def _list(value: Any) -> list:
    return list(value) if isinstance(value, list) else []


def _gemm_at(sig: dict, i: int, whole: Any) -> dict:
    if isinstance(whole, dict):
        return whole
    gemms = sig.get("gemms") if isinstance(sig, dict) else None
    if isinstance(gemms, list) and i < len(gemms) and isinstance(gemms[i], dict):
        return gemms[i]
    return {}


@explained('more kernels launched', 'fewer')
def _kernels(before: Any, after: Any, line) -> list[Line]:
    if isinstance(before, int) and isinstance(after, int):
        if after > before:
            n = after - before
            return [line(REGRESSION, f"{n} more kernel launch{'es' if n > 1 else ''} ({before} -> {after})")]
        n = before - after
        return [line(IMPROVEMENT, f"{n} fewer kernel launch{'es' if n > 1 else ''} ({before} -> {after})")]
    return [line(NEUTRAL, "kernel count not comparable")]


# ---- launches


_LAUNCH = re.compile(r"^(?P<head>.*?)(?: \[(?P<ops>[^\]]*)\])?$")


@dataclass(frozen=True)
class _Launch:
    text: str
    gemm: str | None  # the gemm target for `gemm X` launches
    ops: frozenset

    @classmethod
    def parse(cls, text: str) -> "_Launch":
        m = _LAUNCH.match(str(text))
        assert m is not None  # the pattern matches any text
        head, ops = m.group("head"), m.group("ops")
        ops_set = frozenset(o.strip() for o in ops.split(",") if o.strip()) if ops else frozenset()
        if head.startswith("gemm "):
            return cls(str(text), head[5:].strip(), ops_set)
        return cls(str(text), None, ops_set)


@explained('a new non-gemm kernel; pattern ops moved into a separate kernel (a kernel renamed with the same ops is neutral)', 'a separate kernel gone; ops left it')
def _launches(before: list, after: list) -> list[tuple[str, str]]:
    """Launch lines added and removed, paired where a kernel only changed its name or its ops."""
    removed, added = _multiset_minus(before, after), _multiset_minus(after, before)
    rem = [_Launch.parse(x) for x in removed]
    add = [_Launch.parse(x) for x in added]
    out: list[tuple[str, str]] = []
    # 1. same role, same ops: a rename (gemm target in one family, or fusion kind kInput -> kLoop)
    for x in list(add):
        for y in rem:
            same = (x.gemm is not None and y.gemm is not None and _family(x.gemm) == _family(y.gemm)) or \
                   (x.gemm is None and y.gemm is None and x.ops == y.ops)
            if same:
                out.append((NEUTRAL, f"kernel renamed: {y.text} -> {x.text}"))
                add.remove(x)
                rem.remove(y)
                break
    # 2. a non-gemm kernel whose pattern ops changed: ops moved into / out of a gemm
    for x in list(add):
        if x.gemm is not None:
            continue
        best = max((y for y in rem if y.gemm is None and y.ops & x.ops), key=lambda y: len(y.ops & x.ops), default=None)
        if best is None:
            continue
        rem.remove(best)
        add.remove(x)
        gained, lost = sorted(x.ops - best.ops), sorted(best.ops - x.ops)
        if gained and not lost:
            out.append((REGRESSION, f"ops {', '.join(gained)} moved into a separate kernel ({x.text})"))
        elif lost and not gained:
            out.append((IMPROVEMENT, f"ops {', '.join(lost)} left the separate kernel ({best.text})"))
        else:
            out.append((NEUTRAL, f"separate kernel changed: {best.text} -> {x.text}"))
    for x in add:
        if x.gemm is None:
            out.append((REGRESSION, f"new kernel outside the gemm: {x.text}"))
        else:
            out.append((_gemm_presence(x.gemm, gained=True), f"new gemm launch: {x.text}"))
    for y in rem:
        if y.gemm is None:
            out.append((IMPROVEMENT, f"kernel gone: {y.text}"))
        else:
            out.append((_gemm_presence(y.gemm, gained=False), f"gemm launch gone: {y.text}"))
    return out or [(NEUTRAL, "launch order only")]


def _gemm_presence(target: str, gained: bool) -> str:
    if "$f8" in target:
        return IMPROVEMENT if gained else REGRESSION
    return NEUTRAL  # the gemms[] lines say what this costs


def _multiset_minus(xs: list, ys: list) -> list:
    rest = list(ys)
    out = []
    for x in xs:
        if x in rest:
            rest.remove(x)
        else:
            out.append(x)
    return out


@explained('a pattern op now outside the gemms', 'an op no longer outside')
def _unfused(before: list, after: list) -> list[tuple[str, str]]:
    out = [(REGRESSION, f"{op} now outside the gemms") for op in after if op not in before]
    out += [(IMPROVEMENT, f"{op} no longer outside the gemms") for op in before if op not in after]
    return out or [(NEUTRAL, "same ops")]


# Every field of fp8_check.signature.signature.Signature: its rule, or the rules of its record's fields
# (`gemms`, `block_scaled`: GEMM_RULES / BLOCK_RULES, each field a rule or `Neutral(reason)`).
# tests/test_verdict_fields.py fails for a field with neither.
FIELD_RULES: dict[str, object] = {
    "kernels": _kernels,
    "launches": _launches,
    "unfused": _unfused,
    "gemms": GEMM_RULES,
    "block_scaled": BLOCK_RULES,
    "collectives": COLLECTIVE_RULES,
}
