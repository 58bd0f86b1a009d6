"""Numerics of the fused kernels: deterministic FP8 inputs, an independent float64 reference, and the comparison.

`fp8-check run --numerics` (device mode) executes each compiled pattern case on
the GPU, in the compile worker, on the inputs `make_inputs` builds here; the
parent compares the outputs with `reference`, a float64 implementation of the
case semantics written from the `Case` fields (it never calls the rendered
function). python-kind cases are skipped: their semantics live in user code.

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

Tolerances (per element, documented and checked in tests/test_numerics.py). The
rendered function computes in the dequant dtype D (float32, bfloat16 or
float16); FP8 values and power-of-two scales are exact in D. With u(D) the unit
roundoff of D (2^-24, 2^-8, 2^-11) and S = sum_k |a_ik| |b_kj| (scaled), the
bound on |computed - exact| is carried through the epilogue:

  matmul      k * 2^-24 * S + u(D) * |c|       (f32 accumulation, as cuBLASLt FP8,
                                                Triton and XLA:CPU do; rounded to D)
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

import base64
import math
import zlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from fp8_check.outcome import NumericsResult, OutputCheck  # noqa: F401  (defined with the Outcome; re-exported)
from fp8_check.pipeline.cases import FP8_DTYPES, FP8_MAX, Case
from fp8_check.pipeline.render import arg_specs
from fp8_check.gpu import block_numerics

A_SCALE, B_SCALE = 0.5, 4.0
U_ACCUMULATE = 2.0**-24  # float32 accumulation
GELU_LIPSCHITZ = 1.13
TRANSCENDENTAL_REL = 2.0**-10


def dtype_of(name: str) -> np.dtype:
    """The numpy dtype for a case dtype name (ml_dtypes for bfloat16 and the FP8 formats)."""
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def unit_roundoff(name: str) -> float:
    return float(ml_dtypes.finfo(dtype_of(name)).eps) / 2


def ulp(x: np.ndarray, name: str) -> np.ndarray:
    """Spacing of format `name` at magnitude |x| (subnormal spacing below the smallest normal)."""
    fi = ml_dtypes.finfo(dtype_of(name))
    mag = np.maximum(np.abs(np.asarray(x, dtype=np.float64)), float(fi.smallest_normal))
    mag = np.where(np.isfinite(mag), mag, float(fi.max))
    return np.exp2(np.floor(np.log2(mag)) - fi.nmant)


# Multiply-adds above which a case is skipped: the float64 reference (two numpy
# matmuls) and shipping the outputs through the worker's JSON pipe get slow.
MAX_MULTIPLY_ADDS = 2**33


def skip_reason(case: Case) -> str | None:
    """Why numerics does not cover `case`, or None."""
    if case.block is not None:  # block-scaled
        if block_numerics.skip_reason(case):
            return block_numerics.skip_reason(case)
    elif case.callable is not None:
        return "python-kind case: its semantics live in user code, so there is no float64 reference"
    s = case.shape
    work = (s.batch or 1) * s.m * s.n * s.k
    if work > MAX_MULTIPLY_ADDS:
        return f"{work:.3g} multiply-adds is above the float64 reference's limit ({MAX_MULTIPLY_ADDS:.3g})"
    return None


def seed_for(case_id: str) -> int:
    return zlib.crc32(case_id.encode())


# ------------------------------------------------------------ inputs


def make_inputs(case: Case) -> dict[str, np.ndarray]:
    """Deterministic inputs for a pattern case, by argument name (see the module docstring)."""
    if case.callable is not None:
        raise ValueError(f"case '{case.id}': numerics covers pattern and block-scaled cases only")
    rng = np.random.default_rng(seed_for(case.id))
    specs = {name: (shape, dtype) for name, shape, dtype in arg_specs(case)}
    if case.block is not None:
        return block_numerics.make_inputs(case, rng, specs, dtype_of)
    r = min(4.0, max(0.25, math.sqrt(24.0 / math.sqrt(case.shape.k))))
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
        spread = float(np.std(_dot(case, inputs)[0])) or 1.0
        inputs["bias"] = rng.uniform(-spread, spread, shape).astype(dtype_of(dtype))
    if "out_scale" in specs:
        pre = reference(case, inputs, stop_before_output_scale=True).out
        biggest = float(np.max(np.abs(pre))) if pre.size else 0.0
        if case.out_dtype in FP8_DTYPES and biggest > 0:
            high = FP8_MAX[case.out_dtype] * (2.0 if case.clamp else 0.5)
            exponent = math.floor(math.log2(high / biggest))
        else:
            exponent = 1
        exponent = max(-14, min(15, exponent))  # a normal float16, so exact in every scale dtype
        value = 2.0**exponent if case.output_scale == "multiply" else 2.0**-exponent
        inputs["out_scale"] = np.array(value, dtype=dtype_of(specs["out_scale"][1]))
    return {name: inputs[name] for name in specs}  # in ARGS order


def encode(array: np.ndarray) -> dict:
    array = np.asarray(array)  # tobytes() is C order; ascontiguousarray would make a 0-d array 1-d
    return {"dtype": str(array.dtype), "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def decode(item: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(item["data"]), dtype=dtype_of(item["dtype"])).reshape(item["shape"])


def encode_inputs(case: Case) -> list[dict]:
    return [encode(x) for x in make_inputs(case).values()]


# ------------------------------------------------------------ reference


@dataclass
class Reference:
    out: np.ndarray  # float64, before rounding to the output format
    err: np.ndarray  # per-element bound on |kernel value - out| before that rounding
    amax: np.ndarray | None = None
    amax_err: np.ndarray | float = 0.0


def _scaled(case: Case, inputs: dict) -> tuple[np.ndarray, np.ndarray]:
    a = inputs["a"].astype(np.float64)
    b = inputs["b"].astype(np.float64)
    if "a_scale" in inputs:
        a = a * float(inputs["a_scale"])
    if "b_scale" in inputs:
        b = b * float(inputs["b_scale"])
    if case.transpose_b:
        b = np.swapaxes(b, -1, -2)
    return a, b


def _dot(case: Case, inputs: dict) -> tuple[np.ndarray, np.ndarray]:
    """(a @ b, |a| @ |b|) in float64, with the input scales applied."""
    a, b = _scaled(case, inputs)
    return np.matmul(a, b), np.matmul(np.abs(a), np.abs(b))


def _gelu(x: np.ndarray, approximate: bool) -> np.ndarray:
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def reference(case: Case, inputs: dict, stop_before_output_scale: bool = False) -> Reference:
    """The case's result in float64, from the same FP8 values, with a per-element error bound."""
    if case.block is not None:
        out, err = block_numerics.reference(case, inputs, unit_roundoff)
        return Reference(out=out, err=err)
    u = unit_roundoff(case.dequant)
    c, mags = _dot(case, inputs)
    err = case.shape.k * U_ACCUMULATE * mags + u * np.abs(c)
    if case.has_bias:
        bias = inputs["bias"].astype(np.float64)
        c = c + bias
        err = err + u * (np.abs(bias) + np.abs(c))
    if case.epilogue in ("relu", "bias_relu"):
        c = np.maximum(c, 0.0)
    elif case.epilogue.endswith("gelu_tanh") or case.epilogue.endswith("gelu_exact"):
        slack = max(8 * u, TRANSCENDENTAL_REL) * np.abs(c)
        c = _gelu(c, approximate=case.epilogue.endswith("tanh"))
        err = GELU_LIPSCHITZ * err + slack
    ref = Reference(out=c, err=err)
    if case.amax == "pre_scale":
        amax = float(np.max(np.abs(c)))
        ref.amax, ref.amax_err = np.asarray(amax), float(np.max(err)) + u * amax
    if stop_before_output_scale:
        return ref
    if case.output_scale != "none":
        s = float(inputs["out_scale"])
        factor = s if case.output_scale == "multiply" else 1.0 / s
        ref.out, ref.err = ref.out * factor, ref.err * factor
    if case.clamp:
        limit = FP8_MAX[case.out_dtype]
        ref.out = np.clip(ref.out, -limit, limit)
    return ref


