"""Hardening round 6 (issue 53): every user-supplied file read by the one reader (core/_files.py), and the smaller
items of the round. Each test here failed before its fix (docs/hardening.md, round 6)."""

from __future__ import annotations

import os
import shutil
from importlib.metadata import version

import pytest

from fp8_check.compile import find_results
from fp8_check.targets import AutotuneResultsError, _autotune_results as ar
from fp8_check.verdict import _golden as golden_mod
from tests.conftest import REPO

SECRET = "ghp_fp8chkRound6Secret0123"
# A file like an environment: one long line, the secret far from its start; invalid YAML, JSON and text proto
# just after the secret (where a parser's error quotes the line)
LEAKY = "IS_SANDBOX=yes" + "A" * 200 + f" T6_SECRET={SECRET}: HOME: /root\n"


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The secret in the environment (so in /proc/self/environ) and in a file outside every home."""
    monkeypatch.setenv("T6_SECRET", SECRET)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "leak.txt").write_text(LEAKY)
    return {"environ": "/proc/self/environ", "file": str(outside / "leak.txt")}


def _clean(code, out, err, *, lines=1):
    assert SECRET not in out + err and "IS_SANDBOX" not in out + err, (out, err)
    assert code == 2, (code, out, err)
    assert err.count("\n") == lines, err


# kind -> (the name of the link, the command that reads it)
KINDS = {
    "case file": ("cases.yaml", lambda p: ["list", p]),
    "results file": ("results.json", lambda p: ["report", p, "-o", str(p) + ".html"]),
    "results file (markdown)": ("results.json", lambda p: ["report", p, "--markdown", "x"]),
    "matrix file": ("matrix.json", lambda p: ["matrix", "--merge", p]),
    "target spec": ("mine.txtpb", lambda p: ["run", "--target", p, str(REPO / "cases" / "seed.yaml")]),
    "autotune results": ("0.12.0.1.txt", lambda p: ["fidelity", "--autotune-results", p]),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("to", ["environ", "file"])
def test_a_linked_user_file_prints_no_byte_of_the_environment_or_the_file(tmp_path, planted, run_cli, kind, to):
    name, argv = KINDS[kind]
    link = tmp_path / "proj" / name
    link.parent.mkdir()
    os.symlink(planted[to], link)
    code, out, err = run_cli(*argv(str(link)), cwd=tmp_path / "proj")
    _clean(code, out, err)


def test_a_requirement_file_linked_out_prints_nothing_of_it(tmp_path, planted, run_cli):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "cases.yaml").write_text("cases:\n- id: c\n  kind: python\n  callable: m:f\n"
                                     "  args: [{name: x, shape: [4, 4], dtype: bfloat16}]\n  requirements: reqs.txt\n")
    for to in planted.values():
        (proj / "reqs.txt").unlink(missing_ok=True)
        os.symlink(to, proj / "reqs.txt")
        _clean(*run_cli("list", proj / "cases.yaml", cwd=proj))


@pytest.mark.parametrize("to", ["environ", "file"])
def test_a_committed_autotune_file_linked_out_of_goldens_is_refused_without_its_content(tmp_path, planted, to):
    path = ar.results_path(tmp_path / "goldens", "h100", "0.12.0.1")
    path.parent.mkdir(parents=True)
    os.symlink(planted[to], path)
    with pytest.raises(AutotuneResultsError) as info:
        find_results("h100", "0.12.0.1", tmp_path / "goldens")
    text = str(info.value)
    assert SECRET not in text and "IS_SANDBOX" not in text and "\n" not in text
    assert "outside the goldens folder" in text or "kernel file" in text, text


@pytest.mark.parametrize("to", ["environ", "file"])
def test_run_with_a_committed_autotune_file_linked_out_is_one_line_and_exit_2(tmp_path, planted, run_cli, to):
    """The committed file as `run --profile default` meets it (#58 reads goldens/<target>/autotune/<jax>.txt):
    refused before any compile, one line naming it, no byte of what it links to."""
    proj = tmp_path / "proj"
    shutil.copytree(REPO / "cases", proj / "cases", ignore=shutil.ignore_patterns("*.txt"))
    path = ar.results_path(proj / "goldens", "h100", version("jax"))
    path.parent.mkdir(parents=True)
    os.symlink(planted[to], path)
    code, out, err = run_cli("run", "cases/seed.yaml", "--goldens", "goldens", "--profile", "default",
                             "--target", "h100", "-k", "seed_relu_f32", "--json", "r.json", cwd=proj)
    _clean(code, out, err)
    assert "outside the goldens folder" in err or "kernel file" in err, err


@pytest.mark.parametrize("to", ["environ", "file"])
def test_a_golden_linked_out_of_goldens_is_refused_without_its_content(tmp_path, planted, to):
    root = tmp_path / "goldens"
    path = golden_mod.path_for(root, "c", "h100", "pinned", "deviceless")
    path.parent.mkdir(parents=True)
    os.symlink(planted[to], path)
    with pytest.raises(golden_mod.GoldenError) as info:
        golden_mod.load(path)
    text = str(info.value)
    assert SECRET not in text and "IS_SANDBOX" not in text and "\n" not in text, text


def test_an_autotune_file_that_does_not_parse_quotes_only_a_short_excerpt(tmp_path, planted):
    bad = tmp_path / "bad.txt"
    bad.write_text(LEAKY)  # one long line that is not a text proto
    with pytest.raises(AutotuneResultsError) as info:
        ar.load_results(bad)
    text = str(info.value)
    assert SECRET not in text and "line 1, column" in text and len(text) < len(str(bad)) + 120, text


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe\x00binary", "not UTF-8 text"),
    (None, "larger than the"),
])
def test_binary_and_huge_autotune_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "x.txt"
    if content is None:
        with open(path, "wb") as f:  # sparse: 3 GB on paper, nothing on disk
            f.truncate(3 * 2**30)
    else:
        path.write_bytes(content)
    with pytest.raises(AutotuneResultsError, match=message):
        ar.load_results(path)


def test_a_fifo_is_not_read(tmp_path):
    import subprocess
    import sys

    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    probe = ("import sys\nfrom fp8_check.core import ReadError, load_json\n"
             "try:\n    load_json(sys.argv[1])\nexcept ReadError as e:\n    print(e)\n")
    # in a child with a deadline: opening a FIFO with no writer blocks forever (what the old reader did)
    proc = subprocess.run([sys.executable, "-c", probe, str(fifo)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "not a regular file" in proc.stdout, (proc.stdout, proc.stderr)


def test_duplicate_json_keys_are_refused(tmp_path):
    from fp8_check.core import ReadError, load_json

    path = tmp_path / "r.json"
    path.write_text('{"schema": "a", "schema": "b"}')
    with pytest.raises(ReadError, match="duplicate key 'schema'"):
        load_json(path)


# ------------------------------------------------------------ S2: the GPU session writes only its own folders

def _checkout_tree() -> dict:
    """Every file of the checkout git knows of (tracked or not ignored), byte for byte, and the top-level names
    (.git included): what `--out .` replaced."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True, timeout=60).stdout.decode().split("\0")
    tree = {p: (REPO / p).read_bytes() for p in sorted(filter(None, listed)) if (REPO / p).is_file()}
    tree["<top>"] = repr(sorted(p.name for p in REPO.iterdir())).encode()
    return tree


def _session_script(out: str, cwd, *extra: str):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_session.sh"), "--dry-run", "--out", out, *extra],
                          capture_output=True, text=True, timeout=120, env={**env, "PYTHON": sys.executable}, cwd=cwd)


