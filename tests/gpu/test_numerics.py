"""Numerics: inputs, the float64 reference, tolerances and the comparison, executed on JAX's CPU backend.

The rendered functions run on CPU here (the same source the worker compiles for
the GPU). Bugs injected into the rendered source, or into the reference, must
FAIL; the shipped cases must pass. Executing on the GPU is covered by the
`requires_gpu` tests at the end.
"""

from __future__ import annotations

import dataclasses
import json
import types

import jax
import ml_dtypes
import numpy as np
import pytest

from fp8_check.cases import Shape, _load as case_mod
from fp8_check.cases._load import Case, PatternSpec
from fp8_check.cases.kinds.python import PythonSpec
from fp8_check.compile import _render as render
from fp8_check.compile._service import Compilation, Compiler
from fp8_check.core import FP8_MAX
from fp8_check.gpu import _numerics as numerics
from fp8_check.gpu._pattern_numerics import A_SCALE, B_SCALE
from fp8_check.run import _runner as runner, _selection as selection
from fp8_check.run._results import outcome_to_json
from fp8_check.targets import PROFILES, load_target
from fp8_check.verdict._outcome import FAIL, PASS, UNRESOLVED, XFAIL, Outcome
from fp8_check.worker import serve as worker

from ..conftest import REPO, requires_gpu

SHIPPED = [c for c in case_mod.load([REPO / "cases"]) if numerics.skip_reason(c) is None]
CPU_LIMIT = 2**24  # keep the CPU suite fast: skip the LLM-sized shapes here


def load_fn(source: str):
    module = types.ModuleType("rendered_case")
    exec(compile(source, "<rendered>", "exec"), module.__dict__)
    return module.FN


def execute_on_cpu(case: Case, source: str | None = None) -> list[np.ndarray]:
    fn = load_fn(source or render.render(case).source)
    outs = jax.jit(fn)(*numerics.make_inputs(case).values())
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(outs)]


def check_on_cpu(case: Case, source: str | None = None) -> numerics.NumericsResult:
    return numerics.compare(case, numerics.make_inputs(case), execute_on_cpu(case, source))


def case(**kw) -> Case:
    case_id = kw.pop("id", "t_case")
    if kw.pop("kind", "pattern") == "python":
        return Case(id=case_id, file="<test>", line=0, profiles=("cublas",), spec=PythonSpec(**kw))
    spec = PatternSpec(**kw)
    if spec.has_bias and spec.bias_dtype is None:
        spec = dataclasses.replace(spec, bias_dtype=spec.dequant)
    return Case(id=case_id, file="<test>", line=0, profiles=("cublas",), spec=spec)


SCALED_E4M3 = dict(input_scales="both", output_scale="divide", clamp=True, out_dtype="float8_e4m3fn")


# ------------------------------------------------------------ the shipped cases pass


@pytest.mark.parametrize("c", [c for c in SHIPPED if (c.spec.shape.batch or 1) * c.spec.shape.m * c.spec.shape.n * c.spec.shape.k <= CPU_LIMIT],
                         ids=lambda c: c.id)
def test_shipped_case_matches_reference_on_cpu(c):
    result = check_on_cpu(c)
    assert result.status == "pass", result.reason
    assert result.outputs[0].elements > 0
    assert all(o.max_err_over_tolerance <= 1 for o in result.outputs)


