"""Numerics of pattern cases: deterministic FP8 inputs and an independent float64 reference with its tolerance.

Inputs (deterministic, seeded by the case id): `a` and `b` are uniform in
[-r, r] rounded to their FP8 format, r = sqrt(24 / sqrt(k)) clipped to
[0.25, 4], so the matmul's outputs have a standard deviation of about 8 whatever
k is. Input scales are a_scale = 0.5 and b_scale = 4.0 (powers of two, exact in
every scale dtype; different, so that dropping either one, or both, changes the
result). A bias is uniform in +-(standard deviation of the matmul output). The
output scale is a power of two chosen from the reference's pre-scale output:
for an FP8 output with clamp, the largest scaled value lands in (1, 2] x the FP8
max, so a few elements saturate and the clamp is exercised; for an FP8 output
without clamp, in (1/4, 1/2] x the FP8 max (overflow would be NaN in XLA's
convert, but libraries may saturate: that case is not meant to be probed); for
other outputs the effective factor is 2.

Tolerances (per element, documented and checked in tests/gpu/test_numerics.py). The
rendered function computes in the dequant dtype D (float32, bfloat16 or
float16); FP8 values and power-of-two scales are exact in D. With u(D) the unit
roundoff of D (2^-24, 2^-8, 2^-11) and S = sum_k |a_ik| |b_kj| (scaled), the
bound on |computed - exact| is carried through the epilogue:

  matmul      sqrt(k) * 2^-14 * S + u(D) * |c| (FP8 tensor cores keep about 14 bits of the
                                                accumulation: see U_ACCUMULATE; rounded to D)
  bias        + u(D) * (|bias| + |c + bias|)   (bias rounded to D, then the add)
  relu        unchanged (1-Lipschitz)
  gelu        1.13 * err + max(8 u(D), 2^-10) * |c|
              (gelu's slope is at most 1.13; libraries evaluate tanh/erf with
              fast approximations, about 1e-3 relative)
  amax        err_max + u(D) * amax
  out scale   multiplied by the (power of two) effective factor: exact
  clamp       unchanged (1-Lipschitz)
  output      + 1 ulp of the output format at |value| + err, when the output
              format differs from D (both the kernel and the reference round
              to nearest, from values at most err apart).

A mismatch anywhere is a numerics FAIL. NaN must match NaN, +-inf must match
exactly. These bounds are far below what a real bug costs: a dropped scale is a
factor 2 or 4, a missing relu leaves negative values, a wrong clamp moves
saturated values by 1/8 of the FP8 max or more, a wrong transpose scrambles the
products (tests inject each of them).
"""

from __future__ import annotations

import math

import numpy as np

from fp8_check.cases import Case, PatternSpec
from fp8_check.core import FP8_MAX, JAX_FP8
from fp8_check.gpu._number_formats import Reference, dtype_of, unit_roundoff

A_SCALE, B_SCALE = 0.5, 4.0
# FP8 tensor cores do not accumulate in full float32: Hopper keeps about 14 bits (DeepSeek-V3 report, sec. 3.3.2:
# "limited to retaining around 14 bits"). The bound is the probabilistic one (Higham and Mary, 2019: rounding errors
# of k additions grow like sqrt(k) u, not k u) with u = 2^-14. Measured on an H200 (JAX 0.11.2, cuBLASLt 13.1,
# docs/gpu-session/): under the old float32 worst case (k 2^-24) seed_plain_f32 was off by up to 23x in 1033 of 2048
# elements; its worst element is at 0.18 of this bound. A wrong epilogue, scale or operand still fails (tests).
U_ACCUMULATE = 2.0**-14
GELU_LIPSCHITZ = 1.13
TRANSCENDENTAL_REL = 2.0**-10


def spec_of(case: Case) -> PatternSpec:
    if not isinstance(case.spec, PatternSpec):
        raise ValueError(f"case '{case.id}' is not a pattern case")
    return case.spec


def skip_reason(case: Case) -> str | None:
    return None


def multiply_adds(case: Case) -> int:
    s = spec_of(case).shape
    return (s.batch or 1) * s.m * s.n * s.k