def output_format(case: Case) -> str:
    """The format the compared values are in: the output dtype, or the dequant dtype for a bitcast."""
    return case.dequant if case.block is None and case.requantize == "bitcast" else case.out_dtype


# ------------------------------------------------------------ comparison


def compare_array(name: str, found: np.ndarray, expected: np.ndarray, tolerance: np.ndarray, dtype: str) -> OutputCheck:
    """Element-wise |found - expected| <= tolerance; NaN must match NaN and infinities must match exactly."""
    found = np.asarray(found, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if found.shape != expected.shape:
        return OutputCheck(name, dtype, list(found.shape), int(found.size), int(found.size), "inf", "inf", "inf",
                           {"reason": f"shape {list(found.shape)}, expected {list(expected.shape)}"})
    tolerance = np.broadcast_to(np.asarray(tolerance, dtype=np.float64), expected.shape)
    both_nan = np.isnan(found) & np.isnan(expected)
    finite = np.isfinite(found) & np.isfinite(expected)
    with np.errstate(invalid="ignore"):
        diff = np.where(finite, np.abs(found - expected), np.where(both_nan | (found == expected), 0.0, np.inf))
    bad = diff > tolerance
    rel = np.where(finite & (expected != 0), diff / np.where(expected != 0, np.abs(expected), 1.0), np.where(diff > 0, np.inf, 0.0))
    ratio = np.where(tolerance > 0, diff / np.where(tolerance > 0, tolerance, 1.0), np.where(diff > 0, np.inf, 0.0))
    first = None
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        first = {"index": list(idx), "found": _num(found[idx]), "expected": _num(expected[idx]), "tolerance": _num(tolerance[idx])}
    return OutputCheck(
        name=name, dtype=dtype, shape=list(found.shape), elements=int(found.size), mismatches=int(bad.sum()),
        max_abs_err=_num(diff.max()) if diff.size else 0.0, max_rel_err=_num(rel.max()) if rel.size else 0.0,
        max_err_over_tolerance=_num(ratio.max()) if ratio.size else 0.0, first_mismatch=first,
    )


def _num(x) -> float | str:
    x = float(x)
    return x if math.isfinite(x) else str(x)


def compare(case: Case, inputs: dict, outputs: list[np.ndarray]) -> NumericsResult:
    """Compare a kernel's `outputs` (c[, amax], as numpy arrays) with the float64 reference."""
    result = NumericsResult(status="pass", seed=seed_for(case.id))
    ref = reference(case, inputs)
    fmt = output_format(case)
    expected_count = 2 if case.amax == "pre_scale" else 1
    if len(outputs) != expected_count:
        return NumericsResult("fail", f"the kernel returned {len(outputs)} output(s), expected {expected_count}", result.seed)
    out = np.asarray(outputs[0])
    if getattr(case, "requantize", "convert") == "bitcast":
        # Reinterpret the FP8 bytes as the dequant dtype they were bitcast from.
        out = np.ascontiguousarray(out).view(dtype_of(fmt)).reshape(out.shape[:-1])
    expected = ref.out.astype(dtype_of(fmt)).astype(np.float64)
    tolerance = ref.err
    if fmt != case.dequant or case.block is not None:
        tolerance = tolerance + ulp(np.abs(ref.out) + ref.err, fmt)
    result.outputs.append(compare_array("out", out, expected, tolerance, fmt))
    if case.amax == "pre_scale" and ref.amax is not None:
        amax = np.asarray(outputs[1]).reshape(())
        result.outputs.append(compare_array("amax", amax, ref.amax, ref.amax_err + ulp(ref.amax, "float32"), "float32"))
    bad = [o for o in result.outputs if o.mismatches]
    if bad:
        result.status = "fail"
        parts = []
        for o in bad:
            f = o.first_mismatch or {}
            where = f"at {f.get('index')}: {f.get('found')} vs reference {f.get('expected')} (tolerance {f.get('tolerance')})" if "index" in f else f.get("reason", "")
            parts.append(f"{o.name}: {o.mismatches} of {o.elements} element(s) off, first {where}")
        result.reason = "numerics mismatch: " + "; ".join(parts)
    return result


def check(case: Case, encoded_outputs: list[dict]) -> NumericsResult:
    """Compare outputs as the worker returned them (encoded) with the reference, on the same inputs."""
    return compare(case, make_inputs(case), [decode(o) for o in encoded_outputs])


def skipped(reason: str) -> NumericsResult:
    return NumericsResult("skipped", reason)
