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


# Every folder a session writes holds this file: the only folders a later session may replace
MARKER = ".fp8-check-gpu-session"
SESSION_ENV = "FP8_CHECK_GPU_SESSION_DIR"  # set for a session's steps: `--step` runs only inside a session


class UnsafeOut(ValueError):
    """An `--out` the session must not write (one line)."""


def is_session_folder(path: Path) -> bool:
    """A folder an earlier session wrote (it holds the session's marker file)."""
    return (path / MARKER).is_file() and not (path / MARKER).is_symlink()


def check_out(out: Path, checkout: Path | None, given: str | None = None) -> Path:
    """`out` as an absolute path, if the session may write there: a folder that does not exist yet, an empty one,
    or one an earlier session wrote (its marker); never '', '.', the checkout, an ancestor of it or of the current
    folder, a link, or a non-empty folder it did not write. UnsafeOut otherwise, before anything is written."""
    shown = repr(given) if given is not None and (not given or not given.isprintable()) else (given or str(out))
    if given is not None and given.strip() in ("", "."):
        raise UnsafeOut(f"--out {shown}: give a folder of its own for the session's files, not the current folder")
    absolute = Path(os.path.abspath(out))
    real = absolute.resolve()
    for name, top in (("the checkout", checkout), ("the current folder", Path.cwd())):
        if top is not None and Path(top).resolve().is_relative_to(real):
            raise UnsafeOut(f"--out {shown}: is {name} or a folder above it; give a folder of its own")
    if absolute.is_symlink():
        raise UnsafeOut(f"--out {shown}: a link; give the folder itself")
    if absolute.exists():
        if not absolute.is_dir():
            raise UnsafeOut(f"--out {shown}: not a folder")
        try:
            empty = not any(absolute.iterdir())
        except OSError as exc:
            raise UnsafeOut(f"--out {shown}: cannot read it: {exc.strerror or exc}") from None
        if not empty and not is_session_folder(absolute):
            raise UnsafeOut(f"--out {shown}: a folder with files the session did not write (no {MARKER}); "
                            "give a new or empty folder")
    return absolute


def fresh_folder(out: Path) -> Path:
    """A new, empty, hidden folder next to `out` (same file system: it can be renamed into place), marked as a
    session's folder."""
    out = Path(os.path.abspath(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    fresh = out.parent / f".{out.name}.session-{stamp}-{os.getpid()}"
    fresh.mkdir()
    (fresh / MARKER).write_text("written by fp8-check's GPU session (scripts/gpu_session.sh); a later session may "
                                "replace this folder\n")
    return fresh


def move_into_place(fresh: Path, out: Path) -> None:
    """Replace `out` by `fresh`: the old folder is renamed aside first, removed after the new one is in place.
    Only an empty folder or one a session wrote is replaced (checked again here: UnsafeOut, nothing moved)."""
    out = Path(os.path.abspath(out))
    if out.exists() and (out.is_symlink() or not out.is_dir()
                         or (any(out.iterdir()) and not is_session_folder(out))):
        raise UnsafeOut(f"--out {out}: changed during the session into something it did not write; "
                        f"this session's files are in {fresh}")
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        os.rename(out, old)
    os.rename(fresh, out)
    shutil.rmtree(old, ignore_errors=True)
