"""What every verdict rule speaks and asks: the classes, a `Finding`, `Neutral(reason)`, `@explained`; is a dtype narrow.

A rule (in a peer of this folder, reached through the table in harness/fp8_check/verdict/rules/__init__.py) maps one
differing field (before -> after) to `(class, why)` pairs, or a `Finding` where it states more, and says with `@explained` what it
calls a regression and an improvement (docs/verdicts.md generates its table from these statements). Dtype questions (is
it narrow? did it get wider?) are answered by harness/fp8_check/core/_dtypes.py; `_narrow_lost` is the rule every
dtype-valued field shares. Pure: no I/O, no JAX.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence, TypeVar

from fp8_check import platforms
from fp8_check.core import FP4, FP8, SCALE, dtype_class, is_narrow, upcast

REGRESSION, IMPROVEMENT, NEUTRAL, MIXED = "regression", "improvement", "neutral", "mixed"
LINE_CLASSES = (REGRESSION, IMPROVEMENT, NEUTRAL)
CLASSES = (REGRESSION, IMPROVEMENT, NEUTRAL, MIXED)


class Finding(NamedTuple):
    """What a rule found in one field: its class, why, and whether it decides the whole verdict.

    `decides`: this line alone makes the change a regression, whatever else improved (the FP8 gemm
    itself is gone). A rule states it here, in data; nothing reads a rule's wording to find out."""

    cls: str
    why: str
    decides: bool = False


@dataclass(frozen=True)
class Explained:
    """What a rule calls a regression and an improvement, one line each, stated next to the rule."""

    regression: str
    improvement: str = "the reverse"


_F = TypeVar("_F", bound=Callable[..., Any])


def explained(regression: str, improvement: str = "the reverse") -> Callable[[_F], _F]:
    """Decorator: attach the rule's `Explained` statement (read by `explanation`)."""
    def mark(rule: _F) -> _F:
        rule.__dict__["explained"] = Explained(regression, improvement)  # a function (or closure) carries it
        return rule
    return mark


def explanation(rule: object) -> Explained | None:
    """The statement a rule carries, or None for a rule nobody explained."""
    found = getattr(rule, "explained", None)
    return found if isinstance(found, Explained) else None


def _list(value: Any) -> list:
    return list(value) if isinstance(value, list) else []


def _family(target: Any) -> str:
    t = str(target)
    library = platforms.engine_of(t)
    if library is not None and library.family != "cudnn":
        return library.family
    if t.startswith("__triton") or "triton" in t:
        return "triton"
    if library is not None:
        return library.family
    return "plain"  # a dot left in a loop/input fusion, or a bare dot: no gemm emitter


def _is_fp8(dtype: Any) -> bool:
    """Narrow (FP8, FP4 or an E8M0 scale): see harness/fp8_check/core/_dtypes.py."""
    return is_narrow(dtype)


def _width_change(before: list, after: list, what: str) -> tuple[str, str]:
    """A dtype list's change: fewer narrow values or more bits is an upcast (regression), the reverse an improvement."""
    b, a = "x".join(map(str, before)) or "-", "x".join(map(str, after)) or "-"
    fb, fa = sum(map(_is_fp8, before)), sum(map(_is_fp8, after))
    if fa < fb:
        return REGRESSION, f"{what} upcast from {_narrow_name(before)} ({b} -> {a})"
    if fa > fb:
        return IMPROVEMENT, f"{what} {_narrow_name(after)} again ({b} -> {a})"
    change = upcast(before, after)
    if change:
        return (REGRESSION, f"{what} wider ({b} -> {a})") if change > 0 else (IMPROVEMENT, f"{what} narrower ({b} -> {a})")
    return NEUTRAL, f"{what} {b} -> {a}"


def _narrow_name(values: list) -> str:
    """'FP8', 'FP4' or 'FP8/FP4': the narrow classes among `values` (for the why text)."""
    classes = {dtype_class(v) for v in values if _is_fp8(v)}
    names = [n for c, n in ((FP8, "FP8"), (FP4, "FP4"), (SCALE, "E8M0")) if c in classes]
    return "/".join(names) or "FP8"


@explained("a narrow type (FP8, FP4, E8M0) replaced by a wider one, whatever the field's own rule says",
           '—')
def _narrow_lost(before: Any, after: Any, what: str) -> list[tuple[str, str]]:
    """The rule every dtype-valued field shares: a narrow type replaced by a wider one is an upcast."""
    b = before if isinstance(before, list) else [before] if isinstance(before, str) else []
    a = after if isinstance(after, list) else [after] if isinstance(after, str) else []
    if not b or not a:
        return []
    fb, fa = sum(map(_is_fp8, b)), sum(map(_is_fp8, a))
    if fa < fb:
        return [(REGRESSION, f"{what} upcast from {_narrow_name(b)} ({'x'.join(b)} -> {'x'.join(a)})")]
    if fa > fb:
        return [(IMPROVEMENT, f"{what} {_narrow_name(a)} again ({'x'.join(b)} -> {'x'.join(a)})")]
    return []


@dataclass(frozen=True)
class Neutral:
    """A field that costs nothing on the GPU when it changes; `reason` says why.

    The line reads `LABEL BEFORE -> AFTER` when a label is given, else the reason."""

    reason: str
    label: str | None = None

    def why(self, before: Any, after: Any) -> str:
        return f"{self.label} {before} -> {after}" if self.label else self.reason


# What a rule returns: (class, why) pairs, or a `Finding` where it states more (that it decides the verdict).
Findings = Sequence["tuple[str, str] | Finding"]
# A rule: (before, after, gemm or block before, gemm or block after, sub-key) -> [(class, why)].
Rule = Callable[[Any, Any, dict, dict, "str | None"], Findings]
