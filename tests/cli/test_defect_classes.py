"""Hardening, round 3 (issue 22): one test per defect class, through the real CLI.

The data-driven corpus of hostile inputs is tests/hostile/ (tests/cli/test_hostile.py); the tests here
need more than one input file, a process of their own, or a real compile.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from fp8_check.targets import TARGET_DIR
from tests.conftest import REPO, write_cases

DL = ("--mode", "deviceless")
ARGS = "args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]"
SIG = {"kernels": 1, "launches": ["gemm __cublas$lt$matmul$f8"], "gemms": [], "unfused": []}


def _matrix(rows: list[tuple[str, str, str, str]], versions=(("0.7.0", "ran"),)) -> dict:
    entries = []
    for jax, status in versions:
        results = [{"case": c, "target": t, "profile": p, "mode": m, "jax": jax, "outcome": "PASS", "reason": "",
                    "signature": SIG, "diffs": []} for c, t, p, m in rows] if status == "ran" else []
        entries.append({"jax": jax, "status": status, "error": "uv: no such version" if status != "ran" else "",
                        "results": results})
    return {"schema": "fp8-check/matrix/2", "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"],
            "versions": entries}


# ---------------------------------------------------------------- 1. names that become path parts


def test_bless_from_a_crafted_matrix_writes_nothing_outside_the_goldens(run_cli, tmp_path):
    victim = tmp_path / "home" / "victim"
    (tmp_path / "home").mkdir()
    rows = [("seed_ok", "h100", "cublas", "deviceless"),  # a good row first: nothing may be written before the bad one
            (str(victim), "h100", "cublas", "deviceless"),
            ("x", "../../../home", "cublas", "deviceless")]
    (tmp_path / "m.json").write_text(json.dumps(_matrix(rows)))
    code, out, err = run_cli("bless", "--from-matrix", tmp_path / "m.json", "--goldens", tmp_path / "goldens", cwd=tmp_path)
    assert code == 2 and "cannot be part of a file name" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "goldens").exists()  # checked before any golden is written
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == []


def test_a_dead_writers_temporary_golden_is_removed(run_cli, tmp_path):
    """A bless killed (SIGKILL) while writing leaves `.<case>.yaml.<pid>.<random>.tmp`; the next write removes it."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "goldens" / "h100" / "cublas" / "deviceless"
    folder.mkdir(parents=True)
    leftover = folder / f".seed_ok.yaml.{dead.pid}.x1y2.tmp"
    leftover.write_text("half a golden")
    (tmp_path / "m.json").write_text(json.dumps(_matrix([("seed_ok", "h100", "cublas", "deviceless")])))
    code, out, err = run_cli("bless", "--from-matrix", tmp_path / "m.json", "--goldens", tmp_path / "goldens", cwd=tmp_path)
    assert code == 0, out + err
    assert (folder / "seed_ok.yaml").is_file() and not leftover.exists()
    assert [p.name for p in folder.iterdir()] == ["seed_ok.yaml"]


# ---------------------------------------------------------------- 4. --fail-on newest


def test_fail_on_newest_fails_when_the_newest_version_cannot_be_installed(run_cli, tmp_path):
    doc = _matrix([("seed_ok", "h100", "cublas", "deviceless")], versions=(("0.7.0", "ran"), ("0.99.0", "install-failed")))
    (tmp_path / "m.json").write_text(json.dumps(doc))
    code, out, err = run_cli("matrix", "--merge", tmp_path / "m.json", "--out", tmp_path / "merged.json",
                             "--no-html", "--fail-on", "newest", cwd=tmp_path)
    assert code == 3, out + err
    # the newest version is found by version, not by file order (file names sort 0.10 before 0.6)
    (tmp_path / "a.json").write_text(json.dumps(_matrix([("seed_ok", "h100", "cublas", "deviceless")],
                                                        versions=(("0.10.0", "install-failed"),))))
    (tmp_path / "b.json").write_text(json.dumps(_matrix([("seed_ok", "h100", "cublas", "deviceless")],
                                                        versions=(("0.6.1", "ran"),))))
    code, out, err = run_cli("matrix", "--merge", tmp_path / "a.json", tmp_path / "b.json", "--out", tmp_path / "m2.json",
                             "--no-html", "--fail-on", "newest", cwd=tmp_path)
    assert code == 3, out + err


# ---------------------------------------------------------------- 5. check runs user code in a child process


