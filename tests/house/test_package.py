"""The package people install: the wheel exposes the import name `fp8_check` (the code stays in the folder
harness/), installs outside the checkout, and `fp8-check --version` names the JAX it runs with; the requirement
`fp8-check init` writes into the CI workflow installs (a local git URL standing in for the published repository).

Packages come from uv's cache, pinned to uv.lock (slow: a fresh environment with jax[cuda12] each)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from fp8_check.versions._envs import find_uv

from ..conftest import REPO

IMPORT_NAME = "fp8_check"


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(UV_PYTHON_DOWNLOADS="never", FP8_CHECK_NO_GPU="1")
    return env


def _run(cmd, cwd: Path, env: dict, timeout: int = 1200) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout)


def _venv(tmp_path: Path, name: str, env: dict) -> Path:
    uv = find_uv()
    venv = tmp_path / name
    p = _run([uv, "venv", "--python", getattr(sys, "_base_executable", sys.executable), venv], tmp_path, env)
    assert p.returncode == 0, p.stderr
    return venv


def _constraints(tmp_path: Path, env: dict) -> Path:
    out = tmp_path / "constraints.txt"
    p = _run([find_uv(), "export", "--locked", "--all-extras", "--no-hashes", "--no-emit-project", "-o", out], REPO, env)
    assert p.returncode == 0, p.stdout + p.stderr
    return out


def _version_of(py: Path, dist: str, cwd: Path, env: dict) -> str:
    p = _run([py, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"], cwd, env)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.mark.slow
@pytest.mark.network
def test_the_wheel_installs_outside_the_checkout_as_fp8_check(tmp_path):
    env = _env()
    dist = tmp_path / "dist"
    p = _run([find_uv(), "build", "--wheel", "--out-dir", dist, REPO], tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    [wheel] = dist.glob("fp8_check-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {IMPORT_NAME, next(t for t in tops if t.endswith(".dist-info"))}, tops  # no top-level harness
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert f"fp8-check = {IMPORT_NAME}.cli.main:main" in entry_points and f"fp8_check = {IMPORT_NAME}.cli.pytest_plugin" in entry_points

    venv = _venv(tmp_path, "venv", env)
    py = venv / "bin" / "python"
    p = _run([find_uv(), "pip", "install", "--python", py, "-c", _constraints(tmp_path, env), wheel], tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = _run([py, "-c", f"import {IMPORT_NAME}, {IMPORT_NAME}.api as api; print({IMPORT_NAME}.__file__); "
                        f"print({IMPORT_NAME}.assert_fusion is api.assert_fusion)"], elsewhere, env)
    assert p.returncode == 0, p.stderr
    where, same = p.stdout.split()
    assert Path(where).is_relative_to(venv) and same == "True"
    p = _run([py, "-c", "import harness"], elsewhere, env)
    assert p.returncode != 0 and "No module named 'harness'" in p.stderr
    # the pytest plugin is registered under the new name
    p = _run([py, "-c", "from importlib.metadata import entry_points; print([e.value for e in entry_points(group='pytest11')])"],
             elsewhere, env)
    assert f"'{IMPORT_NAME}.cli.pytest_plugin'" in p.stdout

    p = _run([venv / "bin" / "fp8-check", "--version"], elsewhere, env)
    assert p.returncode == 0, p.stderr
    jax, jaxlib, plugin = (_version_of(py, d, elsewhere, env) for d in ("jax", "jaxlib", "jax-cuda12-plugin"))
    assert p.stdout.startswith(f"fp8-check 0.1.0 (jax {jax}, jaxlib {jaxlib}, CUDA plugin {plugin}; Python "), p.stdout
    p = _run([venv / "bin" / "fp8-check"], elsewhere, env)
    assert p.returncode == 0 and p.stdout.startswith("usage: fp8-check"), p.stdout + p.stderr


def _git_copy_of_the_checkout(dest: Path, env: dict) -> str:
    """A git repository holding this checkout's files as they are now (tracked and untracked, not ignored): the
    stand-in for the published one."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout
    for rel in filter(None, files.decode().split("\0")):
        src, dst = REPO / rel, dest / rel
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the work tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst, follow_symlinks=False)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "stand-in"]):
        subprocess.run(git + cmd, check=True, env=env)
    return subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


