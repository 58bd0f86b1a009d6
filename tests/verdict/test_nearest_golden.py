"""A release with no golden of its own is judged against the nearest release's golden (issue 52): a regression there
is FAIL [regression] naming the layer and the golden's release, never a NEW that exits 0 under
`--fail-on regression`; other differences are NEW with them listed; an identical signature is PASS with the note.

The fast tests judge recorded signatures through the real runner (`runner.judge_signature`, what run, matrix,
check, the pytest plugin and bisect all judge by); the slow one is the issue's own case: the flax decoder train
step whose fused q/k/v forward gemm loses FP8 on JAX 0.11.0, blessed on 0.11.2 by a real matrix and judged on 0.11.0
by another, in per-release environments (cached under the user cache).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fp8_check.core._files import atomic_write
from fp8_check.run._runner import is_regression, judge_signature
from fp8_check.signature import _extract as signature
from fp8_check.verdict import _golden as golden
from fp8_check.verdict._outcome import FAIL, NEW, PASS, UNRESOLVED, Outcome

from ..conftest import REPO, write_cases

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"
ROW = ("plain", "h100", "cublas", "deviceless")


def _sig(version: str, case: str = "plain", profile: str = "cublas"):
    return signature.extract((FIXTURES / f"jax-{version}" / f"{case}.h100.{profile}.txt").read_text())


def _golden(root: Path, expectations: list[golden.Expectation]) -> None:
    atomic_write(golden.path_for(root, *ROW), golden.Golden(*ROW, expectations).to_yaml())


def _judge(root: Path, version: str, sig) -> Outcome:
    return judge_signature(Outcome(*ROW[:3], ROW[3], version, UNRESOLVED), sig, root)


def test_nearest_release_is_the_newest_blessed_before_else_the_oldest_after():
    g = golden.Golden(*ROW, [golden.Expectation({"kernels": 3}, ">=0.12.0", "jax 0.12.0..0.12.0.1 (fp8-check matrix, 2 versions)"),
                             golden.Expectation({"kernels": 2}, ">=0.9.0,<0.9.1", "jax 0.9.0 (fp8-check matrix, 1 version)"),
                             golden.Expectation({"kernels": 1}, "==0.7.0", "")])
    assert g.expected_for("0.11.0") is None
    assert [(e.signature["kernels"], r) for v in ("0.11.0", "0.8.0", "0.6.2")
            for e, r in [g.nearest(v)]] == [(2, "0.9.0"), (1, "0.7.0"), (1, "0.7.0")]
    assert golden.Golden(*ROW).nearest("0.11.0") is None


def test_a_lost_fp8_gemm_against_the_nearest_golden_is_a_regression_not_new(tmp_path):
    """The golden states one FP8 gemm, blessed on 0.12.0 only; on 0.11.2 (no expectation) the gemm runs in f32."""
    root = tmp_path / "goldens"
    fp8 = _sig("0.12.0.1")
    _golden(root, [golden.Expectation(fp8.to_dict(), ">=0.12.0", "jax 0.12.0 (fp8-check matrix, 1 version)")])
    # the same program as XLA compiles it where it does not rewrite the FP8 pattern (recorded for a100): f32 gemm
    lost = signature.extract((FIXTURES / "jax-0.12.0.1" / "plain.a100.cublas.txt").read_text())
    out = _judge(root, "0.11.2", lost)
    assert out.code is FAIL and out.verdict is not None and out.verdict.cls == "regression", (out.code, out.reason)
    assert out.reason.startswith("against the golden of 0.12.0: this release has none") and is_regression(out)
    # identical: PASS with the note; the release's own expectation judges it without one
    same = _judge(root, "0.11.2", fp8)
    assert same.code is PASS and same.reason == "against the golden of 0.12.0: this release has none"
    assert _judge(root, "0.12.0.1", fp8).reason == ""
    # no golden at all: NEW as before
    assert _judge(tmp_path / "none", "0.11.2", fp8).code is NEW


def test_a_difference_that_is_no_regression_is_new_with_the_differences_listed(tmp_path):
    """Triton's gemm kind renamed (0.8.0 -> 0.12.0.1, neutral) and the requantization fused (an improvement):
    NEW against the nearest golden, its differences and class kept; never a FAIL, never silent."""
    root = tmp_path / "goldens"
    row = ("plain", "h100", "triton", "deviceless")
    atomic_write(golden.path_for(root, *row), golden.Golden(*row, [golden.Expectation(
        _sig("0.8.0", "plain", "triton").to_dict(), "==0.8.0", "jax 0.8.0")]).to_yaml())
    out = judge_signature(Outcome(*row, "0.12.0.1", UNRESOLVED), _sig("0.12.0.1", "plain", "triton"), root)
    assert out.code is NEW and out.diffs and out.verdict is not None and not out.verdict.is_regression, out.reason
    assert out.reason.startswith("against the golden of 0.8.0: this release has none; neutral, not a regression")
    assert "fp8-check bless -k plain" in out.reason and not is_regression(out)


MODEL = "decoder_e5m2_train"


def _model_case(tmp_path: Path) -> Path:
    """The shipped case without its known issue on 0.11.0 (the issue's setting: nothing declared, a golden from
    0.11.2 only)."""
    doc = yaml.safe_load((REPO / "cases" / "models.yaml").read_text())
    case = next(c for c in doc["cases"] if c["id"] == MODEL)
    case.pop("known_issues", None)
    return write_cases(tmp_path / "cases" / "models.yaml", yaml.safe_dump({"defaults": doc["defaults"], "cases": [case]}))


@pytest.mark.slow
@pytest.mark.network
def test_a_model_blessed_on_one_release_fails_on_an_earlier_one_where_a_layer_loses_fp8(tmp_path, run_cli):
    """Done when (issue 52): the flax train step blessed from 0.11.2 (a contract), judged on 0.11.0 where the fused
    q/k/v forward gemm runs as an f16 loop fusion: FAIL [regression] naming the layer and the golden's release, exit 1
    under --fail-on regression (it was NEW, exit 0). Real per-release environments and deviceless compiles."""
    _model_case(tmp_path)
    goldens = tmp_path / "goldens"
    common = ("--target", "h100", "--profile", "cublas", "--mode", "deviceless", "--with", "flax", "--with", "optax",
              "--goldens", goldens, "--no-html", "--jobs", "1")
    code, out, err = run_cli("matrix", "cases", "--jax", "0.11.2", "--out", tmp_path / "bless.json", *common, cwd=tmp_path)
    assert code == 1 and "NEW" in out, out + err  # nothing blessed yet
    code, out, err = run_cli("bless", "--from-matrix", tmp_path / "bless.json", "--goldens", goldens, cwd=tmp_path)
    assert code == 0 and f"blessed h100/cublas {MODEL}: 1 contract(s): >=0.11.2" in out, out + err
    code, out, err = run_cli("matrix", "cases", "--jax", "0.11.0", "--out", tmp_path / "m.json", "--fail-on", "regression",
                             *common, cwd=tmp_path)
    assert code == 1, out + err
    doc = json.loads((tmp_path / "m.json").read_text())
    [res] = doc["versions"][0]["results"]
    assert res["outcome"] == "FAIL" and res["verdict"]["class"] == "regression", res
    assert res["reason"].startswith("against the golden of 0.11.2: this release has none"), res["reason"]
    assert "DecoderBlock/attn/q_proj/CurrentScalingFp8_0 forward: FP8 -> f16" in res["reason"], res["reason"]
    assert "1 regression against goldens" in out, out


@pytest.mark.slow
def test_the_api_and_the_pytest_fixture_judge_by_the_nearest_golden_too(tmp_path):
    """`check_golden` (what the pytest fixture `fp8.check_golden` calls): a bf16 program against a golden blessed
    on 0.11.2 only that states the FP8 gemm: FAIL naming the golden's release, a regression; its own signature
    blessed on 0.11.2: passes here (another release) with nothing to record."""
    import jax
    import jax.numpy as jnp

    from fp8_check import api

    def bf16_dot(a, b):
        return jnp.dot(a, b)

    args = (jax.ShapeDtypeStruct((64, 64), jnp.bfloat16), jax.ShapeDtypeStruct((64, 32), jnp.bfloat16))
    report = api.fusion_signature(bf16_dot, *args, target="h100", profile="cublas")
    assert report.jax != "0.11.2" and not report.signature.fp8_gemms
    path = golden.path_for(tmp_path, "bf16_dot", "h100", "cublas", "deviceless")
    fp8 = _sig("0.12.0.1")  # the recorded FP8 gemm of the same shapes' pattern
    atomic_write(path, golden.Golden("bf16_dot", "h100", "cublas", "deviceless",
                                     [golden.Expectation(fp8.to_dict(), "==0.11.2", "jax 0.11.2")]).to_yaml())
    with pytest.raises(api.FusionMismatch, match=r"FAIL .*\(against the golden of 0\.11\.2: this release has none\)") as exc:
        api.check_golden(report, tmp_path, name="bf16_dot")
    assert exc.value.verdict is not None and exc.value.verdict.is_regression
    atomic_write(path, golden.Golden("bf16_dot", "h100", "cublas", "deviceless", [golden.Expectation(
        report.signature.to_dict(), "==0.11.2", "jax 0.11.2")]).to_yaml())
    assert api.check_golden(report, tmp_path, name="bf16_dot") == ""
    assert api.judge_golden(report, tmp_path, name="bf16_dot").reason == "against the golden of 0.11.2: this release has none"
