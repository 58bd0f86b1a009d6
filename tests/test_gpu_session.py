"""The H100 session (harness/fp8_check/gpu/session.py, scripts/gpu_session.sh): its dry run executes every step deviceless on
this CPU machine, from the checkout, and leaves every file a real session writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fp8_check.gpu import kernel_timing, session

from .conftest import REPO


def test_the_steps_and_their_budgets_fit_eight_minutes():
    assert [s.name for s in session.STEPS] == ["environment", "capture", "autotune", "kernels", "calibrate", "fidelity",
                                               "numerics", "gpu-tests"]
    assert all(s.budget_s > 0 for s in session.STEPS)
    assert sum(s.budget_s for s in session.STEPS) <= session.TOTAL_S == 480
    out = subprocess.run(["bash", str(REPO / "scripts" / "gpu_session.sh"), "--list"], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 0, out.stderr
    for s in session.STEPS:
        assert f"{s.name:<12} {s.budget_s:>4} s" in out.stdout


def test_every_gpu_only_test_is_in_the_sessions_files():
    # a GPU-only test (requires_gpu, or marked gpu) in a file the session does not run would never run on a GPU
    marked = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").glob("test_*.py")
                    if p.name != "test_gpu_session.py"
                    and ("\n@requires_gpu" in p.read_text() or "\n@pytest.mark.gpu" in p.read_text()))
    assert marked and set(marked) <= set(session.GPU_TEST_FILES), marked


@pytest.mark.slow
def test_the_dry_run_executes_every_step_deviceless_and_writes_the_files(tmp_path):
    out = tmp_path / "session"
    # the script makes fp8_check importable from harness/ itself (a link on PYTHONPATH): run it with the plain
    # interpreter and no PYTHONPATH of ours
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_session.sh"), "--dry-run", "--out", str(out),
                           "--budget-scale", "3"], capture_output=True, text=True, timeout=1800,
                          env={**env, "PYTHON": sys.executable}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for s in session.STEPS:
        assert f"gpu-session: {s.name} (budget {3 * s.budget_s} s)" in proc.stdout
        assert f"gpu-session: {s.name}: ok in " in proc.stdout
    record = json.loads((out / "session.json").read_text())
    assert record["dry_run"] is True and [r["status"] for r in record["steps"]] == ["ok"] * len(session.STEPS)
    assert [(r["name"], r["budget_s"]) for r in record["steps"]] == [(s.name, s.budget_s) for s in session.STEPS]
    md = (out / "SESSION.md").read_text()
    assert "dry run on a CPU: no GPU numbers" in md and all(f"| {s.name} | {s.budget_s} | ok |" in md for s in session.STEPS)
    # each step's files
    env_doc = json.loads((out / "environment.json").read_text())
    assert env_doc["gpu"] is False
    assert env_doc["imported_from"] == str(REPO / "harness" / "fp8_check")  # the checkout's package, not an install
    tests_log = (out / "gpu-tests.log").read_text()
    assert "skipped" in tests_log and "needs an NVIDIA GPU" in tests_log and "failed" not in tests_log
    assert "h100" in (out / "capture.log").read_text()
    fidelity = json.loads((out / "fidelity.json").read_text())
    assert fidelity and "agree" in (out / "fidelity.md").read_text()
    numerics = json.loads((out / "numerics.json").read_text())
    assert numerics["backend"] == "cpu" and numerics["cases"] and all(c["status"] == "pass" for c in numerics["cases"]
                                                                      if c["status"] != "skipped")
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["dry_run"] is True and [r["case"] for r in cal["rows"]] == session.CALIBRATE.split(",")
    for r in cal["rows"]:
        assert "error" not in r, r
        assert r["estimated_us"] > 0 and r["measured_us"] > 0 and r["unfused_us"] > 0 and r["fusion_speedup"] > 0
    assert "Dry run on a CPU" in (out / "calibration.md").read_text()
    # autotune replay: the keys a capture must hold (deviceless lookups), and profiler-timed gemms with a re-fit
    autotune = json.loads((out / "autotune.json").read_text())
    assert autotune["dry_run"] is True and autotune["rows"] and all("error" not in r for r in autotune["rows"])
    assert all(r["decisions"] >= 1 and len(r["keys"]) == r["decisions"] for r in autotune["rows"])
    kernels = json.loads((out / "kernels.json").read_text())
    assert kernels["dry_run"] is True and len(kernels["rows"]) == 2 * len(kernel_timing.DRY_SHAPES)
    assert all("error" not in r and r["us_per_call"] > 0 for r in kernels["rows"]) and "refit" in kernels
    assert "Dry run on a CPU" in (out / "kernels.md").read_text()


@pytest.mark.slow
def test_a_step_over_its_budget_is_stopped_and_the_session_goes_on(tmp_path):
    # 10 ms: no child process starts Python and imports JAX in that (1 s was enough on a quiet machine)
    steps = (session.Step("environment", 0.01, "a budget too small to import JAX"), session.Step("capture", 60, "then this"))
    record = session.run_session(tmp_path, dry=True, steps=steps)
    assert record[0]["status"] == "timed out" and record[0]["seconds"] < 30
    assert record[1]["status"] == "ok"
    assert json.loads((tmp_path / "session.json").read_text())["steps"][0]["status"] == "timed out"


def test_the_session_compares_the_device_with_the_chosen_shipped_target(monkeypatch, tmp_path):
    # an H200 lent instead of an H100: every device step names the same shipped spec, the capture is named after it
    monkeypatch.setenv("FP8_CHECK_SESSION_TARGET", "h200")
    fid = session.command("fidelity", tmp_path, dry=False)
    num = session.command("numerics", tmp_path, dry=False)
    cap = session.command("capture", tmp_path, dry=False)
    assert fid[fid.index("--target") + 1] == num[num.index("--target") + 1] == "h200"
    # fidelity's deviceless `default` replays what this session's `autotune` step captured for that target
    assert fid[fid.index("--autotune-results") + 1] == str(tmp_path / "autotune" / "h200")
    assert "--autotune-target" not in fid  # no captured spec yet; once `capture` wrote one, the replay compiles for it
    (tmp_path / "h200-captured.txtpb").write_text("")
    fid = session.command("fidelity", tmp_path, dry=False)
    assert fid[fid.index("--autotune-target") + 1] == str(tmp_path / "h200-captured.txtpb")
    assert "h200-captured" in cap
    monkeypatch.delenv("FP8_CHECK_SESSION_TARGET")
    assert session.session_target(dry=True) == "h100"


def test_the_kernel_calibration_covers_twenty_shapes_from_1k_to_16k():
    rows = [(m, n, k, cls) for m, n, k in kernel_timing.SHAPES for cls in kernel_timing.CLASSES]
    assert len(set(rows)) >= 20 and {"fp8", "bf16"} == set(kernel_timing.CLASSES)
    sizes = {d for shape in kernel_timing.SHAPES for d in shape}
    assert min(sizes) == 1024 and max(sizes) == 16384


def test_the_timed_gemms_compile_to_one_gemm_kernel_each():
    """What `kernels` times is one gemm, not a gemm plus transposes and converts: deviceless for h100, the FP8 function
    is one cuBLASLt FP8 call (f8e4m3fn x f8e4m3fn) and the bf16 one a single cuBLASLt gemm."""
    import jax
    import jax.numpy as jnp

    from fp8_check.api import fusion_signature

    m, n, k = kernel_timing.SHAPES[5]
    for cls, target, inputs in (("fp8", "__cublas$lt$matmul$f8", ["f8e4m3fn", "f8e4m3fn"]),
                                ("bf16", "__cublas$lt$matmul", ["bf16", "bf16"])):
        dtype = jnp.float8_e4m3fn if cls == "fp8" else jnp.bfloat16
        args = [jax.ShapeDtypeStruct((m, k), dtype), jax.ShapeDtypeStruct((n, k), dtype)]
        args += [jax.ShapeDtypeStruct((), jnp.float32)] * 2 if cls == "fp8" else []
        report = fusion_signature(kernel_timing.gemm_function(cls), *args, target="h100", profile="cublas")
        assert report.signature.launches == [f"gemm {target}"], (cls, report.signature.launches)
        assert report.signature.gemms[0].operand_dtypes == inputs
