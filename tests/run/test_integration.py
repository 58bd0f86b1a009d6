"""End to end through the real pipeline: compiled deviceless for H100 by the real CUDA plugin (no mocks)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import jax
import pytest
import yaml

from fp8_check.compile._service import Compiler
from fp8_check.run import _runner as runner
from fp8_check.targets import TARGET_DIR, load_target
from fp8_check.verdict import _golden as golden

from ..conftest import write_cases

JAX = jax.__version__
DL = ("--mode", "deviceless")


def results_of(path):
    doc = json.loads(path.read_text())
    return {(r["case"], r["target"], r["profile"]): r for r in doc["results"]}, doc


def test_seed_run_passes_and_writes_results(workspace, run_cli):
    code, out, err = run_cli("run", *DL, "--json", workspace / "r.json", cwd=workspace)
    assert code == 0, out + err
    by_key, doc = results_of(workspace / "r.json")
    assert doc["schema"] == "fp8-check/results/2"
    env = doc["environment"]
    for key in ("jax", "jaxlib", "jaxlib_git_hash", "cuda_plugin", "python", "mode", "targets", "profiles", "xla_flags"):
        assert key in env, key
    assert env["jax"] == JAX and env["mode"] == "deviceless"
    assert {p for (_, _, p) in by_key} == {"cublas", "triton"}
    r = by_key[("seed_relu_amax_f32", "h100", "cublas")]
    assert r["outcome"] == "PASS" and r["mode"] == "deviceless" and r["jax"] == JAX and r["compile_seconds"] > 0
    gemm = r["signature"]["gemms"][0]
    # first principles: the whole scaled/relu/amax pattern is one cuBLASLt FP8 call
    assert gemm["target"] == "__cublas$lt$matmul$f8" and gemm["epilogue"] == "RELU" and gemm["damax_output"] is True
    assert gemm["operand_dtypes"] == ["f8e4m3fn", "f8e4m3fn"] and gemm["output"] == "f8e4m3fn"
    assert isinstance(r["signature"]["kernels"], int)
    assert "PASS" in out and "results:" in out


def test_edited_golden_gives_fail_with_field_diff(workspace, run_cli):
    path = golden.path_for(workspace / "goldens", "seed_relu_f32", "h100", "cublas", "deviceless")
    text = path.read_text()
    assert "epilogue: RELU" in text
    path.write_text(text.replace("epilogue: RELU", "epilogue: DEFAULT"))
    code, out, _ = run_cli("run", *DL, "-k", "seed_relu_f32", "--profile", "cublas", "--json", workspace / "r.json", cwd=workspace)
    assert code == 1
    assert re.search(r"FAIL\s+h100/cublas\s+seed_relu_f32", out)
    assert "gemms[0].epilogue: expected DEFAULT, found RELU" in out
    by_key, _ = results_of(workspace / "r.json")
    diffs = by_key[("seed_relu_f32", "h100", "cublas")]["diffs"]
    assert diffs == [{"path": "gemms[0].epilogue", "expected": "DEFAULT", "found": "RELU"}]


@pytest.mark.slow
def test_missing_golden_is_new_and_bless_records_it(workspace, run_cli):
    code, out, _ = run_cli("run", *DL, "-k", "seed_plain_f32", "--profile", "cublas", "--goldens", workspace / "empty", cwd=workspace)
    assert code == 1 and "NEW" in out and "fp8-check bless -k seed_plain_f32" in out
    code, out, _ = run_cli("bless", *DL, "-k", "seed_plain_f32", "--profile", "cublas", "--goldens", workspace / "empty", cwd=workspace)
    assert code == 0 and "+++ b/" in out and "blessed: 1 golden(s) changed" in out
    written = golden.load(golden.path_for(workspace / "empty", "seed_plain_f32", "h100", "cublas", "deviceless"))
    assert written.expect[0].blessed_with == f"jax {JAX}"
    code, out, _ = run_cli("run", *DL, "-k", "seed_plain_f32", "--profile", "cublas", "--goldens", workspace / "empty", cwd=workspace)
    assert code == 0 and "PASS" in out


PY_CASES = """\
cases:
  - id: a_raises
    kind: python
    callable: tests.casefns:raises
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
    profiles: [cublas]
  - id: b_crashes
    kind: python
    callable: tests.casefns:crash
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
    profiles: [cublas]
  - id: c_after_crash
    kind: python
    callable: tests.casefns:plain
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
    profiles: [cublas]
  - id: d_missing_dependency
    kind: python
    callable: no_such_package_xyz.layers:dense
    requires: [no_such_package_xyz]
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}]
    profiles: [cublas]
