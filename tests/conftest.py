"""Shared fixtures. Integration tests compile for real, deviceless, through the CUDA plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from fp8_check.targets import gpu_present

# Tests that execute rendered functions use JAX's CPU backend; compiles for GPU
# targets happen in the worker subprocess, which sets up its own environment.
if not gpu_present():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pytest

from fp8_check.cli import main as cli

# The compile cache of a test session lives in a directory of its own (never the user's),
# shared by the tests of the session; tests of the cache itself use their own.
if not os.environ.get("FP8_CHECK_COMPILE_CACHE"):
    import atexit
    import tempfile

    _session_cache = tempfile.mkdtemp(prefix="fp8-check-test-compile-cache-")
    os.environ["FP8_CHECK_COMPILE_CACHE"] = _session_cache
    atexit.register(shutil.rmtree, _session_cache, True)

REPO = Path(__file__).resolve().parent.parent

_WITHOUT_GPU = pytest.mark.skipif(not gpu_present(), reason="needs an NVIDIA GPU (device mode); this machine has none")


def requires_gpu(fn):
    """A GPU-only test: marked `gpu` (the GPU session runs `pytest -m gpu`, harness/fp8_check/gpu/session.py) and skipped,
    with the reason, on a machine without one."""
    return pytest.mark.gpu(_WITHOUT_GPU(fn))


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Run `fp8-check ARGS` in-process from a directory; returns (exit code, stdout, stderr)."""

    def run(*args: str, cwd: Path = REPO):
        monkeypatch.chdir(cwd)
        code = cli.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A scratch project: a copy of the seed cases and their goldens."""
    (tmp_path / "cases").mkdir()
    shutil.copy(REPO / "cases" / "seed.yaml", tmp_path / "cases" / "seed.yaml")
    shutil.copytree(REPO / "goldens", tmp_path / "goldens")
    return tmp_path


def write_cases(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def git_available() -> bool:
    return shutil.which("git") is not None and subprocess.run(["git", "--version"], capture_output=True).returncode == 0


@pytest.fixture(autouse=True)
def _no_saved_upstream_explanations(tmp_path_factory, monkeypatch):
    """Issue bodies must not pick up `bisect --explain` results saved in this checkout's reports/upstream/."""
    monkeypatch.setenv("FP8_CHECK_UPSTREAM_DIR", str(tmp_path_factory.mktemp("upstream")))
