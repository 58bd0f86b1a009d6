"""Autotune replay (fp8_check.targets._autotune_results, fp8_check.compile._autotune_replay), deviceless through the
real CUDA plugin: a results file whose entries carry the keys this JAX's XLA logged for the case's own compile
forces the choice it holds (cuBLASLt for the FP8 gemm; a Triton tiling), and entries keyed for another device
or another release are reported missing, with why, while XLA's deviceless defaults apply."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from fp8_check.compile import _render as render
from fp8_check.compile._autotune_replay import ReplayCompiler, find_results
from fp8_check.run import _selection as selection
from fp8_check.signature import _extract as signature
from fp8_check.targets import _autotune_results as ar, load_target

CASE = "seed_relu_f32"
TILES = {"block_m": 128, "block_n": 64, "block_k": 64, "split_k": 1, "num_stages": 3, "num_warps": 8, "num_ctas": 1}


@pytest.fixture(scope="module")
def replay():
    case = next(c for c in selection.load_cases([], CASE) if c.id == CASE)
    target = load_target("h100")
    with ReplayCompiler() as rc:
        def run(results=None):
            out = rc.compile(render.render(case), target, results, render.case_options(case))
            assert out.compilation.ok, out.compilation.error
            return out
        yield run


@pytest.fixture(scope="module")
def own_keys(replay):
    """The keys XLA looked up while compiling the case with no results: the file's entries are built from them."""
    out = replay()
    assert out.coverage.decisions >= 1 and out.coverage.covered == 0
    assert out.coverage.summary().startswith("no autotune results for this target and release")
    return [m.key for m in out.coverage.missing], out


def _gemm_key(keys):
    gemm = [k for k in keys if " dot(" in k.hlo]
    assert len(gemm) == 1, [k.first_line() for k in keys]
    return gemm[0]


def _write(tmp_path, name, entries):
    path = tmp_path / name
    path.write_text(ar.format_results(entries))
    assert ar.load_results(path).entries == tuple(entries)  # the file reads back as written
    return path


def test_without_results_deviceless_defaults_a_triton_gemm(own_keys):
    _, out = own_keys
    sig = signature.extract(out.compilation.hlo)
    assert [g.target for g in sig.gemms] == ["__triton_nested_gemm_fusion"]


def test_results_force_cublaslt_for_the_fp8_gemm(replay, own_keys, tmp_path):
    key = _gemm_key(own_keys[0])
    path = _write(tmp_path, "cublas.txt", [ar.Entry(key, ar.Choice("cublaslt", {"algorithm": -1}))])
    out = replay(path)
    assert out.coverage.loaded and out.coverage.covered == 1
    targets = [g.target for g in signature.extract(out.compilation.hlo).gemms]
    assert targets and all(t.startswith("__cublas$lt$matmul") for t in targets), targets
    assert "__triton" not in out.compilation.hlo


def _tiling(hlo: str) -> list[tuple[list[str], str, str]]:
    """(output tile sizes, num_warps, num_stages) of each Triton gemm fusion in the optimized HLO."""
    found = re.findall(r'"num_stages":(\d+),[^{}]*?"num_warps":"(\d+)","output_tiles":(\[\{"sizes":\[[^]]*\]\}\])', hlo)
    return [(json.loads(tiles)[0]["sizes"], warps, stages) for stages, warps, tiles in found]


def test_results_force_a_triton_tiling(replay, own_keys, tmp_path):
    key = _gemm_key(own_keys[0])
    default = _tiling(own_keys[1].compilation.hlo)
    assert default and default[0][0] != ["128", "64"]  # the file changes something
    path = _write(tmp_path, "triton.txt", [ar.Entry(key, ar.Choice("triton", TILES))])
    out = replay(path)
    assert out.coverage.covered == 1
    assert _tiling(out.compilation.hlo) == [(["128", "64"], "8", "3")]


def test_another_device_is_reported_missing_not_silent(replay, own_keys, tmp_path):
    key = _gemm_key(own_keys[0])
    assert "L2 cache: 50 MB" in key.device  # the shipped h100 spec
    other = dataclasses.replace(key, device=key.device.replace("L2 cache: 50 MB", "L2 cache: 60 MB"))
    path = _write(tmp_path, "other_device.txt", [ar.Entry(other, ar.Choice("triton", TILES))])
    out = replay(path)
    assert out.coverage.covered == 0 and not out.coverage.complete
    [missing] = [m for m in out.coverage.missing if m.key == key]
    assert missing.reason.startswith("another device") and "L2 cache 60 MB vs 50 MB" in missing.reason
    assert "deviceless defaults for the rest" in out.coverage.summary()
    assert _tiling(out.compilation.hlo) == _tiling(own_keys[1].compilation.hlo)  # XLA's deviceless default


