"""Fail early: check that output paths can be written before anything is compiled.

An unwritable `--json` used to be found only after compiling the whole library, losing
every result. These checks create nothing but a probe file that they remove at once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputError(ValueError):
    """An output path that cannot be written (bad input: exit 2)."""


class WriteError(OSError):
    """Writing an output failed after the checks passed (a full disk, a quota): a broken environment, exit 3.

    One line naming the file; nothing half-written is left (`golden.atomic_write`)."""


def _nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and not path.is_symlink():
        path = path.parent
    return path


def _probe(directory: Path, what: str, target: Path) -> None:
    """Create and remove a file in `directory` (os.access says yes to root even on read-only mounts)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".fp8-check-probe-", dir=directory)
    except OSError as exc:
        raise OutputError(f"{what} {target}: cannot write into {directory}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(name)


def check_file(path: Path | str, what: str) -> None:
    """`path` can be written as a file (missing folders are created when it is written)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{what} {path}: is a directory; give a file name")
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise OutputError(f"{what} {path}: {base} is not a directory")
    _probe(base, what, path)


def check_dir(path: Path | str, what: str) -> None:
    """Files can be created in directory `path` (created when missing)."""
    path = Path(path)
    if (path.exists() or path.is_symlink()) and not path.is_dir():
        raise OutputError(f"{what} {path}: not a directory")
    base = _nearest_existing(path)
    if not base.is_dir():
        raise OutputError(f"{what} {path}: {base} is not a directory")
    _probe(base, what, path)
