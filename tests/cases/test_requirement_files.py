"""A case's `requirements:` file (hardening round 5, issue 43): a regular file in the case file's folder after
resolving links, at most 64 KiB of UTF-8; an error names file, case and field in one line and never quotes the
file beyond a short escaped excerpt of the offending requirement, nor any environment variable.

Every refusal here is checked with a secret planted both in the environment and in a file the case points at:
no byte of it may appear on stdout or stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from fp8_check.cases import _load as case_mod
from tests.conftest import REPO, write_cases

SECRET = "fp8chk-secret-7c1f2a9e"
CASE = """
cases:
- id: needs_more
  kind: python
  callable: mod:step
  args: [{name: x, shape: [16, 16], dtype: bfloat16}]
  requirements: %s
"""
MODULE = "import jax.numpy as jnp\n\ndef step(x):\n    return jnp.dot(x, x)\n"


def _project(tmp_path, value: str):
    """tmp_path/outside/secret.txt holds the secret as a requirement line; the case lives in tmp_path/proj."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}==1.0\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "mod.py").write_text(MODULE)
    return proj, write_cases(proj / "cases.yaml", CASE % value)


def _refused(run_cli, monkeypatch, path, message: str) -> str:
    monkeypatch.setenv("FP8_CHECK_PLANTED_TOKEN", SECRET)
    code, out, err = run_cli("list", path)
    assert SECRET not in out + err, err
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and message in err, err
    assert f"{path}" in err and "case 'needs_more'" in err and "field 'requirements'" in err, err
    return err


@pytest.mark.parametrize("value, message", [
    ("/proc/self/environ", "give a file in the case file's folder, by a relative path without '..'"),
    ("../outside/secret.txt", "without '..'"),
    ("sub/../../outside/secret.txt", "without '..'"),
    ("SECRET_ABS", "without '..'"),
])
def test_a_path_out_of_the_case_folder_is_refused_and_nothing_of_it_printed(tmp_path, run_cli, monkeypatch,
                                                                            value, message):
    value = value.replace("SECRET_ABS", str(tmp_path / "outside" / "secret.txt"))
    _, path = _project(tmp_path, value)
    _refused(run_cli, monkeypatch, path, message)


@pytest.mark.parametrize("link_to", ["/proc/self/environ", "OUTSIDE"])
def test_a_link_out_of_the_case_folder_is_refused(tmp_path, run_cli, monkeypatch, link_to):
    proj, path = _project(tmp_path, "reqs.txt")
    os.symlink(link_to.replace("OUTSIDE", str(tmp_path / "outside" / "secret.txt")), proj / "reqs.txt")
    _refused(run_cli, monkeypatch, path, "a link to a file outside the case file's folder")


def test_a_link_inside_the_case_folder_is_followed(tmp_path):
    proj, path = _project(tmp_path, "reqs.txt")
    (proj / "sub").mkdir()
    (proj / "sub" / "real.txt").write_text("somepkg>=1\n")
    os.symlink("sub/real.txt", proj / "reqs.txt")
    [case] = case_mod.load([path])
    assert case.requirements and case.requirements.requirements == ("somepkg>=1",)


def test_proc_environ_through_the_real_cli_prints_no_byte_of_it(tmp_path):
    """The same refusal through a separate `fp8-check` process (all its output, both streams)."""
    _, path = _project(tmp_path, "/proc/self/environ")
    env = {**os.environ, "FP8_CHECK_PLANTED_TOKEN": SECRET}
    proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "list", str(path)], capture_output=True,
                          text=True, env=env, timeout=120, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_a_fifo_is_not_read(tmp_path, run_cli, monkeypatch):
    """A named pipe would block the reader forever: refused from its mode, never opened."""
    proj, path = _project(tmp_path, "reqs.txt")
    os.mkfifo(proj / "reqs.txt")
    _refused(run_cli, monkeypatch, path, "not a regular file")


def test_a_folder_is_not_a_requirements_file(tmp_path, run_cli, monkeypatch):
    proj, path = _project(tmp_path, "reqs")
    (proj / "reqs").mkdir()
    _refused(run_cli, monkeypatch, path, "not a regular file")


def test_a_huge_file_is_refused_at_once(tmp_path, run_cli, monkeypatch):
    proj, path = _project(tmp_path, "reqs.txt")
    with open(proj / "reqs.txt", "wb") as f:  # 100 MB (sparse): reading it whole took 29 s
        f.truncate(100 * 2**20)
    start = time.monotonic()
    _refused(run_cli, monkeypatch, path, "larger than the 64 KiB limit")
    assert time.monotonic() - start < 10  # bounded read (not a speed claim: 100 MB read whole is what this guards)


def test_a_file_that_is_not_utf8_is_refused(tmp_path, run_cli, monkeypatch):
    proj, path = _project(tmp_path, "reqs.txt")
    (proj / "reqs.txt").write_bytes(b"somepkg\n\xff\xfe" + SECRET.encode() + b"\n")
    _refused(run_cli, monkeypatch, path, "not UTF-8 text: byte 0xff on line 2")


def test_an_offending_line_is_quoted_short_escaped_and_on_one_line(tmp_path, run_cli, monkeypatch):
    proj, path = _project(tmp_path, "reqs.txt")
    (proj / "reqs.txt").write_text("somepkg\n" + "bad>>pkg\x1b[31m" + "x" * 200 + SECRET + "\n")
    err = _refused(run_cli, monkeypatch, path, "reqs.txt:2: 'bad>>pkg\\x1b[31m")
    assert "\x1b" not in err and "..." in err and "x" * 60 not in err


def test_an_environment_variable_in_a_requirement_is_refused_unexpanded(tmp_path, run_cli, monkeypatch):
    proj, path = _project(tmp_path, "reqs.txt")
    (proj / "reqs.txt").write_text("somepkg @ https://example.invalid/${FP8_CHECK_PLANTED_TOKEN}.whl\n")
    _refused(run_cli, monkeypatch, path, "'$' is not allowed in a requirement")


def test_a_line_break_in_the_field_is_one_escaped_line(tmp_path, run_cli, monkeypatch):
    proj, path = _project(tmp_path, '"reqs.txt\\nsecond line"')
    _refused(run_cli, monkeypatch, path, "'reqs.txt\\nsecond line': a file name has no line breaks")


@pytest.mark.parametrize("plugin", ["jax-cuda13-plugin", "jax_cuda13_pjrt", "jax-rocm7-plugin", "jax-rocm7-pjrt",
                                    "Jax.Cuda12.Plugin[with-cuda]"])
def test_no_gpu_plugin_in_a_requirement_set(tmp_path, run_cli, monkeypatch, plugin):
    proj, path = _project(tmp_path, "reqs.txt")
    (proj / "reqs.txt").write_text(f"somepkg\n{plugin}\n")
    _refused(run_cli, monkeypatch, path, "jax, jaxlib and the GPU plugins are chosen per version")
