"""Benchmark `fp8_check.api`: what checking your own function costs, deviceless, on this machine.

    python benchmarks/bench_api.py [--repeat 5]

Measures, in one fresh Python process:
- first call: starting the compile worker (it imports JAX and the CUDA plugin), the canary
  for the target, exporting and compiling the function;
- each further call on the same target: export in this process (trace + lower + serialize)
  and the worker's deserialize + compile, split into the two;
- for comparison, the same pattern as a YAML case through `fp8-check run`'s compiler
  (render + compile in the worker), so the export route's overhead is visible.

Writes benchmarks/out/bench_api.json and benchmarks/out/bench_api.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from fp8_check import api  # noqa: E402
from fp8_check.cases import Shape  # noqa: E402
from fp8_check.cases._load import Case, PatternSpec
from fp8_check.compile import _render as render  # noqa: E402
from fp8_check.compile._export import export_callable  # noqa: E402
from fp8_check.targets import PROFILES, load_target  # noqa: E402


def scaled_relu(a, b, a_scale, b_scale):
    c = jax.lax.dot_general(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale, (((1,), (0,)), ((), ())))
    return jnp.clip(jax.nn.relu(c), -448.0, 448.0).astype(jnp.float8_e4m3fn)


ARGS = (jax.ShapeDtypeStruct((64, 64), jnp.float8_e4m3fn), jax.ShapeDtypeStruct((64, 32), jnp.float8_e4m3fn),
        jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    target, profile = load_target("h100"), PROFILES["cublas"]
    out: dict = {"machine": platform.platform(), "cpus": os.cpu_count(), "jax": jax.__version__, "repeat": args.repeat}
    with api.Checker("deviceless") as checker:
        t0 = time.perf_counter()
        checker.signature(scaled_relu, *ARGS, target=target, profile=profile)
        out["first_call_s"] = round(time.perf_counter() - t0, 3)
        export_s, compile_s, total_s = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            data = export_callable(scaled_relu, ARGS, {})
            t1 = time.perf_counter()
            comp = checker.compiler.compile_exported("scaled_relu", data, target, profile)
            t2 = time.perf_counter()
            assert comp.ok, comp.error
            export_s.append(t1 - t0)
            compile_s.append(t2 - t1)
            t0 = time.perf_counter()
            checker.signature(scaled_relu, *ARGS, target=target, profile=profile)
            total_s.append(time.perf_counter() - t0)
        case = Case(id="bench_scaled_relu", file="<bench>", line=0, spec=PatternSpec(
            shape=Shape(m=64, n=32, k=64), input_scales="both", output_scale="none", clamp=True,
            out_dtype="float8_e4m3fn", epilogue="relu"))
        case_s = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            comp = checker.compiler.compile(render.render(case), target, profile)
            case_s.append(time.perf_counter() - t0)
            assert comp.ok, comp.error
    med = lambda xs: round(statistics.median(xs), 3)  # noqa: E731
    out.update(export_median_s=med(export_s), worker_compile_median_s=med(compile_s),
               signature_call_median_s=med(total_s), yaml_case_compile_median_s=med(case_s))
    bench = REPO / "benchmarks" / "out"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "bench_api.json").write_text(json.dumps(out, indent=1) + "\n")
    md = [
        "# fp8_check.api: cost of checking your own function (deviceless, h100/cublas)",
        "",
        f"Machine: {out['machine']}, {out['cpus']} CPUs; jax {out['jax']}; medians of {args.repeat} calls.",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| first call (worker start, canary, export, compile) | {out['first_call_s']} |",
        f"| export in the caller (trace, lower, serialize) | {out['export_median_s']} |",
        f"| worker: deserialize + compile | {out['worker_compile_median_s']} |",
        f"| `Checker.signature` (both, plus signature extraction) | {out['signature_call_median_s']} |",
        f"| the same pattern as a YAML case (render + compile) | {out['yaml_case_compile_median_s']} |",
        "",
    ]
    (bench / "bench_api.md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