class _ActionsAPI:
    """A stand-in for the GitHub Actions API on 127.0.0.1: `GET /repos/caller/project/actions/runs/42` answers
    `run` when the request's token is `token` (or, with `anonymous`, has none), 403 otherwise; `seen` records
    (path, Authorization header) of every request."""

    def __init__(self, run: dict, token: str = "good-token", anonymous: bool = True):
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.run, self.token, self.anonymous, self.seen = run, token, anonymous, []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                auth = self.headers.get("Authorization")
                api.seen.append((self.path, auth))
                ok = self.path == "/repos/caller/project/actions/runs/42" and (
                    auth == f"Bearer {api.token}" if auth else api.anonymous)
                body = json.dumps(api.run if ok else {"message": "Resource not accessible by integration"}).encode()
                self.send_response(200 if ok else 403)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _reusable_step(name: str, job: str = "resolve") -> dict:
    reusable = yaml.safe_load((REPO / ".github" / "workflows" / "fp8-check.yml").read_text())
    [step] = [s for s in reusable["jobs"][job]["steps"] if s.get("name") == name]
    return step


_OUTPUTS = itertools.count()


def _resolve(tmp_path: Path, api: _ActionsAPI, server: Path, requirement: str = "", token: str = "good-token"):
    """Run the reusable workflow's `Which fp8-check to install` step (`shell: python`, standard library only, so
    with the base interpreter in isolated mode) as GitHub would for run 42 of caller/project; its
    (process, `requirement` output)."""
    step = _reusable_step("Which fp8-check to install")
    assert step["shell"] == "python"
    out = tmp_path / f"github-output-{next(_OUTPUTS)}"  # a fresh $GITHUB_OUTPUT for each step run
    env = dict(_env(), REQUIREMENT=requirement, TOKEN=token, GITHUB_API_URL=api.url, GITHUB_SERVER_URL=f"file://{server}",
               GITHUB_REPOSITORY="caller/project", GITHUB_RUN_ID="42", GITHUB_OUTPUT=str(out))
    p = _run([getattr(sys, "_base_executable", sys.executable), "-I", "-c", step["run"]], tmp_path, env, timeout=120)
    lines = out.read_text().splitlines() if out.exists() else []
    values = dict(line.split("=", 1) for line in lines)
    return p, values.get("requirement")


