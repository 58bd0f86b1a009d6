"""MaxText's llama2-7b FP8 train step on h100x8, built by MaxText 0.2.5 itself (harness/layers/maxtext_llama.py).

One slow, network test (CI builds the MaxText environment on first use, about 1.7 GB from the package
index, then reuses it): the scanned `quantization=fp8` case compiles deviceless through
`matrix --with-requirements`; the 21 FP8 gemms MaxText's `test_fp8_gemm_llama2_7b` counts (7 projections
x forward, backward-input, backward-weight) are there, each attributed to the layer's FP8 op and a pass,
plus the forward gemms MaxText's default full rematerialization recomputes in the backward loop, also
FP8; with a layer rule blessed into its golden the case passes.
Without MaxText installed the cases are UNSUPPORTED, never an error (fast).
"""

from __future__ import annotations

import json

import jax
import pytest
import yaml

from fp8_check import outcome
from tests.conftest import REPO

CASES = REPO / "docs" / "examples" / "maxtext" / "cases.yaml"
REQUIREMENTS = REPO / "harness" / "layers" / "maxtext-requirements.txt"


def test_without_maxtext_the_cases_are_unsupported(run_cli, tmp_path):
    try:
        import maxtext  # noqa: F401
        pytest.skip("MaxText is installed in this environment")
    except ImportError:
        pass
    code, out, err = run_cli("run", CASES, "-k", "qwix_fp8_full", "--target", "h100x8", "--json", tmp_path / "r.json",
                             "--goldens", tmp_path / "g")
    [row] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert row["outcome"] == outcome.UNSUPPORTED.name and "maxtext" in row["reason"], row


@pytest.mark.slow
@pytest.mark.network
def test_the_llama2_7b_fp8_train_step_runs_every_projection_in_fp8_and_passes(run_cli, tmp_path, monkeypatch):
    from tests.test_models import TEST_CACHE

    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    args = ("matrix", CASES, "-k", "maxtext_llama2_7b_fp8", "--jax", jax.__version__, "--target", "h100x8",
            "--profile", "cublas", "--with-requirements", REQUIREMENTS, "--goldens", tmp_path / "g", "--no-html")
    code, out, err = run_cli(*args, "--out", tmp_path / "m.json", cwd=tmp_path)
    [row] = [r for v in json.loads((tmp_path / "m.json").read_text())["versions"] for r in v["results"]]
    assert row["outcome"] == outcome.NEW.name, (row.get("reason"), out[-3000:], err[-3000:])
    fp8 = [g for g in row["signature"]["gemms"] if g["operand_dtypes"][0].startswith("f8")]
    # every FP8 gemm is attributed to the layer's FP8 op (MaxText's NNX bridge leaves `eval_jaxpr/Fp8DirectDotGeneralOp`
    # in the name stack, not the projection's name) and to a pass
    assert all(g["layer"].endswith("Fp8DirectDotGeneralOp") and g["pass"] for g in fp8), fp8[:3]
    # the 7 projections: 7 forward, 7 input gradients and 7 weight gradients take the E5M2 output gradient: the 21
    # MaxText's test counts ...
    assert sum(g["pass"] == "forward" for g in fp8) == 7
    with_grad = [g for g in fp8 if "f8e5m2" in g["operand_dtypes"]]
    assert len(with_grad) == 14 and all(g["pass"].startswith("backward") for g in with_grad)
    # ... and, with MaxText's default remat_policy=full, the forward matmuls recomputed inside the backward loop (E4M3 x
    # E4M3 there), each FP8 too
    recomputed = [g for g in fp8 if g["pass"] != "forward" and "f8e5m2" not in g["operand_dtypes"]]
    assert len(fp8) == 21 + len(recomputed) and 0 < len(recomputed) <= 7
    # the contract in the golden: nothing under the FP8 op is wider than FP8; blessed, the case passes
    code, out, err = run_cli("bless", "--from-matrix", tmp_path / "m.json", "--goldens", tmp_path / "g", cwd=tmp_path)
    assert code == 0, out + err
    [golden] = list((tmp_path / "g").rglob("maxtext_llama2_7b_fp8.yaml"))
    doc = yaml.safe_load(golden.read_text())
    doc["layers"] = [{"layer": "*Fp8DirectDotGeneralOp", "fp8": True}]
    golden.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, out, err = run_cli(*args, "--out", tmp_path / "m2.json", cwd=tmp_path)
    [row] = [r for v in json.loads((tmp_path / "m2.json").read_text())["versions"] for r in v["results"]]
    assert row["outcome"] == outcome.PASS.name, (row.get("diffs"), out[-2000:])
