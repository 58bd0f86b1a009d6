"""What makes a GPU session's results trustworthy (harness/fp8_check/gpu/session.py): JAX sees the platform's GPU
before any step, a device step is ok only when its files show a device measurement (`EVIDENCE`), and the output
folder is replaced only by a device run whose every step is ok (`fresh_folder`, `move_into_place`).

Issue 43: on a machine whose JAX saw no GPU the session recorded `environment: ok`, `calibrate: ok` (every row an
"Unknown backend 'gpu'" error) and `gpu-tests: ok` (all skipped), and rewrote the committed docs/gpu-session/.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fp8_check import platforms

GPU_CHECK_S = 25  # importing JAX and asking for its GPU: the whole no-GPU answer comes within 30 s


class NoGpu(Exception):
    """JAX does not see the platform's GPU: the session stops before any step."""


_GPU_PROBE = """
import json, sys
import jax
try:
    found = jax.devices(sys.argv[1])
except Exception as exc:
    print(json.dumps({"error": (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]}))
else:
    print(json.dumps({"devices": [d.device_kind for d in found]}))
"""


def check_gpu(platform: platforms.Platform = platforms.DEFAULT, timeout: float = GPU_CHECK_S) -> list[str]:
    """The device kinds of the GPUs JAX sees on `platform` (in a child process, so that this one never starts a
    backend); NoGpu with one line when it sees none, fails or does not answer within `timeout`."""
    name = f"JAX sees no {platform.vendor} GPU"
    try:
        proc = subprocess.run([sys.executable, "-c", _GPU_PROBE, platform.jax_platform], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise NoGpu(f"{name}: asking it took over {timeout:g} s") from None
    lines = proc.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if proc.returncode == 0 and lines else {}
    except ValueError:
        answer = {}
    if not isinstance(answer, dict) or not answer.get("devices"):
        why = str(answer.get("error", "")) if isinstance(answer, dict) else ""
        why = why or (proc.stderr.strip().splitlines() or [f"the probe exited {proc.returncode}"])[-1][:200]
        raise NoGpu(f"{name} ({platform.jax_platform}): {why}")
    return [str(k) for k in answer["devices"]]


def _json(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _environment_measured(out: Path) -> str | None:
    doc = _json(out / "environment.json")
    if not any(isinstance(d, dict) and d.get("platform") not in (None, "cpu") for d in doc.get("devices") or []):
        return "environment.json lists no GPU device"
    return None


def _capture_measured(out: Path) -> str | None:
    return None if any(out.glob("*-captured.txtpb")) else "no captured target spec was written"


def _calibrate_measured(out: Path) -> str | None:
    doc = _json(out / "calibration.json")
    rows = [r for r in doc.get("rows") or [] if isinstance(r, dict)]
    errors = [r for r in rows if "error" in r or "measured_us" not in r]
    if doc.get("backend") != "gpu" or not rows:
        return "calibration.json has no row measured on the GPU"
    if errors:
        return f"{len(errors)} of {len(rows)} cases not measured (first: {str(errors[0].get('error', ''))[:120]})"
    return None


def _fidelity_measured(out: Path) -> str | None:
    doc = _json(out / "fidelity.json")
    return None if doc.get("device") and doc.get("cells") else "fidelity.json has no device column"


def _numerics_measured(out: Path) -> str | None:
    doc = _json(out / "numerics.json")
    ran = [r for r in doc.get("results") or [] if isinstance(r, dict) and isinstance(r.get("numerics"), dict)
           and r["numerics"].get("status") not in (None, "skipped")]
    env = doc.get("environment")
    if not (isinstance(env, dict) and env.get("mode") == "device") or not ran:
        return "numerics.json has no case executed on the device"
    return None


def _gpu_tests_measured(out: Path) -> str | None:
    try:
        log = (out / "gpu-tests.log").read_text(errors="replace")
    except OSError:
        return "no gpu-tests.log"
    passed = re.findall(r"(\d+) passed", log)
    return None if passed and int(passed[-1]) > 0 else "no GPU-only test ran (every one skipped or none selected)"


# Per step: why its files show it did NOT measure on the device (None: it did). A step of a device run is ok only
# when it exited 0 and this says None; a step without an entry is judged by its exit code alone.
EVIDENCE: dict[str, Callable[[Path], str | None]] = {
    "environment": _environment_measured,
    "capture": _capture_measured,
    "calibrate": _calibrate_measured,
    "fidelity": _fidelity_measured,
    "numerics": _numerics_measured,
    "gpu-tests": _gpu_tests_measured,
}


def step_status(step: str, code: int, out: Path, dry: bool) -> str:
    """ok, failed (exit N), or not measured on the device (a device run's step that exited 0 without a GPU
    measurement in its files)."""
    if code != 0:
        return f"failed (exit {code})"
    why = None if dry or step not in EVIDENCE else EVIDENCE[step](out)
    return "ok" if why is None else f"not measured on the device: {why}"


def fresh_folder(out: Path) -> Path:
    """A new, empty, hidden folder next to `out` (same file system: it can be renamed into place)."""
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    fresh = out.parent / f".{out.name}.session-{stamp}-{os.getpid()}"
    fresh.mkdir()
    return fresh


def move_into_place(fresh: Path, out: Path) -> None:
    """Replace `out` by `fresh`: the old folder is renamed aside first, removed after the new one is in place."""
    out = Path(os.path.abspath(out))
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        os.rename(out, old)
    os.rename(fresh, out)
    shutil.rmtree(old, ignore_errors=True)
