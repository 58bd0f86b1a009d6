"""The command line's first minutes: --version, a bare call, a closed pipe, help texts that state the
real defaults, and scripts/env.sh run from another directory."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from fp8_check.cli import main as cli
from fp8_check.upstream import _bisect as bisect

from ..conftest import REPO


def test_version_prints_fp8_check_and_the_jax_it_runs_with(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # one line, never wrapped
    assert out.startswith(f"fp8-check {metadata.version('fp8-check')} (")
    assert f"jax {metadata.version('jax')}" in out and f"jaxlib {metadata.version('jaxlib')}" in out
    assert f"CUDA plugin {metadata.version('jax-cuda12-plugin')}" in out


def test_a_bare_call_prints_the_help_and_exits_0(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: fp8-check")
    for command in ("run", "bless", "matrix", "bisect", "report", "init", "--version"):
        assert command in out


def test_list_into_a_closed_pipe_stops_quietly():
    # `fp8-check list | head -1`: the reader is gone before the first write
    p = subprocess.Popen([sys.executable, "-m", cli.__name__, "list"], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_bisect_help_states_the_profile_it_uses(capsys):
    parser, _ = cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["bisect", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "(default: cublas, or the mode's only profile)" in help_text
    assert "every profile the mode supports" not in help_text
    assert bisect.CRITERIA  # the module whose help this is


def test_pytest_fixture_defaults_are_the_ones_its_help_states():
    import inspect

    from fp8_check.cli import pytest_plugin

    src = inspect.getsource(pytest_plugin.pytest_addoption)
    assert "{platforms.default_profile()} for the fp8 fixture" in src and "<rootdir>/goldens for the fp8 fixture" in src
    fixture = inspect.getsource(pytest_plugin._fixture_params) + inspect.getsource(pytest_plugin.fp8)
    assert 'else [platforms.default_profile()]' in fixture and '"goldens"' in fixture


@pytest.mark.slow
def test_env_sh_runs_the_command_where_the_caller_stands(tmp_path):
    (tmp_path / "mycases").mkdir()
    (tmp_path / "mycases" / "mine.yaml").write_text(
        "cases:\n  - id: only_in_the_callers_directory\n    description: a case the checkout does not have\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    p = subprocess.run(["bash", str(REPO / "scripts" / "env.sh"), "fp8-check", "list", "mycases"], cwd=tmp_path,
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["only_in_the_callers_directory", "a", "case", "the", "checkout", "does", "not", "have"]
    assert "pip" not in p.stderr  # uv is found (on PATH or pip's --user directory), not installed again
    p = subprocess.run(["bash", str(REPO / "scripts" / "env.sh"), "pwd"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=600)
    assert Path(p.stdout.strip()).resolve() == tmp_path.resolve()
