"""The compile pool and the cache, end to end: real workers compiling deviceless through the CUDA plugin."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from fp8_check.cases import _load as case_mod
from fp8_check.compile import _render as render
from fp8_check.compile._cache import CompileCache
from fp8_check.compile._pool import CompilerPool
from fp8_check.compile._service import CompileRequest
from fp8_check.targets import PROFILES, TARGET_DIR, load_target
from fp8_check.verdict._canary import CANARY

from ..conftest import write_cases

pytestmark = pytest.mark.slow

DL = ("--mode", "deviceless")
ARGS = "args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]"


def py_case(case_id: str, fn: str) -> str:
    return f"  - id: {case_id}\n    kind: python\n    callable: tests.casefns:{fn}\n    {ARGS}\n    profiles: [cublas]\n"


def load(tmp_path: Path, text: str):
    write_cases(tmp_path / "cases" / "c.yaml", "cases:\n" + text)
    return case_mod.load([tmp_path / "cases" / "c.yaml"])


def test_pool_yields_in_request_order_and_a_crash_or_hang_hits_only_its_case(tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"  # where the workers' dump directories go: none may be left behind
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    cases = load(tmp_path, py_case("p1", "plain") + py_case("crash", "crash") + py_case("p2", "plain")
                 + py_case("hang", "sleeps") + py_case("p3", "plain") + py_case("p4", "plain"))
    h100 = load_target("h100")
    requests = [CompileRequest(render.render(c), h100, PROFILES["cublas"]) for c in cases]
    with CompilerPool("deviceless", jobs=2, timeout=20.0, cache=None) as pool:
        comps = list(pool.imap(requests))
        dumps = [c.worker.dump_dir for c in pool._compilers]  # None: that worker was killed (the hang) and gone
    assert any(dumps) and all(d.startswith(str(scratch)) for d in dumps if d), dumps
    assert [c.case_id for c in comps] == ["p1", "crash", "p2", "hang", "p3", "p4"]
    by = {c.case_id: c for c in comps}
    assert "worker crashed" in by["crash"].error and "exited with status" in by["crash"].error
    assert "worker crashed" in by["hang"].error and "no answer within 20 s" in by["hang"].error
    for ok in ("p1", "p2", "p3", "p4"):
        assert by[ok].ok, by[ok].error
        assert '"__cublas$lt$matmul$f8"' in by[ok].hlo or "__cublas$lt$matmul$f8" in by[ok].hlo
    assert pool.compiled == 6
    assert not list(scratch.glob("fp8-check-dump-*")), list(scratch.iterdir())


def results(path: Path) -> list[dict]:
    return json.loads(path.read_text())["results"]


def without_cache_flag(rs: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "cached"} for r in rs]


def test_outcomes_identical_with_and_without_cache_and_rerun_is_all_hits(workspace, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    # a FAIL and a NEW among the PASSes, so more than one outcome code is compared
    g = workspace / "goldens" / "h100" / "cublas" / "deviceless" / "seed_relu_f32.yaml"
    g.write_text(g.read_text().replace("epilogue: RELU", "epilogue: DEFAULT"))
    (workspace / "goldens" / "h100" / "triton" / "deviceless" / "seed_plain_bf16.yaml").unlink()
    code0, out0, _ = run_cli("run", *DL, "-v", "--no-cache", "--json", workspace / "nocache.json", cwd=workspace)
    code1, out1, _ = run_cli("run", *DL, "-v", "-j", "2", "--json", workspace / "cold.json", cwd=workspace)
    code2, out2, _ = run_cli("run", *DL, "-v", "-j", "2", "--json", workspace / "warm.json", cwd=workspace)
    assert code0 == code1 == code2 == 1
    assert "compile cache off; 17 compiled" in out0
    # 16 cases + the canary, which is seed_plain_f32's program (only the docstring differs): compiled once
    assert "compile cache: 0 hit(s), 16 compiled, 1 shared" in out1
    assert "compile cache: 17 hit(s), 0 compiled" in out2
    nocache, cold, warm = (results(workspace / f"{n}.json") for n in ("nocache", "cold", "warm"))
    codes = [r["outcome"] for r in nocache]
    assert codes.count("FAIL") == 1 and codes.count("NEW") == 1 and codes.count("PASS") == 14
    assert not any(r["cached"] for r in nocache + cold) and all(r["cached"] for r in warm)
    # identical outcomes, reasons, signatures and HLO, in the same order
    for name, rs in (("cold", cold), ("warm", warm)):
        a, b = without_cache_flag(nocache), without_cache_flag(rs)
        for r in a + b:
            r.pop("compile_seconds")  # measured anew without the cache
        assert a == b, name
    assert without_cache_flag(cold) == without_cache_flag(warm)  # including the (cached) compile seconds
    # the shared compilation is seed_plain_f32's own, in its own file's name: identical to compiling it (above)
    [shared] = [r for r in cold if r["case"] == "seed_plain_f32" and r["profile"] == "cublas"]
    assert "fp8_case_seed_plain_f32.py" in shared["hlo"] and "canary" not in shared["hlo"]
    # printed in plan order, whatever order the workers finished in (-v: every result line, plain PASS too)
    def lines(out: str) -> list[list[str]]:
        return [ln.split()[1:3] for ln in out.splitlines() if re.match(r"^(PASS|FAIL|NEW)\s", ln)]

    assert lines(out0) == lines(out1) == lines(out2) and len(lines(out0)) == 16
    assert "(cached)" in out2 and "(cached)" not in out1


def test_each_real_key_component_misses(workspace, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    sel = ("-k", "seed_plain_f32", "--profile", "cublas")

    def run(*extra):
        code, out, err = run_cli("run", *DL, *sel, *extra, cwd=workspace)
        m = re.search(r"compile cache: (\d+) hit\(s\), (\d+) compiled(?:, (\d+) shared)?", out)
        assert m, out + err
        # (hits, misses); a miss is compiled, or shared with an identical compilation of another case: the
        # canary's program is seed_plain_f32's (tests/compile/test_sharing.py)
        return int(m.group(1)), int(m.group(2)) + int(m.group(3) or 0)

    assert run() == (0, 2)  # canary + case
    assert run() == (2, 0)
    # the profile's compiler options
    assert run("--profile", "triton") == (1, 1)  # (the canary is always cublas)
    # the XLA flags (a dump option: changes nothing in the program, but the key must not guess that)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_hlo_pass_re=nothing")
    assert run() == (0, 2)
    monkeypatch.delenv("XLA_FLAGS")
    assert run() == (2, 0)
    # the target spec text
    spec = (TARGET_DIR / "h100.txtpb").read_text()
    (workspace / "h100_edited.txtpb").write_text(spec + "\n# an edited copy\n")
    assert run("--target", workspace / "h100_edited.txtpb") == (0, 2)
    # the rendered source (the description is in its docstring)
    seed = workspace / "cases" / "seed.yaml"
    text = seed.read_text()
    assert "description: plain FP8 matmul, float32 dequant" in text
    seed.write_text(text.replace("description: plain FP8 matmul, float32 dequant", "description: edited, float32 dequant", 1))
    assert run() == (1, 1)


def test_uncacheable_and_import_error_rules_in_a_real_run(tmp_path, run_cli, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    write_cases(tmp_path / "cases" / "py.yaml", "cases:\n" + py_case("inlined_plain", "plain") + """\
  - id: missing_dependency
    kind: python
    callable: no_such_package_xyz.layers:dense
    requires: [no_such_package_xyz]
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}]
    profiles: [cublas]
  - id: raises
    kind: python
    callable: tests.casefns:raises
