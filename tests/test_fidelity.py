"""`fp8-check fidelity`: the table logic, on real deviceless signatures.

No GPU here, so the "device" side is stood in for by real deviceless signatures
of another target (A100: no FP8 gemm) or of the same target (must agree). The
committed table from a real H100 comes from `fp8-check fidelity` on one.
"""

from __future__ import annotations

import json

import pytest

from harness.pipeline import cases as case_mod
from harness.gpu import fidelity
from harness.pipeline.compile import Compiler
from harness.targets import load_target

from .conftest import REPO, requires_gpu

SEED = [c for c in case_mod.load([REPO / "cases" / "seed.yaml"]) if c.id in ("seed_plain_f32", "seed_relu_f32")]


@pytest.fixture(scope="module")
def signatures():
    """Real signatures: h100 deviceless on the left; h100 (same) and a100 (different) as stand-ins for the device."""
    same, other = {}, {}
    with Compiler("deviceless") as compiler:
        fidelity.collect(compiler, SEED, load_target("h100"), fidelity.PINNED, "deviceless", same)
        other.update(same)
        fidelity.collect(compiler, SEED, load_target("h100"), fidelity.PINNED, "device", same)
        fidelity.collect(compiler, SEED, load_target("a100"), fidelity.PINNED, "device", other)
    return same, other


def test_same_compiles_agree_and_unrun_columns_are_marked(signatures):
    same, _ = signatures
    cells = fidelity.build(same)
    assert {c.case for c in cells} == {"seed_plain_f32", "seed_relu_f32"}
    pinned = [c for c in cells if c.right != "device/default"]
    assert pinned and all(c.status == "agree" for c in pinned)
    assert all(c.status == "missing" for c in cells if c.right == "device/default")
    table = fidelity.markdown(cells, {"left": "h100 deviceless", "right": "h100 deviceless"})
    assert "| seed_relu_f32 | agree | agree | not run | not run |" in table
    assert "Summary: 4 agree, 4 missing" in table


def test_differences_are_listed_field_by_field(signatures, tmp_path):
    _, other = signatures
    cells = fidelity.build(other)
    cublas = next(c for c in cells if c.case == "seed_relu_f32" and c.right == "device/cublas")
    assert cublas.status == "differ"
    # H100 folds the pattern into one FP8 cuBLASLt gemm; A100 has no FP8 tensor cores
    assert any("f8" in d for d in cublas.diffs), cublas.diffs
    fidelity.write(cells, {"target": "h100"}, tmp_path / "f.md", tmp_path / "f.json")
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["schema"] == "fp8-check/fidelity/1" and doc["target"] == "h100"
    assert {c["status"] for c in doc["cells"]} >= {"differ", "missing"}
    assert "**differ**:" in (tmp_path / "f.md").read_text()


def test_errors_are_cells_not_crashes():
    sigs = {("c", "deviceless/cublas"): {"error": "XlaRuntimeError: boom"}, ("c", "device/cublas"): {"signature": {"kernels": 1}}}
    cell = fidelity.compare_one("c", "deviceless/cublas", "device/cublas", sigs)
    assert cell.status == "error" and "boom" in cell.text()


def test_cli_from_results_files(workspace, run_cli):
    common = ("--mode", "deviceless", "-k", "seed_relu_f32", "--profile", "cublas,triton")
    code, out, _ = run_cli("run", *common, "--json", workspace / "h100.json", cwd=workspace)
    assert code == 0, out
    code, out, _ = run_cli("run", *common, "--target", "a100", "--json", workspace / "a100.json", cwd=workspace)
    code, out, err = run_cli("fidelity", "--from", workspace / "h100.json", workspace / "a100.json",
                             "--out", workspace / "fid.md", "--json", workspace / "fid.json", cwd=workspace)
    assert code == 0, err
    assert "fidelity:" in out and "differ" in out
    table = (workspace / "fid.md").read_text()
    assert "| seed_relu_f32 | **differ**" in table and "targets a100" in table


def test_cli_without_gpu_needs_from(run_cli, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_NO_GPU", "1")
    code, out, err = run_cli("fidelity", "-k", "seed_plain_f32")
    assert code == 2 and "--from DEVICELESS.json DEVICE.json" in err


@requires_gpu
def test_gpu_fidelity_table(workspace, run_cli):
    code, out, err = run_cli("fidelity", "--mode", "device", "-k", "seed_", "--out", workspace / "f.md",
                             "--json", workspace / "f.json", cwd=workspace)
    assert code == 0, err
    doc = json.loads((workspace / "f.json").read_text())
    assert doc["device"]["name"] and all(c["status"] in ("agree", "differ") for c in doc["cells"])
