"""The dtype vocabulary: one home for what FP8, FP4, a scale type and a wide type are.

Two spellings of the same types meet in fp8-check: JAX/NumPy names in case files
(`float8_e4m3fn`) and XLA's HLO names in signatures (`f8e4m3fn`). Every module that
asks "is this FP8?", "is this narrower?", "which dtypes may a case use?" asks here:
signature extraction, the verdict rules, the case schema, the API and the report.

Classes (of an HLO dtype, `dtype_class`):

- `fp8`: the 8-bit float formats a gemm computes on (E4M3, E5M2 and their variants);
- `fp4`: E2M1, the 4-bit data format of NVFP4 / MXFP4;
- `scale`: E8M0, a power-of-two block scale (MX formats); it is 8 bits wide but never data;
- `wide`: the formats a narrow value is upcast to (bf16, f16, f32, tf32, f64);
- `int` and `other` (pred, tuples, unknown names).

*Narrow* is fp8, fp4 or scale: a narrow dtype becoming a wide one, in any signature field,
is an upcast and a regression (docs/verdicts.md). Pure: no I/O, no JAX.
"""

from __future__ import annotations

from typing import Any, Iterable

FP8 = "fp8"
FP4 = "fp4"
SCALE = "scale"
WIDE = "wide"
INT = "int"
OTHER = "other"
CLASSES = (FP8, FP4, SCALE, WIDE, INT, OTHER)

# ------------------------------------------------------------------ HLO names (signatures)

FP8_TYPES = frozenset({"f8e4m3fn", "f8e5m2", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz", "f8e3m4"})
FP4_TYPES = frozenset({"f4e2m1fn"})
SCALE_TYPES = frozenset({"f8e8m0fnu"})
WIDE_TYPES = frozenset({"bf16", "f16", "f32", "tf32", "f64"})
INT_TYPES = frozenset({"s4", "u4", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"})
# Narrow: what an FP8 / block-scaled matmul wants to keep narrow. Members of one of these sets
# are what the older code called FP8_TYPES (which counted E8M0 in) and LOW_PRECISION.
NARROW_TYPES = FP8_TYPES | FP4_TYPES | SCALE_TYPES

BITS = {
    **{t: 8 for t in FP8_TYPES | SCALE_TYPES}, "f4e2m1fn": 4,
    "bf16": 16, "f16": 16, "f32": 32, "tf32": 32, "f64": 64,
    "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 64, "u64": 64,
}

# ------------------------------------------------------------------ JAX / NumPy names (case files)

JAX_FP8 = ("float8_e4m3fn", "float8_e5m2")
# The fnuz variants (no negative zero, NaN at 0x80; E4M3 max 240): what AMD's gfx942 (MI300) runs natively,
# where the OCP types above are upcast (harness/fp8_check/platforms/_amd.py).
JAX_FP8_FNUZ = ("float8_e4m3fnuz", "float8_e5m2fnuz")
JAX_FP4 = ("float4_e2m1fn",)
JAX_SCALE = ("float8_e8m0fnu",)
JAX_WIDE = ("float32", "bfloat16", "float16")
# Low-precision operand formats a case may use (pattern and block-scaled cases).
DATA_DTYPES = JAX_FP8 + JAX_FP8_FNUZ + JAX_FP4
# Scalar scale dtypes of pattern cases: E8M0 is a power-of-two scale (MX formats).
SCALE_DTYPES = JAX_WIDE + JAX_SCALE
# Per-block scale dtypes of block-scaled cases: E8M0 (MX formats), E4M3 (NVFP4).
BLOCK_SCALE_DTYPES = JAX_SCALE + JAX_FP8[:1]
# Largest finite value of each FP8 format (what a clamp saturates to).
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0, "float8_e4m3fnuz": 240.0, "float8_e5m2fnuz": 57344.0}

_JAX_TO_HLO = {
    "float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2", "float8_e4m3": "f8e4m3", "float8_e4m3fnuz": "f8e4m3fnuz",
    "float8_e5m2fnuz": "f8e5m2fnuz", "float8_e3m4": "f8e3m4", "float8_e8m0fnu": "f8e8m0fnu",
    "float4_e2m1fn": "f4e2m1fn", "bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
    "int8": "s8", "uint8": "u8", "int32": "s32",
}


def hlo_name(dtype: str) -> str:
    """The HLO spelling of a JAX/NumPy dtype name (`float8_e4m3fn` -> `f8e4m3fn`); HLO names pass through."""
    return _JAX_TO_HLO.get(dtype, dtype)


def dtype_class(dtype: Any) -> str:
    """The class of a dtype (HLO or JAX spelling): fp8, fp4, scale, wide, int or other."""
    d = hlo_name(str(dtype))
    if d in FP8_TYPES:
        return FP8
    if d in FP4_TYPES:
        return FP4
    if d in SCALE_TYPES:
        return SCALE
    if d in WIDE_TYPES:
        return WIDE
    if d in INT_TYPES:
        return INT
    return OTHER


def is_fp8(dtype: Any) -> bool:
    """An FP8 data format (not E8M0, which is only ever a scale)."""
    return dtype_class(dtype) == FP8


def is_narrow(dtype: Any) -> bool:
    """FP8, FP4 or an E8M0 scale: a type an FP8 / block-scaled matmul keeps narrow."""
    return dtype_class(dtype) in (FP8, FP4, SCALE)


def bits(dtype: Any) -> int | None:
    return BITS.get(hlo_name(str(dtype)))


def total_bits(dtypes: Iterable[Any]) -> int | None:
    """The summed width of `dtypes`, or None when one is unknown."""
    total = 0
    for d in dtypes:
        b = bits(d)
        if b is None:
            return None
        total += b
    return total


def upcast(before: Iterable[Any], after: Iterable[Any]) -> int:
    """How the dtypes `before` -> `after` changed width: 1 wider (an upcast), -1 narrower, 0 neither.

    Fewer narrow values is an upcast whatever the widths say (FP8 -> f32, FP4 -> bf16);
    with as many narrow values, the total width decides (e4m3 x bf16 -> e4m3 x f32 is wider).
    """
    b, a = list(before), list(after)
    nb, na = sum(map(is_narrow, b)), sum(map(is_narrow, a))
    if na != nb:
        return 1 if na < nb else -1
    wb, wa = total_bits(b), total_bits(a)
    if wb is None or wa is None or wb == wa:
        return 0
    return 1 if wa > wb else -1
