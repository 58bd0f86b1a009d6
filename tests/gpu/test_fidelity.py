"""`fp8-check fidelity`: the table logic, on real deviceless signatures.

No GPU here, so the "device" side is stood in for by real deviceless signatures
of another target: A100 (no FP8 gemm: must differ where the case uses FP8) or H200
(Hopper like the H100: must agree). The
committed table from a real H100 comes from `fp8-check fidelity` on one.
"""

from __future__ import annotations

import json

import pytest

from fp8_check.cases import _load as case_mod
from fp8_check.compile._service import Compiler
from fp8_check.gpu import _fidelity as fidelity
from fp8_check.signature._extract import Signature
from fp8_check.targets import load_target
from fp8_check.verdict._comparator import FieldDiff

from ..conftest import REPO, requires_gpu

SEED = [c for c in case_mod.load([REPO / "cases" / "seed.yaml"]) if c.id in ("seed_plain_f32", "seed_relu_f32")]


@pytest.fixture(scope="module")
def signatures():
    """Real signatures: h100 deviceless on the left; stand-ins for the device on the right: h200 (also Hopper,
    sm_90: the same FP8 rewrites must apply) and a100 (Ampere, sm_80: no FP8 tensor cores)."""
    hopper, ampere = {}, {}
    with Compiler("deviceless") as compiler:
        fidelity.collect(compiler, SEED, load_target("h100"), fidelity.PINNED, "deviceless", hopper)
        ampere.update(hopper)
        fidelity.collect(compiler, SEED, load_target("h200"), fidelity.PINNED, "device", hopper)
        fidelity.collect(compiler, SEED, load_target("a100"), fidelity.PINNED, "device", ampere)
    return hopper, ampere


@pytest.mark.slow
def test_two_hopper_targets_agree_and_unrun_columns_are_marked(signatures):
    hopper, _ = signatures
    assert hopper[("seed_relu_f32", "device/cublas")].signature.gemms[0].target == "__cublas$lt$matmul$f8"
    cells = fidelity.build(hopper)
    assert {c.case for c in cells} == {"seed_plain_f32", "seed_relu_f32"}
    pinned = [c for c in cells if c.right != "device/default"]
    assert len(pinned) == 4 and all(c.status == "agree" for c in pinned), [(c.case, c.right, c.diffs) for c in pinned]
    assert all(c.status == "missing" for c in cells if c.right == "device/default")
    table = fidelity.markdown(cells, {"left": "h100 deviceless", "right": "h200 deviceless"})
    assert "| seed_relu_f32 | agree | agree | not run | not run | not run |" in table
    assert "Summary: 4 agree, 6 missing" in table


# What the case means on Ampere: seed_relu_f32 is an FP8 matmul (f8e4m3fn operands, per-tensor scales) with a
# relu and an f8e4m3fn output. Hopper runs it as one FP8 cuBLASLt call; sm_80 has no FP8 gemm, so XLA upcasts
# the operands and calls the plain cuBLASLt matmul, while the relu stays a cuBLASLt epilogue on both.
F8 = ["f8e4m3fn", "f8e4m3fn"]


def _check_ampere_disagreement(cells_json: list[dict]) -> None:
    by = {(c["case"], c["right"]): c for c in cells_json}
    cublas = by[("seed_relu_f32", "device/cublas")]
    assert cublas["status"] == "differ"
    diffs = {d["path"]: d for d in cublas["diffs"]}
    assert diffs["gemms[0].target"] == {"path": "gemms[0].target", "expected": "__cublas$lt$matmul$f8",
                                        "found": "__cublas$lt$matmul"}
    assert diffs["gemms[0].operand_dtypes"]["expected"] == F8 and "f8e4m3fn" not in diffs["gemms[0].operand_dtypes"]["found"]
    assert "gemms[0].epilogue" not in diffs  # RELU on both
    triton = by[("seed_relu_f32", "device/triton")]
    assert triton["status"] == "differ"
    inputs = next(d for d in triton["diffs"] if d["path"] == "gemms[0].inputs")  # what the Triton gemm loads
    assert inputs["expected"] == F8 and "f8e4m3fn" not in inputs["found"]


@pytest.mark.slow
def test_differences_are_listed_field_by_field(signatures, tmp_path):
    _, ampere = signatures
    cells = fidelity.build(ampere)
    cublas = next(c for c in cells if c.case == "seed_relu_f32" and c.right == "device/cublas")
    assert FieldDiff("gemms[0].target", "__cublas$lt$matmul$f8", "__cublas$lt$matmul") in cublas.diffs
    fidelity.write(cells, {"target": "h100"}, tmp_path / "f.md", tmp_path / "f.json")
    doc = json.loads((tmp_path / "f.json").read_text())
    assert doc["schema"] == "fp8-check/fidelity/2" and doc["target"] == "h100"
    _check_ampere_disagreement(doc["cells"])
    assert "| seed_relu_f32 | **differ**: " in (tmp_path / "f.md").read_text()


def test_errors_are_cells_not_crashes():
    sigs = {("c", "deviceless/cublas"): fidelity.Compiled(error="XlaRuntimeError: boom"),
            ("c", "device/cublas"): fidelity.Compiled(Signature(1, [], [], []))}
    cell = fidelity.compare_one("c", "deviceless/cublas", "device/cublas", sigs)
    assert cell.status == "error" and cell.text() == "error: deviceless/cublas: XlaRuntimeError: boom"


@pytest.mark.slow
def test_cli_from_results_files(workspace, run_cli):
    """Two results files that really differ: h100 (deviceless side) and a100 (device side)."""
    common = ("--mode", "deviceless", "-k", "seed_relu_f32", "--profile", "cublas,triton")
    code, out, _ = run_cli("run", *common, "--json", workspace / "h100.json", cwd=workspace)
    assert code == 0, out
    run_cli("run", *common, "--target", "a100", "--json", workspace / "a100.json", cwd=workspace)
    code, out, err = run_cli("fidelity", "--from", workspace / "h100.json", workspace / "a100.json",
                             "--out", workspace / "fid.md", "--json", workspace / "fid.json", cwd=workspace)
    assert code == 0, err
    # missing: the two `vs device default` columns, and `default` replayed (no results file holds deviceless default)
    assert "fidelity: 2 differ, 3 missing" in out
    _check_ampere_disagreement(json.loads((workspace / "fid.json").read_text())["cells"])
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
