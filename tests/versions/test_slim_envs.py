"""Slim deviceless environments (fp8_check.versions._wheels) and versions that share an XLA commit (shared_xla)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fp8_check.matrix._document import load_matrix
from fp8_check.versions import _envs as envs, _shared_xla as shared_xla, _wheels as wheels, xla_commits

from ..conftest import REPO
from ..matrix.test_matrix import TEST_CACHE

TABLE = REPO / "docs" / "slim_envs.json"


def test_wheel_sets():
    assert wheels.requirements("0.8.0", wheels.DEVICE) == ["jax[cuda12]==0.8.0"]
    assert wheels.requirements("0.8.0")[0] == "jax[cuda12-local]==0.8.0"
    assert wheels.requirements("0.8.0", extras=["nvidia-cuda-nvcc-cu12"]) == [
        "jax[cuda12-local]==0.8.0", "nvidia-cuda-nvcc-cu12"]
    with pytest.raises(ValueError, match="unknown environment kind"):
        wheels.requirements("0.8.0", "everything")
    assert wheels.kind_for_mode("device") == wheels.DEVICE
    assert wheels.kind_for_mode("deviceless") == wheels.DEVICELESS
    table = {"<0.7": ("nvidia-cuda-nvcc-cu12",), "==0.6.1": ("nvidia-cuda-nvcc-cu12", "x")}
    assert wheels.slim_extras("0.6.1", table) == ["nvidia-cuda-nvcc-cu12", "x"]
    assert wheels.slim_extras("0.7.0", table) == []


def test_slim_and_full_environments_live_apart(tmp_path):
    slim = envs.Manager(tmp_path, reuse_self=False)
    full = envs.Manager(tmp_path, reuse_self=False, kind=wheels.DEVICE)
    assert slim.kind == wheels.DEVICELESS  # the default: deviceless compiles
    assert slim.path_for("0.8.0") != full.path_for("0.8.0")
    assert "-slim-" in slim.name("0.8.0") and "-slim-" not in full.name("0.8.0")
    assert slim.requirements("0.8.0") == wheels.requirements("0.8.0")
    with pytest.raises(ValueError):
        envs.Manager(tmp_path, kind="huge")


def test_the_committed_check_covers_the_shipped_extras():
    """docs/slim_envs.json (scripts/slim_check.py) holds identical compilations for every version it
    checked, with exactly the extra wheels SLIM_EXTRAS gives that version."""
    doc = json.loads(TABLE.read_text())
    rows = doc["versions"]
    assert rows and rows[0]["jax"] == "0.6.1"
    for r in rows:
        assert r["identical"] is True, r["jax"]
        assert r["requests"] >= 300, r["jax"]  # the whole library, h100 and b200, cublas and triton
        assert r["slim_extras"] == wheels.slim_extras(r["jax"]), r["jax"]
        assert r["slim_bytes"] <= 1.2e9 < r["full_bytes"], r["jax"]


def test_versions_sharing_an_xla_commit():
    table = xla_commits.load()
    tw = shared_xla.twins(["0.8.1", "0.8.2", "0.8.3", "0.9.0", "0.9.0.1", "0.9.1"], table)
    assert tw == {"0.8.2": "0.8.3", "0.9.0": "0.9.0.1"}
    assert shared_xla.twins(["0.8.2", "0.9.0"], table) == {}  # alone in the run: compiled
    fake = {v: xla_commits.Entry(v, None, None, c, None) for v, c in (("1.0", "abc"), ("1.1", "abc"), ("1.2", None),
                                                                      ("1.3", None), ("1.4", "abc"))}
    assert shared_xla.twins(["1.4", "1.0", "1.1", "1.2", "1.3"], fake) == {"1.0": "1.4", "1.1": "1.4"}


@pytest.mark.slow
@pytest.mark.network
def test_matrix_compiles_a_shared_xla_once_and_reports_both(run_cli, workspace, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    out = workspace / "m.json"
    code, stdout, err = run_cli("matrix", "--jax", "0.9.0,0.9.0.1", "-k", "seed_relu_f32,seed_scaled_clamp_f32",
                                "--out", out, "--no-html", "--no-cache", cwd=workspace)
    assert code == 0, stdout + err
    assert "same XLA commit as jax 0.9.0.1: compiled once, judged for both" in stdout
    m = load_matrix(out)
    twin, rep = m.versions
    assert (twin.jax, rep.jax) == ("0.9.0", "0.9.0.1")
    assert twin.env["same_xla_as"] == "0.9.0.1" and "path" not in twin.env  # no environment built for it
    assert twin.environment["jax"] == "0.9.0" and twin.environment["compiled_by_jax"] == "0.9.0.1"
    assert "-slim-" in Path(rep.env["path"]).name
    assert rep.env["requirement"] == "jax[cuda12-local]==0.9.0.1 nvidia-cuda-nvcc-cu12"
    assert len(twin.outcomes) == len(rep.outcomes) == 4
    for o in twin.outcomes:
        other = rep.outcome((o.case, o.target, o.profile))
        assert o.jax == "0.9.0" and o.code.name == "PASS" and o.signature == other.signature


def test_an_environment_built_with_another_wheel_set_is_not_reused(tmp_path, monkeypatch):
    m = envs.Manager(tmp_path, reuse_self=False)
    path = m.path_for("0.8.0")
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "python").write_text("")
    site = path / "lib" / "python3.12" / "site-packages"  # whole, as the cache verifies (jax's metadata and package)
    (site / "jax-0.8.0.dist-info").mkdir(parents=True)
    (site / "jax").mkdir()
    (site / "jax" / "__init__.py").write_text("")
    (path / envs.MARKER).write_text(json.dumps({"jax": "0.8.0", "requirement": "jax[cuda12-local]==0.8.0"}))
    assert m.cached("0.8.0") is None  # the slim set now includes ptxas: this one is stale
    (path / envs.MARKER).write_text(json.dumps({"jax": "0.8.0", "requirement": " ".join(m.requirements("0.8.0"))}))
    assert m.cached("0.8.0") is not None