CHECKED = '''"""A user's module, as written."""
from __future__ import annotations

import os
import signal
import sys

HOW = os.environ.get("HOW", "")
if HOW == "exit":
    exit(4)
if HOW == "segfault":
    os.kill(os.getpid(), signal.SIGSEGV)
if HOW == "hang":
    while True:
        pass
if HOW == "input":
    input("? ")
if HOW == "raise":
    raise RuntimeError("broken at import")


def f(x):
    return x
'''


@pytest.mark.parametrize("how, code, message", [
    ("exit", 1, "the checked code (usermod:f) called exit(4)"),
    ("segfault", 1, "ended the checking process (signal SIGSEGV) before a result"),
    ("hang", 1, "usermod:f did not finish within 2 s (--timeout): stopped"),
    ("input", 2, "importing 'usermod' failed: EOFError"),
    ("raise", 2, "importing 'usermod' failed: RuntimeError: broken at import"),
])
def test_check_guards_user_code(run_cli, tmp_path, monkeypatch, how, code, message):
    (tmp_path / "usermod.py").write_text(CHECKED)
    monkeypatch.setenv("HOW", how)
    # only the hang needs a short limit; the others must end on their own (the child's start-up counts against
    # --timeout, and on a loaded machine that alone took over 2 s)
    limit = "2" if how == "hang" else "60"
    got, out, err = run_cli("check", "usermod:f", "--arg", "x=float32[4]", "--timeout", limit, cwd=tmp_path)
    assert "Traceback" not in out + err, err
    assert got == code and message in err and len(err.strip().splitlines()) == 1, (got, out, err)


# ---------------------------------------------------------------- 3. late steps


def test_filecheck_past_its_limit_is_the_cases_filecheck_failure():
    from fp8_check.signature._filecheck import run_filecheck

    problem = run_filecheck("CHECK: custom-call\n", "x\n" * 200_000, timeout=0.001)
    assert problem is not None and "did not finish within" in problem


@pytest.mark.slow
def test_results_on_a_full_disk_are_one_line_exit_3_and_nothing_half_written(run_cli, tmp_path, monkeypatch):
    """RLIMIT_FSIZE stands in for a full disk: writes past it fail with EFBIG as on a full one with ENOSPC."""
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    sel = ("-k", "seed_plain_f32", "--profile", "cublas", *DL, "--goldens", str(REPO / "goldens"))
    code, out, err = run_cli("run", REPO / "cases" / "seed.yaml", *sel, "--json", tmp_path / "warm.json", cwd=tmp_path)
    assert code == 0, out + err  # warms the compile cache: the limited run below compiles nothing

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))

    proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "run", str(REPO / "cases" / "seed.yaml"), *sel,
                           "--json", str(tmp_path / "out" / "r.json")], capture_output=True, text=True, cwd=tmp_path,
                          preexec_fn=limit, env=dict(os.environ), timeout=600)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "cannot write" in proc.stderr and "r.json" in proc.stderr
    assert "PASS" in proc.stdout  # the outcomes were printed before the write failed
    assert list((tmp_path / "out").iterdir()) == []  # no half-written results, no .tmp file


# ---------------------------------------------------------------- 2 and 6. python cases: imported, no stdin


PKG_INIT = '"""A package."""\nfrom __future__ import annotations\n'
PKG_HELPERS = "import jax.numpy as jnp\n\n\ndef mm(a, b):\n    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))\n"
PKG_MODEL = '''"""A model: a docstring first, then a __future__ import, __file__ and a relative import."""
from __future__ import annotations

import os

from .helpers import mm

HERE = os.path.dirname(os.path.abspath(__file__))


def forward(a, b):
    return mm(a, b)
'''
FLAT = '''"""A flat module importing a sibling module."""
from __future__ import annotations

from sibling_helper import mm


def forward(a, b):
    return mm(a, b)


def asks(a, b):
    input("scale? ")
    return mm(a, b)


def stops(a, b):
    breakpoint()
    return mm(a, b)
'''


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(PKG_INIT)
    (tmp_path / "pkg" / "helpers.py").write_text(PKG_HELPERS)
    (tmp_path / "pkg" / "model.py").write_text(PKG_MODEL)
    (tmp_path / "sibling_helper.py").write_text(PKG_HELPERS)
    (tmp_path / "flat.py").write_text(FLAT)
    cases = "".join(f"  - id: {cid}\n    kind: python\n    callable: {fn}\n    {ARGS}\n    profiles: [cublas]\n"
                    for cid, fn in (("pkg_relative", "pkg.model:forward"), ("flat_sibling", "flat:forward"),
                                    ("asks_input", "flat:asks"), ("left_breakpoint", "flat:stops")))
    write_cases(tmp_path / "cases" / "mine.yaml", "cases:\n" + cases)
    return tmp_path