@pytest.mark.parametrize("dequant", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("epilogue", ["none", "relu", "gelu_tanh", "gelu_exact", "bias", "bias_gelu_tanh", "matrix_bias"])
def test_every_epilogue_and_dequant_passes(dequant, epilogue):
    c = case(id=f"grid_{dequant}_{epilogue}", dequant=dequant, epilogue=epilogue, amax="pre_scale",
             shape=Shape(32, 48, 64, batch=2), transpose_b=True, **SCALED_E4M3)
    result = check_on_cpu(c)
    assert result.status == "pass", result.reason


@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16", "float8_e5m2"])
def test_other_output_formats_pass(out_dtype):
    c = case(id=f"out_{out_dtype}", input_scales="a", output_scale="multiply", out_dtype=out_dtype, epilogue="relu",
             clamp=out_dtype.startswith("float8"), a_dtype="float8_e5m2")
    assert check_on_cpu(c).status == "pass"


# ------------------------------------------------------------ injected bugs fail

BUGS = [
    # (case fields, text in the rendered source, replacement, what it simulates)
    (dict(**SCALED_E4M3), " * a_scale.astype(jnp.float32)", "", "a_scale dropped"),
    (dict(**SCALED_E4M3), " * b_scale.astype(jnp.float32)", "", "b_scale dropped"),
    (dict(**SCALED_E4M3), "c = c / out_scale", "c = c * out_scale", "output scale multiplied instead of divided"),
    (dict(**SCALED_E4M3, epilogue="relu"), "    c = jax.nn.relu(c)\n", "", "relu missing"),
    (dict(**SCALED_E4M3), "E4M3FN_MAX = 448.0", "E4M3FN_MAX = 384.0", "clamp to a wrong maximum"),
    (dict(**SCALED_E4M3), "    c = jnp.clip(c, -E4M3FN_MAX, E4M3FN_MAX)\n", "", "clamp missing (overflow to NaN)"),
    (dict(**SCALED_E4M3, shape=Shape(32, 64, 64), transpose_b=True), "(((1,), (1,)), ((), ()))", "(((1,), (0,)), ((), ()))",
     "b read untransposed"),
    (dict(**SCALED_E4M3, epilogue="bias"), "    c = c + bias.astype(c.dtype)\n", "", "bias dropped"),
    (dict(**SCALED_E4M3, epilogue="gelu_tanh"), "jax.nn.gelu(c, approximate=True)", "jax.nn.relu(c)", "relu instead of gelu"),
    (dict(**SCALED_E4M3, amax="pre_scale"), "jnp.max(jnp.abs(c))", "jnp.max(c)", "amax without abs"),
    (dict(**SCALED_E4M3, amax="pre_scale", dequant="bfloat16"), "amax = jnp.max(jnp.abs(c)).astype(jnp.float32)\n",
     "amax = jnp.max(jnp.abs(c * 2)).astype(jnp.float32)\n", "amax taken after a scale"),
    (dict(input_scales="both", dequant="bfloat16", out_dtype="bfloat16"), " * b_scale.astype(jnp.bfloat16)", "",
     "bf16 output, b_scale dropped"),
]


@pytest.mark.parametrize("fields,old,new,what", BUGS, ids=[b[3] for b in BUGS])
def test_injected_bug_in_rendered_source_fails(fields, old, new, what):
    c = case(id="bug_" + what.replace(" ", "_"), **fields)
    source = render.render(c).source
    assert source.count(old) == 1, f"the template changed; update this test: {old!r} not in\n{source}"
    assert check_on_cpu(c, source).status == "pass"
    result = check_on_cpu(c, source.replace(old, new))
    assert result.status == "fail", f"{what} went unnoticed: {result.summary()}"
    assert result.reason.startswith("numerics mismatch:")


REFERENCE_BUGS = [
    (dict(**SCALED_E4M3, epilogue="relu"), dict(epilogue="none"), "reference without relu"),
    (dict(**SCALED_E4M3, shape=Shape(32, 64, 64), transpose_b=True), dict(transpose_b=False), "reference ignores the transpose"),
    (dict(**SCALED_E4M3), dict(clamp=False), "reference without clamp"),
    (dict(**SCALED_E4M3), dict(output_scale="multiply"), "reference multiplies the output scale"),
    (dict(SCALED_E4M3, epilogue="gelu_tanh", out_dtype="float32", clamp=False), dict(epilogue="relu"), "reference relu for gelu"),
]


@pytest.mark.parametrize("fields,wrong,what", REFERENCE_BUGS, ids=[b[2] for b in REFERENCE_BUGS])
def test_injected_bug_in_reference_fails(fields, wrong, what):
    c = case(id="refbug", **fields)
    outputs = execute_on_cpu(c)
    inputs = numerics.make_inputs(c)
    assert numerics.compare(c, inputs, outputs).status == "pass"
    assert numerics.compare(dataclasses.replace(c, spec=dataclasses.replace(c.spec, **wrong)), inputs, outputs).status == "fail", what


# ------------------------------------------------------------ inputs and tolerances


def test_inputs_are_deterministic_per_case_and_differ_between_cases():
    c = case(id="det", **SCALED_E4M3, epilogue="bias")
    one, two = numerics.make_inputs(c), numerics.make_inputs(c)
    assert list(one) == [name for name, _, _ in render.arg_specs(c)]
    for name in one:
        assert one[name].dtype == two[name].dtype and one[name].tobytes() == two[name].tobytes()
    other = numerics.make_inputs(dataclasses.replace(c, id="det2"))
    assert one["a"].tobytes() != other["a"].tobytes()
    assert one["a"].dtype == np.dtype(ml_dtypes.float8_e4m3fn) and not np.isnan(one["a"].astype(np.float32)).any()


def test_scales_are_powers_of_two_and_clamp_is_exercised_without_trivial_saturation():
    for fields in (SCALED_E4M3, dict(SCALED_E4M3, output_scale="multiply", out_dtype="float8_e5m2", dequant="float16",
                                     scale_dtype="float16")):
        c = case(id="sat", **fields)
        inputs = numerics.make_inputs(c)
        for name in ("a_scale", "b_scale", "out_scale"):
            v = float(inputs[name])
            assert v > 0 and np.log2(v) == int(np.log2(v)), (name, v)
        assert (float(inputs["a_scale"]), float(inputs["b_scale"])) == (A_SCALE, B_SCALE)
        ref = numerics.reference(c, inputs)
        limit = FP8_MAX[c.spec.out_dtype]
        saturated = np.mean(np.abs(ref.out) >= limit)
        assert 0 < saturated < 0.2, saturated
    # without clamp, an FP8 output stays well inside the range
    c = case(id="nosat", input_scales="both", output_scale="divide", out_dtype="float8_e4m3fn")
    ref = numerics.reference(c, numerics.make_inputs(c))
    assert 0.25 * 448 < np.abs(ref.out).max() <= 0.5 * 448


def test_ulp_and_unit_roundoff_follow_the_formats():
    assert numerics.ulp(20.0, "float8_e4m3fn") == 2.0
    assert numerics.ulp(448.0, "float8_e4m3fn") == 32.0
    assert numerics.ulp(20.0, "float8_e5m2") == 4.0
    assert numerics.ulp(1.0, "bfloat16") == 2.0**-7
    assert numerics.ulp(0.0, "float8_e4m3fn") == 2.0**-9  # subnormal spacing
    assert numerics.unit_roundoff("float32") == 2.0**-24
    assert numerics.unit_roundoff("bfloat16") == 2.0**-8
    assert numerics.unit_roundoff("float16") == 2.0**-11


def test_tolerance_is_one_output_ulp_plus_accumulated_error():
    c = case(id="tol", **SCALED_E4M3)
    inputs = numerics.make_inputs(c)
    ref = numerics.reference(c, inputs)
    # the FP8 accumulation bound (sqrt(k) 2^-14, Hopper's ~14 bits) stays below a tenth of one E4M3 output ulp
    assert ref.err.max() < 0.1 * np.median(numerics.ulp(ref.out, "float8_e4m3fn"))
    exact = ref.out.astype(numerics.dtype_of("float8_e4m3fn"))
    assert numerics.compare(c, inputs, [exact]).status == "pass"
    # one ulp off everywhere is within tolerance, two ulps (at a value away from 0) is not
    # (a neighbour in the same binade as the reference, so that "1 ulp" is the same on both sides)
    e = exact.astype(np.float64)
    step = numerics.ulp(e, "float8_e4m3fn")
    same_binade = (step == numerics.ulp(np.abs(ref.out) + ref.err, "float8_e4m3fn")) & (np.abs(e) + step < 448)
    assert same_binade.mean() > 0.8
    within = np.where(same_binade, e + step * np.sign(e), e).astype(exact.dtype)
    assert numerics.compare(c, inputs, [within]).status == "pass"
    i = np.unravel_index(np.argmax(np.abs(ref.out) * (np.abs(ref.out) < 200)), ref.out.shape)
    off = exact.astype(np.float64)
    off[i] += 3 * numerics.ulp(off[i], "float8_e4m3fn") * np.sign(off[i])
    result = numerics.compare(c, inputs, [off.astype(exact.dtype)])
    assert result.status == "fail" and result.outputs[0].mismatches == 1
    assert result.outputs[0].first_mismatch["index"] == [int(x) for x in i]


def test_nan_and_shape_rules():
    tol = np.zeros(3)
    assert numerics.compare_array("x", np.array([np.nan, 1, np.inf]), np.array([np.nan, 1, np.inf]), tol, "f").mismatches == 0
    assert numerics.compare_array("x", np.array([np.nan, 1, 1]), np.array([448.0, 1, 1]), tol + 1e9, "f").mismatches == 1
    assert numerics.compare_array("x", np.array([1.0, 1]), np.array([1.0, 1, 1]), tol, "f").mismatches == 2


def test_python_and_huge_cases_are_skipped_with_a_reason():
    py = case(kind="python", callable="m:f", args=(("a", (2, 2), "float8_e4m3fn"),))
    assert "python-kind" in numerics.skip_reason(py)
    huge = case(shape=Shape(8192, 8192, 8192))
    assert "limit" in numerics.skip_reason(huge)


# ------------------------------------------------------------ worker, compiler, runner


def test_worker_execute_round_trips_arrays_on_cpu():
    c = case(id="wexec", **SCALED_E4M3, amax="pre_scale", epilogue="relu")
    fn = load_fn(render.render(c).source)
    cpu = jax.devices("cpu")[0]
    specs = [jax.ShapeDtypeStruct(s, jax.numpy.dtype(d)) for _, s, d in render.arg_specs(c)]
    compiled = jax.jit(fn).lower(*specs).compile()
    encoded = worker.execute(compiled, numerics.encode_inputs(c), cpu)
    json.dumps(encoded)  # what goes through the worker's pipe
    assert [e["dtype"] for e in encoded] == ["float8_e4m3fn", "float32"]
    result = numerics.check(c, encoded)
    assert result.status == "pass", result.reason


def test_deviceless_worker_compiles_but_refuses_to_execute():
    c = case(id="dlexec", **SCALED_E4M3)
    with Compiler("deviceless") as compiler:
        comp = compiler.compile(render.render(c), load_target("h100"), PROFILES["cublas"], inputs=numerics.encode_inputs(c))
    assert comp.ok and comp.hlo
    assert comp.outputs is None and "needs a GPU: --mode device" in comp.execute_error


def _outcome(c: Case, comp: Compilation) -> runner.Outcome:
    return Outcome(c.id, comp.target, comp.profile, comp.mode, "0", PASS)


def test_runner_numerics_fail_is_its_own_fail_reason():
    c = case(id="rnum", **SCALED_E4M3, epilogue="relu")
    good = [numerics.encode(x) for x in execute_on_cpu(c)]
    comp = Compilation(c.id, "h100", "cublas", "device", hlo="", outputs=good)
    out = _outcome(c, comp)
    runner.apply_numerics(out, c, comp, numerics)
    assert out.code is PASS and out.numerics.status == "pass"
    assert outcome_to_json(out, with_text=False)["numerics"]["outputs"][0]["name"] == "out"
    bad_src = render.render(c).source.replace("    c = jax.nn.relu(c)\n", "")
    bad = [numerics.encode(x) for x in execute_on_cpu(c, bad_src)]
    comp = Compilation(c.id, "h100", "cublas", "device", hlo="", outputs=bad)
    out = _outcome(c, comp)
    runner.apply_numerics(out, c, comp, numerics)
    assert out.code is FAIL and out.reason.startswith("numerics mismatch: out:")
    assert out.diffs[-1].path == "numerics" and out.numerics.status == "fail"
    # a known fusion issue (XFAIL) does not excuse a wrong result
    out = _outcome(c, comp)
    out.code, out.reason = XFAIL, "known issue"
    runner.apply_numerics(out, c, comp, numerics)
    assert out.code is FAIL and "signature: XFAIL" in out.reason
    # an execution error is UNRESOLVED, not a silent pass
    comp = Compilation(c.id, "h100", "cublas", "device", hlo="", execute_error="XlaRuntimeError: boom")
    out = _outcome(c, comp)
    runner.apply_numerics(out, c, comp, numerics)
    assert out.code is UNRESOLVED and "boom" in out.reason
    py = case(id="rpy", kind="python", callable="m:f", args=(("a", (2, 2), "float8_e4m3fn"),))
    out = _outcome(py, comp)
    runner.apply_numerics(out, py, comp, numerics)
    assert out.code is PASS and out.numerics.status == "skipped" and "python-kind" in out.numerics.reason


def test_cli_numerics_deviceless_is_a_clear_usage_error(workspace, run_cli):
    code, out, err = run_cli("run", "--mode", "deviceless", "--numerics", "-k", "seed_plain_f32", cwd=workspace)
    assert code == 2 and "needs a GPU: --mode device" in err


# ------------------------------------------------------------ on a real GPU


@requires_gpu
def test_gpu_numerics_on_the_seed_cases(workspace, run_cli):
    code, out, err = run_cli("run", "--mode", "device", "--numerics", "--json", workspace / "r.json", cwd=workspace)
    doc = json.loads((workspace / "r.json").read_text())
    dev = doc["environment"]["device"]
    assert dev["name"] and dev["compute_capability"] and dev.get("cuda_runtime") and dev.get("cublas")
    for r in doc["results"]:
        assert r["numerics"]["status"] == "pass", (r["case"], r["profile"], r["numerics"])
    assert "numerics pass" in out


def test_a_value_rounded_the_other_way_at_a_rounding_boundary_passes():
    # recorded on the H200 session (JAX 0.11.2, cuBLASLt 13.1): seed_plain_bf16's kernel gave -17.75 at [10, 31] where
    # the float64 reference rounds to -17.625 (one bf16 ulp). The comparison is with the *rounded* reference, so
    # that rounding (half an ulp) is allowed as well; four ulps the wrong way is still an error
    (c,) = [c for c in selection.load_cases([], "seed_plain_bf16") if c.id == "seed_plain_bf16"]
    inputs = numerics.make_inputs(c)
    ref = numerics.reference(c, inputs)
    expected = ref.out.astype(numerics.dtype_of("bfloat16")).astype(np.float64)
    assert expected[10, 31] == -17.625
    out = expected.copy()
    out[10, 31] = -17.75
    assert numerics.compare(c, inputs, [out.astype(numerics.dtype_of("bfloat16"))]).status == "pass"
    out[10, 31] = -17.625 - 4 * 0.125
    assert numerics.compare(c, inputs, [out.astype(numerics.dtype_of("bfloat16"))]).status == "fail"
