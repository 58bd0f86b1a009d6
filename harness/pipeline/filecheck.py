"""Optional FileCheck-style expectations on the optimized HLO (the `filecheck` package, LLVM FileCheck in Python)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile


def run_filecheck(patterns: str, text: str) -> str | None:
    """None when `text` matches the CHECK lines in `patterns`; otherwise FileCheck's first error line."""
    exe = shutil.which("filecheck") or os.path.join(os.path.dirname(sys.executable), "filecheck")
    if not os.path.exists(exe):
        return "FileCheck patterns given, but the 'filecheck' package is not installed"
    with tempfile.NamedTemporaryFile("w", suffix=".check", delete=False) as f:
        f.write(patterns)
        check_file = f.name
    try:
        proc = subprocess.run([exe, check_file], input=text, capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(check_file)
    if proc.returncode == 0:
        return None
    lines = [l for l in (proc.stderr or proc.stdout).splitlines() if "error" in l.lower()]
    return (lines[0] if lines else (proc.stderr or proc.stdout).strip().splitlines()[0]).strip()