"""


@pytest.mark.slow
def test_errors_crashes_and_missing_dependencies(tmp_path, run_cli):
    write_cases(tmp_path / "cases" / "py.yaml", PY_CASES)
    code, out, _ = run_cli("run", *DL, "--json", tmp_path / "r.json", cwd=tmp_path)
    assert code == 1
    by_key, _ = results_of(tmp_path / "r.json")
    raises = by_key[("a_raises", "h100", "cublas")]
    assert raises["outcome"] == "UNRESOLVED" and "this case is broken on purpose" in raises["reason"]
    crashed = by_key[("b_crashes", "h100", "cublas")]
    assert crashed["outcome"] == "UNRESOLVED" and "worker crashed" in crashed["reason"]
    # the crash took down only the worker: the next case compiled in a fresh one
    after = by_key[("c_after_crash", "h100", "cublas")]
    assert after["outcome"] == "NEW" and after["signature"]["gemms"][0]["target"] == "__cublas$lt$matmul$f8"
    missing = by_key[("d_missing_dependency", "h100", "cublas")]
    assert missing["outcome"] == "UNSUPPORTED" and "no_such_package_xyz" in missing["reason"]


@pytest.mark.slow
def test_known_issue_gives_xfail_then_xpass(workspace, run_cli):
    known = (
        "    known_issues:\n      - url: https://github.com/openxla/xla/issues/17887\n"
        f"        jax: '=={JAX}'\n        profiles: [cublas]\n"
    )
    seed = (workspace / "cases" / "seed.yaml").read_text()
    seed = seed.replace("  - id: seed_relu_f32\n", "  - id: seed_relu_f32\n" + known)
    (workspace / "cases" / "seed.yaml").write_text(seed)
    code, out, _ = run_cli("run", *DL, "-k", "seed_relu_f32", "--profile", "cublas", cwd=workspace)
    assert code == 1 and re.search(r"XPASS\s+h100/cublas\s+seed_relu_f32", out)
    assert "no longer reproduces" in out
    # a golden that expects something else now: the known issue explains the mismatch
    path = golden.path_for(workspace / "goldens", "seed_relu_f32", "h100", "cublas", "deviceless")
    path.write_text(path.read_text().replace("kernels: 3", "kernels: 1"))
    code, out, _ = run_cli("run", *DL, "-k", "seed_relu_f32", "--profile", "cublas", cwd=workspace)
    assert code == 0 and re.search(r"XFAIL\s+h100/cublas\s+seed_relu_f32", out)
    # bless refuses to record a broken signature while the issue is active
    code, out, _ = run_cli("bless", *DL, "-k", "seed_relu_f32", "--profile", "cublas", cwd=workspace)
    assert "skipped h100/cublas seed_relu_f32: known issue" in out
    assert "kernels: 1" in path.read_text()


def test_default_profile_compiles_deviceless_and_says_whose_decisions(workspace, run_cli):
    """Deviceless `default` on NVIDIA replays the committed autotune results (none here for this release): the
    result line says XLA's deviceless defaults made its autotuned decisions (tests/compile/test_autotune_default.py)."""
    code, out, _ = run_cli("run", *DL, "-k", "seed_plain_f32", "--profile", "default", cwd=workspace)
    assert code == 1  # NEW: no golden for default
    line = next(ln for ln in out.splitlines() if re.match(r"NEW\s+h100/default\s+seed_plain_f32", ln))
    assert re.search(r"FP8 \d+/\d+", line) and "[autotune: XLA's deviceless defaults (1/1: no results file)]" in line


@pytest.mark.slow
def test_canary_detects_a_target_without_runtime_version(workspace, run_cli):
    # A user's spec without a CUDA runtime version is refused before anything compiles (exit 3, naming the field).
    spec = (TARGET_DIR / "h100.txtpb").read_text()
    broken = re.sub(r"^# cuda_runtime:.*\n", "", spec, flags=re.M)
    assert broken != spec
    (workspace / "h100_no_runtime.txtpb").write_text(broken)
    code, out, err = run_cli("run", *DL, "--target", workspace / "h100_no_runtime.txtpb", cwd=workspace)
    assert code == 3
    assert "refused target spec" in err and "'runtime_version'" in err
    assert "FAIL" not in out
    # And should one reach the worker without it, the FP8 canary still stops the run.
    h100 = load_target("h100")
    no_runtime = dataclasses.replace(h100, versions=dataclasses.replace(h100.versions, runtime=None))
    with Compiler("deviceless") as compiler:
        with pytest.raises(runner.CanaryError) as e:
            runner.check_canary(compiler, no_runtime)
        assert "did not become an FP8 gemm" in str(e.value) and "no runtime_version" in str(e.value)
        # the one canary gate (run, the pytest plugin and the API ask it) says the same, and lets a sound target pass
        assert runner.CanaryGate("deviceless").problem(compiler, no_runtime) == str(e.value)
        assert runner.CanaryGate("deviceless").problem(compiler, h100) is None