@pytest.mark.slow
@pytest.mark.network
def test_the_requirement_init_writes_installs(tmp_path):
    env = _env()
    server = tmp_path / "server"  # GITHUB_SERVER_URL: file://server, so repositories are server/OWNER/NAME
    repo = server / "someone" / "fp8-check"
    commit = _git_copy_of_the_checkout(repo, env)
    constraints = _constraints(tmp_path, env)
    # 1. a user installs fp8-check from the repository's git URL …
    first = _venv(tmp_path, "first", env)
    p = _run([find_uv(), "pip", "install", "--python", first / "bin" / "python", "-c", constraints,
              f"fp8-check[flax] @ git+file://{repo}@{commit}"], tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    # 2. … and scaffolds a project: the CI installs the wheel init re-packs from that installation and commits
    project = tmp_path / "project"
    p = _run([first / "bin" / "fp8-check", "init", project], tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    workflow = yaml.safe_load((project / ".github" / "workflows" / "fp8-check.yml").read_text())
    caller = workflow["jobs"]["fp8-check"]
    assert caller["uses"] == "./.github/workflows/fp8-check-reusable.yml"
    assert caller["with"]["requirement"].startswith(".github/fp8-check/fp8_check-0.1.0-")
    assert (project / caller["with"]["requirement"]).is_file()
    assert caller["permissions"] == {"contents": "read", "actions": "read"}
    # 3. the reusable workflow's DEFAULT requirement (input left empty): the repository and commit it was called
    #    at, from the calling run's `referenced_workflows` (a stand-in Actions API) — the same URL init wrote
    api = _ActionsAPI({"id": 42, "referenced_workflows": [
        {"path": "someone/fp8-check/.github/workflows/fp8-check.yml@refs/tags/v1", "sha": commit, "ref": "refs/tags/v1"},
        {"path": "caller/project/.github/workflows/lint.yml@refs/heads/main", "sha": "0" * 40}]})
    try:
        p, requirement = _resolve(tmp_path, api, server)
        assert p.returncode == 0, p.stdout + p.stderr
        assert requirement == f"fp8-check[flax] @ git+file://{repo}@{commit}", (requirement, p.stdout)
        assert api.seen == [("/repos/caller/project/actions/runs/42", "Bearer good-token")]
    finally:
        api.close()
    # 4. the install step, run as a script with that requirement, installs an importable fp8_check
    step = _reusable_step("Install fp8-check", job="matrix")
    assert step["env"]["REQUIREMENT"] == "${{ needs.resolve.outputs.requirement }}"
    runner_temp, github_path = tmp_path / "runner-temp", tmp_path / "github-path"
    runner_temp.mkdir()
    step_env = dict(env, REQUIREMENT=requirement, RUNNER_TEMP=str(runner_temp), GITHUB_PATH=str(github_path),
                    UV_CONSTRAINT=str(constraints), GITHUB_WORKSPACE=str(tmp_path))
    p = _run(["bash", "-eo", "pipefail", "-c", step["run"]], tmp_path, step_env)
    assert p.returncode == 0, p.stdout + p.stderr
    bin_dir = Path(github_path.read_text().strip())
    p = _run([bin_dir / "python", "-c", f"import {IMPORT_NAME}; print({IMPORT_NAME}.__file__)"], tmp_path, env)
    assert p.returncode == 0 and str(runner_temp) in p.stdout, p.stdout + p.stderr
    p = _run([bin_dir / "fp8-check", "--version"], tmp_path, env)
    assert p.returncode == 0 and p.stdout.startswith("fp8-check 0.1.0 (jax "), p.stdout + p.stderr
    # the optional issues job: its step installs fp8-check without JAX and files a body through `gh`
    #  (a stand-in on PATH that records its arguments); it installs what the first job resolved
    issues_step = _reusable_step("Open or update issues", job="issues")
    assert issues_step["env"]["REQUIREMENT"] == "${{ needs.resolve.outputs.requirement }}"
    work = tmp_path / "issues-job"
    (work / "reports" / "issues").mkdir(parents=True)
    (work / "reports" / "issues" / "c--h100--cublas.md").write_text(
        "# [XLA:GPU] a title\n\nbody\n<!-- fp8-check-issue: 0123456789abcdef -->\n")
    gh_log, gh = tmp_path / "gh.log", tmp_path / "gh-bin" / "gh"
    gh.parent.mkdir()
    gh.write_text(f"#!/bin/sh\necho \"$*\" >> {gh_log}\n[ \"$1 $2\" = \"issue list\" ] && echo '[]'\nexit 0\n")
    gh.chmod(0o755)
    temp2 = tmp_path / "runner-temp-2"
    temp2.mkdir()
    p = _run(["bash", "-eo", "pipefail", "-c", issues_step["run"]], work,
             dict(step_env, RUNNER_TEMP=str(temp2), LABEL="fp8-check", PATH=f"{gh.parent}{os.pathsep}{env['PATH']}"))
    assert p.returncode == 0, p.stdout + p.stderr
    calls = gh_log.read_text().splitlines()
    assert calls[0].startswith("issue list") and calls[1].startswith("issue create --title [XLA:GPU] a title --body-file")
    assert not (temp2 / "fp8-check" / "lib" / "python3.12" / "site-packages" / "jax").exists()  # no JAX needed


def test_the_default_requirement_falls_back_to_anonymous_and_fails_in_one_line(tmp_path):
    """The resolve step alone (no install): a token without `actions: read` is refused, so the run is read
    anonymously (public repositories); when that fails too, or the run does not call fp8-check.yml exactly
    once, one `::error::` line says what to grant or set; an explicit requirement is passed through untouched."""
    sha = "a" * 40
    server = tmp_path / "server"
    called = {"path": "someone/fp8-check/.github/workflows/fp8-check.yml@main", "sha": sha, "ref": "refs/heads/main"}
    api = _ActionsAPI({"referenced_workflows": [called]}, token="a-token-with-actions-read")
    try:
        p, requirement = _resolve(tmp_path, api, server, token="a-token-without-it")
        assert p.returncode == 0, p.stdout + p.stderr
        assert requirement == f"fp8-check[flax] @ git+file://{server}/someone/fp8-check@{sha}"
        assert [auth for _, auth in api.seen] == ["Bearer a-token-without-it", None]

        api.anonymous, api.seen[:] = False, []
        p, requirement = _resolve(tmp_path, api, server, token="a-token-without-it")
        assert p.returncode == 2 and requirement is None
        [line] = p.stdout.splitlines()
        assert line.startswith("::error::cannot tell which fp8-check to install: reading this run from the Actions "
                               "API failed (with the job's token: HTTP Error 403") and "anonymously: HTTP Error 403" in line
        assert "actions: read" in line and "set the 'requirement' input" in line and not p.stderr

        api.anonymous = True
        for workflows, count in (([], 0), ([called, dict(called, sha="b" * 40)], 2)):
            api.run = {"referenced_workflows": workflows}
            p, requirement = _resolve(tmp_path, api, server)
            assert p.returncode == 2 and requirement is None
            assert p.stdout.startswith(f"::error::cannot tell which fp8-check to install: this run calls {count} "
                                       "fp8-check.yml workflows"), p.stdout

        api.seen[:] = []
        p, requirement = _resolve(tmp_path, api, server, requirement="fp8-check[flax] @ https://example.invalid/x.whl")
        assert p.returncode == 0 and requirement == "fp8-check[flax] @ https://example.invalid/x.whl"
        assert api.seen == []
    finally:
        api.close()
