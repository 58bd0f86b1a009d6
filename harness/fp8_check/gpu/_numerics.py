"""Numerics of the fused kernels: deterministic inputs, an independent float64 reference, and the comparison.

`fp8-check run --numerics` (device mode) executes each compiled case on the GPU, in the
compile worker, on the inputs `make_inputs` builds; the parent compares the outputs with
`reference`, a float64 implementation of the case semantics written from the case's own
fields (it never calls the rendered function). Each kind with such a reference has its own
numerics module (`NUMERICS`, by spec type): harness/fp8_check/gpu/_pattern_numerics.py (inputs,
reference and the tolerances, documented there) for pattern cases, block_numerics.py for
block-scaled cases; a kind without one (python: its semantics live in user code) is skipped.

What they share lives here: the seed, the work limit, encoding for the worker's pipe and the
element-wise comparison. A mismatch anywhere is a numerics FAIL. NaN must match NaN, +-inf
must match exactly; where the kernel rounds its result to another format than it computes
in (and for block-scaled cases) one ulp of the output format is added to the tolerance.
"""

from __future__ import annotations

import base64
import math
import zlib
from types import ModuleType

import numpy as np

from fp8_check.cases import BlockScaledSpec, Case, PatternSpec
from fp8_check.compile import arg_specs
from fp8_check.gpu import _block_numerics, _pattern_numerics
from fp8_check.gpu._number_formats import Reference, dtype_of, ulp, unit_roundoff
from fp8_check.verdict import NumericsResult, OutputCheck

# The kinds with a float64 reference, by spec type: each module provides skip_reason, multiply_adds, make_inputs,
# reference, output_format, output_count, bitcast and rounds_output for its cases.
NUMERICS: dict[type, ModuleType] = {PatternSpec: _pattern_numerics, BlockScaledSpec: _block_numerics}


def _of(case: Case) -> ModuleType:
    impl = NUMERICS.get(type(case.spec))
    if impl is None:
        raise ValueError(f"case '{case.id}': numerics covers pattern and block-scaled cases only")
    return impl


# Multiply-adds above which a case is skipped: the float64 reference (two numpy
# matmuls) and shipping the outputs through the worker's JSON pipe get slow.
MAX_MULTIPLY_ADDS = 2**33


def skip_reason(case: Case) -> str | None:
    """Why numerics does not cover `case`, or None."""
    impl = NUMERICS.get(type(case.spec))
    if impl is None:
        return f"{case.kind}-kind case: its semantics live in user code, so there is no float64 reference"
    if impl.skip_reason(case):
        return impl.skip_reason(case)
    work = impl.multiply_adds(case)
    if work > MAX_MULTIPLY_ADDS:
        return f"{work:.3g} multiply-adds is above the float64 reference's limit ({MAX_MULTIPLY_ADDS:.3g})"
    return None


def seed_for(case_id: str) -> int:
    return zlib.crc32(case_id.encode())


# ------------------------------------------------------------ inputs


def make_inputs(case: Case) -> dict[str, np.ndarray]:
    """Deterministic inputs for a case, by argument name, in ARGS order (the kind's numerics module says how)."""
    impl = _of(case)
    rng = np.random.default_rng(seed_for(case.id))
    specs = {name: (shape, dtype) for name, shape, dtype in arg_specs(case)}
    return impl.make_inputs(case, rng, specs)


def encode(array: np.ndarray) -> dict:
    array = np.asarray(array)  # tobytes() is C order; ascontiguousarray would make a 0-d array 1-d
    return {"dtype": str(array.dtype), "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def decode(item: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(item["data"]), dtype=dtype_of(item["dtype"])).reshape(item["shape"])


def encode_inputs(case: Case) -> list[dict]:
    return [encode(x) for x in make_inputs(case).values()]


# ------------------------------------------------------------ reference


def reference(case: Case, inputs: dict, stop_before_output_scale: bool = False) -> Reference:
    """The case's result in float64, from the same inputs, with a per-element error bound."""
    return _of(case).reference(case, inputs, stop_before_output_scale)


def output_format(case: Case) -> str:
    """The format the compared values are in: the output dtype, or the dequant dtype for a bitcast."""
    return _of(case).output_format(case)


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
    impl = _of(case)
    ref = impl.reference(case, inputs)
    fmt = impl.output_format(case)
    expected_count = impl.output_count(case)
    if len(outputs) != expected_count:
        return NumericsResult("fail", f"the kernel returned {len(outputs)} output(s), expected {expected_count}", result.seed)
    out = np.asarray(outputs[0])
    if impl.bitcast(case):
        # Reinterpret the FP8 bytes as the dequant dtype they were bitcast from.
        out = np.ascontiguousarray(out).view(dtype_of(fmt)).reshape(out.shape[:-1])
    expected = ref.out.astype(dtype_of(fmt)).astype(np.float64)
    tolerance = ref.err
    if impl.rounds_output(case):
        tolerance = tolerance + ulp(np.abs(ref.out) + ref.err, fmt)
    else:  # `expected` is the reference rounded to fmt: near a rounding boundary the kernel may round the other way
        tolerance = tolerance + unit_roundoff(fmt) * np.abs(ref.out)
    result.outputs.append(compare_array("out", out, expected, tolerance, fmt))
    if ref.amax is not None and expected_count == 2:
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


class Float64Reference:
    """`run --numerics`'s check (the run stage's `NumericsCheck`): this module's reference, as the object the runner
    is handed (the pipeline does not import the GPU layer)."""

    skip_reason = staticmethod(skip_reason)
    encode_inputs = staticmethod(encode_inputs)
    check = staticmethod(check)
