"""Optional FileCheck-style expectations on the optimized HLO (the `filecheck` package, LLVM FileCheck in Python)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

TIMEOUT = 60.0  # seconds FileCheck may take on one HLO text (a pattern can backtrack for ever)


def run_filecheck(patterns: str, text: str, timeout: float = TIMEOUT) -> str | None:
    """None when `text` matches the CHECK lines in `patterns`; otherwise FileCheck's first error line.

    FileCheck running past `timeout`, or failing to start, is that line too (the case's FileCheck
    fails; the run goes on), never an exception.
    """
    exe = shutil.which("filecheck") or os.path.join(os.path.dirname(sys.executable), "filecheck")
    if not os.path.exists(exe):
        return "FileCheck patterns given, but the 'filecheck' package is not installed"
    check_file = None
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".check", delete=False) as f:
            check_file = f.name
            f.write(patterns)
        proc = subprocess.run([exe, check_file], input=text, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"FileCheck did not finish within {timeout:g} s (a pattern that backtracks?)"
    except OSError as exc:
        return f"FileCheck could not run: {exc.strerror or exc}"
    finally:
        if check_file:
            try:
                os.unlink(check_file)
            except OSError:
                pass
    if proc.returncode == 0:
        return None
    output = (proc.stderr or proc.stdout or "").strip()
    lines = [line for line in output.splitlines() if "error" in line.lower()]
    return (lines[0] if lines else (output.splitlines() or [f"FileCheck exited with status {proc.returncode}"])[0]).strip()
