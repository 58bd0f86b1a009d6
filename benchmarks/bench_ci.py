"""The reusable workflow's job, run as a script (no `act` here: it needs container images from a registry this
machine cannot reach): what one GitHub-hosted job costs in time, disk and cache.

    python benchmarks/bench_ci.py [--jax-range 0.6.1.. --select minor] [--skip-cold]

Steps, as in .github/workflows/fp8-check.yml: `fp8-check init` a user project (its example case); install
fp8-check from a wheel of this checkout (standing in for the requirement) into a fresh venv; `fp8-check matrix`
over the workflow's default versions (jax-range 0.6.1.., select minor, h100) with a fresh FP8_CHECK_CACHE;
`fp8-check ci summary`. Twice:
- cold: an empty uv cache (a first run, or a runner without a restored cache: every wheel downloaded);
- warm: that uv cache kept (what `setup-uv` with `enable-cache: true, prune-cache: false` restores), everything
  else fresh (venv, per-version environments, compile cache).
Measured: wall time per step and per job, the uv cache's size at the end of the job (what the job saves
as its one cache entry), and the disk the job used (uv cache + venv + environments + reports; hard links
counted once). Writes benchmarks/out/bench_ci.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"


def du(*paths: Path) -> int:
    """Bytes on disk under `paths`, each hard-linked file counted once (as `du -sc` does)."""
    p = subprocess.run(["du", "-scb", *[str(x) for x in paths if x.exists()]], capture_output=True, text=True)
    return int(p.stdout.strip().splitlines()[-1].split()[0]) if p.stdout.strip() else 0


def run(cmd, cwd: Path, env: dict, log: list, name: str) -> float:
    t = time.perf_counter()
    p = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    log.append({"step": name, "seconds": round(dt, 1), "rc": p.returncode})
    if p.returncode not in (0, 1):
        raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return dt


def job(wheel: Path, uv: str, uv_cache: Path, work: Path, versions_args: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "FP8_CHECK_CACHE")}
    env.update(UV_CACHE_DIR=str(uv_cache), UV_PYTHON_DOWNLOADS="never", FP8_CHECK_NO_GPU="1",
               FP8_CHECK_CACHE=str(work / "fp8-check-cache"), FP8_CHECK_COMPILE_CACHE=str(work / "compile-cache"))
    log: list = []
    start = time.perf_counter()
    venv = work / "venv"
    run([uv, "venv", "--python", sys.executable, venv], work, env, log, "uv venv")
    run([uv, "pip", "install", "--python", venv / "bin" / "python", f"{wheel}[flax]"], work, env, log, "install fp8-check")
    bin_dir = venv / "bin"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    project = work / "project"
    run([bin_dir / "fp8-check", "init", project], work, env, log, "init (the caller's project)")
    run([bin_dir / "fp8-check", "bless", "--profile", "cublas"], project, env, log, "bless (the caller's goldens)")
    run([bin_dir / "fp8-check", "matrix", "cases", "--mode", "deviceless", "--target", "h100", *versions_args,
         "--fail-on", "newest", "--out", "reports/matrix.json", "--html", "reports/matrix.html"], project, env, log, "matrix")
    env["GITHUB_STEP_SUMMARY"] = str(work / "summary.md")
    run([bin_dir / "fp8-check", "ci", "summary", "reports/matrix.json", "--issues-dir", "reports/issues"], project, env,
        log, "ci summary")
    total = time.perf_counter() - start
    return {"steps": log, "seconds": round(total, 1), "uv_cache_bytes": du(uv_cache),
            "disk_bytes": du(uv_cache, venv, work / "fp8-check-cache", work / "compile-cache", project),
            "envs": sorted(p.name for p in (work / "fp8-check-cache" / "envs").glob("jax-*"))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jax-range", default="0.6.1..")
    ap.add_argument("--select", default="minor")
    ap.add_argument("--jax", help="explicit versions instead of the range")
    ap.add_argument("--skip-cold", action="store_true", help="reuse this machine's uv cache as the 'cold' one")
    args = ap.parse_args()
    versions_args = ["--jax", args.jax] if args.jax else ["--jax-range", args.jax_range, "--select", args.select]
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    root = Path(tempfile.mkdtemp(prefix="fp8-check-bench-ci-"))
    try:
        dist = root / "dist"
        subprocess.run([uv, "build", "--wheel", "--out-dir", dist, REPO], check=True, capture_output=True)
        [wheel] = dist.glob("*.whl")
        uv_cache = root / "uv-cache"
        results = {}
        for kind in ("cold", "warm"):
            if kind == "cold" and args.skip_cold:
                continue
            work = root / kind
            work.mkdir()
            print(f"bench_ci: {kind} job …", flush=True)
            results[kind] = job(wheel, uv, uv_cache, work, versions_args)
            shutil.rmtree(work, ignore_errors=True)
            print(json.dumps(results[kind], indent=1), flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    doc = {"machine": f"{platform.node()}: {os.cpu_count()} cores", "versions": versions_args, "results": results}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "bench_ci.json").write_text(json.dumps(doc, indent=1) + "\n")
    gb = lambda b: f"{b / 1e9:.2f} GB"  # noqa: E731
    lines = ["# bench_ci: the reusable workflow's job as a script", "",
             f"Versions: `{' '.join(versions_args)}`; {doc['machine']}.", "",
             "| job | wall | uv cache at the end (the job's cache entry) | disk used by the job | environments |",
             "|---|---|---|---|---|"]
    for kind, r in results.items():
        lines.append(f"| {kind} | {r['seconds']:.0f} s | {gb(r['uv_cache_bytes'])} | {gb(r['disk_bytes'])} | {len(r['envs'])} |")
    lines += ["", "Steps (seconds):", ""]
    for kind, r in results.items():
        lines.append(f"- {kind}: " + ", ".join(f"{s['step']} {s['seconds']}" for s in r["steps"]))
    (OUT / "bench_ci.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
