"""Benchmark the sharded train-step case: its compile time per JAX version, against its one-device compile.

    python benchmarks/bench_sharded.py                                   # 0.6.2, 0.8.3, 0.10.2, 0.12.0.1
    python benchmarks/bench_sharded.py --jax 0.6.1,0.12.0.1 --repeat 5

For each version (its per-version environment, built or reused as `fp8-check matrix` does), one
compile worker compiles `shard_train_step_fsdp_tp` (cases/sharded.yaml: an SGD step of an MLP
block with FP8 QDQ gemms, FSDP 4 x TP 2) deviceless for `h100x8` under the `cublas` profile,
and, as the baseline measured in the same run and worker, the same function with the same
global shapes unsharded for the one-GPU `h100`. No compile cache: every compile is real. The
worker's own compile time (lower + XLA compile, `Compilation.seconds`) is recorded; the
median of --repeat compiles after one warm-up compile of each.

Writes benchmarks/out/bench_sharded.json and benchmarks/out/bench_sharded.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fp8_check.cases import _load as cases  # noqa: E402
from fp8_check.compile import _render as render  # noqa: E402
from fp8_check.compile._service import Compiler  # noqa: E402
from fp8_check.signature._extract import extract  # noqa: E402
from fp8_check.targets import PROFILES, load_target  # noqa: E402
from fp8_check.versions import _envs as envs  # noqa: E402

CASE = "shard_train_step_fsdp_tp"


def _times(compiler: Compiler, rendered, target, repeat: int) -> tuple[list[float], object]:
    first = compiler.compile(rendered, target, PROFILES["cublas"])  # warm-up: imports, the device, JAX's caches
    if not first.ok:
        raise RuntimeError(first.error)
    out = []
    for _ in range(repeat):
        comp = compiler.compile(rendered, target, PROFILES["cublas"])
        out.append(comp.seconds)
    return out, extract(first.hlo)


def bench(version: str, repeat: int) -> dict:
    case = next(c for c in cases.load([REPO / "cases" / "sharded.yaml"]) if c.id == CASE)
    one_device = replace(case, mesh=(), shardings=(), out_shardings=None, targets=())
    env = envs.Manager().ensure(version)
    row: dict = {"jax": version}
    with Compiler("deviceless", python=str(env.python)) as compiler:
        row["jax_reported"] = compiler.environment()["jax"]
        sharded, sig = _times(compiler, render.render(case), load_target("h100x8"), repeat)
        single, sig1 = _times(compiler, render.render(one_device), load_target("h100"), repeat)
    row.update(sharded_s=round(statistics.median(sharded), 3), single_s=round(statistics.median(single), 3),
               sharded_all=[round(x, 3) for x in sharded], single_all=[round(x, 3) for x in single],
               ratio=round(statistics.median(sharded) / statistics.median(single), 2),
               kernels=sig.kernels, collectives=len(sig.collectives), fp8_gemms=sig.fp8_gemms, gemms=len(sig.gemms),
               kernels_single=sig1.kernels)
    print(f"jax {version}: h100x8 {row['sharded_s']}s, h100 {row['single_s']}s (x{row['ratio']}); "
          f"{row['kernels']} kernels, {row['collectives']} collectives, {row['fp8_gemms']}/{row['gemms']} FP8 gemms",
          flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jax", default="0.6.2,0.8.3,0.10.2,0.12.0.1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out")
    args = ap.parse_args()
    os.environ.pop("FP8_CHECK_COMPILE_CACHE", None)
    rows = [bench(v.strip(), args.repeat) for v in args.jax.split(",") if v.strip()]
    doc = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "case": CASE, "repeat": args.repeat,
           "machine": f"{os.cpu_count()} CPUs, {platform.platform()}, Python {platform.python_version()}", "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_sharded.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# Sharded train-step compile time ({doc['created']})", "", doc["machine"], "",
             f"`{CASE}` compiled deviceless, `cublas` profile, median of {args.repeat} compiles after a warm-up; "
             "baseline: the same function unsharded for one `h100`, same worker.", "",
             "| jax | h100x8 sharded (s) | h100 one device (s) | ratio | kernels (sharded) | collectives | FP8 gemms |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['jax']} | {r['sharded_s']} | {r['single_s']} | {r['ratio']}x | {r['kernels']} | {r['collectives']} | "
              f"{r['fp8_gemms']}/{r['gemms']} |" for r in rows]
    (args.out / "bench_sharded.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
