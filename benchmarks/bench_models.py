"""Benchmark: the decoder-block train step through fp8-check vs a bare `jax.jit(...).lower(...).compile()`.

    python benchmarks/bench_models.py [--repeat 3] [--case train_step_direct]

In one process, interleaved, `--repeat` times each:
- bare: `jax.jit(fn).lower(*shapes).compile(options)` for the same compile-only H100 device
  (the shipped h100 spec with its versions written in, `cublas` profile options), a fresh
  `jax.jit` wrapper each time so nothing is reused — what a user would write without fp8-check;
- fp8-check: `fp8_check.api.Checker.signature(fn, *shapes)` on a started checker (worker up, canary
  done): export in this process, compile in the worker (with the HLO dump fp8-check reads),
  parse, signature with attribution and coverage. The compile cache is not involved (the API
  does not use it).
Once, for context: `fp8-check run -k decoder_direct_train --no-cache -j 1` (process start,
canary, case, judging), wall clock.

Writes benchmarks/out/bench_models.json and benchmarks/out/bench_models.md.
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
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from fp8_check import (
    api,  # noqa: E402
    platforms,  # noqa: E402
)
from fp8_check.models import decoder  # noqa: E402
from fp8_check.targets import PROFILES, load_target  # noqa: E402
from fp8_check.worker import _aot as aot  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--case", default="train_step_direct", help="a function of fp8_check.models.decoder")
    ap.add_argument("--no-run", action="store_true", help="skip the `fp8-check run` row")
    args = ap.parse_args()
    kind = "forward" if args.case.startswith("forward") else "train"
    recipe = args.case.rsplit("_", 1)[1]
    fn = getattr(decoder, args.case)
    specs = getattr(decoder, f"args_{kind}_{recipe}")()  # the case's own argument factory (pytrees of shapes)

    target = load_target("h100")
    config = aot.target_config_for(target.config_text, target.versions_dict(), jax.__version__)
    device = aot.compile_device("deviceless", config, platforms.of_spec(config).jax_platform)
    sharding = jax.sharding.SingleDeviceSharding(device)
    placed = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding), specs)
    options = dict(PROFILES["cublas"].compiler_options)

    def bare() -> float:
        start = time.perf_counter()
        jax.jit(lambda *xs: fn(*xs)).lower(*placed).compile(compiler_options=options)
        return time.perf_counter() - start

    checker = api.Checker("deviceless")
    t0 = time.perf_counter()
    checker.signature(lambda a, b: a @ b, jax.ShapeDtypeStruct((16, 16), jnp.float32),
                      jax.ShapeDtypeStruct((16, 16), jnp.float32), target="h100")
    warmup = time.perf_counter() - t0

    rows: dict[str, list[float]] = {"bare": [], "fp8-check": [], "fp8-check worker compile": []}
    report = None
    for _ in range(args.repeat):
        rows["bare"].append(bare())
        start = time.perf_counter()
        report = checker.signature(fn, *specs, target="h100", profile="cublas")
        rows["fp8-check"].append(time.perf_counter() - start)
        rows["fp8-check worker compile"].append(report.seconds)
    checker.close()

    run_wall = None
    if not args.no_run and args.case == "train_step_direct":
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "run", "cases/models.yaml", "-k", "decoder_direct_train",
                               "--no-cache", "-j", "1", "--json", os.path.join(tempfile.mkdtemp(), "r.json")],
                              cwd=REPO, capture_output=True, text=True)
        run_wall = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)

    med = {k: statistics.median(v) for k, v in rows.items()}
    ratio = med["fp8-check"] / med["bare"]
    pairs = [f / b for f, b in zip(rows["fp8-check"], rows["bare"])]
    out = {
        "case": args.case, "jax": jax.__version__, "python": platform.python_version(), "cpus": os.cpu_count(),
        "load_average": os.getloadavg(), "repeat": args.repeat, "seconds": rows, "median": med,
        "ratio_median": round(ratio, 3), "ratio_pairs": [round(p, 3) for p in pairs],
        "checker_start_and_canary_s": round(warmup, 2), "fp8_check_run_wall_s": run_wall,
        "kernels": report.kernels if report else None,
        "coverage": report.to_dict()["coverage"] if report else None,
    }
    dest = REPO / "benchmarks" / "out"
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "bench_models.json").write_text(json.dumps(out, indent=1) + "\n")
    md = [
        f"# bench_models: {args.case} (jax {jax.__version__}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})",
        "",
        "| path | median s | runs |",
        "|---|---|---|",
        *(f"| {k} | {med[k]:.2f} | {', '.join(f'{x:.2f}' for x in v)} |" for k, v in rows.items()),
        "",
        f"fp8-check / bare: **{ratio:.2f}x** (pairs {', '.join(f'{p:.2f}' for p in pairs)}; target <= 1.2)",
        f"checker start + canary (once per process): {warmup:.1f} s",
    ]
    if run_wall is not None:
        md.append(f"`fp8-check run -k decoder_direct_train --no-cache -j 1` (whole process): {run_wall:.1f} s wall")
    if report is not None:
        md.append(f"signature: {report.kernels} kernels; {out['coverage'].get('line') or ''}")
    (dest / "bench_models.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
