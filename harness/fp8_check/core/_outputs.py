"""Outputs: check early that their paths can be written, then write them as peers with one failure policy.

Fail early: an unwritable `--json` used to be found only after compiling the whole library,
losing every result. `check_file` / `check_dir` create nothing but a probe file that they
remove at once.

Every command writes its outputs the same way (`write_all`): each is an `Output` (what it
is, where, a function writing it there, and whether it is the primary record). The policy:
a primary output that cannot be written (the results or matrix JSON) is an error (exit 2,
after the others were tried); a secondary one (the HTML report, a markdown issue body, a
CI job summary) only warns: a report problem never changes the verdict.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

from fp8_check.core._errors import BadInput, BrokenEnvironmentError, Fp8CheckError, shown_path


class OutputError(BadInput, ValueError):
    """An output path that cannot be written (bad input: exit 2)."""


class WriteError(BrokenEnvironmentError, OSError):
    """Writing an output failed after the checks passed (a full disk, a quota): a broken environment, exit 3.

    One line naming the file; nothing half-written is left (`fp8_check.core._files.atomic_write`)."""

    def message_line(self) -> str:
        return f"fp8-check: {self.strerror}"


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


@dataclass(frozen=True)
class Output:
    """One output of a command: `write(path)` writes it; `announce` is printed after it was written."""

    what: str  # e.g. "results JSON", "HTML report"
    path: Path
    write: Callable[[Path], object]
    primary: bool = False  # the record of the run: failing to write it is an error, not a warning
    announce: str | None = None  # printed on success, "{path}" replaced (e.g. "results: {path}")


def write_all(outputs: list[Output], out: TextIO | None = None, err: TextIO | None = None) -> list[Path]:
    """Write every output in order (the one failure policy above); the paths written."""
    out, err = out or sys.stdout, err or sys.stderr
    written: list[Path] = []
    failed: list[str] = []
    own: list[Fp8CheckError] = []  # a primary output's own error (a full disk: WriteError, exit 3) keeps its exit code
    for o in outputs:
        try:
            o.write(o.path)
        except Exception as exc:  # any failure of a writer is reported by the policy
            text = f"could not write the {o.what} {o.path}: {type(exc).__name__}: {exc}"
            if o.primary:
                failed.append(text)
                if isinstance(exc, Fp8CheckError):
                    own.append(exc)
            else:
                print(f"fp8-check: warning: {text}", file=err)
            continue
        written.append(o.path)
        if o.announce:
            print(o.announce.replace("{path}", shown_path(o.path)), file=out)  # one line: never a `::` line
    if own:
        raise own[0]
    if failed:
        raise OutputError("; ".join(failed))
    return written
