"""One parser for every timeout option and variable (fp8_check/core/_timeouts.py; hardening round 5, issue 43):
a finite number of seconds above 0 and at most a week, else one line naming the option or variable, exit 2, no
traceback (`--timeout 1e12` overflowed `select` as an UNRESOLVED traceback, `FP8_CHECK_GH_TIMEOUT=inf` a
traceback, `abc` was ignored and `-1`/`nan` clamped to 1 s). And a timed-out external program is killed with its
whole process group."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from fp8_check.cli import main as cli
from fp8_check.core import _timeouts as timeouts

from ..conftest import REPO

BAD = ["1e12", "inf", "-inf", "nan", "-1", "0", "abc", "1e400", "0x10", "5 s"]


def _main(capsys, *argv) -> tuple[int, str]:
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and 'File "' not in err, err
    return code, err


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("command", [["run", "--mode", "deviceless"], ["check", "mod:fn", "--arg", "x=float32[4]"]])
def test_a_bad_timeout_option_is_one_line(capsys, command, value):
    code, err = _main(capsys, *command, f"--timeout={value}")
    assert code == 2 and err.count("\n") == 1, err
    assert "argument --timeout: expected a number of seconds above 0 and at most 604800" in err, err


@pytest.mark.parametrize("value", BAD)
def test_a_bad_uv_timeout_is_one_line_before_anything_is_built(capsys, tmp_path, monkeypatch, value):
    monkeypatch.setenv("FP8_CHECK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FP8_CHECK_UV_TIMEOUT", value)
    code, err = _main(capsys, "matrix", REPO / "cases" / "seed.yaml", "--jax", "0.6.1", "-k", "seed_plain_f32",
                      "--out", tmp_path / "m.json")
    assert code == 2 and err.count("\n") == 1 and "$FP8_CHECK_UV_TIMEOUT: expected a number of seconds" in err, err
    assert not any((tmp_path / "cache").rglob("bin")), "an environment was built"


@pytest.mark.parametrize("value", BAD)
def test_a_bad_gh_timeout_is_one_line(capsys, tmp_path, monkeypatch, value):
    (tmp_path / "issues").mkdir()
    (tmp_path / "issues" / "x--0123456789abcdef.md").write_text("# x\n\n<!-- fp8-check-issue: 0123456789abcdef -->\n")
    monkeypatch.setenv("FP8_CHECK_GH_TIMEOUT", value)
    code, err = _main(capsys, "ci", "issues", "--issues-dir", tmp_path / "issues")
    assert code == 2 and err.count("\n") == 1 and "$FP8_CHECK_GH_TIMEOUT: expected a number of seconds" in err, err


def test_good_values_and_the_defaults(monkeypatch):
    assert timeouts.seconds(" 30 ", "--timeout") == 30.0 and timeouts.seconds("1e-3", "x") == 0.001
    assert timeouts.seconds(str(timeouts.MAX_S), "x") == timeouts.MAX_S
    monkeypatch.setenv("FP8_CHECK_UV_TIMEOUT", "")
    assert timeouts.from_env("FP8_CHECK_UV_TIMEOUT", 3600.0) == 3600.0
    monkeypatch.delenv("FP8_CHECK_UV_TIMEOUT")
    assert timeouts.from_env("FP8_CHECK_UV_TIMEOUT", 3600.0) == 3600.0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")  # a zombie waiting for init to reap it is dead


def _spawner(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A program that starts a child (sleeping 300 s), writes the child's pid, then hangs itself."""
    pid_file = tmp_path / f"{name}.child"
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport subprocess, time\n"
                    f"c = subprocess.Popen(['sleep', '300'])\nopen({str(pid_file)!r}, 'w').write(str(c.pid))\n"
                    "time.sleep(300)\n")
    path.chmod(0o755)
    return path, pid_file


def _gone(pid_file: Path) -> None:
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(pid):
            return
        time.sleep(0.1)
    os.kill(pid, 9)
    raise AssertionError(f"the timed-out program's child {pid} was still running")


def test_a_timed_out_uv_is_killed_with_its_children(tmp_path, monkeypatch, capsys):
    uv, pid_file = _spawner(tmp_path, "uv")
    monkeypatch.setenv("FP8_CHECK_UV", str(uv))
    monkeypatch.setenv("FP8_CHECK_UV_TIMEOUT", "3")
    monkeypatch.setenv("FP8_CHECK_CACHE", str(tmp_path / "cache"))
    code, err = _main(capsys, "matrix", REPO / "cases" / "seed.yaml", "--jax", "0.6.1", "-k", "seed_plain_f32",
                      "--profile", "cublas", "--out", tmp_path / "m.json")
    assert code == 3, err
    _gone(pid_file)


def test_a_timed_out_gh_is_killed_with_its_children(tmp_path):
    gh, pid_file = _spawner(tmp_path, "gh")
    import subprocess

    with pytest.raises(subprocess.TimeoutExpired):
        timeouts.run([str(gh)], 3)
    _gone(pid_file)
