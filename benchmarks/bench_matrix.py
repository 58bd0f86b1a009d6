"""Benchmark `fp8-check matrix`: environment creation per JAX version, and the warm matrix wall time.

    python benchmarks/bench_matrix.py                       # 8 versions (0.6.1..0.12.0.1, --select minor)
    python benchmarks/bench_matrix.py --jobs 1,2 --cold-uv 0.12.0.1

Measures, per version:
- cold: a new environment in an empty fp8-check cache (a temp FP8_CHECK_CACHE), uv's
  wheel cache as this machine has it ("cold env, warm wheels": what a second
  machine sharing a uv cache, or CI with a restored uv cache, pays);
- cold_uv (only the versions in --cold-uv): as cold but with an empty uv cache too
  (every wheel downloaded: a fresh CI runner without a cache);
- warm: the same call again, the environment reused from the cache.
Then the warm matrix over the whole library (cases/), deviceless, both deviceless
profiles, for each --jobs value, with the environments already built.

Writes benchmarks/out/bench_matrix.json and benchmarks/out/bench_matrix.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fp8_check.versions import envs  # noqa: E402
from fp8_check.versions import releases as versions  # noqa: E402
from fp8_check.versions.matrix_document import load_matrix  # noqa: E402


def env_times(version_list: list[str], cold_uv: list[str]) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="fp8-bench-envs-", dir=str(versions.cache_dir().parent)) as tmp:
        manager = envs.Manager(Path(tmp) / "envs")
        for v in version_list:
            row = {"jax": v}
            t = time.perf_counter()
            try:
                env = manager.ensure(v)
                row["cold_s"] = round(time.perf_counter() - t, 2)
                row["jaxlib"], row["cuda_plugin"] = env.info.get("jaxlib"), env.info.get("cuda_plugin")
                row["size_mb_apparent"] = round(_du(env.path) / 2**20)
            except envs.InstallError as exc:
                row["cold_s"], row["error"] = None, str(exc)
            t = time.perf_counter()
            try:
                manager.ensure(v)
                row["warm_s"] = round(time.perf_counter() - t, 4)
            except envs.InstallError:
                row["warm_s"] = None
            print(f"env jax {v}: cold {row['cold_s']}s, warm {row['warm_s']}s", flush=True)
            rows.append(row)
        for v in cold_uv:
            with tempfile.TemporaryDirectory(prefix="fp8-bench-uv-", dir=tmp) as scratch:
                uvc = str(Path(scratch) / "uv-cache")
                old = os.environ.get("UV_CACHE_DIR")
                os.environ["UV_CACHE_DIR"] = uvc
                try:
                    m2 = envs.Manager(Path(scratch) / "envs")
                    t = time.perf_counter()
                    m2.ensure(v)
                    secs = round(time.perf_counter() - t, 2)
                finally:
                    if old is None:
                        os.environ.pop("UV_CACHE_DIR", None)
                    else:
                        os.environ["UV_CACHE_DIR"] = old
            for row in rows:
                if row["jax"] == v:
                    row["cold_uv_s"] = secs
            else:
                if not any(r["jax"] == v for r in rows):
                    rows.append({"jax": v, "cold_uv_s": secs})
            print(f"env jax {v}: cold with an empty uv cache {secs}s", flush=True)
    return rows


def _du(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def matrix_time(version_list: list[str], jobs: int, out: Path) -> dict:
    cmd = [sys.executable, "-m", "fp8_check.cli", "matrix", "--jax", ",".join(version_list), "--mode", "deviceless",
           "--jobs", str(jobs), "--out", str(out / f"matrix-jobs{jobs}.json"), "--no-html", "--fail-on", "never"]
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(REPO), capture_output=True, text=True)
    wall = round(time.perf_counter() - t, 1)
    (out / f"matrix-jobs{jobs}.txt").write_text(proc.stdout + proc.stderr)
    m = load_matrix(out / f"matrix-jobs{jobs}.json")
    per = {e.jax: {"status": str(e.status), "run_s": e.run_seconds, "summary": {k: n for k, n in e.summary().items() if n}}
           for e in m.versions}
    n = sum(len(e.outcomes) for e in m.versions)
    print(f"matrix jobs={jobs}: {wall}s wall for {n} results over {len(version_list)} versions (exit {proc.returncode})", flush=True)
    return {"jobs": jobs, "wall_s": wall, "results": n, "exit": proc.returncode, "per_version": per,
            "changes": len(m.changes())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jax-range", default="0.6.1..0.12.0.1")
    p.add_argument("--select", default="minor")
    p.add_argument("--jobs", default="1,2")
    p.add_argument("--cold-uv", default="", help="versions to also build with an empty uv cache (downloads everything)")
    p.add_argument("--skip-envs", action="store_true")
    args = p.parse_args()
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    version_list = versions.select_range(args.jax_range, args.select)
    print(f"versions: {', '.join(version_list)}", flush=True)
    report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                          "uv": subprocess.run(["uv", "--version"], capture_output=True, text=True).stdout.strip()},
              "versions": version_list, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    previous = {}
    try:
        previous = json.loads((out / "bench_matrix.json").read_text())
    except (OSError, ValueError):
        pass
    if not args.skip_envs:
        report["environments"] = env_times(version_list, [v for v in args.cold_uv.split(",") if v])
    elif previous.get("environments"):
        report["environments"] = previous["environments"]  # keep the last measurement
        report["environments_measured"] = previous.get("created")
    manager = envs.Manager()
    for v in version_list:  # the matrix runs warm: make sure the real cache has them
        try:
            manager.ensure(v)
        except envs.InstallError:
            pass
    report["matrix"] = [matrix_time(version_list, int(j), out) for j in args.jobs.split(",") if j]
    report["load_average_after"] = os.getloadavg()
    (out / "bench_matrix.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"# fp8-check matrix benchmark ({report['created']})", "",
             f"{report['machine']['cpus']} CPUs, {report['machine']['platform']}, Python {report['machine']['python']}, "
             f"{report['machine']['uv']}", "", "| jax | cold env (s) | cold env, empty uv cache (s) | warm env (s) |",
             "|---|---|---|---|"]
    for r in report.get("environments", []):
        lines.append(f"| {r['jax']} | {r.get('cold_s')} | {r.get('cold_uv_s', '')} | {r.get('warm_s')} |")
    lines += ["", "| jobs | warm matrix wall (s) | results | signature changes |", "|---|---|---|---|"]
    for m in report["matrix"]:
        lines.append(f"| {m['jobs']} | {m['wall_s']} | {m['results']} | {m['changes']} |")
    (out / "bench_matrix.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
