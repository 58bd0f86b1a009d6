"""The device-validity rule: an FP8 gemm that compiles deviceless but that the platform's gemm library has no
kernel for (cuBLASLt's and hipBLASLt's FP8 type tables, plain data in fp8_check/platforms/)."""

from __future__ import annotations

import json
import textwrap

import pytest

from fp8_check.platforms import AMD, NVIDIA
from fp8_check.signature._extract import Signature
from fp8_check.verdict import _device_validity as device_validity, _golden as golden
from fp8_check.verdict._classify import REGRESSION, Verdict, classify_extra

from ..conftest import REPO

CUBLASLT, HIPBLASLT = NVIDIA.fp8_gemm_types, AMD.fp8_gemm_types
E4, E5, E4Z, E5Z = "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"


def test_the_tables_are_the_libraries_rows():
    assert CUBLASLT is not None and HIPBLASLT is not None
    # cuBLASLt: E4M3 x E4M3 writes no E5M2; mixed operands write either FP8 type; E5M2 x E5M2 has no kernel
    assert set(CUBLASLT.outputs(E4, E4)) == {"bf16", "f16", "f32", E4}
    assert set(CUBLASLT.outputs(E4, E5)) == set(CUBLASLT.outputs(E5, E4)) == {"bf16", "f16", "f32", E4, E5}
    assert CUBLASLT.outputs(E5, E5) == ()
    assert set(CUBLASLT.biases(E4, E4, E4)) == {"bf16", "f16"} and CUBLASLT.biases(E4, E4, "f32") == ("bf16",)
    assert len(CUBLASLT.combinations) == 5 + 7 + 7 and "cuBLAS documentation" in CUBLASLT.source
    # hipBLASLt: the fnuz types (MI300) and the OCP ones (MI350); neither writes E5M2 from E4M3 x E4M3
    assert E5Z not in HIPBLASLT.outputs(E4Z, E4Z) and E5 not in HIPBLASLT.outputs(E4, E4)
    assert HIPBLASLT.outputs(E4Z, E5Z) == ("f16", "f32", "bf16", E5Z)
    assert HIPBLASLT.outputs(E4Z, E4) == ()  # no mixed fnuz x OCP row


def _golden_signature(case: str, target: str = "h100", profile: str = "cublas") -> Signature:
    g = golden.load(golden.path_for(REPO / "goldens", case, target, profile, "deviceless"))
    return Signature.from_dict(g.expect[0].signature)


def test_the_rule_flags_only_what_the_library_cannot_run():
    bad = _golden_signature("dtype_e4m3_e4m3_e5m2_out")
    diffs = device_validity.diffs(bad, NVIDIA)
    assert [d.path for d in diffs] == ["gemms[0].device"]
    assert "compiles deviceless; cuBLASLt has no kernel for it: fails on the device" in diffs[0].found
    assert "f8e4m3fn x f8e4m3fn -> f8e5m2" in diffs[0].found
    for fine in ("seed_relu_amax_f32", "dtype_e4m3_e5m2", "scale_out_divide_e4m3"):
        assert device_validity.diffs(_golden_signature(fine), NVIDIA) == [], fine
    # Triton writes its own kernel: the table is about the library call only
    assert device_validity.diffs(_golden_signature("dtype_e4m3_e4m3_e5m2_out", profile="triton"), NVIDIA) == []
    # the same program on AMD's library: hipBLASLt has no such kernel either
    assert [d.found.split(":")[1].strip() for d in device_validity.diffs(bad, AMD)] == [
        "compiles deviceless; hipBLASLt has no kernel for it"]


def test_a_bias_the_library_does_not_take_is_flagged():
    sig = _golden_signature("dtype_e4m3_e4m3_e5m2_out")
    g = sig.gemms[0]
    g.output, g.operands = "f32", {**g.operands, "bias": "f32"}  # cuBLASLt's f32 output takes a bf16 bias only
    (d,) = device_validity.diffs(sig, NVIDIA)
    assert "with a f32 bias: cuBLASLt takes only a bf16 bias there" in d.found
    g.operands["bias"] = "bf16"
    assert device_validity.diffs(sig, NVIDIA) == []


def test_the_verdict_line_is_a_regression_naming_the_library():
    (d,) = device_validity.diffs(_golden_signature("dtype_e4m3_e4m3_e5m2_out"), NVIDIA)
    v = classify_extra(Verdict("neutral"), d.path, d.expected, d.found)
    assert v.cls == REGRESSION
    assert [x.why for x in v.lines] == ["compiles deviceless; cuBLASLt has no kernel for it: fails on the device"]


