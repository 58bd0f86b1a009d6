"""Benchmark `fp8-check run` (pool + compile cache) against a bare single-process compile loop, and the warm matrix.

    python benchmarks/bench_run.py                               # whole library, h100, cublas + triton, deviceless
    python benchmarks/bench_run.py --matrix-versions 0.6.1,0.12.0.1 --repeat 2

All in one run, on the same machine state (each measurement is the wall time of a
fresh process, interpreter start to exit):

- bare: ONE Python process that imports JAX and compiles every planned case (and the
  canary, which `run` also compiles) with `fp8_check.worker._aot.compile_for` — the
  worker's own code path, same compiler options, same XLA flags (the optimized-HLO
  dump), same target — one after the other, no harness around it;
- run --no-cache -j 1: the previous `fp8-check run` (one worker, nothing cached);
- run cold: `fp8-check run` with the default workers and an empty compile cache;
- run warm: the same command again, unchanged (every compile is a cache hit);
- matrix: `fp8-check matrix` over --matrix-versions (environments already built),
  `--no-cache` (the previous path: one worker per version, everything compiled), then
  with an empty compile cache (cold), then again (warm). Per-version time = wall / versions.

bare and the cold/warm runs are measured --repeat times, interleaved; the ratios use the
medians. The machine's load average is recorded before and after.
Writes benchmarks/out/bench_run.json and .md (--out-name to name them otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BARE_LOOP = r'''
import os, sys, tempfile, time, types
sys.path.insert(0, sys.argv[1])
from fp8_check import platforms
from fp8_check.worker import _aot as aot
dump = tempfile.mkdtemp(prefix="fp8-bench-dump-")
aot.prepare_environment("deviceless", dump, deviceless_env=platforms.deviceless_environment())            # the worker's environment and XLA flags
import json
jobs = json.load(open(sys.argv[2]))
devices = {}
n = 0
for job in jobs:
    if job["target_config"] not in devices:
        devices[job["target_config"]] = aot.compile_device("deviceless", job["target_config"], platforms.of_spec(job["target_config"]).jax_platform)
    module = types.ModuleType("case")
    exec(compile(job["source"], "case.py", "exec"), module.__dict__)
    try:
        aot.compile_for(module.FN, module.ARGS, devices[job["target_config"]], job["compiler_options"], dump)
        n += 1
    except Exception as exc:
        print("error", job["case"], type(exc).__name__, exc)
print("compiled", n, "of", len(jobs))
'''


def plan_jobs(target: str, profiles: list[str], paths: list[Path] | None = None) -> list[dict]:
    """Exactly what `fp8-check run --mode deviceless` compiles, in its order: the target's canary requests (the
    canary, and the cuDNN probe where the target expects cuDNN), then every planned case that is not
    UNSUPPORTED here, each with the XLA options its kind adds (`optional_options`: this XLA has them all)."""
    from importlib.metadata import version

    from fp8_check.cases import _load as case_mod
    from fp8_check.run import _runner as runner
    from fp8_check.targets import load_target
    from fp8_check.verdict import _canary as canary_mod

    t = load_target(target)
    jax_version = version("jax")
    requests = canary_mod.requests([t], "deviceless", jax_version)
    cases = case_mod.load(paths or [REPO / "cases"])
    for case, tgt, profile in runner.plan(cases, [t], profiles):
        if runner.unsupported_reason(profile, "deviceless", jax_version) is None:
            requests.append(runner.request_for(case, tgt, profile))
    return [{"case": r.rendered.case_id, "source": r.rendered.source, "target_config": r.target.config_text,
             "compiler_options": dict(r.profile.compiler_options, **(r.optional_options or {}))} for r in requests]


CPU: dict[str, list[float]] = {}
LOAD: dict[str, list[float]] = {}


def timed(cmd: list[str], env: dict, log: Path, name: str = "") -> tuple[float, int, str]:
    """Wall time of `cmd`; its CPU time (user + sys, with its worker subprocesses) and the 1-minute load go to CPU/LOAD."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if name:
        CPU.setdefault(name, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        LOAD.setdefault(name, []).append(load)
    log.write_text(proc.stdout + proc.stderr)
    return wall, proc.returncode, proc.stdout + proc.stderr


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="h100")
    p.add_argument("--profiles", default="cublas,triton")
    p.add_argument("--repeat", type=int, default=1, help="measure bare / cold / warm this many times (medians)")
    p.add_argument("--matrix-versions", default="0.6.1,0.9.2,0.12.0.1", help="'' skips the matrix")
    p.add_argument("--skip-old-run", action="store_true", help="skip `run --no-cache -j 1`")
    p.add_argument("--cases", default="", help="comma-separated case files (relative to the checkout) instead of "
                   "the whole library in cases/, e.g. to measure the pattern library without the model cases")
    p.add_argument("--out-name", default="bench_run", help="basename of the .json/.md written to benchmarks/out")
    args = p.parse_args()
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    logs = out / f"{args.out_name}_logs"
    logs.mkdir(exist_ok=True)
    py = sys.executable
    fp8 = [py, "-m", "fp8_check.cli.main"]
    profiles = args.profiles.split(",")
    case_paths = [REPO / c for c in args.cases.split(",") if c] or None
    jobs = plan_jobs(args.target, profiles, case_paths)
    scratch = Path(tempfile.mkdtemp(prefix="fp8-bench-run-"))
    jobs_file = scratch / "jobs.json"
    jobs_file.write_text(json.dumps(jobs))
    report = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
              "compiles": len(jobs), "target": args.target, "profiles": profiles,
              "cases": args.cases.split(",") if args.cases else ["cases/"],
              "load_average_before": os.getloadavg(), "runs": {}}
    print(f"{len(jobs)} compiles per run (canary + cases x profiles); load average {os.getloadavg()}", flush=True)

    base_env = dict(os.environ)
    base_env.pop("FP8_CHECK_COMPILE_CACHE", None)
    run_args = ["run", "--mode", "deviceless", "--target", args.target, "--profile", args.profiles,
                *[str(c) for c in case_paths or []]]
    samples: dict[str, list[float]] = {"bare": [], "cold": [], "warm": []}
    for i in range(args.repeat):
        env = dict(base_env, FP8_CHECK_COMPILE_CACHE=str(scratch / f"cache-{i}"))
        wall, code, text = timed([py, "-c", BARE_LOOP, str(REPO), str(jobs_file)], env, logs / f"bare-{i}.txt", "bare")
        assert f"compiled {len(jobs)} of {len(jobs)}" in text, text[-2000:]
        samples["bare"].append(wall)
        print(f"[{i}] bare loop: {wall:.1f}s", flush=True)
        for name in ("cold", "warm"):
            wall, code, text = timed(fp8 + run_args + ["--json", str(scratch / f"{name}-{i}.json")], env,
                                     logs / f"run-{name}-{i}.txt", name)
            assert code in (0, 1), text[-2000:]
            samples[name].append(wall)
            summary = [ln for ln in text.splitlines() if ln.startswith("compile cache")]
            print(f"[{i}] run {name}: {wall:.1f}s ({summary[0] if summary else '?'})", flush=True)
            report["runs"].setdefault(name + "_cache_line", summary[0] if summary else None)
    if not args.skip_old_run:
        env = dict(base_env, FP8_CHECK_COMPILE_CACHE=str(scratch / "unused"))
        wall, code, text = timed(fp8 + run_args + ["--no-cache", "-j", "1", "--json", str(scratch / "old.json")], env,
                                 logs / "run-old.txt", "old_nocache_j1")
        samples["old_nocache_j1"] = [wall]
        print(f"run --no-cache -j 1: {wall:.1f}s", flush=True)
    med = {k: statistics.median(v) for k, v in samples.items() if v}
    report["runs"].update({k: {"samples_s": [round(x, 2) for x in v], "median_s": round(med[k], 2),
                               "cpu_s": [round(x, 1) for x in CPU.get(k, [])],
                               "load_at_start": [round(x, 1) for x in LOAD.get(k, [])]}
                           for k, v in samples.items() if v})
    report["ratios"] = {f"{k}_over_bare": round(med[k] / med["bare"], 3) for k in med if k != "bare"}
    # paired: each repeat's run against the bare loop measured just before it
    report["paired_ratios"] = {k: [round(a / b, 3) for a, b in zip(samples[k], samples["bare"])]
                               for k in ("cold", "warm") if samples[k]}

    versions = [v for v in args.matrix_versions.split(",") if v]
    if not versions:  # keep the last matrix measurement, saying when it was taken
        try:
            previous = json.loads((out / f"{args.out_name}.json").read_text())
        except (OSError, ValueError):
            previous = {}
        if previous.get("matrix"):
            report["matrix"] = previous["matrix"]
            report["matrix"].setdefault("measured", previous.get("created"))
    if versions:
        from fp8_check.versions import _envs as envs

        manager = envs.Manager()
        for v in versions:  # warm environments: what is measured is compiling, not installing
            manager.ensure(v)
        report["matrix"] = {"versions": versions}
        for name, extra, cache in (("old_nocache", ["--no-cache"], "m-unused"), ("cold", [], "m-cache"),
                                   ("warm", [], "m-cache")):
            env = dict(base_env, FP8_CHECK_COMPILE_CACHE=str(scratch / cache))
            cmd = fp8 + ["matrix", "--jax", ",".join(versions), "--target", args.target, "--profile", args.profiles,
                         "--out", str(scratch / f"matrix-{name}.json"), "--no-html", "--fail-on", "never", *extra]
            wall, code, text = timed(cmd, env, logs / f"matrix-{name}.txt", "matrix_" + name)
            doc = json.loads((scratch / f"matrix-{name}.json").read_text())
            n = sum(len(e.get("results", [])) for e in doc["versions"])
            report["matrix"][name] = {"wall_s": round(wall, 2), "per_version_s": round(wall / len(versions), 2),
                                      "cpu_s": round(CPU["matrix_" + name][-1], 1),
                                      "results": n, "exit": code,
                                      "status": {e["jax"]: e["status"] for e in doc["versions"]},
                                      "cached": sum(1 for e in doc["versions"] for r in e.get("results", []) if r.get("cached"))}
            print(f"matrix {name}: {wall:.1f}s for {len(versions)} versions ({wall / len(versions):.1f}s per version), "
                  f"{n} results, {report['matrix'][name]['cached']} from the cache", flush=True)
        m = report["matrix"]
        m["warm_speedup_per_version"] = round(m["old_nocache"]["per_version_s"] / m["warm"]["per_version_s"], 1)
    report["load_average_after"] = os.getloadavg()
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    (out / f"{args.out_name}.json").write_text(json.dumps(report, indent=1) + "\n")
    r = report["runs"]
    lines = [f"# fp8-check run benchmark ({report['created']})", "",
             f"{report['machine']['cpus']} CPUs, {report['machine']['platform']}, Python {report['machine']['python']}; "
             f"load average before {tuple(round(x, 2) for x in report['load_average_before'])}, after "
             f"{tuple(round(x, 2) for x in report['load_average_after'])} (the machine is shared)", "",
             f"{report['compiles']} compiles per run: canary + {', '.join(report['cases'])} x {', '.join(profiles)} "
             f"for {args.target}, deviceless.",
             "", "| what | wall (s), median | wall samples (s) | CPU (s), with workers | load at start | ratio to the bare loop (medians) |",
             "|---|---|---|---|---|---|"]
    names = {"bare": "bare single-process compile loop", "old_nocache_j1": "`run --no-cache -j 1` (previous behaviour)",
             "cold": "`run`, empty compile cache (default -j)", "warm": "`run` again, unchanged (warm cache)"}
    for k in ("bare", "old_nocache_j1", "cold", "warm"):
        if k in r:
            ratio = "1" if k == "bare" else f"{report['ratios'][k + '_over_bare']:.3f}"
            lines.append(f"| {names[k]} | {r[k]['median_s']} | {r[k]['samples_s']} | {r[k]['cpu_s']} | "
                         f"{r[k]['load_at_start']} | {ratio} |")
    lines += ["", "Paired ratios (each repeat against the bare loop run just before it): "
              + "; ".join(f"{k} {v}" for k, v in report["paired_ratios"].items())]
    if "matrix" in report:
        m = report["matrix"]
        when = f" (measured {m['measured']})" if m.get("measured") else ""
        lines += ["", f"Matrix over {len(m['versions'])} versions ({', '.join(m['versions'])}), environments warm{when}:", "",
                  "| matrix | wall (s) | per version (s) | CPU (s) | results | from the cache |", "|---|---|---|---|---|---|"]
        for k, label in (("old_nocache", "`--no-cache` (previous behaviour)"), ("cold", "empty compile cache"),
                         ("warm", "warm compile cache")):
            lines.append(f"| {label} | {m[k]['wall_s']} | {m[k]['per_version_s']} | {m[k].get('cpu_s', '')} | {m[k]['results']} | "
                         f"{m[k]['cached']} |")
        lines += ["", f"Warm matrix: {m['warm_speedup_per_version']}x faster per version than the previous path."]
    (out / f"{args.out_name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
