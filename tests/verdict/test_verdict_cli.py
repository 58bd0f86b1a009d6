"""Verdicts end to end: real deviceless compiles for H100, goldens edited or a case forced to regress.

Expected classes come from the rules (docs/verdicts.md), not from the output under test.
"""

from __future__ import annotations

import json
import re

import pytest

from fp8_check.verdict import _golden as golden

DL = ("--mode", "deviceless")
pytestmark = pytest.mark.slow

RELU_F32_CLAMP = "    clamp: true\n    out_dtype: float8_e4m3fn\n    epilogue: relu\n\n  - id: seed_relu_bf16"


def results_of(path):
    doc = json.loads(path.read_text())
    return {(r["case"], r["target"], r["profile"]): r for r in doc["results"]}


def test_golden_expecting_less_fusion_is_an_improvement_not_a_regression(workspace, run_cli):
    """The golden says DEFAULT where XLA fuses RELU: the found signature is better than the golden."""
    path = golden.path_for(workspace / "goldens", "seed_relu_f32", "h100", "cublas", "deviceless")
    path.write_text(path.read_text().replace("epilogue: RELU", "epilogue: DEFAULT"))
    args = ("run", *DL, "--profile", "cublas", "--json", workspace / "r.json")
    code, out, _ = run_cli(*args, cwd=workspace)
    assert code == 1  # default --fail-on any: every FAIL fails
    assert re.search(r"FAIL\s+h100/cublas\s+seed_relu_f32 .*\[improvement\]", out)
    assert re.search(r"gemms\[0\]\.epilogue: expected DEFAULT, found RELU  \[improvement: ", out)
    assert "update the golden: fp8-check bless -k seed_relu_f32" in out
    by_key = results_of(workspace / "r.json")
    assert [k for k, r in by_key.items() if r["outcome"] != "PASS"] == [("seed_relu_f32", "h100", "cublas")]
    assert by_key[("seed_relu_f32", "h100", "cublas")]["verdict"]["class"] == "improvement"
    code, out, _ = run_cli(*args, "--fail-on", "regression", cwd=workspace)
    assert code == 0, out


def test_forced_regression_turns_exactly_that_case_red_as_a_regression(workspace, run_cli):
    """Dropping the clamp: XLA's FP8 convert does not saturate, so the requantization leaves the gemm
    (it writes f32, a separate kernel converts): the FP8 output is lost — a regression."""
    seed = workspace / "cases" / "seed.yaml"
    text = seed.read_text()
    assert text.count(RELU_F32_CLAMP) == 1
    seed.write_text(text.replace(RELU_F32_CLAMP, RELU_F32_CLAMP.replace("    clamp: true\n", "")))
    code, out, _ = run_cli("run", *DL, "--profile", "cublas", "--fail-on", "regression", "--json", workspace / "r.json",
                           cwd=workspace)
    assert code == 1
    assert re.search(r"FAIL\s+h100/cublas\s+seed_relu_f32 .*\[regression\]", out)
    by_key = results_of(workspace / "r.json")
    bad = {k: r for k, r in by_key.items() if r["outcome"] != "PASS"}
    assert list(bad) == [("seed_relu_f32", "h100", "cublas")]
    v = bad[("seed_relu_f32", "h100", "cublas")]["verdict"]
    assert v["class"] in ("regression", "mixed")
    assert any(x["path"] == "gemms[0].output" and x["class"] == "regression" for x in v["lines"])
    assert v["class"] == "regression"  # nothing got better by losing the clamp
