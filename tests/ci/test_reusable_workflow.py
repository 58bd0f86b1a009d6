"""The reusable workflow (.github/workflows/fp8-check.yml, `workflow_call`) and the caller `fp8-check init` writes."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from fp8_check.cli import main as cli, scaffold

from ..conftest import REPO
from .test_workflow import _actionlint

REUSABLE = REPO / ".github" / "workflows" / "fp8-check.yml"


def _load(text: str) -> dict:
    doc = yaml.safe_load(text)
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as True
    return doc


def test_actionlint_accepts_the_reusable_workflow_and_the_scaffolded_caller(tmp_path):
    cmd = _actionlint()
    if cmd is None:
        pytest.skip("actionlint is not installable here (the structural checks below still run)")
    assert scaffold.cmd_init(type("A", (), {"directory": tmp_path, "uses": "acme/fp8-check/.github/workflows/fp8-check.yml@v1",
                                            "requirement": "fp8-check[flax]", "force": False,
                                            "goldens_now": False})()) == 0
    for path in (REUSABLE, tmp_path / ".github" / "workflows" / "fp8-check.yml"):
        p = subprocess.run(cmd + ["-no-color", "-oneline", str(path)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (path, p.stdout + p.stderr)


def test_inputs_are_declared_and_the_caller_passes_only_declared_ones():
    text = REUSABLE.read_text()
    doc = _load(text)
    declared = set(doc["on"]["workflow_call"]["inputs"])
    used = set(re.findall(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)", text))
    assert used <= declared and {"requirement", "jax", "jax-range", "jax-index", "targets", "cases", "goldens"} <= used
    caller = _load(scaffold.files("acme/fp8-check/.github/workflows/fp8-check.yml@v1", "fp8-check[flax]")
                   [".github/workflows/fp8-check.yml"])
    job = caller["jobs"]["fp8-check"]
    assert job["uses"].endswith("/.github/workflows/fp8-check.yml@v1")
    assert set(job["with"]) <= declared


def _argv(step: dict, doc: dict, extra: dict) -> list[str]:
    """The step's `fp8-check matrix` command line with the default inputs (and `extra` env values)."""
    defaults = {k: v.get("default", "") for k, v in doc["on"]["workflow_call"]["inputs"].items()}
    values = {name: extra.get(name) or defaults.get((re.search(r"inputs\.([\w-]+)", expr) or [None, ""])[1], "")
              for name, expr in step["env"].items()}
    flags = re.search(r"args=\((.*?)\)\n", step["run"], re.S).group(1).split()
    argv = ["matrix", values["CASES"]]
    for word in flags:
        argv.append(re.sub(r'"?\$(\w+)"?', lambda m: values[m.group(1)], word).replace('"', ""))
    return argv


def test_the_per_version_job_uses_flags_the_cli_accepts_and_the_merge_applies_fail_on():
    doc = _load(REUSABLE.read_text())
    job = doc["jobs"]["matrix"]
    # one job per version x target group: the resolve step's `jobs` ({jax, group, targets} each)
    assert job["needs"] == "resolve" and job["strategy"]["matrix"]["include"] == "${{ fromJSON(needs.resolve.outputs.jobs) }}"
    assert job["strategy"]["fail-fast"] is False
    [step] = [s for s in job["steps"] if "fp8-check matrix" in s.get("run", "")]
    assert step["env"]["TARGETS"] == "${{ matrix.targets }}" and step["env"]["GROUP"] == "${{ matrix.group }}"
    args = cli.build_parser()[0].parse_args(_argv(step, doc, {"JAX": "0.8.0", "GROUP": "amd", "TARGETS": "mi300x"}))
    assert args.command == "matrix" and args.mode == "deviceless" and args.jax == "0.8.0" and args.target == "mi300x"
    assert args.fail_on == "never" and args.no_html and str(args.out) == "reports/matrix-0.8.0-amd.json"
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()" and "matrix.jax" in upload[0]["with"]["name"]
    assert "matrix.group" in upload[0]["with"]["name"]
    [resolve] = [s for s in doc["jobs"]["resolve"]["steps"] if "--list-jobs" in s.get("run", "")]
    assert "--list-jobs --format github" in resolve["run"] and resolve["env"]["TARGETS"] == "${{ inputs.targets }}"
    assert job["env"]["FP8_CHECK_JAX_INDEX"] == "${{ inputs.jax-index }}"
    merge = doc["jobs"]["merge"]
    assert merge["needs"] == ["resolve", "matrix"] and "always()" in merge["if"]
    [step] = [s for s in merge["steps"] if "--merge" in s.get("run", "")]
    argv = step["run"].split("fp8-check", 1)[1].replace("\\\n", " ").replace('"$FAIL_ON"', "newest").replace("'", "").split()
    args = cli.build_parser()[0].parse_args(argv)
    assert args.merge == ["reports/jobs/*/matrix-*.json"] and args.fail_on == "newest" and str(args.html) == "reports/matrix.html"
    assert str(args.expect_jobs) == "reports/jobs.json" and step["env"]["JOBS"] == "${{ needs.resolve.outputs.jobs }}"
    download = [s for s in merge["steps"] if s.get("uses", "").startswith("actions/download-artifact")]
    assert download[0]["with"]["pattern"] == "${{ inputs.artifact-name }}-jax-*"


def test_nightly_workflow_can_run_the_newest_jax_nightly_from_a_configured_index():
    from .test_workflow import load

    doc = load()
    assert "jax_index" in doc["on"]["workflow_dispatch"]["inputs"]
    job = doc["jobs"]["jax-nightly"]
    assert "inputs.jax_index" in job["if"] and "vars.JAX_NIGHTLY_INDEX" in job["if"]
    assert job["env"]["FP8_CHECK_JAX_INDEX"] == "${{ inputs.jax_index || vars.JAX_NIGHTLY_INDEX }}"
    [run] = [s["run"] for s in job["steps"] if "fp8-check matrix" in s.get("run", "")]
    argv = run.split("fp8-check", 1)[1].replace("\\\n", " ").split()
    args = cli.build_parser()[0].parse_args(argv)
    assert args.jax == "nightly" and args.mode == "deviceless" and args.fail_on == "any"