@pytest.mark.parametrize("out", ["USER", ".", "", "docs", "REPO", "PARENT"])
def test_the_session_refuses_an_out_it_did_not_write_before_any_step(tmp_path, out):
    user = tmp_path / "mywork"
    user.mkdir()
    (user / "notes.txt").write_text("the user's notes\n")
    out = {"USER": str(user), "REPO": str(REPO), "PARENT": str(REPO.parent)}.get(out, out)
    before, before_user, before_tmp = _checkout_tree(), {p.name for p in tmp_path.iterdir()}, (user / "notes.txt").read_bytes()
    proc = _session_script(out, tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "(budget" not in proc.stdout and proc.stderr.count("\n") == 1 and "--out" in proc.stderr, proc.stderr
    assert _checkout_tree() == before
    assert {p.name for p in tmp_path.iterdir()} == before_user and (user / "notes.txt").read_bytes() == before_tmp
    assert not list(REPO.glob(".*.session-*")) and not list(REPO.parent.glob(".*.session-*"))


def test_a_failed_dry_run_moves_nothing(tmp_path, monkeypatch, capsys):
    from fp8_check.gpu import session

    out = tmp_path / "gs"
    monkeypatch.setenv("FP8_CHECK_SESSION_TARGET", "h100")
    steps = (session.Step("gpu-tests", 0.01, "a budget too small to import pytest"),)
    assert session.session(out, dry=True, steps=steps) == 1
    assert not out.exists()
    [fresh] = [p for p in tmp_path.iterdir() if p.name.startswith(".gs.session-")]
    assert (fresh / session.MARKER).is_file()


def test_a_session_replaces_only_a_folder_a_session_wrote(tmp_path, monkeypatch):
    from fp8_check.gpu import session

    monkeypatch.setenv("FP8_CHECK_SESSION_TARGET", "h100")
    out = tmp_path / "gs"
    out.mkdir()
    (out / session.MARKER).write_text("x")
    (out / "old.md").write_text("an earlier session\n")
    monkeypatch.setattr(session, "run_session", lambda fresh, *a, **k: [{"name": "environment", "status": "ok"}])
    assert session.session(out, dry=True) == 0
    assert not (out / "old.md").exists() and (out / session.MARKER).is_file()


@pytest.mark.parametrize("step", ["environment", "calibrate"])
def test_a_step_runs_only_inside_a_session(tmp_path, step):
    before = _checkout_tree()
    proc = _session_script(str(tmp_path / "x"), tmp_path, "--step", step)
    assert proc.returncode == 2 and "runs only inside a session" in proc.stderr, proc.stdout + proc.stderr
    # without --out: the committed docs/gpu-session was the default
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_session.sh"), "--step", step, "--dry-run"],
                          capture_output=True, text=True, timeout=120, env={**env, "PYTHON": sys.executable})
    assert proc.returncode == 2 and "runs only inside a session" in proc.stderr, proc.stdout + proc.stderr
    assert _checkout_tree() == before and not (tmp_path / "x").exists()