def make_inputs(case: Case, rng: np.random.Generator, specs: dict) -> dict[str, np.ndarray]:
    """Deterministic inputs by argument name (see the module docstring); `specs`: name -> (shape, dtype)."""
    spec = spec_of(case)
    r = min(4.0, max(0.25, math.sqrt(24.0 / math.sqrt(spec.shape.k))))
    inputs: dict[str, np.ndarray] = {}
    for name in ("a", "b"):
        shape, dtype = specs[name]
        inputs[name] = rng.uniform(-r, r, shape).astype(dtype_of(dtype))
    if "a_scale" in specs:
        inputs["a_scale"] = np.array(A_SCALE, dtype=dtype_of(specs["a_scale"][1]))
    if "b_scale" in specs:
        inputs["b_scale"] = np.array(B_SCALE, dtype=dtype_of(specs["b_scale"][1]))
    if "bias" in specs:
        shape, dtype = specs["bias"]
        spread = float(np.std(_dot(spec, inputs)[0])) or 1.0
        inputs["bias"] = rng.uniform(-spread, spread, shape).astype(dtype_of(dtype))
    if "out_scale" in specs:
        pre = reference(case, inputs, stop_before_output_scale=True).out
        biggest = float(np.max(np.abs(pre))) if pre.size else 0.0
        if spec.out_dtype in JAX_FP8 and biggest > 0:
            high = FP8_MAX[spec.out_dtype] * (2.0 if spec.clamp else 0.5)
            exponent = math.floor(math.log2(high / biggest))
        else:
            exponent = 1
        exponent = max(-14, min(15, exponent))  # a normal float16, so exact in every scale dtype
        value = 2.0**exponent if spec.output_scale == "multiply" else 2.0**-exponent
        inputs["out_scale"] = np.array(value, dtype=dtype_of(specs["out_scale"][1]))
    return {name: inputs[name] for name in specs}  # in ARGS order


def _scaled(spec: PatternSpec, inputs: dict) -> tuple[np.ndarray, np.ndarray]:
    a = inputs["a"].astype(np.float64)
    b = inputs["b"].astype(np.float64)
    if "a_scale" in inputs:
        a = a * float(inputs["a_scale"])
    if "b_scale" in inputs:
        b = b * float(inputs["b_scale"])
    if spec.transpose_b:
        b = np.swapaxes(b, -1, -2)
    return a, b


def _dot(spec: PatternSpec, inputs: dict) -> tuple[np.ndarray, np.ndarray]:
    """(a @ b, |a| @ |b|) in float64, with the input scales applied."""
    a, b = _scaled(spec, inputs)
    return np.matmul(a, b), np.matmul(np.abs(a), np.abs(b))


def _gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def reference(case: Case, inputs: dict, stop_before_output_scale: bool = False) -> Reference:
    """The case's result in float64, from the same FP8 values, with a per-element error bound."""
    spec = spec_of(case)
    u = unit_roundoff(spec.dequant)
    c, mags = _dot(spec, inputs)
    err = math.sqrt(spec.shape.k) * U_ACCUMULATE * mags + u * np.abs(c)
    if spec.has_bias:
        bias = inputs["bias"].astype(np.float64)
        c = c + bias
        err = err + u * (np.abs(bias) + np.abs(c))
    if spec.epilogue in ("relu", "bias_relu"):
        c = np.maximum(c, 0.0)
    elif spec.epilogue.endswith("gelu_tanh") or spec.epilogue.endswith("gelu_exact"):
        slack = max(8 * u, TRANSCENDENTAL_REL) * np.abs(c)
        c = _gelu(c, approximate=spec.epilogue.endswith("tanh"))
        err = GELU_LIPSCHITZ * err + slack
    ref = Reference(out=c, err=err)
    if spec.amax == "pre_scale":
        amax = float(np.max(np.abs(c)))
        ref.amax, ref.amax_err = np.asarray(amax), float(np.max(err)) + u * amax
    if stop_before_output_scale:
        return ref
    if spec.output_scale != "none":
        s = float(inputs["out_scale"])
        factor = s if spec.output_scale == "multiply" else 1.0 / s
        ref.out, ref.err = ref.out * factor, ref.err * factor
    if spec.clamp:
        limit = FP8_MAX[spec.out_dtype]
        ref.out = np.clip(ref.out, -limit, limit)
    return ref


def output_format(case: Case) -> str:
    """The format the compared values are in: the output dtype, or the dequant dtype for a bitcast."""
    spec = spec_of(case)
    return spec.dequant if spec.requantize == "bitcast" else spec.out_dtype


def output_count(case: Case) -> int:
    """c, or (c, amax) with `amax: pre_scale`."""
    return 2 if spec_of(case).amax == "pre_scale" else 1


def bitcast(case: Case) -> bool:
    """The output holds the dequant dtype's bytes reinterpreted as FP8 (`requantize: bitcast`)."""
    return spec_of(case).requantize == "bitcast"


def rounds_output(case: Case) -> bool:
    """The kernel rounds the result to a format other than the one it computes in (one more ulp of tolerance)."""
    return output_format(case) != spec_of(case).dequant
