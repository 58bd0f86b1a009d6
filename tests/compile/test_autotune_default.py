"""Deviceless `default` through the commands (fp8_check.compile._autotune_replay wired into the runner): `run
--profile default --target h100` compiles deviceless, loads the results file committed for the target and release
(goldens/<target>/autotune/<jax>.txt) or an empty one, and every result says which autotuned decisions the file
made and which XLA's deviceless defaults made; the compile cache keys on the file's content; `bless` records the
coverage so that a later capture that changes a decision is a visible change. The results files are written from
the keys XLA logged for the case's own compile (cuBLASLt vs Triton), through the real CUDA plugin."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from fp8_check.compile import _render as render
from fp8_check.compile._autotune_replay import ReplayCompiler
from fp8_check.run import _selection as selection
from fp8_check.targets import _autotune_results as ar, load_target
from fp8_check.verdict import _golden as golden

CASE = "seed_relu_f32"
TILES = {"block_m": 128, "block_n": 64, "block_k": 64, "split_k": 1, "num_stages": 3, "num_warps": 8, "num_ctas": 1}


@pytest.fixture(scope="module")
def logged():
    """(jax version, the key XLA looked the case's FP8 gemm up by) in a deviceless `default` compile with no results."""
    case = next(c for c in selection.load_cases([], CASE) if c.id == CASE)
    with ReplayCompiler() as rc:
        got = rc.compile(render.render(case), load_target("h100"), None, render.case_options(case))
        jax_version = rc.environment()["jax"]
    assert got.compilation.ok, got.compilation.error
    [key] = [m.key for m in got.coverage.missing if " dot(" in m.key.hlo]
    return jax_version, key


def _run(run_cli, workspace: Path, *extra: str, command: str = "run"):
    out = workspace / "r.json"
    args = [command, "cases/seed.yaml", "-k", CASE, "--profile", "default", "--target", "h100", "-j", "1",
            "--goldens", "goldens", *extra]
    if command == "run":
        args += ["--json", str(out)]
    code, stdout, stderr = run_cli(*args, cwd=workspace)
    if command != "run":
        return code, stdout, None
    [result] = json.loads(out.read_text())["results"]
    return code, stdout, result


def _results_file(workspace: Path, jax_version: str, entries) -> Path:
    path = ar.results_path(workspace / "goldens", "h100", jax_version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(ar.format_results(entries))
    return path


def _gemm_targets(result) -> list[str]:
    return [g["target"] for g in result["signature"]["gemms"]]


def _line(stdout: str) -> str:
    [line] = [ln for ln in stdout.splitlines() if f"h100/default {CASE}" in ln and re.search(r"FP8 \d+/\d+", ln)]
    return line


@pytest.mark.slow
def test_run_default_deviceless_follows_the_committed_results_file(run_cli, workspace, logged):
    jax_version, key = logged
    # no file for h100 and this release: XLA's deviceless defaults, and the result line says so
    code, stdout, result = _run(run_cli, workspace)
    assert result["outcome"] == "NEW" and result["mode"] == "deviceless"
    assert result["autotune"]["results"] == "" and result["autotune"]["covered"] == 0
    assert result["autotune"]["decisions"] >= 1
    assert "XLA's deviceless defaults" in _line(stdout) and "no results file" in _line(stdout)
    assert _gemm_targets(result) == ["__triton_nested_gemm_fusion"]

    # a committed file that makes the gemm cuBLASLt: the engine follows it
    path = _results_file(workspace, jax_version, [ar.Entry(key, ar.Choice("cublaslt", {"algorithm": -1}))])
    code, stdout, result = _run(run_cli, workspace)
    assert result["autotune"]["covered"] == result["autotune"]["decisions"] == 1
    assert result["autotune"]["results"] == "goldens/h100/autotune/" + path.name
    assert result["autotune"]["choices"] == ["cublaslt(algorithm=-1)"]
    assert _gemm_targets(result) == ["__cublas$lt$matmul$f8"]
    assert f"autotune: 1/1 from goldens/h100/autotune/{path.name}" in _line(stdout)

    # the same path, another content (a Triton tiling): the compile cache keys on the content, not the path
    _results_file(workspace, jax_version, [ar.Entry(key, ar.Choice("triton", TILES))])
    code, stdout, result = _run(run_cli, workspace)
    assert not result["cached"]
    assert _gemm_targets(result) == ["__triton_nested_gemm_fusion"]
    assert '"output_tiles":[{"sizes":["128","64"]}]' in result["hlo"]
    assert result["autotune"]["choices"] == [ar.Choice("triton", TILES).text()]

    # unchanged: answered from the cache, with its coverage
    code, stdout, cached = _run(run_cli, workspace)
    assert cached["cached"] and cached["autotune"] == result["autotune"]
    assert "autotune: 1/1 from" in _line(stdout)


@pytest.mark.slow
def test_a_file_for_another_device_is_named_in_the_result(run_cli, workspace, logged):
    jax_version, key = logged
    other = dataclasses.replace(key, device=key.device.replace("L2 cache: 50 MB", "L2 cache: 60 MB"))
    _results_file(workspace, jax_version, [ar.Entry(other, ar.Choice("cublaslt", {"algorithm": -1}))])
    code, stdout, result = _run(run_cli, workspace)
    assert result["autotune"]["covered"] == 0
    [missing] = result["autotune"]["missing"]
    assert missing["reason"].startswith("another device") and "L2 cache 60 MB vs 50 MB" in missing["reason"]
    assert "XLA's deviceless defaults (1/1: another device)" in _line(stdout)
    assert _gemm_targets(result) == ["__triton_nested_gemm_fusion"]  # the default, not the file's cuBLASLt


@pytest.mark.slow
def test_bless_records_coverage_and_a_new_capture_is_a_visible_change(run_cli, workspace, logged):
    jax_version, key = logged
    _results_file(workspace, jax_version, [ar.Entry(key, ar.Choice("triton", TILES))])
    code, stdout, _ = _run(run_cli, workspace, command="bless")
    assert code == 0, stdout
    path = golden.path_for(workspace / "goldens", CASE, "h100", "default", "deviceless")
    g = golden.load(path)
    assert g is not None and g.expect[0].autotune == {"decisions": 1, "from_results": 1,
                                                      "choices": [ar.Choice("triton", TILES).text()]}
    code, stdout, result = _run(run_cli, workspace)
    assert result["outcome"] == "PASS", stdout

    # a later capture picks another tiling: same engine, same coverage count, but the change is visible
    _results_file(workspace, jax_version, [ar.Entry(key, ar.Choice("triton", dict(TILES, num_warps=4)))])
    code, stdout, result = _run(run_cli, workspace)
    assert result["outcome"] == "FAIL" and code == 1
    assert "autotune.choices" in [d["path"] for d in result["diffs"]]


def test_coverage_lines_and_record():
    key = ar.ReplayKey("CUDA: 9.0", "{\n  ROOT d = f32[2,2] dot(a, b)\n}", 56)
    none = ar.Coverage("", 1, 0, (ar.Uncovered(key, "no results file"),))
    assert none.line() == "autotune: XLA's deviceless defaults (1/1: no results file)"
    full = ar.Coverage("goldens/h100/autotune/x.txt", 1, 1, (), True, ("cublaslt(algorithm=-1)",))
    assert full.line() == "autotune: 1/1 from goldens/h100/autotune/x.txt"
    part = ar.Coverage("f.txt", 2, 1, (ar.Uncovered(key, "another release: captured with ..."),), True, ("triton",))
    assert part.line() == "autotune: 1/2 from f.txt, 1 XLA's deviceless defaults (another release)"
    assert part.record() == {"decisions": 2, "from_results": 1, "choices": ["triton"]}
    assert ar.Coverage.from_json(part.to_json(full=True)) == part


def test_the_cache_keys_a_results_file_by_its_content(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(ar.format_results([]))
    b.write_text(ar.format_results([]))
    ka, kb = (ar.key_options(ar.replay_options(p)) for p in (a, b))
    assert ka == kb and str(a) not in json.dumps(ka)  # another path, the same content: the same key
    assert ar.key_options(ar.replay_options(ar.stand_in()))[ar.LOAD_OPTION] == "none"
    assert ar.key_options({"xla_gpu_enable_triton_gemm": False}) == {"xla_gpu_enable_triton_gemm": False}


def test_a_golden_autotune_record_is_checked(tmp_path):
    path = golden.path_for(tmp_path, CASE, "h100", "default", "deviceless")
    path.parent.mkdir(parents=True)
    path.write_text(f"case: {CASE}\ntarget: h100\nprofile: default\nmode: deviceless\n"
                    "expect:\n- signature: {kernels: 1}\n  autotune: 3\n")
    with pytest.raises(golden.GoldenError, match=r"field 'expect\[0\]\.autotune'"):
        golden.load(path)


def test_default_deviceless_is_nvidia_only():
    from fp8_check.run import _runner as runner
    from fp8_check.targets import PROFILES

    default = PROFILES["default"]
    assert runner.unsupported_reason(default, "deviceless", "0.12.0.1", load_target("h100")) is None
    why = runner.unsupported_reason(default, "deviceless", "0.12.0", load_target("mi300x"))  # a release with ROCm
    assert why and "replays the device's autotune results on NVIDIA targets only, not on mi300x" in why
    replayed = runner.compile_profile(default, load_target("h100"), "deviceless", "0.12.0.1", Path("/nonexistent"))
    assert replayed.name == "default" and replayed.compiler_options[ar.LOAD_OPTION] == str(ar.stand_in())
    assert runner.compile_profile(default, load_target("h100"), "device", "0.12.0.1", None) is default


MODEL = '''
import jax, jax.numpy as jnp

def scaled_relu(a, b, a_scale, b_scale):
    c = jax.lax.dot_general(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale, (((1,), (0,)), ((), ())))
    return jnp.clip(jax.nn.relu(c), -448.0, 448.0).astype(jnp.float8_e4m3fn)
'''
ARG_FLAGS = ["--arg", "a=float8_e4m3fn[64,64]", "--arg", "b=float8_e4m3fn[64,32]", "--arg", "a_scale=float32[]",
             "--arg", "b_scale=float32[]"]


@pytest.mark.slow
def test_check_and_the_api_compile_default_deviceless(run_cli, tmp_path, monkeypatch):
    """`fp8-check check --profile default` and fp8_check.api: deviceless `default`, with its coverage (here no results
    file is committed for this release: XLA's deviceless defaults, said on the FP8-first line and in the JSON);
    bless records it in the golden, and the golden then judges the next check."""
    (tmp_path / "usermodel_at58.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli("check", "usermodel_at58:scaled_relu", *ARG_FLAGS, "--profile", "default",
                             "--golden", "sr", "--bless", "--json", str(tmp_path / "c.json"), cwd=tmp_path)
    assert code == 0, out + err
    line = next(ln for ln in out.splitlines() if "h100/default" in ln)
    assert re.search(r"FP8 \d+/\d+", line) and "[autotune: XLA's deviceless defaults (1/1: no results file)]" in line
    g = golden.load(golden.path_for(tmp_path / "goldens", "sr", "h100", "default", "deviceless"))
    assert g is not None and g.expect[0].autotune == {"decisions": 1, "from_results": 0, "choices": []}
    code, out, err = run_cli("check", "usermodel_at58:scaled_relu", *ARG_FLAGS, "--profile", "default",
                             "--golden", "sr", cwd=tmp_path)
    assert code == 0 and "PASS" in out, out + err

    from fp8_check import api

    report = api.fusion_signature(__import__("usermodel_at58").scaled_relu, *_api_args(), profile="default")
    assert report.profile == "default" and report.autotune is not None and report.autotune.decisions == 1
    assert report.to_dict()["autotune"]["summary"].startswith("no autotune results for this target and release")


def _api_args():
    import jax
    import jax.numpy as jnp

    f8 = jnp.float8_e4m3fn
    return (jax.ShapeDtypeStruct((64, 64), f8), jax.ShapeDtypeStruct((64, 32), f8),
            jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32))


def test_the_text_format_flag_is_optional_so_older_releases_are_unsupported():
    """The replay's `xla_gpu_use_new_autotune_cache_format` is set only where the XLA has it (JAX 0.11.1 on): on
    0.6.1 to 0.11.0 it made every deviceless `default` UNRESOLVED ("No such compile option"); as an optional option
    the worker answers UNSUPPORTED with the flag's name (measured with `matrix --jax 0.11.0,0.11.1`)."""
    from fp8_check.run import _runner as runner
    from fp8_check.targets import PROFILES

    case = next(c for c in selection.load_cases([], CASE) if c.id == CASE)
    request = runner.request_for(case, load_target("h100"), PROFILES["default"], None, "deviceless", "0.12.0.1",
                                 Path("/nonexistent"))
    assert ar.FORMAT_OPTION not in request.profile.compiler_options and ar.LOAD_OPTION in request.profile.compiler_options
    assert request.optional_options is not None and request.optional_options[ar.FORMAT_OPTION] is False
    plain = runner.request_for(case, load_target("h100"), PROFILES["cublas"], None, "deviceless", "0.12.0.1", None)
    assert ar.FORMAT_OPTION not in (plain.optional_options or {})
