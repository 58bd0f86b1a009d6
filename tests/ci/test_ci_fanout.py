"""The CI `fp8-check init` writes: nothing to edit, what the cases' `requires:` name in `with:`, actionlint + shellcheck clean;
the reusable workflow's per-version jobs merged once; what did not run named with its reason; the pytest plugin's
`requirements:`; and (slow) the workflow's jobs replayed locally (scripts/replay_ci.py) on three releases."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import jax
import pytest
import yaml

from fp8_check.cli import scaffold
from fp8_check.matrix import _document as matrix_document
from fp8_check.matrix._document import Matrix, Status, VersionEntry
from fp8_check.matrix._news import not_run
from fp8_check.run import _results as results
from fp8_check.verdict import _outcome as outcome
from fp8_check.verdict._outcome import Outcome
from fp8_check.versions._uvbin import find_uv
from fp8_check.worker.serve import MISSING_OPTIONAL

from ..conftest import REPO, write_cases
from .test_workflow import _actionlint

REUSABLE = REPO / ".github" / "workflows" / "fp8-check.yml"
FIXTURE = Path(__file__).parents[1] / "fixtures" / "ci_project"
# the worker's words when flax is not installed (worker.missing_optional; flax is installed here)
FLAX_REASON = (MISSING_OPTIONAL % "flax") + " (requires: flax, optax): no module named 'flax' is installed"


def _load(text: str) -> dict:
    doc = yaml.safe_load(text)
    doc["on"] = doc.pop(True, doc.get("on"))
    return doc


def _git(*args, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=120,
                   env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
                            GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid"))


def _model_project(root: Path) -> Path:
    """A fresh git repository holding a user's flax model case (`requires: [flax, optax]`)."""
    (root / "cases").mkdir(parents=True)
    (root / "goldens").mkdir()
    shutil.copy(FIXTURE / "fp8_mlp.py", root / "fp8_mlp.py")
    shutil.copy(FIXTURE / "cases_model.yaml", root / "cases" / "model.yaml")
    _git("init", "-q", cwd=root)
    return root


# ------------------------------------------------------------------ init


