"""The rules for the `block_scaled` record of a signature (harness/fp8_check/signature/_extract.py's `BlockScaling`).

Every field of `BlockScaling` has an entry in `BLOCK_RULES`: a rule, or `Neutral(reason)` saying why it costs
nothing (tests/verdict/test_verdict_fields.py fails for a field with neither). Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from typing import Any

from fp8_check.verdict._comparator import MISSING
from fp8_check.verdict.rules.findings import (
    IMPROVEMENT,
    NEUTRAL,
    REGRESSION,
    Finding,
    Findings,
    Neutral,
    Rule,
    _is_fp8,
    _list,
    _width_change,
    explained,
)

_DECOMPOSED = "decomposed"


@explained('a block-scaled kernel (cuDNN, Triton, scaled-dot) → `decomposed`',
           'the reverse')
def _rule_form(before: Any, after: Any, bb: dict, ba: dict, sub: str | None) -> list[tuple[str, str]]:
    if before != _DECOMPOSED and after == _DECOMPOSED:
        return [(REGRESSION, f"no block-scaled kernel any more ({before} -> {after}): the scales are applied "
                             "by kernels of their own and the gemm runs on dequantized data")]
    if before == _DECOMPOSED and after != _DECOMPOSED:
        return [(IMPROVEMENT, f"a block-scaled kernel again ({before} -> {after})")]
    return [(NEUTRAL, f"block-scaled kernel {before} -> {after}")]


def _dtype_rule(what: str) -> Rule:
    def rule(before: Any, after: Any, bb: dict, ba: dict, sub: str | None) -> list[tuple[str, str]]:
        if before is MISSING or after is MISSING:
            return [(NEUTRAL, f"{what} {before!r} -> {after!r}")]
        return [_width_change(_list(before), _list(after), what)]
    return explained(f"{what} upcast (fewer FP8/FP4/E8M0 values, or wider)", "narrow again")(rule)


def _count_rule(what: str) -> Rule:
    def rule(before: Any, after: Any, bb: dict, ba: dict, sub: str | None) -> list[tuple[str, str]]:
        if isinstance(before, int) and isinstance(after, int):
            if after > before:
                return [(REGRESSION, f"{after - before} more {what} ({before} -> {after})")]
            return [(IMPROVEMENT, f"{before - after} fewer {what} ({before} -> {after})")]
        return [(NEUTRAL, f"{what}: {before!r} -> {after!r}")]
    return explained(f"more {what}", "fewer")(rule)


# Every field of fp8_check.signature._extract.BlockScaling: its rule, or why it is neutral.
BLOCK_RULES: dict[str, "Rule | Neutral"] = {
    "form": _rule_form,
    "target": Neutral("the block-scaled kernel's name; `form` and `gemms` carry what it costs",
                      label="block-scaled kernel"),
    "data_dtypes": _dtype_rule("block-scaled data"),
    "scale_dtypes": _dtype_rule("block scales at the kernel"),
    "inputs": _dtype_rule("low-precision inputs"),
    "scale_kernels": _count_rule("kernel(s) rewriting the scales outside the gemm"),
    "data_kernels": _count_rule("kernel(s) rewriting the data outside the gemm"),
    "global_scale": Neutral("which kernels read the global scale; a kernel of its own shows in `kernels` and `launches`",
                            label="global scale read by"),
}


@explained('the block-scaled matmul gone (no FP4 or E8M0 value left)',
           'a block-scaled matmul appeared')
def block_field(key: str | None, before: Any, after: Any) -> Findings:
    """`block_scaled` (key None: the whole record) or `block_scaled.KEY` changed."""
    if key is None:
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        if before is MISSING or not b:
            narrow = any(_is_fp8(d) for d in _list(a.get("data_dtypes")))
            return [(IMPROVEMENT if narrow else NEUTRAL, "a block-scaled matmul appeared")]
        if after is MISSING or not a:
            narrow = any(_is_fp8(d) for d in _list(b.get("data_dtypes")))
            return [(REGRESSION if narrow else NEUTRAL, "the block-scaled matmul is gone (no FP4 or E8M0 value left)")]
        out: list[tuple[str, str] | Finding] = []
        for k in list(b) + [k for k in a if k not in b]:
            if b.get(k, MISSING) != a.get(k, MISSING):
                out += block_field(k, b.get(k, MISSING), a.get(k, MISSING))
        return out
    rule = BLOCK_RULES.get(key)
    if rule is None:
        return [(NEUTRAL, f"block_scaled.{key} changed (no cost rule for this field)")]
    if isinstance(rule, Neutral):
        return [(NEUTRAL, rule.why(before, after))]
    return rule(before, after, {}, {}, None)


def judge(m: re.Match, before: Any, after: Any, b_sig: dict, a_sig: dict) -> Findings:
    """The table's entry (`block_scaled`, `block_scaled.KEY`): `m` is its path matched."""
    return block_field(m.group(1), before, after)
