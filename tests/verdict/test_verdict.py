"""The verdict rules (harness/fp8_check/verdict/_classify.py) on signatures recorded with real deviceless compiles.

Each test pairs recorded signatures (tests/fixtures/hlo/jax-<version>/, JAX 0.6.1,
0.8.0 and 0.12.0.1) whose difference exercises one rule, and states the class the
rule gives from what the change costs on the GPU — never a value copied from the
classifier's output. Where no recorded pair shows a rule (an FP8 Triton dot), a
recorded signature is edited the way the rule describes.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from fp8_check.signature import _extract as signature
from fp8_check.verdict import _classify as verdict, _comparator as comparator
from fp8_check.verdict._classify import IMPROVEMENT, MIXED, NEUTRAL, REGRESSION

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"
VERSIONS = sorted((p.name.removeprefix("jax-") for p in FIXTURES.glob("jax-*") if p.is_dir()),
                  key=lambda v: tuple(int(x) for x in v.split(".")))
REVERSE = {REGRESSION: IMPROVEMENT, IMPROVEMENT: REGRESSION, NEUTRAL: NEUTRAL, MIXED: MIXED}


def sig(version: str, case: str, target: str = "h100", profile: str = "cublas") -> dict:
    text = (FIXTURES / f"jax-{version}" / f"{case}.{target}.{profile}.txt").read_text()
    return signature.extract(text).to_dict()


def classes(v: verdict.Verdict, path_prefix: str) -> set[str]:
    return {x.cls for x in v.lines if x.path.startswith(path_prefix)}


def test_at_least_three_versions_recorded():
    assert len(VERSIONS) >= 3


# ------------------------------------------------------------------ the known changes across versions


def test_bf16_scale_conversion_split_at_0_7_is_a_regression():
    """0.6.1 -> 0.8.0 (first bad 0.7.0): bf16 scalar scales converted to f32 in kernels of their own."""
    before, after = sig("0.6.1", "scaled_bf16"), sig("0.8.0", "scaled_bf16")
    v = verdict.classify(before, after)
    assert v.cls == REGRESSION
    assert classes(v, "kernels") == {REGRESSION}
    new_kernels = [x for x in v.lines if x.path == "launches" and x.cls == REGRESSION]
    assert len(new_kernels) == after["kernels"] - before["kernels"] > 0
    assert verdict.classify(after, before).cls == IMPROVEMENT


def test_triton_kind_rename_is_neutral():
    """`__triton_gemm` -> `__triton_nested_gemm_fusion` with the same structure costs nothing."""
    before, after = sig("0.8.0", "plain", profile="triton"), sig("0.12.0.1", "plain", profile="triton")
    assert before["gemms"][0]["target"] != after["gemms"][0]["target"]  # the rename is in the recording
    v = verdict.classify(before, after)
    assert v.cls == NEUTRAL
    assert v.lines and {x.path for x in v.lines} == {"launches", "gemms[0].target"}


def test_cublas_target_rename_is_neutral():
    """a100: `__cublas$gemm` -> `__cublas$lt$matmul` (same operands, epilogue, kernels)."""
    v = verdict.classify(sig("0.8.0", "plain", "a100"), sig("0.12.0.1", "plain", "a100"))
    assert v.cls == NEUTRAL and v.lines


@pytest.mark.parametrize("case", ["scaled", "scaled_bf16"])
def test_triton_fusing_the_requantization_is_an_improvement(case):
    """0.8.0 -> 0.12.0.1 (from 0.10.1): clamp/divide/convert move into the Triton fusion, which writes FP8."""
    before, after = sig("0.8.0", case, profile="triton"), sig("0.12.0.1", case, profile="triton")
    v = verdict.classify(before, after)
    assert v.cls == IMPROVEMENT
    assert classes(v, "gemms[0].output") == {IMPROVEMENT}  # FP8 output produced by the gemm
    assert classes(v, "gemms[0].fused_ops") == {IMPROVEMENT}
    assert classes(v, "kernels") == {IMPROVEMENT}
    assert classes(v, "gemms[0].target") == {NEUTRAL}  # the rename rides along, costs nothing
    back = verdict.classify(after, before)
    assert back.cls == REGRESSION
    assert classes(back, "gemms[0].output") == {REGRESSION}


# ------------------------------------------------------------------ one rule at a time, at every recorded version


@pytest.mark.parametrize("version", VERSIONS)
def test_fp8_gemm_lost_is_a_regression(version):
    """Same pattern, FP8-capable h100 vs a100: cuBLASLt FP8 on E4M3 -> a gemm on upcast f32 operands."""
    fp8, upcast = sig(version, "plain", "h100"), sig(version, "plain", "a100")
    v = verdict.classify(fp8, upcast)
    assert v.cls == REGRESSION
    assert classes(v, "gemms[0].target") == {REGRESSION}
    assert classes(v, "gemms[0].operand_dtypes") == {REGRESSION}
    assert verdict.classify(upcast, fp8).cls == IMPROVEMENT


@pytest.mark.parametrize("version", VERSIONS)
def test_epilogue_and_damax_moved_out_is_a_regression(version):
    """relu_amax -> scaled on h100/cublas: the RELU epilogue and the damax output leave the gemm."""
    fused, plain = sig(version, "relu_amax"), sig(version, "scaled")
    v = verdict.classify(fused, plain)
    assert classes(v, "gemms[0].epilogue") == {REGRESSION}
    assert classes(v, "gemms[0].damax_output") == {REGRESSION}
    assert classes(v, "gemms[0].amax") == {REGRESSION}
    assert v.cls == REGRESSION
    back = verdict.classify(plain, fused)
    assert classes(back, "gemms[0].epilogue") == {IMPROVEMENT} and back.cls == IMPROVEMENT


@pytest.mark.parametrize("version", VERSIONS)
def test_fp8_output_and_scales_lost_but_fewer_kernels_is_mixed(version):
    """scaled -> plain on h100/cublas: the gemm no longer writes FP8 nor takes the scales
    (regressions), and the separate divide kernel is gone (improvement): both, so mixed."""
    scaled, plain = sig(version, "scaled"), sig(version, "plain")
    v = verdict.classify(scaled, plain)
    assert classes(v, "gemms[0].output") == {REGRESSION}
    assert classes(v, "gemms[0].operands.d_scale") == {REGRESSION}
    assert classes(v, "gemms[0].operands.a_scale") == {REGRESSION}
    assert classes(v, "kernels") == {IMPROVEMENT}
    assert v.cls == MIXED
    assert v.is_regression  # mixed fails under --fail-on regression
    assert classes(verdict.classify(plain, scaled), "gemms[0].operands.d_scale") == {IMPROVEMENT}


@pytest.mark.parametrize("version", VERSIONS)
def test_triton_dot_on_upcast_operands_is_a_regression(version):
    """A Triton gemm fusion whose dot ran on FP8 operands (as flax's Fp8DirectDotGeneralOp gets)
    and now runs on the upcast f32 ones."""
    upcast = sig(version, "plain", profile="triton")
    fp8 = copy.deepcopy(upcast)
    fp8["gemms"][0]["operand_dtypes"] = ["f8e4m3fn", "f8e4m3fn"]
    v = verdict.classify(fp8, upcast)
    assert v.cls == REGRESSION
    (line,) = v.for_path("gemms[0].operand_dtypes")
    assert line.cls == REGRESSION and "Triton dot" in line.why


@pytest.mark.parametrize("version", VERSIONS)
def test_identical_signatures_have_no_lines(version):
    s = sig(version, "relu_amax")
    v = verdict.classify(s, copy.deepcopy(s))
    assert v.cls == NEUTRAL and v.lines == ()


def test_bias_fused_into_cublas_gemm_is_an_improvement_with_a_line_for_the_new_operand():
    """a100 bias_bf16 0.8.0 -> 0.12.0.1: BIAS epilogue and bias operand move into the gemm, a kernel goes.
    The new `operands.bias` key is only seen by comparing both ways (full signatures)."""
    v = verdict.classify(sig("0.8.0", "bias_bf16", "a100"), sig("0.12.0.1", "bias_bf16", "a100"))
    assert v.cls == IMPROVEMENT
    assert classes(v, "gemms[0].operands.bias") == {IMPROVEMENT}
    assert classes(v, "gemms[0].epilogue") == {IMPROVEMENT}
    assert not comparator.compare(sig("0.8.0", "bias_bf16", "a100")["gemms"][0]["operands"],
                              sig("0.12.0.1", "bias_bf16", "a100")["gemms"][0]["operands"])  # the judge's view misses it


def test_more_kernels_is_a_regression_and_fewer_an_improvement():
    s = sig("0.12.0.1", "scaled")
    more = copy.deepcopy(s)
    more["kernels"] += 1
    assert verdict.classify(s, more).cls == REGRESSION
    assert verdict.classify(more, s).cls == IMPROVEMENT


# ------------------------------------------------------------------ partial goldens and other inputs


def test_partial_golden_only_compares_stated_fields():
    found = sig("0.12.0.1", "scaled")  # epilogue DEFAULT, no amax
    partial = {"gemms": [{"epilogue": "RELU", "damax_output": True}]}
    v = verdict.classify(partial, found)
    assert {x.path for x in v.lines} == {"gemms[0].epilogue", "gemms[0].damax_output"}
    assert v.cls == REGRESSION
    assert verdict.classify({"kernels": found["kernels"]}, found).lines == ()


def test_paths_match_the_judges_diff_for_partial_goldens():
    found = sig("0.8.0", "relu_amax", "a100")
    expected = {"kernels": 2, "gemms": [{"target": "__cublas$lt$matmul$f8", "epilogue": "RELU"}]}
    judge_paths = {d.path for d in comparator.compare(expected, found)}
    assert {x.path for x in verdict.classify(expected, found).lines} == judge_paths


def test_signature_objects_and_dicts_agree():
    text = (FIXTURES / "jax-0.6.1" / "scaled_bf16.h100.cublas.txt").read_text()
    text2 = (FIXTURES / "jax-0.8.0" / "scaled_bf16.h100.cublas.txt").read_text()
    a, b = signature.extract(text), signature.extract(text2)
    assert verdict.classify(a, b) == verdict.classify(a.to_dict(), b.to_dict())


def test_numerics_and_filecheck_failures_are_regressions():
    v = verdict.classify_extra(verdict.Verdict(NEUTRAL), "numerics", "within tolerance", "max rel err 0.5")
    assert v.cls == REGRESSION
    improved = verdict.classify(sig("0.8.0", "scaled", profile="triton"), sig("0.12.0.1", "scaled", profile="triton"))
    assert verdict.classify_extra(improved, "filecheck", "patterns match", "no match").cls == MIXED


def test_round_trip_through_json():
    v = verdict.classify(sig("0.6.1", "scaled_bf16"), sig("0.8.0", "scaled_bf16"))
    import json

    assert verdict.Verdict.from_dict(json.loads(json.dumps(v.to_dict()))) == v
    assert v.summary().startswith("worse: ")


def test_overall_class_rules():
    assert verdict.overall([]) == NEUTRAL
    assert verdict.overall([NEUTRAL, IMPROVEMENT]) == IMPROVEMENT
    assert verdict.overall([NEUTRAL, REGRESSION]) == REGRESSION
    assert verdict.overall([IMPROVEMENT, REGRESSION, NEUTRAL]) == MIXED


# ------------------------------------------------------------------ the remaining rules, on edited recordings


@pytest.mark.parametrize("version", VERSIONS)
def test_whole_fp8_gemm_lost_is_a_regression(version):
    s = sig(version, "plain")
    lost = copy.deepcopy(s)
    lost["gemms"] = []
    v = verdict.classify(s, lost)
    assert classes(v, "gemms[0]") == {REGRESSION} and v.cls == REGRESSION
    assert verdict.classify(lost, s).cls == IMPROVEMENT


@pytest.mark.parametrize("version", VERSIONS)
def test_c_matrix_no_longer_accumulated_is_a_regression(version):
    s = sig(version, "scaled")
    with_c = copy.deepcopy(s)
    with_c["gemms"][0]["beta"] = 1.0
    assert classes(verdict.classify(with_c, s), "gemms[0].beta") == {REGRESSION}
    assert classes(verdict.classify(s, with_c), "gemms[0].beta") == {IMPROVEMENT}


@pytest.mark.parametrize("version", VERSIONS)
def test_gemm_fusion_loading_upcast_arrays_is_a_regression(version):
    s = sig(version, "plain", profile="triton")
    assert all(d.startswith("f8") for d in s["gemms"][0]["inputs"])  # the fusion loads the FP8 arrays
    upcast = copy.deepcopy(s)
    upcast["gemms"][0]["inputs"] = ["f32", "f32"]
    assert classes(verdict.classify(s, upcast), "gemms[0].inputs") == {REGRESSION}


@pytest.mark.parametrize("version", VERSIONS)
def test_layout_and_alpha_changes_are_neutral(version):
    s = sig(version, "scaled")
    other = copy.deepcopy(s)
    other["gemms"][0]["dims"]["rhs_contracting"] = [0]
    other["gemms"][0]["alpha_real"] = 2.0
    v = verdict.classify(s, other)
    assert v.cls == NEUTRAL and {x.path for x in v.lines} == {"gemms[0].dims.rhs_contracting", "gemms[0].alpha_real"}


def test_fusion_kind_change_with_the_same_ops_is_neutral():
    """a100 0.6.1 -> 0.8.0: `fusion kInput [convert]` becomes `fusion kLoop [convert]` (and a
    second such kernel appears: that one is the regression)."""
    v = verdict.classify(sig("0.6.1", "plain", "a100"), sig("0.8.0", "plain", "a100"))
    launch = [x.cls for x in v.for_path("launches")]
    assert sorted(launch) == [NEUTRAL, REGRESSION]
