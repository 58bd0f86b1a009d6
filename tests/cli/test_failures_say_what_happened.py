"""The minor items of hardening round 5 (issue 43), each with the test that pins it (docs/hardening.md)."""

from __future__ import annotations

import os
import stat
import sys
import time

import pytest

from fp8_check.cli import main as cli
from tests.conftest import write_cases
from tests.core.test_timeouts import _alive

CASE = """cases:
- id: only_h100
  kind: python
  callable: mod:step
  args: [{name: x, shape: [16, 16], dtype: bfloat16}]
  targets: [h100]
"""


def test_a_run_in_which_no_case_runs_on_the_targets_is_bad_input(tmp_path, run_cli):
    """It said "nothing ran" and exited 0: a CI job so configured was green while checking nothing."""
    (tmp_path / "mod.py").write_text("import jax.numpy as jnp\n\ndef step(x):\n    return jnp.dot(x, x)\n")
    path = write_cases(tmp_path / "cases.yaml", CASE)
    code, out, err = run_cli("run", path, "--target", "h200", "--mode", "deviceless", "--json", tmp_path / "r.json",
                             cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1, (code, out, err)
    assert "none of the 1 selected case(s) runs on --target h200" in err
    assert "fp8-check: jax" not in out  # no worker was started


def test_ci_issues_names_what_it_filed_before_gh_failed(tmp_path, monkeypatch, capsys):
    """The first `gh issue create` succeeded, the second failed: the error line must still name the first."""
    issues = tmp_path / "issues"
    issues.mkdir()
    for i, key in enumerate(("0123456789abcdef", "fedcba9876543210")):
        (issues / f"c{i}--{key}.md").write_text(f"# FP8 lost in case c{i}\n\nbody\n\n<!-- fp8-check-issue: {key} -->\n")
    count = tmp_path / "creates"
    gh = tmp_path / "bin" / "gh"
    gh.parent.mkdir()
    gh.write_text(f"#!{sys.executable}\nimport os, sys\n"
                  "if sys.argv[1:3] == ['issue', 'list']:\n    print('[]'); sys.exit(0)\n"
                  f"n = len(open({str(count)!r}).read()) if os.path.exists({str(count)!r}) else 0\n"
                  f"open({str(count)!r}, 'a').write('x')\n"
                  "if n == 0:\n    print('https://github.com/o/r/issues/7'); sys.exit(0)\n"
                  "print('HTTP 502: server error', file=sys.stderr); sys.exit(1)\n")
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{gh.parent}{os.pathsep}{os.environ['PATH']}")
    assert cli.main(["ci", "issues", "--issues-dir", str(issues)]) == 3
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "gh issue create failed (exit 1)" in line and "before that: created #7: FP8 lost in case c0" in line, line


@pytest.mark.slow
def test_a_timed_out_check_is_killed_with_what_the_checked_code_started(tmp_path, run_cli):
    pid_file = tmp_path / "child.pid"
    (tmp_path / "spawns.py").write_text(
        "import subprocess, time\n"
        f"c = subprocess.Popen(['sleep', '300'])\nopen({str(pid_file)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(300)\n\ndef f(x):\n    return x\n")
    start = time.monotonic()
    code, out, err = run_cli("check", "spawns:f", "--arg", "x=float32[4]", "--timeout", "20", cwd=tmp_path)
    assert code == 1 and "did not finish within 20 s (--timeout): stopped" in err, err
    assert time.monotonic() - start < 120
    pid = int(pid_file.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        raise AssertionError("the checked code's child outlived the timed-out check")



SHARDED = """\
cases:
  - id: s_out
    kind: python
    callable: fp8_check.models.sharded:tp_row
    targets: [h100x8]
    profiles: [cublas]
    mesh: {tp: 8}
    args:
      - {name: x, shape: [64, 256], dtype: bfloat16, sharding: [null, tp]}
      - {name: w, shape: [256, 128], dtype: bfloat16, sharding: [tp]}
      - {name: x_scale, shape: [], dtype: float32}
      - {name: w_scale, shape: [], dtype: float32}
    out_shardings: %s
"""


@pytest.mark.slow
@pytest.mark.parametrize("specs, reason", [
    ("[[], []]", "out_shardings: 2 partition specs for 1 outputs; give one (for every output) or one per output"),
    ("[[tp, null, null]]", "out_shardings[0]: 3 entries for output 0 of rank 2 (shape (64, 128))"),
])
def test_out_shardings_that_do_not_fit_the_outputs_name_the_field(tmp_path, run_cli, specs, reason):
    path = write_cases(tmp_path / "c.yaml", SHARDED % specs)
    run_cli("run", path, "--target", "h100x8", "--mode", "deviceless", "--json", tmp_path / "r.json",
            "--goldens", tmp_path / "g", cwd=tmp_path)
    import json

    [row] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert row["outcome"] == "UNRESOLVED" and reason in row["reason"], row["reason"]
