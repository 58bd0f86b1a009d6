"""Numerics of block-scaled cases: deterministic inputs and an independent float64 reference.

Inputs (seeded by the case id, like `numerics.py`):

- data: FP8 operands uniform in [-2, 2] rounded to their format; FP4 (E2M1) operands
  drawn from all 15 finite E2M1 values {0, +-0.5, +-1, +-1.5, +-2, +-3, +-4, +-6};
- per-block scales: E8M0 scales are powers of two 2^e, e uniform in [-3, 3]; E4M3
  scales are uniform in [0.25, 4] rounded to E4M3 (not powers of two, so a scale
  applied to the wrong block, or a dropped one, changes the result);
- global scales (NVFP4's second level): a_global = 0.5, b_global = 0.25.

Reference: every element of k is multiplied by the scale of its block,
scale[i // block_size] (the last block may be ragged), then a float64 matmul,
then the product of the global scales.

Tolerance: block-scaled products are exact in float32 (and bfloat16): an E4M3 or E2M1
value has at most 4 significant bits, an E4M3 scale 4 and an E8M0 scale 1, so the
dequantized operand needs at most 8 significant bits. What remains is float32
accumulation, k * 2^-24 * sum |a||b|, plus one rounding of the dequant dtype D (u(D) |c|)
for hand-written cases that compute in D, plus one float32 rounding for the global
scale multiply; `numerics.compare` then adds one ulp of the output format. A real bug
costs far more: a scale on the wrong block changes products by factors of 2 to 64,
a dropped global scale is a factor 8.
"""

from __future__ import annotations

import numpy as np

from fp8_check.cases import BlockScaledSpec, Case, spec_of
from fp8_check.gpu._number_formats import Reference, dtype_of, unit_roundoff

A_GLOBAL, B_GLOBAL = 0.5, 0.25
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def skip_reason(case: Case) -> str | None:
    if spec_of(case).block.api == "scaled_dot_general":
        return ("scaled_dot_general quantizes its high-precision inputs inside JAX: the numbers depend on JAX's "
                "quantizer, not on a fusion, so there is no independent float64 reference")
    return None


def multiply_adds(case: Case) -> int:
    s = spec_of(case).shape
    return (s.batch or 1) * s.m * s.n * s.k


def make_inputs(case: Case, rng: np.random.Generator, specs: dict) -> dict[str, np.ndarray]:
    inputs: dict[str, np.ndarray] = {}
    for name in ("a", "b"):
        shape, dtype = specs[name]
        if dtype == "float4_e2m1fn":
            inputs[name] = rng.choice(FP4_VALUES, size=shape).astype(dtype_of(dtype))
        else:
            inputs[name] = rng.uniform(-2.0, 2.0, shape).astype(dtype_of(dtype))
    for name in ("a_scales", "b_scales"):
        shape, dtype = specs[name]
        if dtype == "float8_e8m0fnu":
            inputs[name] = np.exp2(rng.integers(-3, 4, size=shape).astype(np.float64)).astype(dtype_of(dtype))
        else:
            inputs[name] = rng.uniform(0.25, 4.0, shape).astype(dtype_of(dtype))
    if "a_global" in specs:
        inputs["a_global"] = np.array(A_GLOBAL, dtype=np.float32)
        inputs["b_global"] = np.array(B_GLOBAL, dtype=np.float32)
    return {name: inputs[name] for name in specs}


def dequantize(values: np.ndarray, scales: np.ndarray, block: int, k_axis: int) -> np.ndarray:
    """values * scale of each element's block along `k_axis` (scale index = position // block), in float64."""
    v = values.astype(np.float64)
    s = np.repeat(scales.astype(np.float64), block, axis=k_axis)
    s = np.take(s, np.arange(v.shape[k_axis]), axis=k_axis)  # cut a ragged last block
    return v * s


def reference(case: Case, inputs: dict, stop_before_output_scale: bool = False) -> Reference:
    """The float64 result and its per-element error bound for a block-scaled case (it has no output scale)."""
    spec: BlockScaledSpec = spec_of(case)
    bs = spec.block.size
    a = dequantize(inputs["a"], inputs["a_scales"], bs, -1)
    b = dequantize(inputs["b"], inputs["b_scales"], bs, -1 if spec.transpose_b else -2)
    if spec.transpose_b:
        b = np.swapaxes(b, -1, -2)
    c = np.matmul(a, b)
    err = spec.shape.k * 2.0**-24 * np.matmul(np.abs(a), np.abs(b))
    if spec.block.api == "hand_written":
        err = err + unit_roundoff(spec.dequant) * np.abs(c)
    if "a_global" in inputs:
        g = float(inputs["a_global"]) * float(inputs["b_global"])
        c, err = c * g, err * g + 2.0**-24 * np.abs(c * g)
    return Reference(out=c, err=err)


def output_format(case: Case) -> str:
    return spec_of(case).out_dtype


def output_count(case: Case) -> int:
    return 1


def bitcast(case: Case) -> bool:
    return False


def rounds_output(case: Case) -> bool:
    return True  # compared with one ulp of the output format, whatever it is
