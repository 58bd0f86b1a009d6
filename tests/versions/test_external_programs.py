"""Every external program fp8-check starts (uv, the base interpreter, gh, git) runs with a timeout, and a broken
one ends in a clear line and exit 3, never a traceback: a uv that hangs, a uv that exits 0 without building, an
argument list over the system's limit, $FP8_CHECK_PYTHON naming nothing, $FP8_CHECK_CACHE=/dev/null. And a
`--with` requirement is honoured exactly: `flax @ URL` is never "satisfied" by whatever flax is installed."""

from __future__ import annotations

import os
import stat
import sys
import time

import pytest

from fp8_check.versions import _requirements as requirements

from ..conftest import REPO

# a version other than the one fp8-check runs with, so an environment must be built
VERSION = "0.6.1"


def _matrix(run_cli, tmp_path, *extra):
    return run_cli("matrix", REPO / "cases" / "seed.yaml", "--jax", VERSION, "-k", "seed_plain_f32", "--profile", "cublas",
                   "--out", tmp_path / "m.json", *extra, cwd=tmp_path)


def _install_failed(code, out, err, message):
    assert "Traceback" not in out + err and 'File "' not in err, err[-2000:]
    assert code == 3, (code, out[-2000:], err[-2000:])
    assert message in out + err, (out[-2000:], err[-2000:])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _program(tmp_path, name, body):
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_a_hanging_uv_is_stopped(run_cli, tmp_path, cache, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_UV", str(_program(tmp_path, "uv", "import time; time.sleep(120)")))
    monkeypatch.setenv("FP8_CHECK_UV_TIMEOUT", "2")
    start = time.monotonic()
    _install_failed(*_matrix(run_cli, tmp_path), "uv did not finish within 2 s (FP8_CHECK_UV_TIMEOUT)")
    assert time.monotonic() - start < 60


def test_a_uv_that_exits_0_without_building(run_cli, tmp_path, cache, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_UV", str(_program(tmp_path, "uv", "pass")))
    _install_failed(*_matrix(run_cli, tmp_path), "uv finished but the new environment does not run")


def test_an_argument_list_over_the_system_limit(run_cli, tmp_path, cache):
    """`--with` requirements that add up to more than the system takes on one command line (E2BIG; the corpus
    used a 300 000-line requirements file, which is now over the 64 KiB limit for one: here 20 000 `--with`)."""
    many = [a for i in range(20_000) for a in ("--with", f"p{'x' * 150}{i}>=1")]
    _install_failed(*_matrix(run_cli, tmp_path, *many), "cannot run uv: Argument list too long")


def test_fp8_check_python_naming_nothing(run_cli, tmp_path, cache, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_PYTHON", str(tmp_path / "no-such-python"))
    _install_failed(*_matrix(run_cli, tmp_path), "cannot run the interpreter")


def test_fp8_check_cache_dev_null(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_CACHE", os.devnull)
    _install_failed(*_matrix(run_cli, tmp_path), "cannot make the environments folder")


def test_a_url_requirement_is_never_satisfied_by_the_installed_package():
    assert requirements._satisfied(["flax"])  # flax is installed here (the flax extra)
    assert not requirements._satisfied(["flax @ https://example.invalid/flax-0.0.1-py3-none-any.whl"])
    assert not requirements._satisfied(["flax[all] @ git+https://example.invalid/flax@abc"])


def test_uv_output_quoted_in_a_message_is_no_workflow_command(run_cli, tmp_path, cache, monkeypatch):
    """uv's stderr is quoted when it fails; a line of it starting with `::` must not reach stdout as a command."""
    monkeypatch.setenv("FP8_CHECK_UV", str(_program(
        tmp_path, "uv", "import sys; sys.stderr.write('error: no\\n::add-mask::secret\\n  ::stop-commands::tok\\n'); sys.exit(1)")))
    code, out, err = _matrix(run_cli, tmp_path)
    _install_failed(code, out, err, "add-mask")
    assert not any(line.lstrip().startswith("::") for line in (out + err).splitlines()), out + err
