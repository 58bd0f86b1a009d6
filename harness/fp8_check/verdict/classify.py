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
The gemm-field rules live in harness/fp8_check/verdict/_rules_gemm.py. Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from fp8_check import platforms
from fp8_check.cost import CostDelta
from fp8_check.signature import Signature, identity
from fp8_check.verdict import comparator
from fp8_check.verdict._rules_gemm import (  # noqa: F401
    _SIGNATURE_KEYS,
    BLOCK_RULES,
    CLASSES,
    DEVICELESS_DEFAULT,
    GEMM_RULES,
    IMPROVEMENT,
    LINE_CLASSES,
    MIXED,
    NEUTRAL as NEUTRAL,
    REGRESSION,
    Finding,
    Findings,
    Neutral,
    _family,
    _narrow_lost,
    block_field,
    explained,
    gemm_field,
)
from fp8_check.verdict.comparator import MISSING
from fp8_check.verdict.rules_collective import COLLECTIVE_RULES, collective_field
from fp8_check.verdict.rules_layer import classify as classify_layer


@dataclass(frozen=True)
class Line:
    """One classified difference. `before`/`after` are the field's values (MISSING if absent)."""

    path: str
    before: Any
    after: Any
    cls: str
    why: str
    decides: bool = field(default=False, compare=False)  # its rule said: this line decides the verdict (Finding)

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
    cost: CostDelta | None = None  # what the change costs per call (harness/fp8_check/cost/model.py); None: not priced

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
    lines = _deviceless_default(lines, b, a_by_label)
    # A line whose rule says it decides (the FP8 gemm became a wider one): whatever else XLA changed
    # meanwhile, the FP8 matmul is gone.
    decided = [x.cls for x in lines if x.decides]
    return Verdict(overall(decided) if decided else overall(x.cls for x in lines), tuple(lines))


_SPLIT_K_EFFECTS = re.compile(r"^(?:kernels|launches|unfused)$|^gemms\[(\d+)\]\.(?:output|split_k)$")


def _deviceless_default(lines: list[Line], b: dict, a: dict) -> list[Line]:
    """Where a Triton gemm's split-K changed (`gemms[i].split_k`: XLA's default configuration decides it when
    autotuning is off), what the split brings with it — its wider (f32) partial-sum output and the reduce kernel
    after it — is neutral with that reason (`DEVICELESS_DEFAULT`), not a regression."""
    gb, ga = b.get("gemms"), a.get("gemms")
    if not (isinstance(gb, list) and isinstance(ga, list)):
        return lines
    split = {i for i, g in enumerate(gb) if isinstance(g, dict) and i < len(ga) and isinstance(ga[i], dict)
             and g.get("split_k") != ga[i].get("split_k")}
    if not split:
        return lines
    out, told = [], False
    for x in lines:
        m = _SPLIT_K_EFFECTS.match(x.path)
        if m and (m.group(1) is None or int(m.group(1)) in split) and x.cls != NEUTRAL:
            x = Line(x.path, x.before, x.after, NEUTRAL, f"split-K: {x.why}" if told else f"{DEVICELESS_DEFAULT}: {x.why}")
            told = True
        out.append(x)
    return out


def _by_label(b: dict, a: dict) -> dict:
    """`a` with its gemms (a list indexed by label: {} where the golden's gemm has no counterpart) paired to `b`'s."""
    gb, ga = b.get("gemms"), a.get("gemms")
    if not (isinstance(gb, list) and isinstance(ga, list)
            and all(isinstance(x, dict) for x in gb + ga)):
        return a
    found = identity.found_by_label("gemms", gb, ga)
    size = max(found, default=-1) + 1
    return {**a, "gemms": [found.get(i, {}) for i in range(size)]}


def classify_extra(verdict: Verdict, path: str, before: Any, after: Any) -> Verdict:
    """`verdict` plus a line for a failure outside the signature (`numerics`, `filecheck`, `layers[…]`, `gemms[i].device`)."""
    lines = verdict.lines + tuple(classify_field(path, before, after, {}, {}))
    return Verdict(overall(x.cls for x in lines), lines, verdict.cost)


def classify_field(path: str, before: Any, after: Any, b_sig: dict, a_sig: dict) -> list[Line]:
    lines = _classify_field(path, before, after, b_sig, a_sig)
    # One rule for every field: a narrow dtype (FP8, FP4, E8M0) replaced by a wider one is an upcast,
    # whatever the field (a field whose own rule says less is overruled).
    if not any(x.cls == REGRESSION for x in lines):
        lost = [x for x in _narrow_lost(before, after, path) if x[0] == REGRESSION]
        if lost:
            return [Line(path, before, after, REGRESSION, lost[0][1])]
    return lines


_HEAD = re.compile(r"[A-Za-z_]\w*")


def _classify_field(path: str, before: Any, after: Any, b_sig: dict, a_sig: dict) -> list[Line]:
    """The table dispatches: the entry of FIELD_RULES named by the path's first word judges the field."""
    head = _HEAD.match(path)
    entry = FIELD_RULES.get(head.group(0)) if head else None
    found: Findings | None = None
    if isinstance(entry, Record):
        m = entry.paths.fullmatch(path)
        if m:
            found = entry.judge(m, before, after, b_sig, a_sig)
    elif entry is not None and head is not None and head.group(0) == path:
        found = entry(before, after)
    if found is None:
        found = [(NEUTRAL, f"{path} changed (no cost rule for this field)")]
    return [_line(path, before, after, f) for f in found]