@pytest.mark.slow  # builds fp8-check's wheel (uv build: seconds)
def test_init_in_a_fresh_repository_writes_a_ci_with_nothing_to_edit(tmp_path, capsys):
    project = _model_project(tmp_path / "project")
    args = SimpleNamespace(directory=project, uses=scaffold.DEFAULT_USES, requirement=None, force=False, file_issues=False)
    assert scaffold.cmd_init(args) == 0
    out = capsys.readouterr().out
    # the starting goldens, recorded on the JAX installed here (compiled, timed); then what runs when
    assert re.search(r"goldens: the cases recorded on jax \S+ in \d+\.\d s", out), out
    assert re.search(r"goldens: the pytest test's recorded on jax \S+ in \d+\.\d s", out), out
    assert "next: fp8-check run" in out and "on a push to the default branch" in out
    assert "OWNER" not in out and "edit .github" not in out
    workflows = project / ".github" / "workflows"
    for path in workflows.iterdir():
        assert "OWNER" not in path.read_text(), path
    caller = _load((workflows / "fp8-check.yml").read_text())["jobs"]["fp8-check"]
    assert caller["uses"] == "./.github/workflows/fp8-check-reusable.yml"
    assert (workflows / "fp8-check-reusable.yml").read_text() == REUSABLE.read_text()  # the one reusable workflow, copied
    assert caller["with"]["with"] == "flax optax"  # what the model case requires, for every per-version environment
    wheel = project / caller["with"]["requirement"]
    assert wheel.parent == project / ".github" / "fp8-check" and wheel.name.startswith("fp8_check-")
    names = zipfile.ZipFile(wheel).namelist()
    assert "fp8_check/templates/fp8-check-reusable.yml" in names and "fp8_check/cli/scaffold.py" in names
    cmd = _actionlint()
    assert cmd is not None and "-shellcheck" in cmd, "actionlint and shellcheck are in the dev group"
    p = subprocess.run(cmd + ["-no-color", "-oneline"], cwd=project, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_init_writes_what_requires_names_not_a_requirement_set_and_refuses_a_broken_case(tmp_path, capsys):
    """A set's packages stay out of `with:` (every version's environment): `matrix` builds the set's own
    environment for its cases, on the releases its range includes (issue 52: before, a `jax>=0.12` set in
    `with:` left every older release with nothing run)."""
    (tmp_path / "mod.py").write_text("import jax.numpy as jnp\n\ndef step(x):\n    return jnp.dot(x, x)\n")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "reqs.txt").write_text("tomli-w>=1.0\njax>=0.6.1\n")
    write_cases(tmp_path / "cases" / "c.yaml", "cases:\n- id: c\n  kind: python\n  callable: mod:step\n"
                "  args: [{name: x, shape: [16, 16], dtype: bfloat16}]\n  requires: [flax]\n  requirements: reqs.txt\n")
    assert scaffold.case_requirements(tmp_path) == ("flax",)
    write_cases(tmp_path / "cases" / "bad.yaml", "cases:\n- id: bad\n  kind: python\n  callable: mod:step\n  args: 3\n")
    args = SimpleNamespace(directory=tmp_path, uses=scaffold.DEFAULT_USES, requirement="fp8-check==0.1.0", force=False)
    assert scaffold.cmd_init(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "bad.yaml" in err and "'bad'" in err
    assert not (tmp_path / ".github").exists()


def test_shellcheck_runs_inside_actionlint(tmp_path):
    """The check above can fail on a `run:` script: an unquoted variable is shellcheck's SC2086."""
    cmd = _actionlint()
    assert cmd is not None
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo $HOME\n")
    p = subprocess.run(cmd + ["-no-color", "-oneline", str(bad)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and "SC2086" in p.stdout, p.stdout + p.stderr


# ------------------------------------------------------------------ what did not run, and why


def _entry(v: str, rows: list[tuple[str, str, str]], status: str = "ran", error: str = "") -> VersionEntry:
    return VersionEntry(v, Status(status), error, outcomes=[
        Outcome(c, "h100", "cublas", "deviceless", v, outcome.code(code), reason=reason, file="cases/model.yaml")
        for c, code, reason in rows])


def _only_newest() -> Matrix:
    older = [("mlp", "UNSUPPORTED", FLAX_REASON), ("relu", "PASS", "")]
    return Matrix([_entry("0.6.2", older), _entry("0.8.1", older),
                   _entry("0.9.0", [], "install-failed", "uv: no solution for jax==0.9.0\nmore"),
                   _entry("0.12.0.1", [("mlp", "PASS", ""), ("relu", "PASS", "")])], "deviceless", ["h100"], ["cublas"])


def test_a_missing_requirement_is_named_with_what_to_add_and_newest_only_fails_under_newest():
    m = _only_newest()
    [failed, mlp] = not_run(m)
    assert (failed.what, failed.versions, failed.reason) == ("install-failed", ("0.9.0",), "uv: no solution for jax==0.9.0")
    assert mlp.cases == ("mlp",) and mlp.versions == ("0.6.2", "0.8.1") and mlp.only_newest
    assert "no flax in this environment: add `with: flax`" in mlp.line() and FLAX_REASON in mlp.line()
    assert m.only_newest_rows() == {("mlp", "h100", "cublas")}
    assert m.exit_code("newest") == 1  # checked on the newest release only: a failure under newest
    assert m.exit_code("regression") == 3 and m.exit_code("never") == 0  # a warning otherwise (3: 0.9.0 not installed)
    everywhere = Matrix([_entry(v, [("mlp", "UNSUPPORTED", FLAX_REASON)]) for v in ("0.6.2", "0.12.0.1")])
    [n] = not_run(everywhere)
    assert not n.only_newest and everywhere.exit_code("newest") == 0 and not everywhere.only_newest_rows()


def test_the_job_summary_and_annotations_say_what_did_not_run(tmp_path, run_cli):
    case_file = write_cases(tmp_path / "cases" / "model.yaml", (FIXTURE / "cases_model.yaml").read_text())
    shutil.copy(FIXTURE / "fp8_mlp.py", tmp_path / "fp8_mlp.py")
    m = _only_newest()
    for e in m.versions:
        for o in e.outcomes:
            o.case = "mlp_fp8_forward" if o.case == "mlp" else o.case
    matrix_document.write(tmp_path / "matrix.json", m)
    summary = tmp_path / "summary.md"
    code, out, err = run_cli("ci", "summary", tmp_path / "matrix.json", "--cases", case_file, "--summary-file", summary,
                             "--issues-dir", tmp_path / "issues", cwd=tmp_path)
    assert code == 0, err
    text = summary.read_text()
    assert "### Did not run" in text and "add 'with: flax'" in text and "install-failed" in text
    assert "a failure under 'fail-on: newest'" in text
    warning = next(line for line in out.splitlines() if line.startswith("::warning "))
    line_of_case = case_file.read_text().splitlines().index("  - id: mlp_fp8_forward") + 1
    assert warning.startswith(f"::warning file=cases/model.yaml,line={line_of_case},title=fp8-check UNSUPPORTED%3A mlp_fp8_forward")
    assert "add `with: flax`" in warning
    assert any(line.startswith("::error title=fp8-check%3A jax 0.9.0 install-failed::") for line in out.splitlines())


@pytest.mark.slow
def test_matrix_prints_why_a_case_with_a_missing_requirement_did_not_run(tmp_path, run_cli):
    """A real matrix on this environment's JAX: the case requires a module that is not installed here."""
    (tmp_path / "needs.py").write_text("import tomli_w  # noqa: F401\nimport jax.numpy as jnp\n\n"
                                       "def step(x):\n    return jnp.dot(x, x)\n")
    write_cases(tmp_path / "cases" / "c.yaml", "cases:\n- id: needs_tomli_w\n  kind: python\n  callable: needs:step\n"
                "  args: [{name: x, shape: [16, 16], dtype: bfloat16}]\n  requires: [tomli_w]\n  profiles: [cublas]\n")
    code, out, err = run_cli("matrix", "cases", "--jax", jax.__version__, "--out", tmp_path / "m.json", "--no-html",
                             "--goldens", tmp_path / "goldens", cwd=tmp_path)
    assert code == 0, out + err
    [line] = [x for x in out.splitlines() if x.strip().startswith("UNSUPPORTED needs_tomli_w")]
    assert f"on jax {jax.__version__}: missing optional dependency 'tomli_w'" in line
    assert "no tomli_w in this environment: add `with: tomli_w`" in line and "Did not run (1 reason)" in out


# ------------------------------------------------------------------ the merge job on several jobs' artifacts


def _job_artifact(root: Path, version: str, rows: list[tuple[str, str, str]]) -> None:
    """What one per-version job uploads: reports/matrix-V.json and reports/matrix-V.d/results-jax-V.json, as
    download-artifact lays them out in the merge job (reports/jobs/<artifact>/…)."""
    base = root / f"fp8-check-report-jax-{version}"
    entry = _entry(version, rows)
    res = results.Results({"jax": version, "jaxlib": version, "mode": "deviceless", "targets": ["h100"],
                           "profiles": ["cublas"]}, entry.outcomes)
    results.write(base / f"matrix-{version}.d" / f"results-jax-{version}.json", res)
    entry.results_file = str(base / f"matrix-{version}.d" / f"results-jax-{version}.json")
    matrix_document.write(base / f"matrix-{version}.json", Matrix([entry], "deviceless", ["h100"], ["cublas"]))


def _merge_step(doc: dict, name: str) -> str:
    return next(s["run"] for s in doc["jobs"]["merge"]["steps"] if s.get("name", "").startswith(name))


@pytest.mark.slow  # runs fp8-check as the merge job does, in subprocesses
def test_the_merge_job_merges_several_jobs_artifacts_and_applies_fail_on_once(tmp_path):
    doc = _load(REUSABLE.read_text())
    jobs = tmp_path / "reports" / "jobs"
    _job_artifact(jobs, "0.6.2", [("mlp", "UNSUPPORTED", FLAX_REASON), ("relu", "PASS", "")])
    _job_artifact(jobs, "0.8.1", [("mlp", "UNSUPPORTED", FLAX_REASON), ("relu", "PASS", "")])
    _job_artifact(jobs, "0.12.0.1", [("mlp", "PASS", ""), ("relu", "PASS", "")])
    write_cases(tmp_path / "cases" / "model.yaml", "cases: []\n")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"), CASES="cases",
               JOBS=json.dumps([{"jax": v, "group": "nvidia", "targets": "h100"} for v in ("0.6.2", "0.8.1", "0.12.0.1")]))
    runs = {}
    for fail_on in ("newest", "regression"):
        p = subprocess.run(["bash", "-eo", "pipefail", "-c", _merge_step(doc, "Merge the jobs")], cwd=tmp_path,
                           env=dict(env, FAIL_ON=fail_on), capture_output=True, text=True, timeout=600)
        runs[fail_on] = p
    assert runs["newest"].returncode == 1, runs["newest"].stdout + runs["newest"].stderr  # ran on the newest only
    assert runs["regression"].returncode == 0, runs["regression"].stdout + runs["regression"].stderr
    out = runs["newest"].stdout
    assert "UNSUPPORTED mlp (h100/cublas) on jax 0.6.2, 0.8.1" in out and "add `with: flax`" in out
    merged = json.loads((tmp_path / "reports" / "matrix.json").read_text())
    assert [v["jax"] for v in merged["versions"]] == ["0.6.2", "0.8.1", "0.12.0.1"]
    assert (tmp_path / "reports" / "matrix.html").is_file()
    p = subprocess.run(["bash", "-eo", "pipefail", "-c", _merge_step(doc, "Job summary")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert summary.count("## fp8-check") == 1 and "### Did not run" in summary
    assert "| mlp | h100/cublas | " in summary and "0.6.2 | 0.8.1 | 0.12.0.1 |" in summary


# ------------------------------------------------------------------ the pytest plugin routes `requirements:`


@pytest.mark.slow
@pytest.mark.network
def test_the_pytest_plugin_compiles_a_case_with_requirements_in_their_environment(tmp_path):
    (tmp_path / "goldens").mkdir()
    (tmp_path / "needs.py").write_text("import tomli_w  # noqa: F401\nimport jax.numpy as jnp\n\n"
                                       "def step(x):\n    return jnp.dot(x, x)\n")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "reqs.txt").write_text("tomli-w\n")
    write_cases(tmp_path / "cases" / "c.yaml", "cases:\n- id: needs_tomli_w\n  kind: python\n  callable: needs:step\n"
                "  args: [{name: x, shape: [16, 16], dtype: bfloat16}]\n  requires: [tomli_w]\n"
                "  requirements: reqs.txt\n  profiles: [cublas]\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "cases"], cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=1200)
    out = p.stdout + p.stderr
    assert "missing optional dependency" not in out, out  # before: UNSUPPORTED (skipped) in pytest's own environment
    assert re.search(r"NEW h100/cublas needs_tomli_w", out), out  # compiled where tomli_w is: no golden yet
    assert p.returncode == 1, out


# ------------------------------------------------------------------ the workflow replayed locally


@pytest.mark.slow
@pytest.mark.network
def test_the_workflow_replayed_on_a_push_runs_every_job_green_with_nothing_edited(tmp_path):
    """The documented way (docs/ci.md): `fp8-check init` in a fresh repository holding a flax model case (it records
    the starting goldens on the JAX installed here), commit, then scripts/replay_ci.py replays a push: resolve, one
    matrix job per release x target group, the pytest job per target group, merge. Every job succeeds; the model
    PASSes on the newest release against the goldens init recorded; older releases are told, not failed."""
    releases = "0.8.1,0.12.0.1"
    project = _model_project(tmp_path / "project")
    cli = [str(Path(sys.executable).parent / "fp8-check")]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    p = subprocess.run(cli + ["init"], cwd=project, capture_output=True, text=True, env=env, timeout=1800)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"goldens: the cases recorded on jax \S+ in \d+\.\d s", p.stdout), p.stdout
    assert re.search(r"goldens: the pytest test's recorded on jax \S+ in \d+\.\d s", p.stdout), p.stdout
    assert "on a push to the default branch, each pull request, nightly" in p.stdout
    blessed = {g.stem for g in (project / "goldens").rglob("*.yaml")}
    assert {"mlp_fp8_forward", "mlp_fp8_sgd_step", "example_scaled_relu", "scaled_relu"} <= blessed, blessed
    caller = _load((project / ".github" / "workflows" / "fp8-check.yml").read_text())
    assert "push" in caller["on"] and caller["concurrency"]["cancel-in-progress"] is True
    _git("add", "-A", cwd=project)
    _git("commit", "-qm", "fp8-check init", cwd=project)
    cmd = _actionlint()
    assert cmd is not None
    lint = subprocess.run(cmd + ["-no-color", "-oneline"], cwd=project, capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    work = tmp_path / "replay"
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "replay_ci.py"), str(project), "--event", "push",
                        "--input", f"jax={releases}", "--work", str(work)], capture_output=True, text=True, env=env,
                       timeout=3600)
    assert p.returncode == 0, p.stdout[-8000:] + p.stderr
    assert p.stdout.splitlines()[-1].startswith("replay: every job succeeded on push"), p.stdout[-3000:]
    for v in releases.split(","):
        assert f"== job matrix (jax={v}, group=nvidia, targets=h100): success" in p.stdout
    assert "== job pytest (group=nvidia, targets=h100): success" in p.stdout
    assert re.search(r"\b2 passed\b", p.stdout), p.stdout[-6000:]  # the pytest tests init wrote, out of the box
    merged = json.loads((work / "jobs" / "merge" / "workspace" / "reports" / "matrix.json").read_text())
    assert [v["jax"] for v in merged["versions"]] == releases.split(",") and not merged.get("missing_jobs")
    newest = {r["case"]: r["outcome"] for r in merged["versions"][-1]["results"]}
    assert newest["mlp_fp8_forward"] == newest["mlp_fp8_sgd_step"] == newest["example_scaled_relu"] == "PASS", newest
    assert (work / "artifacts" / "fp8-check-report" / "matrix.html").is_file()
    # a push to another branch: the caller's job does not run (its `if:` names the default branch)
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "replay_ci.py"), str(project), "--branch", "topic",
                        "--work", str(tmp_path / "replay2")], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0 and "does not run on this push" in p.stdout.splitlines()[-1], p.stdout + p.stderr


