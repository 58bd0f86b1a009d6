"""Models through fp8-check: real flax and optax, compiled deviceless through the CUDA plugin.

- `fp8-check check` on a 3-layer flax MLP (docs/examples/flax_mlp.py) under jax.grad with respect to the
  variables and the input: every gemm carries its layer and pass;
- layer rules (`--expect-layer`) and the constant warning;
- cases/models.yaml names the decoder functions and their argument factories (`args: module:factory`);
- `matrix --with flax`: a flax case runs on three JAX versions, each with its own flax (network);
- the reusable workflow's `with` input reaches `matrix --with`.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import jax
import pytest
import yaml

from fp8_check.cli import main as cli
from fp8_check.run import _results as results
from fp8_check.signature._coverage import coverage
from fp8_check.signature._types import Signature
from fp8_check.verdict import _outcome as outcome
from tests.conftest import REPO

EXAMPLES = REPO / "docs" / "examples"


@pytest.fixture
def examples_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return EXAMPLES


@pytest.mark.slow
def test_check_attributes_each_gemm_of_the_mlp_gradient_to_its_layer(run_cli, examples_path):
    code, out, err = run_cli("check", "flax_mlp:grad", "--args", "flax_mlp:grad_args", "--json", "-", cwd=examples_path)
    assert code == 0, err
    [res] = json.loads(out)["results"]
    gemms = res["signature"]["gemms"]
    per_layer = Counter((g["layer"].split("/")[1], g["operand_dtypes"][0].startswith("f8")) for g in gemms)
    # Dense_0 (Fp8DirectDotGeneralOp) and Dense_1 (Fp8DotGeneralOp): forward + input and weight gradients in FP8;
    # Dense_2 (plain nn.Dense): the same three matmuls, none in FP8
    assert per_layer == {("Dense_0", True): 3, ("Dense_1", True): 3, ("Dense_2", False): 3}, gemms
    for layer in ("Dense_0", "Dense_1", "Dense_2"):
        passes = sorted(g["pass"] for g in gemms if g["layer"].split("/")[1] == layer)
        assert passes == ["backward-input", "backward-weight", "forward"]
    assert all(g["source"].startswith(str(EXAMPLES / "flax_mlp.py")) for g in gemms)
    # the backward matmuls take the E5M2 output gradient
    assert all("f8e5m2" in g["operand_dtypes"] for g in gemms if g["pass"] != "forward" and g["layer"] != "MLP/Dense_2")
    # the standard results file holds the signature; coverage is computed from it (as the report does)
    cov = coverage(Signature.from_dict(res["signature"]))
    assert (cov.matmuls, cov.low_precision) == (9, 6) and 0 < cov.flop_fraction < 1


@pytest.mark.slow
def test_layer_rules_on_the_command_line(run_cli, examples_path):
    code, out, err = run_cli("check", "flax_mlp:grad", "--args", "flax_mlp:grad_args",
                             "--expect-layer", "*/Dense_[01]/*=fp8", "--expect-layer", "*/Dense_2/*@backward=wide",
                             cwd=examples_path)
    assert code == 0, out + err
    assert "MLP/Dense_1/Fp8DotGeneralOp_0 backward-weight cuBLASLt FP8" in re.sub(r"\s+", " ", out)
    code, out, err = run_cli("check", "flax_mlp:grad", "--args", "flax_mlp:grad_args", "--expect-layer", "*/Dense_2/*=fp8",
                             cwd=examples_path)
    assert code == 1
    assert len(re.findall(r"layers\[\*/Dense_2/\*\]\.gemms\[\d\]: expected FP8/FP4, found cuBLAS", out)) == 3
    code, _, err = run_cli("check", "flax_mlp:grad", "--args", "flax_mlp:grad_args", "--expect-layer", "Dense_2",
                           cwd=examples_path)
    assert code == 2 and "--expect-layer" in err


@pytest.mark.slow
def test_check_warns_when_the_model_is_initialised_inside(run_cli, tmp_path, monkeypatch):
    (tmp_path / "inside.py").write_text(
        "import jax, jax.numpy as jnp\nfrom flax import linen as nn\n"
        "def forward(x):\n"
        "    model = nn.Dense(512)\n"
        "    variables = model.init(jax.random.PRNGKey(0), x)   # the parameters become constants\n"
        "    return model.apply(variables, x)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli("check", "inside:forward", "--arg", "x=float32[64,256]", cwd=tmp_path)
    assert code == 0
    assert "random numbers are generated inside the function" in err
    (tmp_path / "closure.py").write_text(
        "import numpy as np, jax.numpy as jnp\n"
        "W = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)\n"
        "def forward(x):\n    return x @ jnp.asarray(W)   # a concrete array captured: a constant\n")
    code, out, err = run_cli("check", "closure:forward", "--arg", "x=float32[64,256]", cwd=tmp_path)
    assert code == 0 and "1 large array(s) are constants baked into the program (f32[256,512])" in err
    (tmp_path / "outside.py").write_text(
        "import jax, jax.numpy as jnp\nfrom flax import linen as nn\n"
        "def forward(variables, x):\n    return nn.Dense(512).apply(variables, x)\n"
        "def args():\n    x = jax.ShapeDtypeStruct((64, 256), jnp.float32)\n"
        "    return jax.eval_shape(lambda: nn.Dense(512).init(jax.random.PRNGKey(0), jnp.zeros(x.shape))), x\n")
    code, out, err = run_cli("check", "outside:forward", "--args", "outside:args", cwd=tmp_path)
    assert code == 0 and "baked" not in err


@pytest.mark.slow
def test_model_cases_take_their_trees_from_a_factory():
    """No flattening: each decoder case names the function a training loop calls and an argument factory, whose
    trees (variables, optax state, batch) the function traces on with the installed flax/optax."""
    from fp8_check.models import decoder
    from fp8_check.models.decoder_cases import case_yaml

    doc = yaml.safe_load((REPO / "cases" / "models.yaml").read_text())
    generated = yaml.safe_load(case_yaml())
    fields = ("id", "callable", "args", "price_at", "requires", "profiles")
    assert [[c[f] for f in fields] for c in doc["cases"]] == [[c[f] for f in fields] for c in generated["cases"]]
    assert len(doc["cases"]) == 8
    for case in doc["cases"]:
        assert isinstance(case["args"], str)
        tree = getattr(decoder, case["args"].split(":")[1])()
        leaves = jax.tree_util.tree_leaves(tree)
        assert all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves), case["id"]
        assert any(leaf.shape == (decoder.BATCH, decoder.SEQ, decoder.HIDDEN) for leaf in leaves)
        fn = getattr(decoder, case["callable"].split(":")[1])
        out = jax.tree_util.tree_leaves(jax.eval_shape(fn, *tree))
        assert out and all(hasattr(leaf, "shape") for leaf in out)
        if "train" in case["id"]:  # the new variables and optimizer state come back with the shapes they went in with
            assert [x.shape for x in out[:-1]] == [x.shape for x in leaves[:len(out) - 1]]


# ------------------------------------------------------------------ across versions, flax per version

TEST_CACHE = Path(tempfile.gettempdir()) / "fp8-check-test-cache"  # shared with tests/matrix/test_matrix.py
OLD = ("0.6.2", "0.8.0")


@pytest.mark.slow
@pytest.mark.network
def test_a_flax_case_runs_on_three_versions_with_flax_added(workspace, run_cli, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    new = jax.__version__
    (workspace / "cases" / "flax.yaml").write_text((REPO / "cases" / "flax.yaml").read_text())
    out = workspace / "reports" / "m.json"
    code, stdout, err = run_cli("matrix", "cases/flax.yaml", "-k", "flax_dense_direct_grad", "--jax", ",".join([*OLD, new]),
                                "--profile", "cublas", "--with", "flax", "--out", out, "--no-html", cwd=workspace)
    m = json.loads(out.read_text())
    by = {}
    for v in m["versions"]:
        assert v["status"] == "ran", v
        res = results.load(Path(out.parent / v["results_file"]) if not Path(v["results_file"]).is_absolute()
                           else v["results_file"])
        [o] = res.outcomes
        by[v["jax"]] = o
        if v["jax"] != new:
            assert v["env"]["with"] == ["flax"] and v["env"]["with_installed"]["flax"], v["env"]
    assert set(by) == {*OLD, new}
    for version, o in by.items():
        assert o.code is not outcome.UNSUPPORTED, (version, o.reason)
        assert o.signature.fp8_gemms == 3, (version, o.signature)
        assert sorted(g.pass_ for g in o.signature.gemms) == ["backward-input", "backward-weight", "forward"]
        assert {g.layer for g in o.signature.gemms} == {"Dense/Fp8DirectDotGeneralOp_0"}
    # without --with the old versions have no flax: the case is UNSUPPORTED there (the previous behaviour)
    code, stdout, err = run_cli("matrix", "cases/flax.yaml", "-k", "flax_dense_direct_grad", "--jax", OLD[0],
                                "--profile", "cublas", "--out", out, "--no-html", "--fail-on", "never", cwd=workspace)
    [v] = json.loads(out.read_text())["versions"]
    assert v["status"] == "ran"
    [o] = results.load(Path(out.parent / v["results_file"]) if not Path(v["results_file"]).is_absolute()
                       else v["results_file"]).outcomes
    assert o.code is outcome.UNSUPPORTED and "flax" in o.reason


def test_reusable_workflow_passes_its_with_input_to_matrix():
    doc = yaml.load((REPO / ".github" / "workflows" / "fp8-check.yml").read_text(), Loader=yaml.BaseLoader)
    [step] = [s for s in doc["jobs"]["matrix"]["steps"] if "fp8-check matrix" in s.get("run", "")]  # one job per version
    assert step["env"]["WITH"] == "${{ inputs.with }}"
    assert "with" in doc["on"]["workflow_call"]["inputs"]
    # what the step's loop builds for WITH="flax optax>=0.2" and a requirements file
    argv = ["matrix", "cases", "--jax", "0.12.0.1", "--with", "flax", "--with", "optax>=0.2", "--with-requirements", "r.txt"]
    args = cli.build_parser()[0].parse_args(argv)
    assert args.with_ == ["flax", "optax>=0.2"] and str(args.with_requirements) == "r.txt"
    assert 'args+=(--with "$req")' in step["run"] and "--with-requirements" in step["run"]
