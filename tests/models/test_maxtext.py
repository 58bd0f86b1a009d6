"""MaxText's llama2-7b FP8 train step on h100x8, built by MaxText 0.2.5 itself (harness/fp8_check/models/maxtext_llama.py).

Slow, network tests (CI builds the MaxText environment on first use, about 1.7 GB from the package index, then
reuses it): `fp8-check run -k maxtext_llama2_7b_fp8 --target h100x8` installs what the cases' `requirements:
maxtext` name into a cached environment for this JAX and compiles there; with MaxText's own test's config it has
the 21 FP8 gemms `test_fp8_gemm_llama2_7b` counts (7 projections x forward, backward-input, backward-weight), each
attributed to the layer's FP8 op and a pass, and passes against the committed contract. The qwix recipes are told
apart by operand dtypes, the expected ones read from the recipes' definitions in MaxText and flax.
A JAX outside the set's range makes them UNSUPPORTED (tests/versions/test_requirement_envs.py).
"""

from __future__ import annotations

import json
import subprocess

import jax
import pytest

from fp8_check.verdict import _outcome as outcome
from tests.conftest import REPO

CASES = REPO / "docs" / "examples" / "maxtext" / "cases.yaml"
GOLDENS = REPO / "docs" / "examples" / "maxtext" / "goldens"
REQUIREMENTS = REPO / "harness" / "fp8_check" / "models" / "maxtext-requirements.txt"
TPU_CASES = REPO / "docs" / "examples" / "maxtext" / "tpu_cases.yaml"
PROJECTIONS = 7  # a llama decoder layer: query, key, value, out; wi_0, wi_1, wo


def test_the_cases_name_the_maxtext_set_and_its_jax_range():
    from fp8_check.cases import _load as cases

    loaded = cases.load([CASES])
    assert loaded and all(c.requirements and c.requirements.name == "maxtext" and c.requirements.jax == ">=0.11.1"
                      for c in loaded)
    assert all(c.requirements and "maxtext==0.2.5" in c.requirements.requirements for c in loaded)


def test_the_tpu_cases_have_a_golden_per_target_with_the_projections_in_fp8():
    """The TPU cases are not compiled in CI (libtpu's back end takes 1.5-15 minutes per case and target on 2 cores,
    docs/models.md); their goldens, blessed from `bless --target v6e,tpu7x-2x2x1`, are checked to exist and to state
    the measured answer: MaxText's projections FP8 on the TPU's matmul unit, forward E4M3 x E4M3 and every backward
    one taking the E5M2 gradient; the only bf16 matmuls the logits projection (no layer) and attention's einsums."""
    import yaml

    from fp8_check.cases import _load as cases

    loaded = cases.load([TPU_CASES])
    assert {c.id for c in loaded} == {"maxtext_tpu_fp8", "maxtext_tpu_fp8_full"}
    for case in loaded:
        assert case.requirements and case.requirements.name == "maxtext" and case.profiles == ("tpu",)
        for target in case.targets:
            golden = GOLDENS / target / "tpu" / "deviceless" / f"{case.id}.yaml"
            assert golden.is_file(), golden
            [entry] = yaml.safe_load(golden.read_text())["expect"]
            rows = entry["contract"]["matmuls"]
            fp8 = [r for r in rows if r["engine"] == "TPU matmul FP8"]
            assert {r["pass"] for r in fp8} >= {"forward", "backward"}, (golden, fp8)
            assert all(r["operands"] == "f8e4m3fn x f8e4m3fn" for r in fp8 if r["pass"] == "forward"), golden
            assert all("f8e5m2" in r["operands"] for r in fp8 if r["pass"] != "forward"), golden
            wider = {r["layer"] for r in rows if r not in fp8}
            assert all(layer == "" or "->" in layer for layer in wider), (golden, wider)  # logits, attention einsums


def _fp8(row):
    return [g for g in row["signature"]["gemms"] if g["operand_dtypes"][0].startswith("f8")]


