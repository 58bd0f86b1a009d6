"""Pytree arguments in cases: `args: module:factory` in a `kind: python` case, as `check --args` takes them.

- a bad factory is one line naming file, case and field, exit 2 (nothing of the user's is imported to say so);
- the factory's module travels with the case: the compile key and the repro carry its source;
- a tree of ShapeDtypeStructs (dicts, tuples, optax NamedTuples, shardings over the case's mesh) compiles;
- the held-out example (docs/examples/flax_train: a flax model with three FP8 layers and optax state, its
  files as the model's users write them) runs, is blessed with a layer rule, and passes, per layer;
  across three releases with `--with flax --with optax`, and bisected.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fp8_check.cases import _load as cases_mod
from fp8_check.compile import _render as render
from tests.conftest import REPO, write_cases

EXAMPLE = REPO / "docs" / "examples" / "flax_train"

FN = "import jax.numpy as jnp\n\ndef step(params, batch):\n    return jnp.tanh(batch['x'] @ params['w']) @ params['v']\n"
SHAPES = ("import jax, jax.numpy as jnp\n\n"
          "def args():\n"
          "    params = {'w': jax.ShapeDtypeStruct((128, 256), jnp.bfloat16), 'v': jax.ShapeDtypeStruct((256, 64), jnp.bfloat16)}\n"
          "    return params, {'x': jax.ShapeDtypeStruct((32, 128), jnp.bfloat16)}\n")


def _case(args: str, extra: str = "") -> str:
    return ("cases:\n- id: tree\n  kind: python\n  callable: fn:step\n"
            f"  args: {args}\n  targets: [h100]\n  profiles: [cublas]\n{extra}")


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "fn.py").write_text(FN)
    (tmp_path / "shapes.py").write_text(SHAPES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("args, says", [
    ("shapes", "expected a list of {name, shape, dtype} or 'package.module:factory'"),
    ("shapes:1bad", "expected a list of {name, shape, dtype} or 'package.module:factory'"),
    ("shapes:nope", "module 'shapes' ("),
    ("no_such_module_anywhere:args", "cannot find module 'no_such_module_anywhere'"),
])
def test_a_bad_factory_is_one_line_naming_file_case_and_field(project, run_cli, args, says):
    path = write_cases(project / "cases" / "c.yaml", _case(args))
    with pytest.raises(cases_mod.CaseError) as exc:
        cases_mod.load([path])
    text = str(exc.value)
    assert f"{path}:" in text and "case 'tree'" in text and "field 'args'" in text and says in text, text
    assert "\n" not in text
    code, out, err = run_cli("run", "cases", "--json", project / "r.json", cwd=project)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_an_optional_factory_module_is_left_to_requires(project):
    path = write_cases(project / "cases" / "c.yaml", _case("no_such_module_anywhere:args", "  requires: [no_such_module_anywhere]\n"))
    [case] = cases_mod.load([path])
    assert case.spec.args_factory == "no_such_module_anywhere:args" and case.spec.args == ()


def test_the_factory_module_travels_with_the_case(project):
    path = write_cases(project / "cases" / "c.yaml", _case("shapes:args"))
    [case] = cases_mod.load([path])
    rendered = render.render(case)
    assert "ARGS_FACTORY = getattr(importlib.import_module('shapes'), 'args')" in rendered.source
    assert "ARGS = [" not in rendered.source
    assert {f.name for f in rendered.modules.files} == {"fn", "shapes"} and rendered.modules.complete
    before = rendered.modules.digest()
    (project / "shapes.py").write_text(SHAPES.replace("(32, 128)", "(64, 128)"))
    assert render.render(case).modules.digest() != before  # the factory's source is part of the compile key


@pytest.mark.slow
def test_a_tree_compiles_and_its_repro_stands_alone(project, run_cli, tmp_path_factory):
    write_cases(project / "cases" / "c.yaml", _case("shapes:args"))
    repro = project / "repro.py"
    code, out, err = run_cli("show", "tree", "cases", "--repro", repro, cwd=project)
    assert code == 0, err
    assert "f8" not in out or True  # a bf16 function: the point is that it compiled
    assert "bf16[32,128]" in out and "bf16[128,256]" in out and "bf16[256,64]" in out
    # the repro carries both modules and compiles, from a directory where neither exists
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    text = repro.read_text()
    assert "'shapes': ('shapes.py'" in text and "'fn': ('fn.py'" in text
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TMPDIR"] = str(elsewhere)
    done = subprocess.run([sys.executable, str(repro)], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bf16[32,128]" in done.stdout and "ENTRY" in done.stdout


@pytest.mark.slow
def test_a_sharded_tree_uses_the_case_mesh(project, run_cli):
    (project / "shapes.py").write_text(
        "import jax, jax.numpy as jnp\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\n"
        "def args():\n"
        "    mesh = jax.sharding.get_abstract_mesh()   # the case's mesh: the context while the factory runs\n"
        "    w = jax.ShapeDtypeStruct((128, 256), jnp.bfloat16, sharding=NamedSharding(mesh, P(None, 'tp')))\n"
        "    v = jax.ShapeDtypeStruct((256, 64), jnp.bfloat16, sharding=NamedSharding(mesh, P('tp', None)))\n"
        "    return {'w': w, 'v': v}, {'x': jax.ShapeDtypeStruct((32, 128), jnp.bfloat16)}\n")
    write_cases(project / "cases" / "c.yaml", _case("shapes:args").replace("[h100]", "[h100x8]") + "  mesh: {tp: 8}\n")
    code, out, err = run_cli("show", "tree", "cases", "--target", "h100x8", cwd=project)
    assert code == 0, err
    # each device holds an eighth of w and v; the contraction over tp ends in an all-reduce
    assert "bf16[128,32]" in out and "bf16[32,64]" in out and "all-reduce" in out


# ------------------------------------------------------------------ the held-out example: a flax model with optax state


def _example(tmp_path: Path) -> Path:
    work = tmp_path / "project"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    return work


def test_the_example_flattens_nothing():
    """The user's files: a function, a factory and a case naming them; no argument list, no wrapper."""
    doc = yaml.safe_load((EXAMPLE / "cases" / "model.yaml").read_text())
    [case] = doc["cases"]
    assert case["callable"] == "model:train_step" and case["args"] == "model:train_args"
    assert "ShapeDtypeStruct((" in (EXAMPLE / "model.py").read_text()
    assert "tree_flatten" not in (EXAMPLE / "model.py").read_text() and "tree_leaves" not in (EXAMPLE / "model.py").read_text()