@pytest.mark.slow
def test_a100_negative_control_has_no_fp8_gemm(workspace, run_cli):
    code, out, _ = run_cli("run", *DL, "--target", "a100", "--profile", "cublas", "--json", workspace / "r.json", cwd=workspace)
    assert code == 0, out
    by_key, _ = results_of(workspace / "r.json")
    for r in by_key.values():
        for g in r["signature"]["gemms"]:
            assert not all(d.startswith("f8") for d in g["operand_dtypes"]), r["case"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (("run", "--target", "v100"), "--target: unknown target 'v100'"),
        (("run", "--profile", "fast"), "--profile: unknown profile 'fast'"),
        (("run", "-k", "nothing_matches_this"), "no case matches -k nothing_matches_this"),
        (("run", "cases/nope.yaml"), "no such file or directory"),
        (("show", "no_such_case"), "no case with id 'no_such_case'"),
    ],
)
def test_usage_errors_exit_2(workspace, run_cli, args, needle):
    code, out, err = run_cli(*args, cwd=workspace)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_argparse_usage_exits_2(run_cli):
    with pytest.raises(SystemExit) as info:
        run_cli("run", "--mode", "sideways")
    assert info.value.code == 2


def test_bad_golden_file_is_unresolved_with_its_path(workspace, run_cli):
    path = golden.path_for(workspace / "goldens", "seed_plain_f32", "h100", "cublas", "deviceless")
    path.write_text("expect: 7\n")
    code, out, _ = run_cli("run", *DL, "-k", "seed_plain_f32", "--profile", "cublas", cwd=workspace)
    assert code == 1 and "UNRESOLVED" in out and "seed_plain_f32.yaml: field 'expect'" in out


@pytest.mark.slow
def test_show_prints_everything_and_repro_runs_standalone(workspace, run_cli, tmp_path):
    repro = tmp_path / "repro.py"
    code, out, _ = run_cli("show", "seed_relu_amax_bf16", *DL, "--profile", "cublas", "--repro", repro, cwd=workspace)
    assert code == 0
    for section in ("# ---- repro", "# ---- StableHLO", "# ---- optimized HLO", "# ---- signature"):
        assert section in out
    # the estimate: one line per kernel (3 at these tiny shapes, each a bare launch)
    assert "# ---- estimated cost on H100 SXM" in out and out.count(" µs  launch ") == 3
    assert "stablehlo.dot_general" in out or "dot_general" in out
    # the repro needs nothing but JAX: run it from an empty directory with a clean environment
    proc = subprocess.run([sys.executable, str(repro)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "custom_call_target=\"__cublas$lt$matmul$f8\"" in proc.stdout
    assert "ENTRY" in proc.stdout


def test_golden_files_are_small_readable_yaml():
    from ..conftest import REPO

    files = sorted((REPO / "goldens").rglob("*.yaml"))
    assert files
    for f in files:
        doc = yaml.safe_load(f.read_text())
        assert {"case", "target", "profile", "mode", "expect"} <= set(doc) <= {"case", "target", "profile", "mode",
                                                                           "expect", "layers", "contract_options"}, f
        assert f.parts[-4:-1] == (doc["target"], doc["profile"], doc["mode"]), f
        # small per expectation (a version-ranged golden holds one per run of identical signatures); a model's
        # golden is a contract (docs/contracts.md): at most 300 lines
        if any("contract" in e for e in doc["expect"]):
            assert len(f.read_text().splitlines()) <= 300, f
            continue
        assert doc["expect"] and all(
            len(yaml.safe_dump(e)) < 4096 + 700 * len(e["signature"].get("gemms", [])) + 80 * e["signature"].get("kernels", 0)
            for e in doc["expect"]), f


def test_filecheck_patterns_are_checked_against_the_optimized_hlo(workspace, run_cli):
    seed = (workspace / "cases" / "seed.yaml").read_text()
    good = "    filecheck: {cublas: 'CHECK: custom_call_target=\"__cublas$lt$matmul$f8\"'}\n"
    bad = "    filecheck: {cublas: 'CHECK: custom_call_target=\"__cublas$gemm\"'}\n"
    (workspace / "cases" / "seed.yaml").write_text(
        seed.replace("  - id: seed_plain_f32\n", "  - id: seed_plain_f32\n" + good)
        .replace("  - id: seed_plain_bf16\n", "  - id: seed_plain_bf16\n" + bad)
    )
    code, out, _ = run_cli("run", *DL, "-k", "seed_plain", "--profile", "cublas", "-v", cwd=workspace)
    assert code == 1
    assert re.search(r"PASS\s+h100/cublas\s+seed_plain_f32", out)
    assert re.search(r"FAIL\s+h100/cublas\s+seed_plain_bf16", out)
    assert "filecheck: expected patterns match, found" in out


def test_device_mode_without_a_gpu_is_a_usage_error(workspace, run_cli, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_NO_GPU", "1")
    code, out, err = run_cli("run", "--mode", "device", "-k", "seed_plain_f32", cwd=workspace)
    assert code == 2 and "--mode device compiles on a local NVIDIA GPU" in err and len(err.strip().splitlines()) == 1
