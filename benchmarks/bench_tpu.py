"""Benchmark the TPU environments and TPU compile times.

    python benchmarks/bench_tpu.py [--versions 0.6.1,0.12.0.1] [--cold 0.12.0.1] [--skip-envs]
    python benchmarks/bench_tpu.py --render     # rewrite the .md from benchmarks/out/bench_tpu.json

1. Per JAX release: its TPU environment (`fp8_check.versions._envs.Manager(platform=TPU)`: `jax[tpu]==V`, i.e. jax,
   jaxlib and the pinned libtpu, plus flatbuffers) built into a temporary directory from the shared (warm) uv
   cache: wall time and size on disk; for the `--cold` releases also from an EMPTY uv cache (a new UV_CACHE_DIR),
   with the bytes the machine received meanwhile (machine-wide). The baseline, measured in the same run: the main
   job's slim CUDA environment of the same release (`Manager()`), built the same way: the ratios are TPU / CUDA.
2. Compile time per case: cases/tpu.yaml's one-chip cases compiled for v6e and tpu7x (the TPU environment of the
   newest release, `tpu` profile) and for h100 (this environment's JAX, `cublas` profile: the same functions), one
   worker each, no compile cache, in the same run; the ratio is against h100.
Writes benchmarks/out/bench_tpu.json and .md.
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
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_matrix import rx_bytes  # noqa: E402

from fp8_check.cases import _load as case_mod  # noqa: E402
from fp8_check.compile._render import render  # noqa: E402
from fp8_check.compile._service import Compiler  # noqa: E402
from fp8_check.platforms import TPU  # noqa: E402
from fp8_check.platforms.tpu.generations import LIBTPU_PINS  # noqa: E402
from fp8_check.targets import PROFILES, load_target  # noqa: E402
from fp8_check.versions import _envs as envs  # noqa: E402


def build(version: str, platform_=None, cold: bool = False) -> dict:
    with tempfile.TemporaryDirectory(prefix="fp8-bench-tpu-") as tmp:
        if cold:
            os.environ["UV_CACHE_DIR"] = str(Path(tmp) / "uv-cache")
        try:
            manager = envs.Manager(Path(tmp) / "envs", reuse_self=False, platform=platform_)
            rx, t = rx_bytes(), time.perf_counter()
            env = manager.ensure(version)
            wall = time.perf_counter() - t
            row = {"build_s": round(wall, 1), "env_mb": round(envs.disk_bytes(env.path) / 1e6)}
            if cold:
                row["received_mb"] = round((rx_bytes() - rx) / 1e6)
            return row
        finally:
            os.environ.pop("UV_CACHE_DIR", None)


def build_envs(versions: list[str], cold: list[str]) -> list[dict]:
    rows = []
    for v in versions:
        row = {"jax": v, "libtpu": LIBTPU_PINS[v], "tpu": build(v, TPU), "cuda": build(v)}
        if v in cold:
            row["tpu_cold"] = build(v, TPU, cold=True)
        rows.append(row)
        print(row, flush=True)
    return rows


def compile_times() -> dict:
    cases = [c for c in case_mod.load([REPO / "cases" / "tpu.yaml"]) if "v6e" in c.targets]
    tpu_python = envs.python_for([load_target("v6e")])
    out: dict = {"cases": {}, "environments": {}}
    for target, python, profile in (("h100", None, "cublas"), ("v6e", tpu_python, "tpu"), ("tpu7x", tpu_python, "tpu")):
        t = load_target(target)
        with Compiler("deviceless", python=python) as compiler:
            out["environments"][target] = {k: compiler.environment().get(k) for k in ("jax", "jaxlib")}
            compiler.compile(render(replace(cases[0], profiles=(profile,))), t, PROFILES[profile])  # start-up, not timed
            for case in cases:
                comp = compiler.compile(render(replace(case, profiles=(profile,))), t, PROFILES[profile])
                out["cases"].setdefault(case.id, {})[target] = round(comp.seconds, 3) if comp.ok else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--versions", default=",".join(LIBTPU_PINS))
    ap.add_argument("--cold", default="0.12.0.1", help="releases also built from an empty uv cache (network)")
    ap.add_argument("--skip-envs", action="store_true")
    ap.add_argument("--render", action="store_true")
    args = ap.parse_args()
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    if args.render:
        return render_md(json.loads((out / "bench_tpu.json").read_text()), out)
    report = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_average_at_start": os.getloadavg(),
              "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    if not args.skip_envs:
        report["environments"] = build_envs([v for v in args.versions.split(",") if v],
                                            [v for v in args.cold.split(",") if v])
    report["compile"] = compile_times()
    (out / "bench_tpu.json").write_text(json.dumps(report, indent=1) + "\n")
    return render_md(report, out)


def render_md(report: dict, out: Path) -> int:
    lines = [f"# TPU environments and compile times ({report['created']})", "",
             f"Machine: {report['machine']['cpus']} CPUs, load average at start "
             f"{', '.join(f'{x:.1f}' for x in report['load_average_at_start'])} (shared machine: other jobs' downloads "
             "and compiles count in the wall times).", ""]
    rows = report.get("environments") or []
    if rows:
        lines += ["## Per-release TPU environment (`jax[tpu]==V`), against the slim CUDA one of the same release", "",
                  "Both built in the same run into a temporary folder from the shared, warm uv cache (hard links: the "
                  "build time is uv's resolve and link, not the download); sizes are apparent bytes on disk.", "",
                  "| JAX | libtpu | TPU build (s) | TPU on disk (MB) | CUDA build (s) | CUDA on disk (MB) | size TPU / CUDA |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for r in rows:
            lines.append(f"| {r['jax']} | {r['libtpu']} | {r['tpu']['build_s']} | {r['tpu']['env_mb']} | "
                         f"{r['cuda']['build_s']} | {r['cuda']['env_mb']} | {r['tpu']['env_mb'] / r['cuda']['env_mb']:.2f} |")
        sizes = [r["tpu"]["env_mb"] / r["cuda"]["env_mb"] for r in rows]
        lines += ["", f"Median TPU / CUDA environment size over {len(rows)} releases: **{statistics.median(sizes):.2f}** "
                  f"(TPU {min(r['tpu']['env_mb'] for r in rows)}-{max(r['tpu']['env_mb'] for r in rows)} MB)."]
        cold = [r for r in rows if "tpu_cold" in r]
        if cold:
            lines += ["", "From an empty uv cache (network, machine-wide bytes received):", "",
                      "| JAX | build (s) | received (MB) | on disk (MB) |", "|---|---:|---:|---:|"]
            lines += [f"| {r['jax']} | {r['tpu_cold']['build_s']} | {r['tpu_cold']['received_mb']} | "
                      f"{r['tpu_cold']['env_mb']} |" for r in cold]
        lines.append("")
    comp = report["compile"]
    lines += ["## Compile time per case (one worker, no compile cache)", "",
              "Environments: " + "; ".join(f"{t}: jax {e['jax']}" for t, e in comp["environments"].items()), "",
              "| case | h100 (s) | v6e (s) | tpu7x (s) | v6e / h100 |", "|---|---:|---:|---:|---:|"]
    ratios = []
    for cid, t in comp["cases"].items():
        h, v, x = t.get("h100"), t.get("v6e"), t.get("tpu7x")
        if h and v:
            ratios.append(v / h)
        lines.append(f"| {cid} | {h if h is not None else ''} | {v if v is not None else ''} | "
                     f"{x if x is not None else ''} | {f'{v / h:.2f}' if h and v else ''} |")
    if ratios:
        lines += ["", f"Median compile-time ratio v6e / h100 over {len(ratios)} cases: **{statistics.median(ratios):.2f}** "
                  "(one compile each on a shared machine: single measurements, noisy)."]
    (out / "bench_tpu.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
