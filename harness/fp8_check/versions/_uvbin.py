"""Where uv is: matrix and bisect build per-version environments with it (standard library only)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

UV_MISSING = ("uv is not on PATH and the 'uv' Python package is not installed; fp8-check matrix and bisect make "
              "their per-version environments with uv: install it with `python -m pip install uv` (or reinstall "
              "fp8-check, which depends on it), or put a uv binary on PATH")


def find_uv() -> str | None:
    """The uv binary: $FP8_CHECK_UV, else on PATH, else the one the `uv` Python package ships (a dependency)."""
    given = os.environ.get("FP8_CHECK_UV")
    if given:
        return given if Path(given).is_file() else None
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None