# ------------------------------------------------------------ S3: matrix --merge keeps every result

def _matrix_file(path, jax, rows, targets=("h100",), status="ran"):
    """A matrix file with one version: rows of (case, target, code)."""
    from fp8_check.matrix import Matrix, Status, write
    from fp8_check.matrix._document import VersionEntry
    from fp8_check.verdict import Outcome, _outcome as outcome

    entry = VersionEntry(jax, Status(status), environment={"jax": jax, "targets": list(targets)}, outcomes=[
        Outcome(c, t, "cublas", "deviceless", jax, outcome.code(code), reason="" if code == "PASS" else "signature differs")
        for c, t, code in rows])
    write(path, Matrix([entry], "deviceless", list(targets), ["cublas"]))
    return path


def test_two_artifacts_of_one_version_with_different_outcomes_are_refused_naming_both(tmp_path, run_cli):
    a = _matrix_file(tmp_path / "a.json", "0.12.0.1", [("c1", "h100", "PASS")])
    b = _matrix_file(tmp_path / "b.json", "0.12.0.1", [("c1", "h100", "FAIL")])
    code, out, err = run_cli("matrix", "--merge", a, b, "--out", tmp_path / "m.json", "--no-html", cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1, (code, out, err)
    assert str(a) in err and str(b) in err and "c1" in err, err
    assert not (tmp_path / "m.json").exists()


def test_the_same_result_twice_is_one_result(tmp_path, run_cli):
    a = _matrix_file(tmp_path / "a.json", "0.12.0.1", [("c1", "h100", "FAIL")])
    b = _matrix_file(tmp_path / "b.json", "0.12.0.1", [("c1", "h100", "FAIL")])
    code, out, err = run_cli("matrix", "--merge", a, b, "--out", tmp_path / "m.json", "--no-html", cwd=tmp_path)
    import json

    doc = json.loads((tmp_path / "m.json").read_text())
    assert [len(v["results"]) for v in doc["versions"]] == [1] and code == 1, (code, out, err)


def test_one_version_from_two_targets_keeps_both_targets(tmp_path, run_cli):
    import json

    a = _matrix_file(tmp_path / "a.json", "0.12.0.1", [("c1", "h100", "PASS")], targets=("h100",))
    b = _matrix_file(tmp_path / "b.json", "0.12.0.1", [("c1", "b200", "FAIL")], targets=("b200",))
    code, out, err = run_cli("matrix", "--merge", a, b, "--out", tmp_path / "m.json", "--no-html", cwd=tmp_path)
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["targets"] == ["h100", "b200"]
    [v] = doc["versions"]
    assert sorted((r["target"], r["outcome"]) for r in v["results"]) == [("b200", "FAIL"), ("h100", "PASS")]
    assert code == 1, (code, out, err)  # the b200 FAIL is not dropped


def test_a_merge_of_nothing_is_not_green(tmp_path, run_cli):
    from fp8_check.matrix import Matrix, write

    write(tmp_path / "empty.json", Matrix([], "deviceless", ["h100"], ["cublas"]))
    code, out, err = run_cli("matrix", "--merge", tmp_path / "empty.json", "--out", tmp_path / "m.json", "--no-html",
                             cwd=tmp_path)
    assert code == 2 and "nothing to merge" in err, (code, out, err)
    (tmp_path / "d.json").mkdir()
    code, out, err = run_cli("matrix", "--merge", tmp_path / "d.json", "--out", tmp_path / "m.json", "--no-html",
                             cwd=tmp_path)
    assert code == 2 and "not a regular file" in err and err.count("\n") == 1, (code, out, err)


# ------------------------------------------------------------ S4: a signal during an environment build

def _hanging_uv(tmp_path):
    """A stand-in uv (what is tested is fp8-check's signal handling, not uv): it starts a child in its own process
    group, writes both pids, and hangs."""
    import sys

    pids = tmp_path / "uv.pids"
    path = tmp_path / "bin" / "uv"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport os, subprocess, time\n"
                    "c = subprocess.Popen(['sleep', '300'])\n"
                    f"open({str(pids) + '.tmp'!r}, 'w').write(f'{{os.getpid()}} {{c.pid}}')\n"
                    f"os.rename({str(pids) + '.tmp'!r}, {str(pids)!r})\n"
                    "time.sleep(300)\n")
    path.chmod(0o755)
    return path, pids


