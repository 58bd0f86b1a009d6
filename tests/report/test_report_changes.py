"""The HTML matrix's change data (harness/fp8_check/report/_changes.py) on recorded signatures."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from fp8_check.report import _changes as changes
from fp8_check.signature import _extract as signature
from fp8_check.verdict import _outcome as outcome
from fp8_check.verdict._outcome import Outcome

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"


def rec(version, case, target="h100", profile="triton"):
    sig = signature.extract((FIXTURES / f"jax-{version}" / f"{case}.{target}.{profile}.txt").read_text())
    return Outcome(case, target, profile, "deviceless", version, outcome.PASS, signature=sig)


def test_changes_per_cell_carry_the_class_and_the_field_lines():
    row = [rec("0.6.1", "scaled"), Outcome("scaled", "h100", "triton", "deviceless", "0.7.0", outcome.UNRESOLVED),
           rec("0.8.0", "scaled"), rec("0.12.0.1", "scaled")]
    cells = changes.cell_changes(row)
    assert [c.cls for c in cells] == [None, None, None, "improvement"]  # 0.6.1 == 0.8.0; requantization fused later
    last = cells[-1]
    assert last.change_from == "0.8.0" and last.kernels < cells[0].kernels
    assert any(x["path"] == "gemms[0].output" and x["class"] == "improvement" for x in last.lines)
    # features: the Triton gemm runs on upcast operands (no FP8 gemm); the FP8 output appears with the fusion
    assert cells[0].features == {"FP8 gemm": False, "epilogue": False, "abs-max": False, "FP8 output": False}
    assert last.features["FP8 output"] and not last.features["FP8 gemm"]
    assert cells[1].features is None and cells[1].kernels is None


def test_cublas_relu_amax_features():
    f = changes.features(rec("0.12.0.1", "relu_amax", profile="cublas").signature)
    assert f == {"FP8 gemm": True, "epilogue": True, "abs-max": True, "FP8 output": True}


def test_timeline_is_well_formed_and_escaped():
    row = [rec(v, "scaled_bf16", profile="cublas") for v in ("0.6.1", "0.8.0", "0.12.0.1")]
    cells = changes.cell_changes(row)
    assert cells[1].cls == "regression"  # the bf16 scale conversions split into their own kernels (0.7.0)
    svg = changes.timeline_svg('<script>alert(1)</script> & "x"', cells)
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag.endswith("svg")
    assert "<script" not in svg and "&lt;script&gt;" in svg
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert any("regression since 0.6.1" in t for t in titles)
    # one feature row per fused feature: the FP8 gemm is there on every version (a filled square each)
    assert svg.count('fill="#37474f"') >= 1
    assert changes.CLASS_COLORS["regression"] in svg