@pytest.mark.slow
def test_python_case_modules_are_imported_as_from_pythonpath(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    _project(tmp_path)
    code, out, err = run_cli("run", *DL, "--json", tmp_path / "r.json", cwd=tmp_path)
    by = {r["case"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    # docstring + __future__, __file__, relative and sibling imports: they compile (no golden yet: NEW)
    assert by["pkg_relative"]["outcome"] == "NEW" and by["flat_sibling"]["outcome"] == "NEW", out
    # stdin is not the worker's request pipe: input() and breakpoint() fail at once, they do not hang
    assert by["asks_input"]["outcome"] == "UNRESOLVED" and "stdin is closed" in by["asks_input"]["reason"]
    assert by["left_breakpoint"]["outcome"] == "UNRESOLVED" and "stdin is closed" in by["left_breakpoint"]["reason"]
    # the compile cache keys on the project files: an unchanged re-run compiles nothing it compiled before...
    code, out, err = run_cli("run", *DL, "-k", "pkg_relative,flat_sibling", "--json", tmp_path / "r2.json", cwd=tmp_path)
    assert "compile cache: 3 hit(s), 0 compiled" in out, out
    # ... and an edited sibling module compiles again
    (tmp_path / "sibling_helper.py").write_text(PKG_HELPERS.replace("float32", "bfloat16"))
    code, out, err = run_cli("run", *DL, "-k", "flat_sibling", "--json", tmp_path / "r3.json", cwd=tmp_path)
    assert "compile cache: 1 hit(s), 1 compiled" in out, out


@pytest.mark.slow
def test_repro_of_a_python_case_stands_alone(run_cli, tmp_path):
    _project(tmp_path)
    code, out, err = run_cli("show", "pkg_relative", *DL, "--repro", tmp_path / "repro.py", cwd=tmp_path)
    assert code == 0, out + err
    away = tmp_path / "elsewhere"
    away.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-I", str(tmp_path / "repro.py")], capture_output=True, text=True, cwd=away,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "HloModule" in proc.stdout


# ---------------------------------------------------------------- 8. target specs


@pytest.mark.slow
def test_target_check_names_the_field_xla_cannot_parse(run_cli, tmp_path):
    spec = tmp_path / "h100_typo.txtpb"
    spec.write_text((TARGET_DIR / "h100.txtpb").read_text().replace("core_count", "kore_count"))
    code, out, err = run_cli("target", "check", spec, cwd=tmp_path)
    assert code == 2 and "kore_count" in err and len(err.strip().splitlines()) == 1, out + err


# ---------------------------------------------------------------- 9. issue titles, large reports


def _results_doc(n: int, description: str) -> dict:
    res = [{"case": f"c{i}", "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": "0.12.0.1",
            "outcome": "FAIL", "reason": "differs", "signature": SIG, "description": description, "yaml": "",
            "diffs": [{"path": "kernels", "expected": 1, "found": 2}], "expected": SIG} for i in range(n)]
    return {"schema": "fp8-check/results/2", "environment": {"jax": "0.12.0.1"}, "target_specs": {}, "results": res}


def test_a_multi_line_description_gives_a_one_line_issue_title(run_cli, tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(_results_doc(1, "scaled matmul\n# not a heading\n\tand more")))
    code, out, err = run_cli("report", tmp_path / "r.json", "--markdown", "c0", cwd=tmp_path)
    assert code == 0, err
    title = out.splitlines()[0]
    assert title.startswith("# ") and "scaled matmul # not a heading and more" in title
    assert not any(line.startswith("# not a heading") for line in out.splitlines())


@pytest.mark.slow
def test_a_report_over_5_mb_says_so(run_cli, tmp_path):
    (tmp_path / "r.json").write_text(json.dumps(_results_doc(14_000, "d" * 200)))
    code, out, err = run_cli("report", tmp_path / "r.json", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert code == 0, err
    assert (tmp_path / "r.html").stat().st_size > 5_000_000
    assert "over the 5 MB" in err and "larger than 5 MB" in (tmp_path / "r.html").read_text()