""" + "    " + ARGS + "\n    profiles: [cublas]\n")
    for _ in range(2):
        code, out, _ = run_cli("run", *DL, "--json", tmp_path / "r.json", cwd=tmp_path)
    by = {r["case"]: r for r in results(tmp_path / "r.json")}
    # inlined repository module (imports only os and jax): cached; a missing declared dependency: cached as UNSUPPORTED;
    # an exception while tracing: compiled again every time
    assert by["inlined_plain"]["cached"] and by["missing_dependency"]["cached"]
    assert by["missing_dependency"]["outcome"] == "UNSUPPORTED" and "no_such_package_xyz" in by["missing_dependency"]["reason"]
    assert not by["raises"]["cached"] and by["raises"]["outcome"] == "UNRESOLVED"
    assert "compile cache: 3 hit(s), 1 compiled" in out


def test_corrupt_entries_are_recompiled_with_the_same_outcome(workspace, run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    sel = ("-k", "seed_relu", "--profile", "cublas", "--json")
    run_cli("run", *DL, *sel, workspace / "a.json", cwd=workspace)
    entries = sorted((tmp_path / "cc").rglob("*.json.gz"))
    assert len(entries) == 5  # canary + 4 cases
    entries[0].write_bytes(b"\x1f\x8b garbage")
    entries[1].write_bytes(entries[1].read_bytes()[:50])
    code, out, _ = run_cli("run", *DL, *sel, workspace / "b.json", cwd=workspace)
    assert code == 0 and "compile cache: 3 hit(s), 2 compiled, 2 corrupt entries replaced" in out
    def strip(rs: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k not in ("cached", "compile_seconds")} for r in rs]

    assert strip(results(workspace / "a.json")) == strip(results(workspace / "b.json"))
    cache = CompileCache(tmp_path / "cc")
    assert all(cache.get(p.name[: -len(".json.gz")]) is not None for p in entries)


def test_bless_with_a_pool_writes_the_same_goldens_as_one_worker(workspace, run_cli, tmp_path):
    for jobs, where in (("1", "g1"), ("2", "g2")):
        code, out, _ = run_cli("bless", *DL, "--no-cache", "-j", jobs, "--goldens", tmp_path / where, cwd=workspace)
        assert code == 0 and "blessed: 16 golden(s) changed" in out
    one = sorted(p.relative_to(tmp_path / "g1") for p in (tmp_path / "g1").rglob("*.yaml"))
    two = sorted(p.relative_to(tmp_path / "g2") for p in (tmp_path / "g2").rglob("*.yaml"))
    assert one == two and len(one) == 16
    assert all((tmp_path / "g1" / p).read_text() == (tmp_path / "g2" / p).read_text() for p in one)


def test_bad_worker_count_is_a_usage_error(workspace, run_cli):
    code, _, err = run_cli("run", *DL, "-j", "0", cwd=workspace)
    assert code == 2 and "-j/--workers: must be at least 1" in err and len(err.strip().splitlines()) == 1


def test_the_canary_is_compiled_alongside_the_cases_and_only_once(tmp_path, monkeypatch):
    # run(canary=True) queues the canary first and the planned cases behind it (runner.prefetch),
    # so the other worker starts on a case while the canary compiles; check_canary and the
    # judging then take the prefetched compilations (nothing is compiled twice).
    from fp8_check.compile._service import Compilation
    from fp8_check.run import _runner as runner

    cases = load(tmp_path, py_case("p1", "plain") + py_case("p2", "plain") + py_case("p3", "plain"))
    h100 = load_target("h100")
    started: list[str] = []
    queued_at_canary: list[set] = []
    with CompilerPool("deviceless", jobs=2, cache=None) as pool:
        run_one, check = pool._run, runner.check_canary

        def recording(r, key) -> Compilation:
            started.append(r.rendered.case_id)
            return run_one(r, key)

        def checking(compiler, target, *a, **kw):
            queued_at_canary.append({identity[0] for identity in pool._prefetched})
            return check(compiler, target, *a, **kw)

        pool._run = recording
        monkeypatch.setattr(runner, "check_canary", checking)
        outcomes = runner.run(cases, [h100], ["cublas"], "deviceless", pool, tmp_path / "goldens", canary=True)
    assert queued_at_canary == [{CANARY.id, "p1", "p2", "p3"}]  # all queued before the canary is waited for
    assert started[0] == CANARY.id and sorted(started[1:]) == ["p1", "p2", "p3"]
    assert pool.compiled == 4
    assert [o.case for o in outcomes] == ["p1", "p2", "p3"] and {o.code.name for o in outcomes} == {"NEW"}, [o.reason for o in outcomes]


def test_workers_share_the_cores_compile_the_same_hlo_and_leave_nothing_behind(tmp_path, monkeypatch):
    # Several workers each compile LLVM IR on their share of the cores (aot.prepare_environment's
    # codegen_threads); the optimized HLO is the one a lone worker, on XLA's default, compiles.
    # A closed worker leaves at once (os._exit) but only after removing its dump directory.
    from fp8_check.compile._pool import default_jobs
    from fp8_check.compile._service import Compiler
    from fp8_check.worker._aot import CODEGEN_THREADS_FLAG

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    cases = load(tmp_path, py_case("p1", "plain") + py_case("p2", "plain"))
    h100 = load_target("h100")
    requests = [CompileRequest(render.render(c), h100, PROFILES["cublas"]) for c in cases]
    with Compiler("deviceless") as alone:
        reference = alone.compile(requests[0].rendered, h100, PROFILES["cublas"])
        assert CODEGEN_THREADS_FLAG not in alone.environment()["xla_flags"]
    with CompilerPool("deviceless", jobs=2, cache=None) as pool:
        comps = list(pool.imap(requests))
        share = max(1, default_jobs() // 2)
        flags = [c.environment()["xla_flags"] for c in pool._compilers]
        procs = [c.worker.proc for c in pool._compilers]
        dumps = [c.worker.dump_dir for c in pool._compilers]
    assert all(d and d.startswith(str(scratch)) for d in dumps), dumps
    assert all(f"{CODEGEN_THREADS_FLAG}={share} " in f for f in flags), flags
    assert all(p is not None and p.returncode == 0 for p in procs), [p and p.returncode for p in procs]
    assert not list(scratch.glob("fp8-check-dump-*")), list(scratch.iterdir())

    def masked(hlo: str) -> str:
        return hlo.replace(str(scratch), "TMP")

    assert reference.ok and comps[0].ok, (reference.error, comps[0].error)
    assert re.sub(r"TMP/[\w.-]+/", "TMP/", masked(comps[0].hlo)) == re.sub(r"TMP/[\w.-]+/", "TMP/", masked(reference.hlo))


def test_a_flag_the_user_set_wins_over_the_pools_share(monkeypatch, tmp_path):
    from fp8_check.worker import _aot as aot

    # device mode: prepare_environment then changes only XLA_FLAGS, which monkeypatch restores
    monkeypatch.setenv("XLA_FLAGS", f"{aot.CODEGEN_THREADS_FLAG}=4")
    aot.prepare_environment("device", str(tmp_path), codegen_threads=1)
    assert os.environ["XLA_FLAGS"].count(aot.CODEGEN_THREADS_FLAG) == 1 and f"{aot.CODEGEN_THREADS_FLAG}=4" in os.environ["XLA_FLAGS"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")
    aot.prepare_environment("device", str(tmp_path), codegen_threads=1)
    assert os.environ["XLA_FLAGS"].startswith(f"{aot.CODEGEN_THREADS_FLAG}=1 --xla_gpu_enable_triton_gemm=false")


def test_a_second_probe_reuses_the_first_workers_process():
    with CompilerPool("deviceless", jobs=2, cache=None) as pool:
        pool.environment()
        pool._resolve({"numpy", "yaml"})
        started = [c.worker.proc is not None for c in pool._compilers]
    assert sorted(started) == [False, True]  # one process answered both


def test_device_mode_runs_one_worker_unless_asked():
    # found on the first GPU session (H200): one worker per core, each holding the GPU, left autotuning no memory
    from fp8_check.compile._pool import default_jobs

    device, deviceless = CompilerPool("device", cache=None), CompilerPool("deviceless", cache=None)
    try:
        assert device.jobs == 1 and deviceless.jobs == default_jobs()
        asked = CompilerPool("device", jobs=3, cache=None)
        assert asked.jobs == 3
        asked.close()
    finally:
        device.close()
        deviceless.close()
