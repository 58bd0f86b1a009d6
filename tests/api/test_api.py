"""Check your own model: fp8_check.api (compiled deviceless for real in the worker), `fp8-check check`, the fp8 fixture."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
import yaml

from fp8_check import api
from fp8_check.run import _results as results_mod
from fp8_check.signature._extract import Signature
from fp8_check.verdict._outcome import FAIL

from ..conftest import REPO

F8 = jnp.float8_e4m3fn


def scaled_relu(a, b, a_scale, b_scale):
    """The tutorial pattern: dequantize, scale, dot, relu, clamp, requantize -> one FP8 gemm with RELU on H100."""
    c = jax.lax.dot_general(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale, (((1,), (0,)), ((), ())))
    return jnp.clip(jax.nn.relu(c), -448.0, 448.0).astype(F8)


ARGS = (jax.ShapeDtypeStruct((64, 64), F8), jax.ShapeDtypeStruct((64, 32), F8),
        jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32))

FUSED = dict(fp8_gemms=1, epilogue="RELU", fp8_output=True, no_upcast_dot=True)


def _golden_signature(target: str, case: str) -> dict:
    doc = yaml.safe_load((REPO / "goldens" / target / "cublas" / "deviceless" / f"{case}.yaml").read_text())
    return doc["expect"][0]["signature"]


# ------------------------------------------------------------------ expectations without compiling


def test_fusion_diffs_on_recorded_signatures():
    fused = _golden_signature("h100", "seed_relu_amax_f32")  # FP8 gemm, RELU, damax, E4M3 output
    assert api.fusion_diffs(fused, fp8_gemms=1, epilogue="RELU", damax=True, fp8_output=True, no_upcast_dot=True) == []
    diffs = [str(d) for d in api.fusion_diffs(fused, epilogue="GELU", damax=False, gemms=2)]
    assert "gemms: expected 2 gemm(s), found 1: __cublas$lt$matmul$f8 f8e4m3fnxf8e4m3fn->f8e4m3fn" in diffs
    assert "gemms[0].epilogue: expected GELU, found RELU" in diffs
    assert "gemms[0].damax_output: expected false, found true" in diffs
    upcast = Signature.from_dict(_golden_signature("a100", "seed_relu_f32"))  # no FP8 on sm_80: f32 gemm
    paths = {d.path for d in api.fusion_diffs(upcast, **FUSED)}
    assert paths == {"fp8_gemms", "gemms[*].epilogue", "gemms[*].fp8_output", "gemms[0].operand_dtypes"}
    # A partial signature compares like a golden.
    assert [str(d) for d in api.fusion_diffs(upcast, signature={"gemms": [{"output": "f8e4m3fn"}]})] == \
        ["gemms[0].output: expected f8e4m3fn, found f32"]


def test_golden_names_cannot_leave_the_goldens_directory(tmp_path):
    sig = Signature.from_dict(_golden_signature("h100", "seed_plain_f32"))
    report = api.FusionReport("test_x.<locals>.f", "h100", "cublas", "deviceless", "0.12.0.1", sig, "", "", 0.0)
    for bad in (None, "../escape", "a/b"):
        with pytest.raises(ValueError, match="golden name"):
            api.check_golden(report, tmp_path, bless=True, name=bad)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_non_array_arguments_are_static():
    def maybe_relu(a, b, *, relu: bool, scale):
        c = jax.lax.dot_general(a.astype(jnp.float32) * scale, b.astype(jnp.float32), (((1,), (0,)), ((), ())))
        return jax.nn.relu(c) if relu else c  # a Python branch: `relu` must not be traced

    with_relu = api.fusion_signature(maybe_relu, *ARGS[:2], relu=True, scale=ARGS[2])
    without = api.fusion_signature(maybe_relu, *ARGS[:2], relu=False, scale=ARGS[2])
    assert [g.epilogue for g in with_relu.gemms] == ["RELU"] and [g.epilogue for g in without.gemms] == ["DEFAULT"]
    # the two operands and the scale are the inputs; `relu` is not
    params = re.search(r"func\.func public @main\((.*?)\)\s*->", with_relu.stablehlo, re.S).group(1)
    assert params.count("%arg") == 3 and "tensor<f32>" in params


# ------------------------------------------------------------------ compiled for real, deviceless


@pytest.mark.slow
def test_plain_jit_and_concrete_arrays_give_one_fused_fp8_gemm():
    report = api.assert_fusion(scaled_relu, *ARGS, target="h100", **FUSED)
    assert report.target == "h100" and report.profile == "cublas" and report.mode == "deviceless"
    assert report.gemms[0].target == "__cublas$lt$matmul$f8"
    assert "stablehlo.dot_general" in report.stablehlo and "__cublas$lt$matmul$f8" in report.hlo
    # jitted, and with concrete arrays instead of specs: the same signature.
    concrete = [jnp.zeros(s.shape, s.dtype) for s in ARGS]
    assert api.fusion_signature(jax.jit(scaled_relu), *concrete).signature == report.signature


@pytest.mark.slow
def test_a100_has_no_fp8_gemm_and_the_assertion_says_which_fields_differ():
    with pytest.raises(api.FusionMismatch) as info:
        api.assert_fusion(scaled_relu, *ARGS, target="a100", **FUSED)
    text = str(info.value)
    assert text.splitlines()[0] == "fusion mismatch: scaled_relu on a100/cublas (deviceless, jax " \
        f"{info.value.report.jax}): 4 field(s) differ"
    assert "    fp8_gemms: expected 1, found 0 (__cublas$lt$matmul f32xf32->f32)" in text
    assert "gemms[0].operand_dtypes: expected FP8 operands (no upcast dot), found [f32, f32]" in text
    assert isinstance(info.value, AssertionError)


@pytest.mark.slow
def test_flax_dense_apply_and_its_gradient():
    # flax is a locked extra that scripts/env.sh installs: its absence is a broken environment, not a skip
    from flax import linen as nn
    from flax.linen import fp8_ops

    model = nn.Dense(features=256, use_bias=False, dot_general_cls=fp8_ops.Fp8DotGeneral)
    x = jnp.ones((64, 128), jnp.bfloat16)
    variables = model.init(jax.random.PRNGKey(0), x)
    fwd = api.fusion_signature(model.apply, variables, x, target="h100")
    assert fwd.fp8_gemms == 1 and fwd.gemms[0].operand_dtypes == ["f8e4m3fn", "f8e4m3fn"]

    def loss(variables, x):
        return jnp.mean(model.apply(variables, x).astype(jnp.float32) ** 2)

    grad = api.fusion_signature(jax.grad(loss, argnums=(0, 1)), variables, x, target="h100")
    # forward E4M3 x E4M3, and the two backward gemms take the E5M2 output gradient
    assert grad.fp8_gemms == 3
    assert sorted("x".join(g.operand_dtypes) for g in grad.gemms if g.fp8) == \
        ["f8e4m3fnxf8e4m3fn", "f8e4m3fnxf8e5m2", "f8e5m2xf8e4m3fn"]


@pytest.mark.slow
def test_golden_bless_then_compare_then_differ(tmp_path):
    report = api.fusion_signature(scaled_relu, *ARGS)
    with pytest.raises(api.FusionMismatch, match="no golden yet"):
        api.check_golden(report, tmp_path)
    assert "+case: scaled_relu" in api.check_golden(report, tmp_path, bless=True)
    assert api.check_golden(report, tmp_path) == ""
    path = tmp_path / "h100" / "cublas" / "deviceless" / "scaled_relu.yaml"
    path.write_text(path.read_text().replace("epilogue: RELU", "epilogue: GELU"))
    with pytest.raises(api.FusionMismatch, match=r"gemms\[0\]\.epilogue: expected GELU, found RELU"):
        api.check_golden(report, tmp_path)
    # the same judgement as the one result record `run` and `check` use, its diffs structured
    judged = api.judge_golden(report, tmp_path)
    assert judged.code is FAIL and judged.case == "scaled_relu" and judged.signature == report.signature
    assert [(d.path, d.expected, d.found) for d in judged.diffs] == [("gemms[0].epilogue", "GELU", "RELU")]
    assert judged.verdict is not None and judged.verdict.cls == "mixed"  # GELU moved out, RELU fused in


# ------------------------------------------------------------------ fp8-check check

MODEL = textwrap.dedent('''\
    import jax, jax.numpy as jnp

    def scaled_relu(a, b, a_scale, b_scale):
        c = jax.lax.dot_general(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale,
                                (((1,), (0,)), ((), ())))
        return jnp.clip(jax.nn.relu(c), -448.0, 448.0).astype(jnp.float8_e4m3fn)

    def example_args():
        f8 = jnp.float8_e4m3fn
        return (jax.ShapeDtypeStruct((64, 64), f8), jax.ShapeDtypeStruct((64, 32), f8),
                jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32))
''')
ARG_FLAGS = ["--arg", "a=float8_e4m3fn[64,64]", "--arg", "b=float8_e4m3fn[64,32]", "--arg", "a_scale=float32[]",
             "--arg", "b_scale=float32[]"]


@pytest.mark.slow
def test_check_cli_prints_signature_and_follows_run_exit_codes(run_cli, tmp_path, monkeypatch):
    (tmp_path / "usermodel_i16.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli("check", "usermodel_i16:scaled_relu", *ARG_FLAGS, "--target", "h100,a100",
                             "--expect", "fp8_gemms=1", "--expect", "epilogue=RELU", cwd=tmp_path)
    assert code == 1, out + err
    # each result line leads with the FP8 answer (#45); a100 has no FP8 tensor cores, and the line says so
    assert "PASS        h100/cublas  usermodel_i16.scaled_relu  FP8 1/1 gemms, 100 % of FLOPs  (" in out
    assert "FAIL        a100/cublas  usermodel_i16.scaled_relu  FP8 0/1 gemms  (" in out
    assert "no FP8: the program quantizes to f8e4m3fn but a100 (sm_80) has no FP8 tensor cores" in out
    assert "      fp8_gemms: expected 1, found 0 (__cublas$lt$matmul f32xf32->f32)" in out
    assert "every kernel and gemm with -v" in out
    # `--json -`: stdout is the JSON alone; what the checked code prints (at import, in the --args
    # factory, while traced) goes to stderr
    printing = "print('importing the model')\n" + MODEL.replace(
        "def example_args():\n", "def example_args():\n    print('making the args')\n").replace(
        "def scaled_relu(a, b, a_scale, b_scale):\n", "def scaled_relu(a, b, a_scale, b_scale):\n    print('tracing')\n")
    assert printing.count("print(") == 3
    (tmp_path / "usermodel_i16.py").write_text(printing)
    code, out, err = run_cli("check", "usermodel_i16:scaled_relu", "--args", "usermodel_i16:example_args",
                             "--json", "-", "--golden", "sr", "--bless", cwd=tmp_path)
    assert code == 0, err
    assert "importing the model" in err and "making the args" in err and "tracing" in err, err
    doc = json.loads(out)
    assert doc["results"][0]["outcome"] == "PASS" and doc["results"][0]["signature"]["gemms"][0]["epilogue"] == "RELU"
    # the standard results file, as `run` writes it: it loads as one, and the report renders it
    checked = results_mod.from_json(doc)
    assert doc["schema"] == results_mod.SCHEMA and [o.case for o in checked.outcomes] == ["sr"]
    assert checked.outcomes[0].signature is not None and checked.environment["function"] == "usermodel_i16:scaled_relu"
    assert (tmp_path / "goldens" / "h100" / "cublas" / "deviceless" / "sr.yaml").is_file()
    code, out, err = run_cli("check", "usermodel_i16:scaled_relu", *ARG_FLAGS, "--golden", "sr", cwd=tmp_path)
    assert code == 0, out + err
    # a golden not blessed yet: NEW, and the hint is this command's own way to bless, not pytest's (#43)
    code, out, err = run_cli("check", "usermodel_i16:scaled_relu", *ARG_FLAGS, "--golden", "other", cwd=tmp_path)
    assert "NEW" in out and "`--golden other --bless`" in out and "--fp8-bless" not in out, out + err


@pytest.mark.parametrize("argv, message", [
    (["usermodel_none:f"], "cannot import 'usermodel_none'"),
    (["os:path", "--arg", "x=float32"], "--arg 'x=float32': expected NAME=DTYPE[SHAPE]"),
    (["os:getcwd", "--arg", "x=float9[2]"], "--arg x: unknown dtype 'float9'"),
    (["os:getcwd", "--expect", "fp8=1"], "--expect 'fp8=1': expected KEY=VALUE with KEY one of"),
    (["os:getcwd", "--target", "v100"], "--target: unknown target 'v100'"),
    (["notafunction"], "expected module:function"),
])
def test_check_cli_bad_input_is_one_line_and_exit_2(run_cli, tmp_path, argv, message):
    code, out, err = run_cli("check", *argv, cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


# ------------------------------------------------------------------ the fp8 fixture in a user's own pytest run


USER_TEST = textwrap.dedent('''\
    import jax, jax.numpy as jnp
    from usermodel_i16 import scaled_relu, example_args

    def test_fused(fp8):
        fp8.assert_fusion(scaled_relu, *example_args(), fp8_gemms=1, epilogue="RELU", fp8_output=True)

    def test_golden(fp8):
        fp8.check_golden("scaled_relu", scaled_relu, *example_args())
''')


@pytest.mark.slow
def test_fixture_with_bless_and_a_readable_failure_on_a100(tmp_path):
    (tmp_path / "usermodel_i16.py").write_text(MODEL)
    (tmp_path / "test_user.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(tmp_path)

    def pytest_run(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=tmp_path,
                              capture_output=True, text=True, env=env, timeout=600)

    p = pytest_run("--fp8-bless")
    assert p.returncode == 0 and "2 passed" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / "goldens" / "h100" / "cublas" / "deviceless" / "scaled_relu.yaml").is_file()
    p = pytest_run()
    assert p.returncode == 0 and "2 passed" in p.stdout, p.stdout + p.stderr
    p = pytest_run("--fp8-target", "h100,a100", "-k", "fused")
    assert p.returncode == 1 and "1 failed, 1 passed" in p.stdout, p.stdout + p.stderr
    assert "FAILED test_user.py::test_fused[a100-cublas]" in p.stdout
    assert "fusion mismatch: scaled_relu on a100/cublas" in p.stdout
    assert "fp8_gemms: expected 1, found 0 (__cublas$lt$matmul f32xf32->f32)" in p.stdout
    assert "gemms[*].epilogue: expected RELU, found (no FP8 gemm" in p.stdout


def test_package_reexports_the_api_lazily():
    code = ("import sys; import fp8_check; assert 'fp8_check.api' not in sys.modules and 'yaml' not in sys.modules; "
            "from fp8_check import assert_fusion, FusionMismatch; from fp8_check.api import assert_fusion as a; "
            "assert assert_fusion is a and issubclass(FusionMismatch, AssertionError); print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