@pytest.mark.slow
@pytest.mark.network
def test_run_installs_maxtext_and_the_llama2_7b_step_has_21_fp8_gemms_and_passes(run_cli, tmp_path, monkeypatch):
    from tests.models.test_models import TEST_CACHE

    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    code, out, err = run_cli("run", CASES, "-k", "maxtext_llama2_7b_fp8", "--target", "h100x8", "-v",
                             "--goldens", GOLDENS, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert "fp8-check: requirements maxtext (case maxtext_llama2_7b_fp8): " in out and str(TEST_CACHE) in out, out[:2000]
    [row] = json.loads((tmp_path / "r.json").read_text())["results"]
    fp8 = _fp8(row)
    # MaxText's test_fp8_gemm_llama2_7b: 21 = 7 projections x (forward, input gradient, weight gradient), scanned
    assert len(fp8) == 3 * PROJECTIONS, [(g["pass"], g["operand_dtypes"]) for g in fp8]
    # every one attributed to the layer's FP8 op (MaxText's NNX bridge leaves `eval_jaxpr/Fp8DirectDotGeneralOp`,
    # not the projection's name) and a pass; forward E4M3 x E4M3, each backward gemm takes the E5M2 gradient
    assert all(g["layer"].endswith("Fp8DirectDotGeneralOp") and g["pass"] for g in fp8), fp8[:3]
    forward = [g for g in fp8 if g["pass"] == "forward"]
    assert len(forward) == PROJECTIONS and all(g["operand_dtypes"] == ["f8e4m3fn", "f8e4m3fn"] for g in forward)
    assert all("f8e5m2" in g["operand_dtypes"] for g in fp8 if g not in forward)
    # the committed contract (every projection FP8 in forward and both backward passes) holds
    assert row["outcome"] == outcome.PASS.name and code == 0, (row.get("reason"), row.get("diffs"), out[-3000:])


DEFINITIONS = r"""
import json, os, sys
import maxtext
from flax.linen import fp8_ops
from maxtext.configs import pyconfig
from maxtext.layers import quantizations
out = {}
base = os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml")
for recipe in sys.argv[1:]:
    config = pyconfig.initialize(["x", base, "model_name=llama2-7b", "use_qwix_quantization=true", "quantization=" + recipe,
                                  "base_output_directory=" + sys.argv[0] + "-out", "run_name=x", "enable_checkpointing=false"])
    if isinstance(quantizations.get_qt_provider(config), quantizations.NvidaFp8Provider):  # flax's FP8 op for every rule
        act = weight = fp8_ops.Fp8DirectDotGeneralOp.e4m3_dtype
        bwd = fp8_ops.Fp8DirectDotGeneralOp.e5m2_dtype
    else:  # qwix's own dot, with the rule of the decoder layers
        [rule] = [r for r in quantizations.get_quantization_rule(config) if r.module_path.startswith("decoder/")]
        act, weight, bwd = rule.act_qtype, rule.weight_qtype, rule.bwd_qtype
    out[recipe] = [str(jax_dtype(t)) for t in (act, weight, bwd)]
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.network
def test_the_qwix_recipes_are_told_apart_by_the_operand_dtypes_their_definitions_state(run_cli, tmp_path, monkeypatch):
    from fp8_check.cases._requirement_sets import NAMED, read_set
    from fp8_check.versions import _envs as envs
    from tests.models.test_models import TEST_CACHE

    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    recipes = ["fp8_full", "fp8_gpu", "fp8_e4m3"]
    code, out, err = run_cli("run", CASES, "-k", "qwix", "--target", "h100x8", "--goldens", tmp_path / "g",
                             "--json", tmp_path / "r.json", cwd=tmp_path)
    rows = {r["case"].rsplit("qwix_", 1)[1]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert sorted(rows) == sorted(recipes), out[-2000:]
    python = envs.Manager(extras=list(read_set(NAMED["maxtext"]).requirements)).ensure(jax.__version__).python
    script = tmp_path / "definitions.py"
    script.write_text("import numpy as np\njax_dtype = lambda t: np.dtype(t)\n" + DEFINITIONS)
    done = subprocess.run([str(python), str(script), *recipes], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})
    stated = json.loads(done.stdout.strip().splitlines()[-1])  # recipe -> [act, weight, bwd] as numpy names
    short = {"float8_e4m3fn": "f8e4m3fn", "float8_e5m2": "f8e5m2"}
    seen = {}
    for recipe in recipes:
        act, weight, bwd = (short[t] for t in stated[recipe])
        fp8 = _fp8(rows[recipe])
        assert len(fp8) == 3 * PROJECTIONS, (recipe, [(g["pass"], g["operand_dtypes"]) for g in fp8])
        forward = [g for g in fp8 if g["pass"] == "forward"]
        assert len(forward) == PROJECTIONS and all(sorted(g["operand_dtypes"]) == sorted([act, weight]) for g in forward)
        assert all(bwd in g["operand_dtypes"] for g in fp8 if g not in forward), recipe  # the gradient's type
        seen[recipe] = sorted(tuple(g["operand_dtypes"]) for g in fp8)
    # the definitions tell fp8_e4m3 (E4M3 gradients) from the two with E5M2 gradients; those two (qwix's own dot and
    # flax's FP8 op) state the same types, and their gemms still differ in which operand takes the gradient
    assert stated["fp8_e4m3"] != stated["fp8_full"] == stated["fp8_gpu"]
    assert len({tuple(v) for v in seen.values()}) == 3, seen
