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
The rules and the table that dispatches to them live in harness/fp8_check/verdict/rules/, one peer module a
part of the signature. Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from fp8_check.cost import CostDelta
from fp8_check.signature import Signature, found_by_label
from fp8_check.verdict._comparator import MISSING, compare
from fp8_check.verdict.rules import FIELD_RULES, Record
from fp8_check.verdict.rules.findings import (
    IMPROVEMENT,
    MIXED,
    NEUTRAL,
    REGRESSION,
    Finding,
    Findings,
    _narrow_lost,
)
from fp8_check.verdict.rules.gemm import DEVICELESS_DEFAULT

_SIGNATURE_KEYS = ("kernels", "launches", "gemms", "unfused")


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
    cost: CostDelta | None = None  # what the change costs per call (harness/fp8_check/cost/_model.py); None: not priced

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
    for d in compare(b, a, symmetric=symmetric):
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
    found = found_by_label("gemms", gb, ga)
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

