"""Benchmark `fp8-check matrix`: per-version environments (slim vs full) from an empty uv cache, and the
cold and warm matrix over the supported range.

    python benchmarks/bench_matrix.py                                  # the defaults below
    python benchmarks/bench_matrix.py --slim 0.6.1,0.12.0.1 --full 0.12.0.1 --jax-range 0.10.0..

Measures:
- environments: for each --slim version the deviceless (slim) environment and for each --full
  version the device (full, `jax[cuda12]`) one, each built by `envs.Manager` with an EMPTY uv
  cache (a temporary UV_CACHE_DIR, removed after each build: every wheel is downloaded): build
  seconds, the environment's size (apparent bytes of its files, hard links counted once), and
  the bytes received on the machine's network interfaces meanwhile (machine-wide: an upper
  bound when other jobs download too); then the same call again (the cached environment);
- matrix: `fp8-check matrix --jax-range R` (all released versions in R, both deviceless
  profiles, h100) with an empty fp8-check cache (a temporary FP8_CHECK_CACHE: no environments,
  no compile cache; uv's wheel cache as this machine has it) = cold, then the same command
  again = warm. Versions sharing an XLA commit are compiled once (`shared_xla`).

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

from fp8_check.matrix._document import load_matrix  # noqa: E402
from fp8_check.versions import (
    _envs as envs,  # noqa: E402
    _wheels as wheels,  # noqa: E402
    releases as versions,  # noqa: E402
)

sys.path.insert(0, str(REPO / "benchmarks"))
import wheelsize  # noqa: E402


def rx_bytes() -> int:
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() != "lo":
            total += int(rest.split()[0])
    return total


def env_row(version: str, kind: str, scratch_root: Path) -> dict:
    """One environment built with an empty uv cache, then asked for again."""
    row = {"jax": version, "kind": kind}
    with tempfile.TemporaryDirectory(prefix="fp8-bench-env-", dir=str(scratch_root)) as scratch:
        old = os.environ.get("UV_CACHE_DIR")
        os.environ["UV_CACHE_DIR"] = str(Path(scratch) / "uv-cache")
        try:
            manager = envs.Manager(Path(scratch) / "envs", reuse_self=False, kind=kind)
            rx, t = rx_bytes(), time.perf_counter()
            env = manager.ensure(version)
            row["empty_uv_cache_s"] = round(time.perf_counter() - t, 1)
            row["received_mb"] = round((rx_bytes() - rx) / 1e6)
            row["env_mb"] = round(envs.disk_bytes(env.path) / 1e6)
            row["requirement"] = env.info.get("requirement")
            t = time.perf_counter()
            manager.ensure(version)
            row["cached_s"] = round(time.perf_counter() - t, 4)
        except envs.InstallError as exc:
            row["error"] = str(exc)
        finally:
            if old is None:
                os.environ.pop("UV_CACHE_DIR", None)
            else:
                os.environ["UV_CACHE_DIR"] = old
    print(f"env jax {version} {kind}: {row}", flush=True)
    return row


def matrix_time(jax_range: str, jobs: int, cache: Path, out: Path, label: str, jax: str = "") -> dict:
    which = ["--jax", jax] if jax else ["--jax-range", jax_range]
    cmd = [sys.executable, "-m", "fp8_check.cli.main", "matrix", *which, "--mode", "deviceless",
           "--target", "h100", "--jobs", str(jobs), "--out", str(out / f"matrix-{label}.json"), "--no-html",
           "--fail-on", "never"]
    env = {**os.environ, "FP8_CHECK_CACHE": str(cache)}
    load = os.getloadavg()
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=str(REPO), capture_output=True, text=True, env=env)
    wall = round(time.perf_counter() - t, 1)
    (out / f"matrix-{label}.txt").write_text(proc.stdout + proc.stderr)
    m = load_matrix(out / f"matrix-{label}.json")
    per = {e.jax: {"status": str(e.status), "run_s": e.run_seconds, "env_s": (e.env or {}).get("seconds"),
                   "same_xla_as": (e.env or {}).get("same_xla_as"),
                   "summary": {k: n for k, n in e.summary().items() if n}} for e in m.versions}
    n = sum(len(e.outcomes) for e in m.versions)
    print(f"matrix {label}: {wall}s wall for {n} results over {len(m.versions)} versions (exit {proc.returncode})",
          flush=True)
    return {"label": label, "jobs": jobs, "wall_s": wall, "results": n, "versions": len(m.versions),
            "exit": proc.returncode, "load_at_start": [round(x, 2) for x in load], "per_version": per,
            "compiled_once_for_two": sorted(v for v, p in per.items() if p["same_xla_as"]), "changes": len(m.changes())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jax-range", default="0.6.1..0.12.0.1", help="the matrix's versions (all released in the range)")
    p.add_argument("--slim", default="all", help="versions whose slim environment is built from an empty uv cache "
                                                  "('all': every version of --jax-range; '': none)")
    p.add_argument("--full", default="0.6.1,0.9.0.1,0.12.0.1", help="versions whose full environment is built too")
    p.add_argument("--matrix-jax", default="", help="the matrix over these versions instead of --jax-range (a subset "
                                                       "when the machine is too loaded for the whole range)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--skip-envs", action="store_true")
    p.add_argument("--skip-matrix", action="store_true")
    args = p.parse_args()
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    version_list = versions.select_range(args.jax_range, "all")
    report = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                          "uv": subprocess.run([envs._uv(), "--version"], capture_output=True, text=True).stdout.strip()},
              "jax_range": args.jax_range, "versions": version_list,
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    previous = {}
    try:
        previous = json.loads((out / "bench_matrix.json").read_text())
    except (OSError, ValueError):
        pass
    scratch_root = versions.cache_dir()
    scratch_root.mkdir(parents=True, exist_ok=True)
    if args.skip_envs:
        report["environments"] = previous.get("environments", [])
        report["environments_measured"] = previous.get("environments_measured", previous.get("created"))
    else:
        slim = version_list if args.slim == "all" else [v for v in args.slim.split(",") if v]
        rows = []
        for v in version_list:
            if v in [f for f in args.full.split(",") if f]:
                rows.append(env_row(v, wheels.DEVICE, scratch_root))
            if v in slim:
                rows.append(env_row(v, wheels.DEVICELESS, scratch_root))
        report["environments"], report["environments_measured"] = rows, report["created"]
    for r in report["environments"]:  # the wheels' bytes, from the index's metadata (exact, unlike `received`)
        if r.get("requirement") and "download_mb" not in r:
            r["download_mb"] = wheelsize.for_requirements(r["requirement"].split(), envs._uv())["mb"]
    if args.skip_matrix:
        report["matrix"] = [m for m in previous.get("matrix", []) if "label" in m]  # the last cold/warm measurement
        report["matrix_versions"] = previous.get("matrix_versions", args.jax_range)
    else:
        with tempfile.TemporaryDirectory(prefix="fp8-bench-matrix-", dir=str(scratch_root)) as cache:
            report["matrix"] = [matrix_time(args.jax_range, args.jobs, Path(cache), out, "cold", args.matrix_jax),
                                matrix_time(args.jax_range, args.jobs, Path(cache), out, "warm", args.matrix_jax)]
            report["matrix_versions"] = args.matrix_jax or args.jax_range
    report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    (out / "bench_matrix.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"# fp8-check matrix benchmark ({report['created']})", "",
             f"{report['machine']['cpus']} CPUs, {report['machine']['platform']}, Python {report['machine']['python']}, "
             f"{report['machine']['uv']}; load average before {report['load_average_before']}, after "
             f"{report['load_average_after']} (the machine is shared with other jobs)", "",
             f"Per-version environments built with an EMPTY uv cache (measured {report.get('environments_measured')}); "
             "download: the wheels' sizes from the index's metadata (`benchmarks/wheelsize.py`); received: bytes on the "
             "machine's network interfaces during the build (machine-wide: other jobs' downloads count too); size: the "
             "environment's files, hard links once.", "",
             "| jax | wheel set | requirement | build, empty uv cache (s) | download (MB) | received (MB) | env size (MB) | cached (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in report.get("environments", []):
        lines.append(f"| {r['jax']} | {r['kind']} | `{r.get('requirement') or r.get('error', '')}` | "
                     f"{r.get('empty_uv_cache_s')} | {r.get('download_mb')} | {r.get('received_mb')} | {r.get('env_mb')} | "
                     f"{r.get('cached_s')} |")
    both = [v for v in version_list if {wheels.DEVICE, wheels.DEVICELESS} <= {r["kind"] for r in report.get("environments", [])
                                                                             if r["jax"] == v and "env_mb" in r}]
    for v in both:
        f, s_ = (next(r for r in report["environments"] if r["jax"] == v and r["kind"] == k)
                 for k in (wheels.DEVICE, wheels.DEVICELESS))
        lines.append(f"\njax {v}: slim / full: size {s_['env_mb'] / f['env_mb']:.2f}, download "
                     f"{s_['download_mb'] / f['download_mb']:.2f}, build time from an empty uv cache "
                     f"{s_['empty_uv_cache_s'] / f['empty_uv_cache_s']:.2f}")
    lines += ["", f"Matrix over {report.get('matrix_versions', args.jax_range)} (h100, cublas + triton, deviceless, --jobs {args.jobs}): cold = empty "
              "fp8-check cache (environments built during the run, overlapping the compiles; empty compile cache), "
              "warm = the same command again.", "",
              "| run | wall (s) | versions | results | compiled once for two (same XLA) | load at start |", "|---|---|---|---|---|---|"]
    for m in report["matrix"]:
        lines.append(f"| {m['label']} | {m['wall_s']} | {m['versions']} | {m['results']} | "
                     f"{', '.join(m.get('compiled_once_for_two', [])) or '-'} | {m.get('load_at_start')} |")
    (out / "bench_matrix.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
