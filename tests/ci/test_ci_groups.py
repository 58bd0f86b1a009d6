"""The reusable workflow's fan-out over JAX version x target group, and the merge's notion of a missing job: a planned
job (the resolve step's `jobs`) that uploaded nothing is named in the merged matrix, the terminal, the job summary,
the annotations and the HTML report, and the merge exits non-zero under every `--fail-on`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fp8_check.matrix import _document as matrix_document, _jobs as matrix_jobs
from fp8_check.matrix._document import Matrix, Status, VersionEntry
from fp8_check.matrix._news import closing_line, not_run
from fp8_check.report import _github as github
from fp8_check.run import _results as results, _selection as selection
from fp8_check.verdict import _outcome as outcome
from fp8_check.verdict._outcome import Outcome

from ..conftest import REPO, write_cases

REUSABLE = REPO / ".github" / "workflows" / "fp8-check.yml"


def _entry(v: str, target: str, rows: list[tuple[str, str]]) -> VersionEntry:
    return VersionEntry(v, Status.RAN, outcomes=[Outcome(c, target, "cublas" if target != "mi300x" else "hipblaslt",
                                                         "deviceless", v, outcome.code(code), file="cases/c.yaml")
                                                 for c, code in rows])


def _job_artifact(jobs_dir: Path, version: str, group: str, target: str) -> None:
    """What one version x target-group job uploads, as download-artifact lays it out in the merge job."""
    base = jobs_dir / f"fp8-check-report-jax-{version}-{group}"
    entry = _entry(version, target, [("relu", "PASS")])
    res = results.Results({"jax": version, "jaxlib": version, "mode": "deviceless", "targets": [target],
                           "profiles": ["cublas"]}, entry.outcomes)
    stem = f"matrix-{version}-{group}"
    results.write(base / f"{stem}.d" / f"results-jax-{version}.json", res)
    entry.results_file = str(base / f"{stem}.d" / f"results-jax-{version}.json")
    matrix_document.write(base / f"{stem}.json", Matrix([entry], "deviceless", [target], ["cublas"]))


PLAN = [matrix_jobs.Job("0.8.1", "nvidia", "h100"), matrix_jobs.Job("0.8.1", "amd", "mi300x"),
        matrix_jobs.Job("0.12.0.1", "nvidia", "h100"), matrix_jobs.Job("0.12.0.1", "amd", "mi300x")]


def test_the_plan_is_one_job_per_version_and_target_group(run_cli, tmp_path):
    targets = selection.targets_from("h100,mi300x,h200")
    assert [(j.jax, j.group, j.targets) for j in matrix_jobs.plan(["0.8.1", "0.12.0.1"], targets)] == [
        ("0.8.1", "nvidia", "h100,h200"), ("0.8.1", "amd", "mi300x"),
        ("0.12.0.1", "nvidia", "h100,h200"), ("0.12.0.1", "amd", "mi300x")]
    code, out, err = run_cli("matrix", "--jax", "0.8.1,0.12.0.1", "--target", "h100,mi300x,h200", "--list-jobs",
                             "--format", "github", cwd=tmp_path)
    assert code == 0, err
    lines = dict(line.split("=", 1) for line in out.splitlines())
    assert json.loads(lines["versions"]) == ["0.8.1", "0.12.0.1"]
    assert json.loads(lines["jobs"])[1] == {"jax": "0.8.1", "group": "amd", "targets": "mi300x"}
    assert json.loads(lines["groups"]) == [{"group": "nvidia", "targets": "h100,h200"}, {"group": "amd", "targets": "mi300x"}]


@pytest.mark.parametrize("fail_on", ["newest", "regression", "never", "any"])
def test_a_job_that_uploaded_nothing_is_named_as_missing_and_fails_the_merge(run_cli, tmp_path, fail_on):
    jobs = tmp_path / "reports" / "jobs"
    for v, group, target in (("0.8.1", "nvidia", "h100"), ("0.8.1", "amd", "mi300x"), ("0.12.0.1", "nvidia", "h100")):
        _job_artifact(jobs, v, group, target)  # the job of 0.12.0.1 x amd died: it uploaded nothing
    plan = tmp_path / "reports" / "jobs.json"
    plan.write_text(matrix_jobs.format_plan(PLAN, "json"))
    write_cases(tmp_path / "cases" / "c.yaml", "cases: []\n")
    code, out, err = run_cli("matrix", "--merge", str(jobs / "*" / "matrix-*.json"), "--expect-jobs", plan,
                             "--fail-on", fail_on, "--out", tmp_path / "reports" / "matrix.json",
                             "--html", tmp_path / "reports" / "matrix.html", cwd=tmp_path)
    assert code == 3, out + err  # red under every fail-on: the AMD target was not checked on 0.12.0.1
    assert "missing job (amd): jax 0.12.0.1, targets mi300x: its job uploaded no results" in out
    assert out.strip().splitlines()[-1].startswith("verdict: 1 planned job missing, not checked: jax 0.12.0.1 amd (mi300x)")
    doc = json.loads((tmp_path / "reports" / "matrix.json").read_text())
    assert doc["missing_jobs"] == [{"jax": "0.12.0.1", "group": "amd", "targets": "mi300x", "why": matrix_jobs.NO_UPLOAD}]
    # every other job's results are kept
    kept = {(v["jax"], r["target"]) for v in doc["versions"] for r in v["results"]}
    assert ("0.12.0.1", "h100") in kept and ("0.8.1", "h100") in kept
    assert "missing job: jax 0.12.0.1, amd targets mi300x" in (tmp_path / "reports" / "matrix.html").read_text()
    summary = tmp_path / "summary.md"
    code, out, err = run_cli("ci", "summary", tmp_path / "reports" / "matrix.json", "--cases", "cases",
                             "--summary-file", summary, "--issues-dir", tmp_path / "issues", cwd=tmp_path)
    assert code == 0, err
    text = summary.read_text()
    assert "| missing job (amd) |  | mi300x | 0.12.0.1 | its job uploaded no results" in text
    assert "1 planned job missing" in text.splitlines()[2]
    assert any(line.startswith("::error title=fp8-check%3A jax 0.12.0.1 missing job (amd)::") for line in out.splitlines())


def test_without_the_plan_a_missing_job_goes_unseen(run_cli, tmp_path):
    """What --expect-jobs adds: the same merge without it exits 0 and names nothing (the check above can fail)."""
    jobs = tmp_path / "reports" / "jobs"
    _job_artifact(jobs, "0.12.0.1", "nvidia", "h100")
    code, out, err = run_cli("matrix", "--merge", str(jobs / "*" / "matrix-*.json"), "--fail-on", "newest",
                             "--out", tmp_path / "m.json", "--no-html", cwd=tmp_path)
    assert code == 0 and "missing job" not in out, out + err
    m = Matrix([_entry("0.12.0.1", "h100", [("relu", "PASS")])], "deviceless", ["h100"], ["cublas"],
               missing_jobs=matrix_jobs.missing(PLAN[2:], matrix_jobs.uploaded([str(p) for p in jobs.glob("*/*.json")])))
    assert [(j.jax, j.group) for j in m.missing_jobs] == [("0.12.0.1", "amd")]
    assert [n.what for n in not_run(m)] == ["missing job (amd)"] and m.exit_code("never") == 3
    assert closing_line(m).startswith("verdict: 1 planned job missing")
    assert "missing job (amd)" in github.job_summary(m)


def test_every_job_died_each_is_named(run_cli, tmp_path):
    plan = tmp_path / "jobs.json"
    plan.write_text(matrix_jobs.format_plan(PLAN[:2], "json"))
    code, out, err = run_cli("matrix", "--merge", str(tmp_path / "reports" / "jobs" / "*" / "matrix-*.json"),
                             "--expect-jobs", plan, "--out", tmp_path / "m.json", "--no-html", cwd=tmp_path)
    assert code == 3, out + err
    assert "missing job (nvidia): jax 0.8.1" in out and "missing job (amd): jax 0.8.1" in out


def _merge_step(doc: dict) -> str:
    return next(s["run"] for s in doc["jobs"]["merge"]["steps"] if s.get("name", "").startswith("Merge the jobs"))


@pytest.mark.slow  # fp8-check in subprocesses, as the merge job runs it
def test_the_merge_job_step_names_the_job_that_uploaded_nothing(tmp_path):
    doc = yaml.safe_load(REUSABLE.read_text())
    jobs = tmp_path / "reports" / "jobs"
    _job_artifact(jobs, "0.8.1", "nvidia", "h100")
    _job_artifact(jobs, "0.12.0.1", "nvidia", "h100")
    _job_artifact(jobs, "0.8.1", "amd", "mi300x")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", FAIL_ON="regression",
               JOBS=matrix_jobs.format_plan(PLAN, "github").splitlines()[1].removeprefix("jobs="))
    p = subprocess.run(["bash", "-eo", "pipefail", "-c", _merge_step(doc)], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "missing job (amd): jax 0.12.0.1, targets mi300x" in p.stdout
    assert json.loads((tmp_path / "reports" / "matrix.json").read_text())["missing_jobs"][0]["group"] == "amd"


# ------------------------------------------------------------------ init: tests import the project's modules; NEW is told


def test_the_tests_init_writes_import_the_projects_modules_out_of_the_box(tmp_path):
    """init's conftest.py puts the project's root on sys.path: a test importing the user's module collects and passes
    with a plain `pytest` (before: ModuleNotFoundError at collection until PYTHONPATH=.)."""
    from types import SimpleNamespace

    from fp8_check.cli import scaffold

    (tmp_path / "blockmod.py").write_text("def double(x):\n    return 2 * x\n")
    args = SimpleNamespace(directory=tmp_path, uses=scaffold.DEFAULT_USES, requirement="fp8-check==0.1.0", force=False,
                           file_issues=False, goldens_now=False)
    assert scaffold.cmd_init(args) == 0
    assert (tmp_path / "conftest.py").is_file()
    (tmp_path / "tests" / "test_mine.py").write_text("import blockmod\n\n\ndef test_double():\n"
                                                     "    assert blockmod.double(2) == 4\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_mine.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
    caller = yaml.safe_load((tmp_path / ".github" / "workflows" / "fp8-check.yml").read_text())
    on = caller.pop(True, caller.get("on"))
    assert set(on) == {"push", "pull_request", "schedule", "workflow_dispatch"}
    assert caller["concurrency"] == {"group": "fp8-check-${{ github.event_name }}-${{ github.ref }}",
                                     "cancel-in-progress": True}
    assert "default_branch" in caller["jobs"]["fp8-check"]["if"]


def test_a_case_without_a_golden_is_told_with_how_to_bless_it_not_failed_under_newest():
    """The first CI run of a project whose goldens init could not record: green, the summary says how to bless."""
    m = Matrix([_entry("0.8.1", "h100", [("relu", "NEW")]), _entry("0.12.0.1", "h100", [("relu", "NEW")])],
               "deviceless", ["h100"], ["cublas"])
    assert m.exit_code("newest") == 0 and m.exit_code("regression") == 0
    assert m.exit_code("any") == 1  # `any` still fails on it
    text = github.job_summary(m, run_id="4242")
    assert "### No golden yet: how to bless" in text
    assert "gh run download 4242 -n fp8-check-report -D reports" in text
    assert "fp8-check bless --from-matrix reports/matrix.json" in text and "pytest tests --fp8-bless" in text
    bad = Matrix([_entry("0.12.0.1", "h100", [("relu", "UNRESOLVED")])], "deviceless", ["h100"], ["cublas"])
    assert bad.exit_code("newest") == 1 and "how to bless" not in github.job_summary(bad)