@pytest.mark.slow
def test_a_wheel_repacked_from_an_installed_fp8_check_installs(tmp_path):
    """Installed from a wheel (no checkout): init re-packs the installed files; that wheel installs and runs."""
    uv = find_uv()
    assert uv
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    base = getattr(sys, "_base_executable", sys.executable)
    p = subprocess.run([uv, "build", "--wheel", "--quiet", "--out-dir", tmp_path / "dist", REPO], capture_output=True,
                       text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    [built] = (tmp_path / "dist").glob("*.whl")
    for name in ("a", "b"):
        subprocess.run([uv, "venv", "-q", "--python", base, tmp_path / name], check=True, timeout=300, env=env)
        py = tmp_path / name / "bin" / "python"
        wheel = built if name == "a" else next((tmp_path / "repacked").glob("*.whl"))
        for reqs in ([str(wheel), "--no-deps"], ["pyyaml", "jinja2", "packaging", "rich"]):
            p = subprocess.run([uv, "pip", "install", "-q", "--python", py, *reqs], capture_output=True, text=True,
                               timeout=600, env=env)
            assert p.returncode == 0, p.stderr
        if name == "a":
            p = subprocess.run([py, "-c", "import sys; from pathlib import Path; from fp8_check.cli import own_wheel; "
                                "assert own_wheel.checkout() is None; print(own_wheel.build(Path(sys.argv[1])))",
                                tmp_path / "repacked"], capture_output=True, text=True, timeout=300, env=env,
                               cwd=tmp_path)
            assert p.returncode == 0, p.stderr
    original = {n for n in zipfile.ZipFile(built).namelist()}
    repacked = {n for n in zipfile.ZipFile(next((tmp_path / "repacked").glob("*.whl"))).namelist()}
    assert repacked == original
    p = subprocess.run([tmp_path / "b" / "bin" / "fp8-check", "matrix", "--jax", "0.8.0", "--list-versions"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "0.8.0", p.stdout + p.stderr


def test_init_refuses_a_uses_that_names_its_own_caller(tmp_path, capsys):
    args = SimpleNamespace(directory=tmp_path, uses="./.github/workflows/fp8-check.yml", requirement="fp8-check==0.1.0",
                           force=False)
    assert scaffold.cmd_init(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "names the caller init writes" in err
    assert not (tmp_path / ".github").exists()
