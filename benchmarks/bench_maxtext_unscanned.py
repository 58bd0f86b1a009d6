"""MaxText's llama2-7b FP8 train step with its 32 layers unrolled (scan_layers=false), through `fp8-check run`.

    python benchmarks/bench_maxtext_unscanned.py            # the case maxtext_llama2_7b_unscanned_fp8

MaxText's test config (remat_policy=minimal_with_context, docs/examples/maxtext/cases.yaml): 21 FP8 gemms per
layer, 7 forward and 14 in the backward passes, so 32 x 21 = 672 in all. The name stack carries no layer index
(MaxText's NNX bridge: every FP8 gemm is `eval_jaxpr/Fp8DirectDotGeneralOp`), so "per layer" is the count divided
by the 32 layers, per pass. One fresh `fp8-check run --no-cache` (the MaxText environment for this JAX built on
first use, `requirements: maxtext`): wall time, the worker's compile seconds, peak RSS (the largest process).
Writes benchmarks/out/bench_maxtext_unscanned.json and .md.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_maxtext import CASES, measured  # noqa: E402

CASE, LAYERS = "maxtext_llama2_7b_unscanned_fp8", 32


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-maxtext-unscanned-"))
    load_before = os.getloadavg()
    out = work / "r.json"
    run = measured([str(REPO / ".venv" / "bin" / "fp8-check"), "run", str(CASES), "-k", CASE, "--target", "h100x8",
                    "--profile", "cublas", "--no-cache", "--timeout", "3000", "--goldens", str(work / "goldens"), "--json", str(out)])
    rows = json.loads(out.read_text())["results"] if out.exists() else []
    row = rows[0] if rows else {}
    gemms = (row.get("signature") or {}).get("gemms", [])
    fp8 = [g for g in gemms if g["operand_dtypes"][0].startswith("f8")]
    passes = Counter("forward" if g.get("pass") == "forward" else "backward" for g in fp8)
    result = {
        "benchmark": "bench_maxtext_unscanned", "case": CASE, "target": "h100x8", "jax": row.get("jax"),
        "outcome": row.get("outcome"), "wall_s": run["wall_s"], "peak_rss_mib": run["peak_rss_mib"],
        "compile_seconds": row.get("compile_seconds"), "kernels": (row.get("signature") or {}).get("kernels"),
        "gemms": len(gemms), "fp8_gemms": len(fp8), "fp8_by_pass": dict(passes),
        "fp8_per_layer": len(fp8) / LAYERS, "layers": sorted({g.get("layer") or "" for g in fp8}),
        "load_before": load_before, "load_after": os.getloadavg(), "cpus": os.cpu_count(),
    }
    if run["rc"] not in (0, 1):
        result["tail"] = run["tail"]
    dest = REPO / "benchmarks" / "out"
    (dest / "bench_maxtext_unscanned.json").write_text(json.dumps(result, indent=1) + "\n")
    md = [f"# bench_maxtext_unscanned: {CASE} on h100x8, jax {result['jax']} (deviceless, {os.cpu_count()} cores)", "",
          "| wall s | worker compile s | peak RSS MiB | kernels | FP8 gemms | forward | backward | per layer (/32) |",
          "|---|---|---|---|---|---|---|---|",
          f"| {run['wall_s']} | {result['compile_seconds']} | {run['peak_rss_mib']} | {result['kernels']} | {len(fp8)} | "
          f"{passes.get('forward')} | {passes.get('backward')} | {result['fp8_per_layer']:g} |", "",
          f"`fp8-check run docs/examples/maxtext/cases.yaml -k {CASE} --target h100x8 --profile cublas --no-cache --timeout 3000` "
          f"(the MaxText environment already built): outcome {row.get('outcome')}; FP8 gemms attributed to "
          f"{', '.join(result['layers'])}. Load average before {load_before}, after {result['load_after']} "
          "(a shared machine)."]
    (dest / "bench_maxtext_unscanned.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
