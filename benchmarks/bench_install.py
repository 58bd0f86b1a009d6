"""Benchmark the README's first command on a machine with an EMPTY uv cache: what it downloads, how long it takes.

    python benchmarks/bench_install.py

A fresh clone of this checkout's HEAD in a temporary directory, a new empty UV_CACHE_DIR, then
`bash scripts/env.sh python -c 'import jax, flax'` (the install part of `bash scripts/env.sh
fp8-check run`; `run` itself downloads nothing). Measures the wall time, the bytes received on
the machine's network interfaces meanwhile (machine-wide: other jobs' downloads count too) and the
sizes of the wheels installed, from uv.lock (`benchmarks/wheelsize.py`: exact). uv itself is
expected on PATH (on a machine without it, scripts/env.sh first installs the uv wheel, ~18 MB).
Writes benchmarks/out/bench_install.json and .md.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import wheelsize  # noqa: E402
from bench_matrix import rx_bytes  # noqa: E402


def main() -> int:
    out = REPO / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="fp8-bench-install-") as tmp:
        clone, cache = Path(tmp) / "clone", Path(tmp) / "uv-cache"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", head], cwd=clone, check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
        env["UV_CACHE_DIR"] = str(cache)
        load = os.getloadavg()
        rx, t = rx_bytes(), time.perf_counter()
        proc = subprocess.run(["bash", "scripts/env.sh", "python", "-c", "import jax, flax; print(jax.__version__)"],
                              cwd=clone, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t
        received = rx_bytes() - rx
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr, file=sys.stderr)
            return 1
        wheels = wheelsize.from_lock(clone / "uv.lock", str(clone / ".venv" / "bin" / "python"))
        report = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": head,
                  "command": "bash scripts/env.sh … (fresh clone, empty UV_CACHE_DIR)", "wall_s": round(wall, 1),
                  "received_mb": round(received / 1e6), "wheels": wheels, "jax": proc.stdout.strip(),
                  "load_average_at_start": [round(x, 2) for x in load],
                  "machine": {"cpus": os.cpu_count(), "platform": platform.platform()}}
    (out / "bench_install.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [f"# First install from an empty uv cache ({report['created']}, commit {head[:10]})", "",
             f"`bash scripts/env.sh …` in a fresh clone with an empty `UV_CACHE_DIR`: **{wheels['mb']} MB** of wheels "
             f"({wheels['wheels']} wheels, sizes from uv.lock), {report['received_mb']} MB received by the machine meanwhile "
             f"(machine-wide), {report['wall_s']} s wall (load average {report['load_average_at_start']}); jax "
             f"{report['jax']}.", "", "Largest: " + ", ".join(wheels["largest"]) + "."]
    (out / "bench_install.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