def _line(path: str, before: Any, after: Any, found: "tuple[str, str] | Finding") -> Line:
    if isinstance(found, Finding):
        return Line(path, before, after, found.cls, found.why, found.decides)
    return Line(path, before, after, found[0], found[1])


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
def _kernels(before: Any, after: Any) -> list[tuple[str, str]]:
    if isinstance(before, int) and isinstance(after, int):
        if after > before:
            n = after - before
            return [(REGRESSION, f"{n} more kernel launch{'es' if n > 1 else ''} ({before} -> {after})")]
        n = before - after
        return [(IMPROVEMENT, f"{n} fewer kernel launch{'es' if n > 1 else ''} ({before} -> {after})")]
    return [(NEUTRAL, "kernel count not comparable")]


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
def _launches(before: Any, after: Any) -> list[tuple[str, str]]:
    """Launch lines added and removed, paired where a kernel only changed its name or its ops."""
    before, after = _list(before), _list(after)
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
    engine = platforms.engine_of(target)
    if engine is not None and engine.fp8:  # the platforms say which gemm library calls are FP8 gemms
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
def _unfused(before: Any, after: Any) -> list[tuple[str, str]]:
    before, after = _list(before), _list(after)
    out = [(REGRESSION, f"{op} now outside the gemms") for op in after if op not in before]
    out += [(IMPROVEMENT, f"{op} no longer outside the gemms") for op in before if op not in after]
    return out or [(NEUTRAL, "same ops")]


# ------------------------------------------------------------------ the table that dispatches


@dataclass(frozen=True)
class Record:
    """A field that holds records (`gemms[i]`, `block_scaled`, `collectives[i]`) or keyed findings (`layers[…]`).

    `paths` matches every path the entry judges (its groups go to `judge`); `whole` is the rule for a
    whole record appearing or going, `rules` one per field of the record (docs/verdicts.md lists both)."""

    paths: re.Pattern
    judge: Callable[[re.Match, Any, Any, dict, dict], Findings]
    whole: object
    rules: Mapping[str, object] = field(default_factory=dict)
    label: str = ""  # how docs/verdicts.md writes a record's path: `gemms[i]`


def _judge_gemm(m: re.Match, before: Any, after: Any, b_sig: dict, a_sig: dict) -> Findings:
    i, key, sub = int(m.group(1)), m.group(2), m.group(3)
    gemm_b = _gemm_at(b_sig, i, before if key is None else None)
    gemm_a = _gemm_at(a_sig, i, after if key is None else None)
    return gemm_field(key, sub, before, after, gemm_b, gemm_a)


@explained('always: wrong numbers', '—')
def _numerics(before: Any, after: Any) -> list[tuple[str, str]]:
    return [(REGRESSION, "wrong numbers")]


@explained('always: a FileCheck pattern no longer matches', '—')
def _filecheck(before: Any, after: Any) -> list[tuple[str, str]]:
    return [(REGRESSION, "FileCheck patterns no longer match")]


@explained('a layer that should run in FP8/FP4 fell back to a wider type',
           'a layer that should stay wide runs in FP8/FP4 (a rule matching no matmul is neutral)')
def _layers(m: re.Match, before: Any, after: Any, b_sig: dict, a_sig: dict) -> Findings:
    return [classify_layer(m.string, before, after)]


# The table that dispatches: a path's first word names its entry (`gemms[0].output` -> "gemms"). Every field
# of fp8_check.signature.extract.Signature has one: a rule (before, after) -> findings for a plain field, a
# `Record` for one holding records (each of its fields a rule or `Neutral(reason)`); tests/test_verdict_fields.py
# fails for a field with neither, and proves every entry reachable. Adding an entry is the whole edit.
FIELD_RULES: dict[str, "Callable[[Any, Any], Findings] | Record"] = {
    "kernels": _kernels,
    "launches": _launches,
    "unfused": _unfused,
    "gemms": Record(re.compile(r"gemms\[(\d+)\](?:\.(\w+)(?:\.(\w+))?)?"), _judge_gemm, gemm_field, GEMM_RULES, "gemms[i]"),
    "block_scaled": Record(re.compile(r"block_scaled(?:\.(\w+))?"),
                           lambda m, before, after, b_sig, a_sig: block_field(m.group(1), before, after),
                           block_field, BLOCK_RULES, "block_scaled"),
    "collectives": Record(re.compile(r"collectives(?:\[(\d+)\])?(?:\.(\w+))?"),
                          lambda m, before, after, b_sig, a_sig: collective_field(m.string, before, after),
                          collective_field, COLLECTIVE_RULES, "collectives[i]"),
    # outside the signature: what classify_extra judges
    "numerics": _numerics,
    "filecheck": _filecheck,
    "layers": Record(re.compile(r"layers\[.*"), _layers, _layers, label="layers[PATTERN@PASS]"),
}
