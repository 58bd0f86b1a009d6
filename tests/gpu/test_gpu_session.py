"""The H100 session (harness/fp8_check/gpu/session.py, scripts/gpu_session.sh): its dry run executes every step deviceless on
this CPU machine, from the checkout, and leaves every file a real session writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from fp8_check.gpu import _kernel_timing as kernel_timing, session

from ..conftest import REPO


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
    marked = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py")
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
    # the FP8-first example's train step too, compiled from its own folder (its module and its cases)
    assert "fp8first_train" in [r["case"] for r in autotune["rows"]] and autotune["examples"]
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


def _tree(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("jax_platforms", [None, "cpu"])
def test_without_a_gpu_the_session_stops_at_once_in_one_line_and_leaves_the_committed_files(jax_platforms):
    """This machine's JAX sees no GPU (with its CUDA plugin installed, and with JAX_PLATFORMS=cpu): the real script,
    no --dry-run, default --out. Issue 43: it recorded `environment: ok`, `calibrate: ok`, `gpu-tests: ok` and
    rewrote 11 committed files of docs/gpu-session/."""
    committed = REPO / "docs" / "gpu-session"
    before, docs_before = _tree(committed), sorted(p.name for p in (REPO / "docs").iterdir())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JAX_PLATFORMS", "FP8_CHECK_SESSION_TARGET")}
    if jax_platforms:
        env["JAX_PLATFORMS"] = jax_platforms
    start = time.monotonic()
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_session.sh")], capture_output=True, text=True,
                          timeout=120, env={**env, "PYTHON": sys.executable}, cwd=REPO)
    seconds = time.monotonic() - start
    assert proc.returncode != 0
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and "JAX sees no NVIDIA GPU" in lines[0] and "Traceback" not in proc.stderr, lines
    assert ": ok" not in proc.stdout + proc.stderr
    assert seconds < 30, seconds  # the bound for the whole no-GPU answer
    assert _tree(committed) == before and sorted(p.name for p in (REPO / "docs").iterdir()) == docs_before


def test_a_step_is_ok_only_when_its_files_show_a_device_measurement(tmp_path):
    """What a no-GPU device run left (issue 43): every calibration row an error, every GPU test skipped, a CPU
    device in environment.json: each exited 0 and each is not ok."""
    (tmp_path / "environment.json").write_text(json.dumps({"devices": [{"kind": "cpu", "platform": "cpu"}]}))
    (tmp_path / "calibration.json").write_text(json.dumps({"backend": "gpu", "rows": [
        {"case": "seed_plain_f32", "error": "RuntimeError: Unknown backend 'gpu'"}]}))
    (tmp_path / "gpu-tests.log").write_text("sssss\n5 skipped, 173 deselected in 3.1s\n")
    (tmp_path / "numerics.json").write_text(json.dumps({"environment": {"mode": "device"}, "results": []}))
    for step, why in (("environment", "no GPU device"), ("calibrate", "1 of 1 cases not measured (first: Runtime"),
                      ("gpu-tests", "no GPU-only test ran"), ("numerics", "no case executed on the device"),
                      ("capture", "no captured target spec"), ("fidelity", "no device column")):
        status = session.step_status(step, 0, tmp_path, dry=False)
        assert status.startswith("not measured on the device: ") and why in status, status
        assert session.step_status(step, 0, tmp_path, dry=True) == "ok"  # a dry run measures the machinery only
    assert session.step_status("numerics", 1, tmp_path, dry=False) == "failed (exit 1)"
    (tmp_path / "gpu-tests.log").write_text("....s\n4 passed, 1 skipped in 3.1s\n")
    assert session.step_status("gpu-tests", 0, tmp_path, dry=False) == "ok"


def test_a_failed_session_never_replaces_the_output_folder(tmp_path, monkeypatch, capsys):
    """The session writes into a fresh folder; one whose step is not ok leaves --out as it was."""
    out = tmp_path / "gpu-session"
    out.mkdir()
    (out / "calibration.md").write_text("the last real session\n")
    (out / session.MARKER).write_text("a session's folder\n")
    monkeypatch.setattr(session, "check_gpu", lambda: ["a GPU JAX saw"])  # only the GPU check: its own test is above
    monkeypatch.setenv("FP8_CHECK_SESSION_TARGET", "h100")
    steps = (session.Step("gpu-tests", 0.01, "a budget too small to import pytest"),)
    assert session.session(out, dry=False, steps=steps) == 1
    assert _tree(out) == {"calibration.md": b"the last real session\n", session.MARKER: b"a session's folder\n"}
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "left as it was" in last and "this session's files in" in last
    [fresh] = [p for p in tmp_path.iterdir() if p.name.startswith(".gpu-session.session-")]
    assert json.loads((fresh / "session.json").read_text())["steps"][0]["status"] == "timed out"


def test_a_dry_run_never_writes_the_committed_folder(capsys):
    before = _tree(REPO / "docs" / "gpu-session")
    assert session.main(["--dry-run"]) == 2
    assert session.main(["--dry-run", "--out", str(REPO / "docs" / "gpu-session")]) == 2
    assert "a dry run never writes the committed gpu-session" in capsys.readouterr().err
    assert _tree(REPO / "docs" / "gpu-session") == before


@pytest.mark.parametrize("out", ["/proc/fp8-check-session", "FILE"])
def test_an_unusable_out_is_one_line(tmp_path, capsys, out):
    (tmp_path / "f").write_text("x")
    out = out.replace("FILE", str(tmp_path / "f"))
    assert session.main(["--dry-run", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "Traceback" not in err, err


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
