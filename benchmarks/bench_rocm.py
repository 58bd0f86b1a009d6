"""Benchmark AMD/ROCm deviceless compiling: what each ROCm environment costs, and compile time vs h100.

    python benchmarks/bench_rocm.py [--versions 0.12.0,0.11.2] [--skip-envs]
    python benchmarks/bench_rocm.py --render     # rewrite the .md from benchmarks/out/bench_rocm.json

1. Per JAX release with a ROCm plugin: a ROCm environment (`fp8_check.versions._envs.Manager(platform=AMD)`:
   JAX's slim CUDA set + jax-rocm7-plugin/pjrt + flatbuffers, then the runtime stand-ins generated from the
   plugin) built into a temporary directory from an EMPTY uv cache (a new UV_CACHE_DIR per version): wall
   time, bytes received by the machine meanwhile (machine-wide), the environment's size on disk, and how many
   stand-in libraries/functions were generated.
2. Compile time per case: cases/seed.yaml and cases/amd.yaml under the cublas profile, each compiled once for
   h100 (this environment's JAX) and once for mi300x and mi350x (the cached ROCm environment of the newest
   release), one worker each, no compile cache, in the same run; the ratio is against h100 measured here.
Writes benchmarks/out/bench_rocm.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_matrix import rx_bytes  # noqa: E402

from fp8_check.cases import _load as case_mod  # noqa: E402
from fp8_check.compile._render import render  # noqa: E402
from fp8_check.compile._service import Compiler  # noqa: E402
from fp8_check.platforms import AMD  # noqa: E402
from fp8_check.platforms._amd import PLUGIN_RELEASES  # noqa: E402
from fp8_check.targets import PROFILES, load_target  # noqa: E402
from fp8_check.versions import _envs as envs  # noqa: E402


def build_envs(versions: list[str]) -> list[dict]:
    rows = []
    for v in versions:
        with tempfile.TemporaryDirectory(prefix="fp8-bench-rocm-") as tmp:
            os.environ["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
            manager = envs.Manager(Path(tmp) / "envs", reuse_self=False, platform=AMD)
            rx, t = rx_bytes(), time.perf_counter()
            env = manager.ensure(v)
            wall = time.perf_counter() - t
            received = rx_bytes() - rx
            finished = env.info.get("finished") or {}
            rows.append({"jax": v, "build_s": round(wall, 1), "received_mb": round(received / 1e6),
                         "env_mb": round(envs.disk_bytes(env.path) / 1e6),
                         "standin_libraries": len(finished.get("libraries", {})),
                         "standin_functions": sum(finished.get("libraries", {}).values())})
            print(rows[-1], flush=True)
    os.environ.pop("UV_CACHE_DIR", None)
    return rows


def compile_times() -> dict:
    cases = [c for c in case_mod.load([REPO / "cases" / "seed.yaml", REPO / "cases" / "amd.yaml"])
             if "cublas" in c.profiles]
    profile = PROFILES["cublas"]
    rocm_python = envs.python_for([load_target("mi300x")])
    out: dict = {"cases": {}, "environments": {}}
    for target, python in (("h100", None), ("mi300x", rocm_python), ("mi350x", rocm_python)):
        t = load_target(target)
        with Compiler("deviceless", python=python) as compiler:
            out["environments"][target] = {k: compiler.environment().get(k) for k in ("jax", "jaxlib")}
            compiler.compile(render(cases[0]), t, profile)  # start-up and JAX import, not timed
            for case in cases:
                if case.targets and target not in case.targets:
                    continue
                comp = compiler.compile(render(case), t, profile)
                out["cases"].setdefault(case.id, {})[target] = round(comp.seconds, 3) if comp.ok else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", default=",".join(PLUGIN_RELEASES))
    ap.add_argument("--skip-envs", action="store_true")
    ap.add_argument("--render", action="store_true")
    args = ap.parse_args()
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    if args.render:
        return render_md(json.loads((out / "bench_rocm.json").read_text()), out)
    report = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_average_at_start": os.getloadavg(),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    if not args.skip_envs:
        report["environments"] = build_envs([v for v in args.versions.split(",") if v])
    report["compile"] = compile_times()
    (out / "bench_rocm.json").write_text(json.dumps(report, indent=1) + "\n")
    return render_md(report, out)


def render_md(report: dict, out: Path) -> int:
    lines = [f"# ROCm environments and compile times ({report['created']})", "",
             f"Machine: {report['machine']['cpus']} CPUs, load average at start {', '.join(f'{x:.1f}' for x in report['load_average_at_start'])} "
             "(shared machine: other jobs' downloads and compiles count in the wall times).", ""]
    if report.get("environments"):
        lines += ["## Per-version ROCm environment, from an empty uv cache", "",
                  "Each environment holds JAX's slim CUDA set too (jax, jaxlib, the CUDA plugin and PJRT, ptxas: about "
                  "1.05 GB on disk, so one worker compiles for h100 and mi300x alike); the ROCm plugin and its PJRT "
                  "library are the rest. Generating and compiling the stand-ins takes a few seconds of the build (3.8 s measured alone for 0.12.0).", "",
                  "| JAX | build (s) | received (MB) | on disk (MB) | stand-in libraries | stand-in functions |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['jax']} | {r['build_s']} | {r['received_mb']} | {r['env_mb']} | {r['standin_libraries']} | "
                  f"{r['standin_functions']} |" for r in report["environments"]]
        lines.append("")
    comp = report["compile"]
    lines += ["## Compile time per case (cublas profile, one worker, no compile cache)", "",
              "Environments: " + "; ".join(f"{t}: jax {e['jax']}" for t, e in comp["environments"].items()), "",
              "| case | h100 (s) | mi300x (s) | mi350x (s) | mi300x / h100 |", "|---|---:|---:|---:|---:|"]
    ratios, ratios350 = [], []
    for cid, t in comp["cases"].items():
        h, m, n = t.get("h100"), t.get("mi300x"), t.get("mi350x")
        ratio = f"{m / h:.2f}" if h and m else ""
        if h and m:
            ratios.append(m / h)
        if h and n:
            ratios350.append(n / h)
        lines.append(f"| {cid} | {h if h is not None else ''} | {m if m is not None else ''} | {n if n is not None else ''} | {ratio} |")
    if ratios:
        lines += ["", f"Median compile-time ratio over the {len(ratios)} cases compiled for all three: mi300x / h100 "
                  f"**{statistics.median(ratios):.2f}**, mi350x / h100 **{statistics.median(ratios350):.2f}** (one compile "
                  "each on a shared, loaded machine: single measurements, noisy)."]
    (out / "bench_rocm.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