def _alive(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


REQ_CASE = """
cases:
- id: needs_six
  kind: python
  callable: mod:step
  args: [{name: x, shape: [16, 16], dtype: bfloat16}]
  requirements: reqs.txt
"""

COMMANDS = {
    "matrix": lambda t: ["matrix", str(REPO / "cases" / "seed.yaml"), "--jax", "0.6.1", "-k", "seed_plain_f32",
                         "--profile", "cublas", "--out", str(t / "m.json"), "--no-html"],
    "bisect": lambda t: ["bisect", "seed_plain_f32", str(REPO / "cases" / "seed.yaml"), "--test", "0.6.1",
                         "--criterion", "compiles", "--good", "0.6.2"],
    "reduce": lambda t: ["reduce", "seed_plain_f32", str(REPO / "cases" / "seed.yaml"), "--jax", "0.6.1",
                         "--good", "0.6.2"],
    "run": lambda t: ["run", "--mode", "deviceless", "--json", str(t / "r.json"), str(t / "proj" / "cases.yaml")],
}


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", COMMANDS)
def test_a_signal_during_an_environment_build_stops_the_command_and_uv_within_two_seconds(tmp_path, command, signame):
    import signal
    import subprocess
    import sys
    import time

    uv, pids = _hanging_uv(tmp_path)
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "cases.yaml").write_text(REQ_CASE)
    (proj / "mod.py").write_text("import jax.numpy as jnp\n\ndef step(x):\n    return jnp.dot(x, x)\n")
    (proj / "reqs.txt").write_text("six\n")
    env = dict(os.environ, FP8_CHECK_UV=str(uv), FP8_CHECK_CACHE=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "fp8_check.cli.main", *COMMANDS[command](tmp_path)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120  # a hang guard for the start (JAX's import), not a speed claim
        while not pids.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pids.exists(), proc.communicate(timeout=30)
        uv_pid, child = map(int, pids.read_text().split())
        t0 = time.monotonic()
        proc.send_signal(getattr(signal, signame))
        while (proc.poll() is None or _alive(uv_pid) or _alive(child)) and time.monotonic() - t0 < 10:
            time.sleep(0.02)
        took = time.monotonic() - t0
        assert proc.poll() is not None and not _alive(uv_pid) and not _alive(child), (took, proc.poll())
        assert took < 2.0, took
        assert proc.returncode in (128 + getattr(signal, signame), 130), proc.communicate()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        if pids.exists():
            for pid in map(int, pids.read_text().split()):
                if _alive(pid):
                    os.kill(pid, 9)


# ------------------------------------------------------------ results without a recorded spec

def _no_spec_results(path, schema="fp8-check/results/2"):
    import json

    path.write_text(json.dumps({"schema": schema, "environment": {"jax": "0.12.0.1"}, "results": [
        {"case": "c", "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": "0.12.0.1", "outcome": "FAIL",
         "reason": "signature differs", "source": "import jax\n", "hlo": "HloModule m\n"}]}))
    return path


@pytest.mark.parametrize("schema", ["fp8-check/results/1", "fp8-check/results/2"])
def test_results_without_a_spec_are_reported_with_no_spec_recorded(tmp_path, run_cli, schema):
    res = _no_spec_results(tmp_path / "r.json", schema)
    code, out, err = run_cli("report", res, "-o", tmp_path / "r.html", cwd=tmp_path)
    assert code == 0 and "Traceback" not in err, err
    assert "no spec recorded" in (tmp_path / "r.html").read_text()
    code, out, err = run_cli("report", res, "--markdown", "c", cwd=tmp_path)
    assert code == 0 and "no spec recorded" in out, err
    m = _matrix_file(tmp_path / "m.json", "0.12.0.1", [("c", "h100", "FAIL")])
    import json

    doc = json.loads(m.read_text())
    doc["versions"][0]["results_file"] = str(res)
    m.write_text(json.dumps(doc))
    code, out, err = run_cli("ci", "summary", m, "--issues-dir", tmp_path / "issues", "--summary-file",
                             tmp_path / "summary.md", cwd=tmp_path)
    assert "Traceback" not in err and code in (0, 1), (code, err)


@pytest.mark.parametrize("command", ["matrix", "bisect"])
def test_a_cache_nothing_can_be_written_in_is_one_line_exit_3(tmp_path, run_cli, monkeypatch, command):
    # root writes into a chmod-ed folder: the environments folder is a link to one nobody can create files in
    (tmp_path / "cache").mkdir()
    os.symlink("/proc/self", tmp_path / "cache" / "envs")
    monkeypatch.setenv("FP8_CHECK_CACHE", str(tmp_path / "cache"))
    code, out, err = run_cli(*COMMANDS[command](tmp_path), cwd=tmp_path)
    assert code == 3 and "Traceback" not in err, (code, err)
    [line] = [x for x in err.splitlines() if "cannot write the environments folder" in x]
    assert str(tmp_path / "cache" / "envs") in line and "FP8_CHECK_CACHE" in line


# ------------------------------------------------------------ the escaping sweep

EVIL = "x`</code><script>alert(1)</script> @octocat #12 [a](javascript:x) ${{ secrets.T }}\n::error::pwned"


def _evil_results(path, case="evil_case"):
    import json

    result = {"case": case, "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": "0.12.0.1",
              "outcome": "FAIL", "reason": EVIL, "description": EVIL, "file": EVIL, "known_issue": None,
              "diffs": [{"path": EVIL, "expected": EVIL, "found": EVIL}], "source": "import jax\n", "hlo": EVIL,
              "yaml": EVIL}
    path.write_text(json.dumps({"schema": "fp8-check/results/2", "environment": {"jax": "0.12.0.1"},
                                "results": [result]}))
    return path


def _inert_markdown(text: str, where: str) -> None:
    """Nothing live outside code: code spans and fenced blocks show their text as written (their own escaping is
    that they stay closed: a backtick inside one must not end it)."""
    import re

    prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1[ \t]*$", "", text)  # fenced blocks
    prose = re.sub(r"`[^`\n]*`", "", prose)  # inline code spans (one line each: code_span)
    assert "<script" not in prose and "</code>" not in prose, (where, prose)
    assert not re.search(r"(?<![\w\u200b])@octocat", prose), (where, prose)
    assert not re.search(r"(?<!\u200b)#12\b", prose), (where, prose)
    assert not re.search(r"(?m)^[ \t]*::", text), (where, text)
    assert not re.search(r"(?<!\\)\]\(javascript", prose), (where, prose)


def test_every_field_of_a_crafted_result_is_escaped_in_every_output(tmp_path, run_cli):
    import re

    res = _evil_results(tmp_path / "r.json")
    code, out, err = run_cli("report", res, "-o", tmp_path / "r.html", cwd=tmp_path)
    assert code == 0, err
    html = (tmp_path / "r.html").read_text()
    assert "<script>alert(1)</script>" not in html and "</code><script" not in html
    code, out, err = run_cli("report", res, "--markdown", "evil_case", cwd=tmp_path)
    assert code == 0, err
    # an issue body: nothing in it is live (no mention, no reference, no HTML, no link, no workflow command)
    _inert_markdown(out, "report --markdown")
    m = _matrix_file(tmp_path / "m.json", "0.12.0.1", [("evil_case", "h100", "FAIL")])
    import json

    doc = json.loads(m.read_text())
    doc["versions"][0]["results_file"] = str(res)
    doc["versions"][0]["results"][0].update(reason=EVIL, description=EVIL, file=EVIL,
                                            diffs=[{"path": EVIL, "expected": EVIL, "found": EVIL}])
    m.write_text(json.dumps(doc))
    code, out, err = run_cli("ci", "summary", m, "--issues-dir", tmp_path / "issues", "--summary-file",
                             tmp_path / "summary.md", cwd=tmp_path)
    assert "Traceback" not in err, err
    assert not re.search(r"(?m)^[ \t]*::error::pwned", out + err), out + err
    _inert_markdown((tmp_path / "summary.md").read_text(), "job summary")
    for body in (tmp_path / "issues").glob("*.md"):
        _inert_markdown(body.read_text(), body.name)
    code, out, err = run_cli("matrix", "--merge", m, "--out", tmp_path / "merged.json", "--no-html", cwd=tmp_path)
    assert not re.search(r"(?m)^[ \t]*::error::pwned", out), out


def test_fidelity_markdown_carries_no_raw_html_from_case_names_and_errors():
    from fp8_check.gpu._fidelity import Cell, comparisons, markdown

    cells = [Cell("<b>c</b>", left, right, "error", detail=EVIL) for _, left, right in comparisons()]
    md = markdown(cells, {"left": EVIL, "right": "x"})
    _inert_markdown(md, "fidelity.md")
    assert "<b>" not in md


def test_paths_with_line_breaks_print_no_workflow_command_lines(tmp_path, run_cli):
    import re

    evil = tmp_path / "out\n::error::pwned"
    code, out, err = run_cli("matrix", "--merge", _matrix_file(tmp_path / "a.json", "0.12.0.1", [("c", "h100", "PASS")]),
                             "--out", evil / "m.json", "--no-html", cwd=tmp_path)
    assert not re.search(r"(?m)^[ \t]*::", out + err), out + err
    code, out, err = run_cli("init", evil, "--requirement", "fp8-check==1.0", cwd=tmp_path)
    assert not re.search(r"(?m)^[ \t]*::", out + err), out + err


@pytest.mark.parametrize("requirement", ["fp8-check @ ${{ secrets.TOKEN }}", "fp8-check\n  run: curl x", ""])
def test_init_refuses_a_requirement_with_an_expression_or_a_line_break(tmp_path, run_cli, requirement):
    code, out, err = run_cli("init", tmp_path / "proj", "--requirement", requirement, cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1 and "--requirement" in err, (code, out, err)
    assert not (tmp_path / "proj" / ".github").exists()


# ------------------------------------------------------------ smaller items

def test_a_ten_thousand_case_file_is_no_alias_bomb(tmp_path, run_cli):
    cases = "".join(f"- id: c{i}\n  kind: library\n  pattern: plain\n  m: 16\n  n: 16\n  k: 16\n"
                    "  dtypes: {a: float8_e4m3fn, b: float8_e4m3fn, out: float32}\n" for i in range(10_000))
    path = tmp_path / "many.yaml"
    path.write_text("cases:\n" + cases)
    from fp8_check.core import _safe_yaml as safe_yaml

    doc = safe_yaml.load(path.read_text(), safe_yaml.LineLoader)  # was: LimitError "... (an alias bomb?)"
    assert len(doc["cases"]) == 10_000


def test_an_alias_bomb_is_still_one(tmp_path):
    from fp8_check.core import _safe_yaml as safe_yaml

    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdef", "bcdefg"))
    with pytest.raises(safe_yaml.LimitError, match="alias bomb"):
        safe_yaml.load(bomb)


def test_a_fifo_as_a_matrix_results_file_does_not_hang_the_report(tmp_path):
    import json
    import subprocess
    import sys

    fifo = tmp_path / "results-jax-0.12.0.1.json"
    os.mkfifo(fifo)
    m = _matrix_file(tmp_path / "m.json", "0.12.0.1", [("c", "h100", "PASS")])
    doc = json.loads(m.read_text())
    doc["versions"][0]["results_file"] = str(fifo)
    m.write_text(json.dumps(doc))
    for argv in (["report", str(m), "-o", str(tmp_path / "r.html")],
                 ["ci", "summary", str(m), "--summary-file", str(tmp_path / "s.md"), "--issues-dir", str(tmp_path / "i")]):
        proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", *argv], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)  # a hang guard: a FIFO is never opened
        assert "Traceback" not in proc.stderr and proc.returncode in (0, 1, 2), proc.stderr


def test_the_allowed_targets_message_names_the_tpu_targets(tmp_path, run_cli):
    from fp8_check.targets import platform_target_names

    path = tmp_path / "c.yaml"
    path.write_text("cases:\n- id: c\n  dequant: float32\n  out_dtype: float32\n  targets: [h9000]\n")
    code, out, err = run_cli("list", path, cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1, err
    assert all(t in err for t in platform_target_names()), err


def test_a_crashed_workers_reason_says_why_on_its_first_line(tmp_path, run_cli):
    import json

    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "cases.yaml").write_text("cases:\n- id: aborts\n  kind: python\n  callable: mod:step\n"
                                     "  args: [{name: x, shape: [16, 16], dtype: bfloat16}]\n")
    (proj / "mod.py").write_text("import os\nimport sys\n\ndef step(x):\n"
                                 "    print('the case aborts the worker', file=sys.stderr, flush=True)\n    os.abort()\n")
    code, out, err = run_cli("run", "--mode", "deviceless", "--profile", "cublas", "--json", tmp_path / "r.json",
                             proj / "cases.yaml", cwd=proj)
    [r] = json.loads((tmp_path / "r.json").read_text())["results"]
    first = r["reason"].splitlines()[0]
    assert "status -6" in first and not first.rstrip().endswith(":") and len(first) > len("worker exited with status -6:") + 5, r["reason"]
