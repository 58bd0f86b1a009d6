"""Benchmark the upstream-bug tools on a real change: `bisect --explain` and `reduce`.

    python benchmarks/bench_upstream.py [--case epi_bias_relu] [--good 0.6.2] [--bad 0.7.0] [--profile cublas] [--repeat 3]

With the two versions' environments already built (they are built first, untimed),
times, --repeat times each:
- explain: `fp8_check.upstream._explain.investigate` (both versions' minimal repros with
  per-pass dumps, the pass alignment, FileCheck on both) — what `--explain` adds to bisect;
- bisect_explain: the whole `fp8-check bisect CASE --good --bad --explain` as a subprocess;
- reduce: `fp8-check reduce CASE --jax BAD --good GOOD` as a subprocess.
Writes benchmarks/out/bench_upstream.json and benchmarks/out/bench_upstream.md.
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

from fp8_check.cases import _load as cases  # noqa: E402
from fp8_check.targets import PROFILES, load_target  # noqa: E402
from fp8_check.upstream import _explain as explain  # noqa: E402
from fp8_check.versions._envs import Manager  # noqa: E402


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _cli(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", *args], cwd=str(REPO), capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"fp8-check {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", default="epi_bias_relu")
    ap.add_argument("--good", default="0.6.2")
    ap.add_argument("--bad", default="0.7.0")
    ap.add_argument("--profile", default="cublas")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    case = next(c for c in cases.load([REPO / "cases"]) if c.id == args.case)
    target, profile = load_target("h100"), PROFILES[args.profile]
    manager = Manager()
    for v in (args.good, args.bad):
        manager.ensure(v)
    times: dict[str, list[float]] = {"explain": [], "bisect_explain": [], "reduce": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            times["explain"].append(_timed(lambda: explain.investigate(
                case, target, profile, args.good, args.bad, manager=manager, work=Path(tmp) / f"e{i}", log=lambda s: None)))
            times["bisect_explain"].append(_timed(lambda: _cli(
                "bisect", args.case, "--good", args.good, "--bad", args.bad, "--profile", args.profile, "--explain",
                "--upstream-dir", str(Path(tmp) / "up"))))
            times["reduce"].append(_timed(lambda: _cli(
                "reduce", args.case, "--jax", args.bad, "--good", args.good, "--profile", args.profile)))
            print({k: round(v[-1], 2) for k, v in times.items()}, flush=True)
    rows = {k: {"median_s": round(statistics.median(v), 2), "min_s": round(min(v), 2), "max_s": round(max(v), 2),
                "runs": [round(x, 2) for x in v]} for k, v in times.items()}
    doc = {"case": args.case, "good": args.good, "bad": args.bad, "profile": args.profile, "results": rows,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
           "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_upstream.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# bench_upstream: {args.case}, h100/{args.profile}, jax {args.good} -> {args.bad}", "",
             f"{doc['when']}, {os.cpu_count()} CPUs, environments already built; {args.repeat} runs each.", "",
             "| what | median s | min s | max s |", "|---|---|---|---|"]
    lines += [f"| {k} | {r['median_s']} | {r['min_s']} | {r['max_s']} |" for k, r in rows.items()]
    (out / "bench_upstream.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