def test_another_release_is_reported_missing(replay, own_keys, tmp_path):
    key = _gemm_key(own_keys[0])
    older = dataclasses.replace(key, version=key.version - 1)
    out = replay(_write(tmp_path, "older.txt", [ar.Entry(older, ar.Choice("cublaslt", {"algorithm": -1}))]))
    [missing] = [m for m in out.coverage.missing if m.key == key]
    assert missing.reason.startswith("another release") and str(key.version - 1) in missing.reason
    assert out.coverage.to_json()["missing"][0]["reason"] == missing.reason


def test_a_file_that_is_not_autotune_results_names_file_and_field(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("version: 2\n")
    with pytest.raises(ar.AutotuneResultsError, match=r"bad.txt: version: 2; XLA reads AutotuneResults version 3"):
        ar.load_results(bad)
    bad.write_text("version: 3\nresults { hlo: 'x' }\n")
    with pytest.raises(ar.AutotuneResultsError, match=r"bad.txt: results\[0\]: an entry needs a device and an hlo"):
        ar.load_results(bad)
    bad.write_text("results {\n")
    with pytest.raises(ar.AutotuneResultsError, match=r"bad.txt: not an AutotuneResults text proto"):
        ar.load_results(bad)


def test_results_live_beside_the_targets_goldens(tmp_path):
    assert ar.results_path(tmp_path, "h100", "0.12.0.1") == tmp_path / "h100" / "autotune" / "0.12.0.1.txt"
    assert find_results("h100", "0.12.0.1", tmp_path) is None
    path = ar.results_path(tmp_path, "h100", "0.12.0.1")
    path.parent.mkdir(parents=True)
    path.write_text(ar.format_results([]))
    assert find_results("h100", "0.12.0.1", tmp_path) == path


@pytest.mark.slow
def test_fidelity_compares_replayed_default_with_the_devices_default(tmp_path):
    """The `default (replayed) vs device` column. No GPU here: the device's `default` is stood in for by what an
    autotuner that picked cuBLASLt compiles, the deviceless `cublas` profile of the same target. Replaying a file
    that holds that choice (built from the compile's own keys) agrees on the gemm engine; replaying none does not."""
    from fp8_check.compile._service import Compiler
    from fp8_check.gpu import _fidelity as fidelity
    from fp8_check.targets import PROFILES

    case = next(c for c in selection.load_cases([], CASE) if c.id == CASE)
    target = load_target("h100")
    sigs: fidelity.Signatures = {}
    with Compiler("deviceless") as compiler:
        comp = compiler.compile(render.render(case), target, PROFILES["cublas"], optional_options=render.case_options(case))
    sigs[(case.id, "device/default")] = fidelity.Compiled(signature.extract(comp.hlo))
    no_file = fidelity.collect_replayed([case], target, None, sigs)
    assert no_file[case.id].startswith("no autotune results")
    before = fidelity.agreement(fidelity.build(sigs), sigs)
    assert before == {"cases": 1, "gemm_engine": 0, "launches": 0}
    with ReplayCompiler() as rc:
        keys = [m.key for m in rc.compile(render.render(case), target, None, render.case_options(case)).coverage.missing]
    path = _write(tmp_path, "cublas.txt", [ar.Entry(_gemm_key(keys), ar.Choice("cublaslt", {"algorithm": -1}))])
    covered = fidelity.collect_replayed([case], target, path, sigs)
    assert covered[case.id] == "autotune results covered 1 of 1 autotuned decisions"
    cells = fidelity.build(sigs)
    after = fidelity.agreement(cells, sigs)
    assert after["cases"] == 1 and after["gemm_engine"] == 1
    table = fidelity.markdown(cells, {"replayed_agreement": after, "autotune_coverage": covered})
    assert "gemm engine agrees in 1 of 1 cases (100 %)" in table
    assert "autotune replay, seed_relu_f32: autotune results covered 1 of 1" in table


def test_a_second_compile_in_the_same_worker_still_counts_the_file_loaded(replay, own_keys, tmp_path):
    """XLA says it loaded a results file once per process, at the first compile that names it: the next compile in
    the same worker replays it too (before #58 its summary said the file 'was not loaded')."""
    key = _gemm_key(own_keys[0])
    path = _write(tmp_path, "twice.txt", [ar.Entry(key, ar.Choice("cublaslt", {"algorithm": -1}))])
    first, second = replay(path), replay(path)
    assert first.coverage.loaded and second.coverage.loaded
    assert second.coverage.summary() == "autotune results covered 1 of 1 autotuned decisions"
    assert second.coverage.choices == ("cublaslt(algorithm=-1)",)