def test_check_says_the_gemm_cannot_run_on_the_device(run_cli, tmp_path, monkeypatch):
    """Issue 44's `Done when`: `check` of an E4M3 x E4M3 -> E5M2 requantizing matmul on h100/cublas (a real
    deviceless compile through the CUDA plugin) fails with the device-validity line."""
    (tmp_path / "requant.py").write_text(textwrap.dedent("""
        import jax.numpy as jnp

        def e4m3_to_e5m2(a, b, a_scale, b_scale, out_scale):
            y = jnp.dot(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale)
            return jnp.clip(y / out_scale, -57344.0, 57344.0).astype(jnp.float8_e5m2)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli("check", "requant:e4m3_to_e5m2", "--arg", "a=float8_e4m3fn[64,64]",
                             "--arg", "b=float8_e4m3fn[64,32]", "--arg", "a_scale=float32[]",
                             "--arg", "b_scale=float32[]", "--arg", "out_scale=float32[]", cwd=tmp_path)
    assert code == 1, out + err
    first = out.splitlines()[0]
    # the result line leads with the FP8 answer (#45); the gemm's types are in the device-validity line below
    assert first.startswith("FAIL") and "h100/cublas" in first and "FP8 1/1" in first
    assert "[regression]" in first
    assert ("gemms[0].device: expected a cuBLASLt kernel, found none: compiles deviceless; cuBLASLt has no kernel "
            "for it: fails on the device (f8e4m3fn x f8e4m3fn -> f8e5m2") in out


@pytest.mark.parametrize("case", ["dtype_e4m3_e4m3_e5m2_out", "scale_out_divide_e5m2"])
def test_the_library_cases_are_known_issues_on_cublas(run_cli, tmp_path, case):
    """The library's two E4M3 x E4M3 -> E5M2 cases carry the known issue: XFAIL with the rule's line, not PASS."""
    out_json = tmp_path / "r.json"
    code, out, err = run_cli("run", REPO / "cases", "-k", case, "--target", "h100", "--profile", "cublas",
                             "--mode", "deviceless", "--json", out_json, "--html", tmp_path / "r.html", cwd=REPO)
    assert code == 0, out + err
    assert any(line.startswith("XFAIL") and case in line for line in out.splitlines()), out
    (res,) = json.loads(out_json.read_text())["results"]
    assert [d["path"] for d in res["diffs"]] == ["gemms[0].device"]
    assert res["verdict"]["lines"][0]["why"] == "compiles deviceless; cuBLASLt has no kernel for it: fails on the device"



def _issue_for(outcome, target: str = "h100") -> str:
    from fp8_check.report import _issue as report_issue
    from fp8_check.run import _results as results

    res = results.Results({"jax": "0.12.0.1", "mode": "deviceless", "targets": [target], "profiles": ["cublas"]},
                          [outcome])
    [md] = report_issue.markdown_for([res], outcome.case, profile="cublas")
    return md


def test_the_issue_body_says_xla_should_not_rewrite_what_the_library_cannot_run():
    from fp8_check.verdict._outcome import FAIL, Outcome

    sig = _golden_signature("dtype_e4m3_e4m3_e5m2_out")
    out = Outcome("dtype_e4m3_e4m3_e5m2_out", "h100", "cublas", "deviceless", "0.12.0.1", FAIL, signature=sig)
    out.diffs = device_validity.diffs(sig, NVIDIA)
    out.verdict = classify_extra(Verdict("neutral"), out.diffs[0].path, out.diffs[0].expected, out.diffs[0].found)
    md = _issue_for(out)
    assert "with a type combination the gemm library has no kernel for" in md
    assert "XLA should not rewrite what the library cannot run" in md
    assert "does not rewrite the FP8 matmul" not in md


def test_the_issue_body_of_a_collective_only_change_does_not_blame_the_gemm():
    from fp8_check.verdict import _classify as verdict
    from fp8_check.verdict._comparator import FieldDiff
    from fp8_check.verdict._outcome import FAIL, Outcome

    g = golden.load(golden.path_for(REPO / "goldens", "shard_collective_matmul", "h100x8", "cublas", "deviceless"))
    expected = g.expect[0].signature
    found = {**expected, "collectives": [dict(expected["collectives"][0], dtype="bf16")] + expected["collectives"][1:]}
    out = Outcome("shard_collective_matmul", "h100x8", "cublas", "deviceless", "0.12.0.1", FAIL,
                  signature=Signature.from_dict(found))
    out.diffs = [FieldDiff("collectives[0].dtype", expected["collectives"][0]["dtype"], "bf16")]
    out.verdict = verdict.classify(expected, found)
    md = _issue_for(out, "h100x8")
    assert "the gemms are what the golden expects" in md and "what changed is the collectives" in md
    assert "does not rewrite the FP8 matmul" not in md and "no longer rewrites" not in md
