"""A bless killed with SIGKILL mid-write leaves a hidden `.NAME.PID.XXXX.tmp` beside a golden; the next bless
removes every such file whose writer is gone (not only those beside a golden it writes again), and keeps one
whose writer still runs."""

from __future__ import annotations

import json
import subprocess
import sys


def _row(case, jax):
    return {"case": case, "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": jax, "outcome": "PASS",
            "reason": "", "signature": {"kernels": 1, "launches": ["gemm x"], "gemms": [], "unfused": []},
            "expected": None, "diffs": [], "known_issue": None, "compile_seconds": 0.0, "cached": False,
            "description": "", "file": ""}


def test_bless_removes_stale_temporary_goldens_at_start(tmp_path, run_cli):
    folder = tmp_path / "g" / "h100x8" / "cublas" / "deviceless"
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        stale = folder / f".other_case.yaml.{dead.pid}.k3j4h5.tmp"
        live = folder / f".other_case.yaml.{alive.pid}.a1b2c3.tmp"
        stale.write_text("half a golden")
        live.write_text("being written")
        doc = {"schema": "fp8-check/matrix/2", "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"],
               "versions": [{"jax": "0.7.0", "status": "ran", "results": [_row("c", "0.7.0")]}]}
        (tmp_path / "m.json").write_text(json.dumps(doc))
        code, out, err = run_cli("bless", "--from-matrix", tmp_path / "m.json", "--goldens", tmp_path / "g", cwd=tmp_path)
        assert code == 0, out + err
        assert not stale.exists() and live.exists()
        assert (tmp_path / "g" / "h100" / "cublas" / "deviceless" / "c.yaml").is_file()
    finally:
        alive.kill()
        alive.wait()
