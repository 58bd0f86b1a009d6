"""Files the package writes and the files it ships: one home for both.

- `atomic_write`: every file fp8-check writes (results, goldens, reports, matrices, repros) is written
  whole or not at all, beside a reader that sees the old file or the new one, never half of either;
  `remove_stale_temporaries` sweeps what a writer killed mid-write (SIGKILL) left behind.
- `package_path`: the package's own data (jinja2 templates, target specs and rates, the worker's sources,
  shipped requirement files), found through `importlib.resources` from the package's name, never by how
  deep a module sits; `checkout`: the source checkout the package runs from, when it runs from one.
- `read_text`: the one reader of files users give or commit (regular files only, links resolved and confined to
  the kind's home, a size limit, UTF-8 checked; errors never quote the content).
"""

from __future__ import annotations

import os
import stat
import tempfile
from importlib import resources
from pathlib import Path

from fp8_check.core._errors import shown_path
from fp8_check.core._outputs import WriteError

PACKAGE = __name__.split(".")[0]  # the import name, `fp8_check`


def package_path(*parts: str) -> Path:
    """A file or folder shipped in the package: `package_path("templates")`, `package_path("targets", "rates")`.

    The package is installed as files (a checkout, an editable install or an unpacked wheel): jinja2's loader,
    the compile worker and `git` read these paths directly."""
    root = resources.files(PACKAGE)
    if not isinstance(root, Path):  # a zipped install: nothing here reads data through a zip
        raise ImportError(f"{PACKAGE} must be installed as files to read its data, not from {root}")
    return root.joinpath(*parts)


def checkout() -> Path | None:
    """The source checkout (the folder holding pyproject.toml and harness/{PACKAGE}) the package runs from; None when installed."""
    root = package_path().resolve()
    top = root.parent.parent
    if root.parent.name == "harness" and (top / "pyproject.toml").is_file():
        return top
    return None


def atomic_write(path: Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never half of either."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), 0o666 & ~_umask())  # mkstemp makes 0600; keep the usual permissions
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:  # also a kill (SIGTERM/Ctrl-C) mid-write: no hidden .tmp file stays behind
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(exc, OSError) and not isinstance(exc, WriteError):
            raise WriteError(exc.errno, f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    _remove_leftovers(path)


def _remove_leftovers(path: Path) -> None:
    """Temporary files of earlier writes of `path` whose process is gone (killed with SIGKILL mid-write)."""
    import glob

    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            try:
                tmp.unlink()
            except OSError:
                pass


def remove_stale_temporaries(root: Path) -> int:
    """At the start of a bless: every hidden temporary golden under `root` whose writer is gone (SIGKILLed
    mid-write: `_remove_leftovers` only sweeps beside a golden written again). Returns how many went."""
    import re

    gone = 0
    try:
        found = list(Path(root).rglob(".*.tmp")) if root and Path(root).is_dir() else []
    except OSError:  # an unreadable folder: the bless itself will say so
        return 0
    for tmp in found:
        m = re.fullmatch(r"\..+\.(\d+)\.[^.]+\.tmp", tmp.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            try:
                tmp.unlink()
                gone += 1
            except OSError:
                pass
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------ reading what users give

KERNEL_FILES = ("/proc", "/sys", "/dev")  # "regular" files the kernel makes up on reading (an environment, a device)


class ReadError(ValueError):
    """A file that cannot be read as text (missing, not a regular file, outside its home, too large, not UTF-8)."""


def _limit_text(max_bytes: int) -> str:
    return f"{max_bytes // 2**20} MiB" if max_bytes >= 2**20 else f"{max_bytes // 1024} KiB"


def regular_file(path: Path | str, home: Path | str | None = None, home_name: str | None = None) -> Path:
    """`path` with its links resolved, if that is a regular file (not a folder, pipe, socket or device, nor a
    kernel file under /proc, /sys or /dev, which stat calls regular) inside `home` (resolved) when given:
    where the file's kind lives (goldens/, the case file's folder). ReadError otherwise."""
    path = Path(path)
    try:
        real = path.resolve()
    except (OSError, RuntimeError) as exc:  # a link loop
        raise ReadError(f"cannot read: {getattr(exc, 'strerror', None) or 'a loop of links'}") from None
    if home is not None:
        root = Path(home).resolve()
        if not real.is_relative_to(root):
            raise ReadError(f"a link to a file outside {home_name or shown_path(home)}, where these files live")
    if any(real.is_relative_to(k) for k in KERNEL_FILES):
        raise ReadError("not a regular file (a kernel file)")
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if stat.S_ISDIR(mode):
        raise ReadError("not a regular file: is a directory")
    if not stat.S_ISREG(mode):
        raise ReadError("not a regular file (a pipe, socket or device)")
    return real


def read_bytes(path: Path | str, max_bytes: int, home: Path | str | None = None, home_name: str | None = None) -> bytes:
    """The bytes of a file a user gave or committed: a regular file (`regular_file`), at most `max_bytes`
    (refused from its size before reading, and never more read). ReadError otherwise."""
    real = regular_file(path, home, home_name)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ReadError(f"cannot read: {exc.strerror or type(exc).__name__}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):  # replaced between the check and the open
            raise ReadError("not a regular file")
        if st.st_size > max_bytes:
            raise ReadError(f"larger than the {_limit_text(max_bytes)} limit for one file")
        try:
            data = f.read(max_bytes + 1)
        except OSError as exc:
            raise ReadError(f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > max_bytes:
        raise ReadError(f"larger than the {_limit_text(max_bytes)} limit for one file")
    return data


def read_text(path: Path | str, max_bytes: int = 2 * 1024 * 1024, home: Path | str | None = None,
              home_name: str | None = None) -> str:
    """The one reader of every file users give or commit (case files, requirement files, autotune results,
    results and matrix files, target specs, goldens): `read_bytes`, then checked UTF-8. ReadError says what is
    wrong in one line and never quotes the file's content."""
    data = read_bytes(path, max_bytes, home, home_name)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ReadError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} on line {line}") from None
