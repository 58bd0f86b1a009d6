"""Verdict rules for the `collectives` of a sharded signature (see harness/fp8_check/signature/_collectives.py).

Each differing collective field (before -> after) gets `(class, why)` pairs; every field
has a rule or an explicit neutral reason. Pure: no I/O, no JAX.

Each rule states what it calls a regression and an improvement (`@explained`); docs/verdicts.md
generates its table from them.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from fp8_check.core import bits
from fp8_check.verdict._comparator import MISSING
from fp8_check.verdict.rules.findings import IMPROVEMENT, NEUTRAL, REGRESSION, Findings, Neutral, _is_fp8, explained

_FIELD = re.compile(r"^collectives(?:\[(\d+)\])?(?:\.(\w+))?$")
NEUTRAL_WHY = {
    "op": "collective kind changed (its cost is judged by bytes)",
    "shape": "shape changed (its cost is judged by bytes)",
    "groups": "replica groups changed (which devices talk; the volume is judged by bytes)",
    "layer": "layer attribution changed (metadata only)",
}


def is_collective_path(path: str) -> bool:
    return _FIELD.match(path) is not None


def _bits(dtype: Any) -> int | None:
    """Widths from the dtype vocabulary (harness/fp8_check/core/_dtypes.py); a predicate is a byte; a variadic collective's
    `a+b` (collectives.dtype_text): its widest operand."""
    widths = [8 if part == "pred" else bits(part) for part in str(dtype).split("+")]
    return None if None in widths else max(w for w in widths if w is not None)


def _narrow(dtype: Any) -> bool:
    """FP8/FP4/E8M0, every operand of a variadic collective."""
    return all(_is_fp8(part) for part in str(dtype).split("+"))


def _label(c: Any) -> str:
    if isinstance(c, dict):
        return f"{c.get('op', '?')} {c.get('shape', c.get('dtype', '?'))}"
    return str(c)


@explained("a collective more", "a collective fewer")
def collective_field(path: str, before: Any, after: Any) -> list[tuple[str, str]]:
    """`collectives` (the whole list), `collectives[i]` (one collective) or `collectives[i].KEY` changed:
    a field's rule is its entry in COLLECTIVE_RULES (the table dispatches)."""
    m = _FIELD.match(path)
    key = m.group(2) if m else None
    if key is None:  # a whole collective (or the whole list) appeared or went
        b = before if isinstance(before, list) else [] if before is MISSING else [before]
        a = after if isinstance(after, list) else [] if after is MISSING else [after]
        if len(a) > len(b):
            return [(REGRESSION, f"more collectives: {', '.join(_label(c) for c in a[len(b):]) or len(a) - len(b)}")]
        if len(a) < len(b):
            return [(IMPROVEMENT, f"fewer collectives: {', '.join(_label(c) for c in b[len(a):]) or len(b) - len(a)}")]
        return [(NEUTRAL, "collectives changed")]
    rule = COLLECTIVE_RULES.get(key)
    if rule is None:
        return [(NEUTRAL, f"collectives field {key} changed (no cost rule)")]
    if isinstance(rule, Neutral):
        return [(NEUTRAL, rule.why(before, after))]
    return rule(before, after)


@explained("an FP8 collective now moves a wider type (what it costs: the bytes rule, from the real bytes); any wider type",
           "FP8 again / narrower")
def _dtype(before: Any, after: Any) -> list[tuple[str, str]]:
    bb, ba = _bits(before), _bits(after)
    # no "(bytes xN)" here: the width says nothing of the volume; the `bytes` rule reports the real bytes
    if _narrow(before) and not _narrow(after) and (ba or 0) > 8:
        return [(REGRESSION, f"FP8 collective now moves {after} instead of {before}")]
    if _narrow(after) and not _narrow(before) and (bb or 0) > 8:
        return [(IMPROVEMENT, f"collective moves FP8 again ({before} -> {after})")]
    if bb and ba and ba != bb:
        return [(REGRESSION, f"collective moves a wider type ({before} -> {after})") if ba > bb else
                (IMPROVEMENT, f"collective moves a narrower type ({before} -> {after})")]
    return [(NEUTRAL, f"collective dtype {before} -> {after} (same width)")]


@explained("more bytes per device", "fewer")
def _bytes(before: Any, after: Any) -> list[tuple[str, str]]:
    if isinstance(before, (int, float)) and isinstance(after, (int, float)) and before != after:
        ratio = f", x{after / before:.3g}" if before > 0 else ""  # computed from the bytes, never assumed
        if after > before:
            return [(REGRESSION, f"collective moves more bytes per device ({before} -> {after}{ratio})")]
        return [(IMPROVEMENT, f"collective moves fewer bytes per device ({before} -> {after}{ratio})")]
    return [(NEUTRAL, "collective bytes not comparable")]


@explained("async → sync (can no longer overlap compute)", "sync → async")
def _asynchronous(before: Any, after: Any) -> list[tuple[str, str]]:
    if before is True and after is not True:
        return [(REGRESSION, "collective no longer asynchronous (cannot overlap compute)")]
    if after is True and before is not True:
        return [(IMPROVEMENT, "collective now asynchronous (overlaps compute)")]
    return [(NEUTRAL, "asynchronous unchanged")]


@explained("a windowed-einsum (collective matmul) loop gone", "a loop appeared")
def _loop(before: Any, after: Any) -> list[tuple[str, str]]:
    before, after = ("" if x is MISSING else x for x in (before, after))
    if before and not after:
        return [(REGRESSION, f"{before} loop gone: the collective no longer overlaps the gemm steps")]
    if after and not before:
        return [(IMPROVEMENT, f"collective now in a {after} loop (overlaps the gemm steps)")]
    return [(NEUTRAL, f"loop {before} -> {after}")]


def _core_name(core: Any) -> str:
    return {"sparsecore": "SparseCore", "": "TensorCore"}.get("" if core in (MISSING, None) else str(core), str(core))


@explained("moved back from an offload core (the SparseCore) to the main core (the TensorCore): it now takes the "
           "TensorCore's time", "offloaded from the TensorCore to the SparseCore (the TensorCore keeps computing)")
def core_change(before: Any, after: Any) -> list[tuple[str, str]]:
    b, a = ("" if x in (MISSING, None) else str(x) for x in (before, after))
    if b == a:
        return [(NEUTRAL, "core unchanged")]
    move = f"{_core_name(b)} -> {_core_name(a)}"
    if not b:
        return [(IMPROVEMENT, f"collective offloaded to the {_core_name(a)} ({move}): the TensorCore keeps computing")]
    if not a:
        return [(REGRESSION, f"collective back on the TensorCore ({move}): it no longer runs beside the matmuls")]
    return [(NEUTRAL, f"collective moved between offload cores ({move})")]


# Every field of fp8_check.signature._collectives.Collective: its rule (before, after) -> [(class, why)], or
# why it is neutral. collective_field dispatches through this table; tests/verdict/test_verdict_fields.py fails for a
# field with neither and proves every entry reachable.
COLLECTIVE_RULES: dict[str, "Callable[[Any, Any], list[tuple[str, str]]] | Neutral"] = {
    "dtype": _dtype,
    "bytes": _bytes,
    "asynchronous": _asynchronous,
    "loop": _loop,
    "core": core_change,
    **{key: Neutral(why) for key, why in NEUTRAL_WHY.items()},
}


def judge(m: re.Match, before: Any, after: Any, b_sig: dict, a_sig: dict) -> Findings:
    """The table's entry (`collectives`, `collectives[i]`, `collectives[i].KEY`): `m` is its path matched."""
    return collective_field(m.string, before, after)