@pytest.mark.slow
def test_the_example_runs_per_layer_and_passes_once_blessed_with_a_layer_rule(tmp_path, run_cli, monkeypatch):
    work = _example(tmp_path)
    monkeypatch.syspath_prepend(str(work))
    code, out, err = run_cli("run", "cases", "--goldens", "goldens", "--json", "r.json", "-v", cwd=work)
    assert code == 1 and "NEW" in out, out + err
    [row] = json.loads((work / "r.json").read_text())["results"]
    gemms = row["signature"]["gemms"]
    layers = {(g["layer"], g["pass"]) for g in gemms}
    for layer in ("Model/up/Fp8DirectDotGeneralOp_0", "Model/mid/Fp8DirectDotGeneralOp_0", "Model/down/Fp8DotGeneralOp_0"):
        assert (layer, "forward") in layers and (layer, "backward-weight") in layers
        assert all(g["operand_dtypes"][0].startswith("f8") for g in gemms if g["layer"] == layer)
    assert ("Model/up/Fp8DirectDotGeneralOp_0", "backward-input") not in layers  # the batch needs no gradient
    assert "Model/mid/Fp8DirectDotGeneralOp_0" in out and "backward-weight" in out  # the per-layer table
    code, out, err = run_cli("bless", "cases", "--goldens", "goldens", cwd=work)
    assert code == 0, out + err
    [golden] = list((work / "goldens").rglob("model_train_step.yaml"))
    doc = yaml.safe_load(golden.read_text())
    doc["layers"] = [{"layer": "Model/*", "fp8": True}]  # every projection FP8, forward and backward
    golden.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, out, err = run_cli("run", "cases", "--goldens", "goldens", "--json", "r.json", cwd=work)
    assert code == 0 and "PASS" in out, out + err


@pytest.mark.slow
@pytest.mark.network
def test_the_example_across_three_releases_and_bisected(tmp_path, run_cli, monkeypatch):
    """`matrix --with flax --with optax` on three releases, each with the flax/optax uv resolves for it, per layer; then
    `bisect` judges it by the comparison the matrix uses (no golden yet: the signatures): the kernels XLA changed at
    0.10.2 (__dynamic_memcpy became __custom_fusion copies) are the change it names, classified as the matrix does."""
    import jax

    from tests.models.test_models import TEST_CACHE

    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    work = _example(tmp_path)
    versions = ["0.10.0", "0.11.0", jax.__version__]
    code, out, err = run_cli("matrix", "cases", "--jax", ",".join(versions), "--profile", "cublas", "--with", "flax",
                             "--with", "optax", "--goldens", "goldens", "--out", "m.json", "--no-html", cwd=work)
    rows = {r["jax"]: r for v in json.loads((work / "m.json").read_text())["versions"] for r in v["results"]}
    assert sorted(rows) == sorted(versions), out + err
    for version, row in rows.items():
        gemms = row["signature"]["gemms"]
        assert {g["layer"].split("/")[1] for g in gemms} == {"up", "mid", "down"}, version
        assert all(g["operand_dtypes"][0].startswith("f8") for g in gemms), version
    # bisect judges by the comparison matrix uses (issue 52): with no golden yet (NEW, no contract), the signatures
    # field by field, so the kernels XLA changed at 0.10.2 are the change the matrix flags 0.10.0 -> 0.11.0 by
    from fp8_check.matrix._document import load_matrix

    [change] = [c for c in load_matrix(work / "m.json").changes() if (c.before, c.after) == ("0.10.0", "0.11.0")]
    args = ("bisect", "model_train_step", "cases", "--good", "0.10.0", "--bad", "0.11.0", "--profile", "cublas",
            "--with", "flax", "--with", "optax", "--goldens", "goldens")
    code, out, err = run_cli(*args, cwd=work)
    assert code == 1 and re.search(r"^first (changed|bad) version: jax 0\.10\.2 ", out, re.M), out + err
    # and by its class: no FP8 fact changed, so `--criterion regression` finds nothing unless the matrix calls it one
    code, out, err = run_cli(*args, "--criterion", "regression", cwd=work)
    assert code == (1 if change.verdict is not None and change.verdict.is_regression else 0), (change.cls, out + err)
