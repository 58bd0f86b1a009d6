"""Rendering: every valid case becomes readable Python that JAX traces, with the shapes and dtypes the case states.

JAX's CPU backend executes the rendered functions, so their math is checked
here against a float64 NumPy reference computed from the same FP8 values.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fp8_check.cases import Shape, _load as cases
from fp8_check.cases._load import Case, PatternSpec
from fp8_check.cases.kinds.pattern import FP8_DTYPES
from fp8_check.cases.kinds.python import PythonSpec
from fp8_check.compile import _render as render


def load(source: str) -> types.ModuleType:
    module = types.ModuleType("rendered")
    exec(compile(source, "<rendered>", "exec"), module.__dict__)
    return module


case_strategy = st.builds(
    lambda a, b, batch, tb, deq, ins, sdt, outs, out, epi, bias, amax: (
        Case(id="h", file="<h>", line=1, spec=PatternSpec(
            a_dtype=a, b_dtype=b, shape=Shape(8, 16, 32, batch), transpose_b=tb,
            dequant=deq, input_scales=ins, scale_dtype=sdt, output_scale=outs, clamp=out in FP8_DTYPES,
            out_dtype=out, epilogue=epi, bias_dtype=bias if (epi.startswith("bias") or epi == "matrix_bias") else None,
            amax=amax,
        ))
    ),
    st.sampled_from(FP8_DTYPES), st.sampled_from(FP8_DTYPES), st.sampled_from([None, 3]), st.booleans(),
    st.sampled_from(cases.DEQUANT_DTYPES), st.sampled_from(cases.INPUT_SCALES), st.sampled_from(cases.DEQUANT_DTYPES),
    st.sampled_from(cases.OUTPUT_SCALES), st.sampled_from(cases.OUT_DTYPES), st.sampled_from(cases.EPILOGUES),
    st.sampled_from(cases.DEQUANT_DTYPES), st.sampled_from(cases.AMAX),
)


@settings(max_examples=60, deadline=None)
@given(case_strategy)
def test_every_case_renders_to_source_jax_traces(case):
    source = render.render(case).source
    module = load(source)
    assert module.ARGS == render.arg_specs(case)
    specs = [jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)) for _, shape, dtype in module.ARGS]
    out = jax.eval_shape(module.FN, *specs)
    c = out[0] if case.spec.amax == "pre_scale" else out
    lead = (case.spec.shape.batch,) if case.spec.shape.batch else ()
    assert c.shape == lead + (case.spec.shape.m, case.spec.shape.n)
    assert c.dtype == jnp.dtype(case.spec.out_dtype)
    if case.spec.amax == "pre_scale":
        assert out[1].shape == () and out[1].dtype == jnp.float32
    # readable: no leftover template syntax, no trailing whitespace
    assert "{{" not in source and "{%" not in source
    assert all(line == line.rstrip() for line in source.splitlines())


def _fp8(rng, shape, dtype):
    values = rng.uniform(-4, 4, size=shape).astype(np.float32)
    return values.astype(getattr(ml_dtypes, dtype))


@pytest.mark.parametrize("transpose_b", [False, True])
@pytest.mark.parametrize("epilogue", ["none", "relu", "bias_relu", "gelu_tanh"])
def test_rendered_math_matches_float64_reference(transpose_b, epilogue):
    case = Case(id="n", file="<n>", line=1, spec=PatternSpec(
        shape=Shape(8, 16, 32), transpose_b=transpose_b, input_scales="both",
        output_scale="divide", clamp=True, out_dtype="float8_e4m3fn", epilogue=epilogue,
        bias_dtype="float32" if epilogue.startswith("bias") else None, amax="pre_scale",
    ))
    module = load(render.render(case).source)
    rng = np.random.default_rng(0)
    a = _fp8(rng, (8, 32), "float8_e4m3fn")
    b = _fp8(rng, (16, 32) if transpose_b else (32, 16), "float8_e4m3fn")
    values = {"a": a, "b": b, "a_scale": np.float32(0.5), "b_scale": np.float32(2.0), "out_scale": np.float32(4.0),
              "bias": rng.uniform(-1, 1, size=(16,)).astype(np.float32)}
    args = [values[name] for name, _, _ in module.ARGS]
    c, amax = jax.jit(module.FN)(*args)

    a64 = a.astype(np.float64) * 0.5
    b64 = b.astype(np.float64) * 2.0
    ref = a64 @ (b64.T if transpose_b else b64)
    if epilogue.startswith("bias"):
        ref = ref + values["bias"].astype(np.float64)
    if epilogue.endswith("relu"):
        ref = np.maximum(ref, 0)
    if epilogue == "gelu_tanh":
        ref = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref**3)))
    ref_amax = np.abs(ref).max()
    ref_out = np.clip(ref / 4.0, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_allclose(float(amax), ref_amax, rtol=1e-5)
    # one E4M3 ulp at the value (3 mantissa bits): float32 accumulation may round to the neighbour
    got = np.asarray(c).astype(np.float64)
    assert np.all(np.abs(got - ref_out) <= np.maximum(np.abs(ref_out), 2**-6) * 2**-3 + 1e-12)


def test_python_case_renders_an_import():
    case = Case(id="p", file="<p>", line=1, spec=PythonSpec(callable="tests.casefns:plain",
                args=(("a", (4, 8), "float8_e4m3fn"), ("b", (8, 2), "float8_e4m3fn"))))
    rendered = render.render(case)
    source = rendered.source
    # the module is imported, never pasted: the source names it; the files it runs are found by path (for the
    # compile cache and the repro), without importing anything here
    assert "FN = getattr(importlib.import_module('tests.casefns'), 'plain')" in source
    assert "def plain" not in source
    assert {f.name for f in rendered.modules.files} == {"tests", "tests.casefns"} and rendered.modules.complete
    module = load(source)
    assert module.ARGS == [("a", (4, 8), "float8_e4m3fn"), ("b", (8, 2), "float8_e4m3fn")]
    assert module.FN.__name__ == "plain"


def test_python_case_from_an_installed_package_is_imported():
    case = Case(id="p", file="<p>", line=1, spec=PythonSpec(callable="no_such_package_xyz.layers:dense",
                args=(("a", (4, 8), "float32"),)))
    source = render.render(case).source
    assert "FN = getattr(importlib.import_module('no_such_package_xyz.layers'), 'dense')" in source
    # rendering never imports the case's module in this process (only the compile worker does)
    import sys

    assert "no_such_package_xyz" not in sys.modules
