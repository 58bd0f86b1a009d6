"""Timeouts: one parser for every timeout option and variable, and one way to run an external program under one.

Every number of seconds a user can give (`--timeout`, `FP8_CHECK_UV_TIMEOUT`, `FP8_CHECK_GH_TIMEOUT`, the GPU
session's budget scale) is read by `seconds`: a finite number above 0 and at most `MAX_S` (a week: beyond any
honest wait, and far below what `select`, threads and `subprocess` accept — 1e12 s overflowed them). Anything
else is one line naming the option or variable (bad input, exit 2), never a traceback, never a silent default
or clamp.

`run` runs an external program (uv, gh, git) in a process group of its own: when its time is up the whole group
is killed, so a timed-out uv leaves none of its children behind.

`stop_all` is the one way a command stops on SIGTERM/SIGINT (cli/main.py calls it): every process group `run`
started, in any thread (matrix builds environments in a thread of its own), is killed, and no new one starts;
`wait_lock` takes a file lock (another process building the same environment) in a way that a stop interrupts.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
import time

from fp8_check.core._errors import BadInput

MAX_S = 7 * 24 * 3600.0  # a week


class TimeoutValueError(BadInput, ValueError):
    """A timeout that is not a finite number of seconds in (0, MAX_S] (bad input: exit 2)."""


def seconds(text: object, what: str) -> float:
    """`text` as seconds, or TimeoutValueError naming `what` (e.g. '--timeout', '$FP8_CHECK_UV_TIMEOUT')."""
    shown = repr(str(text)[:40])
    try:
        value = float(str(text).strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= MAX_S:
        raise TimeoutValueError(f"{what}: expected a number of seconds above 0 and at most {MAX_S:g} (a week), "
                                f"got {shown}")
    return value


def from_env(name: str, default: float) -> float:
    """The seconds in environment variable `name` (unset or empty: `default`)."""
    value = os.environ.get(name, "")
    return seconds(value, f"${name}") if value.strip() else default


def option(what: str = "--timeout"):
    """An argparse `type=` for a timeout option: the same rule, as argparse's one-line usage error."""
    import argparse

    def parse(text: str) -> float:
        try:
            return seconds(text, what)
        except TimeoutValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[1]) from None

    return parse


_STARTED: set[subprocess.Popen] = set()  # the process groups `run` is running now, in every thread
_LOCK = threading.Lock()
_STOPPING = threading.Event()


class Stopped(KeyboardInterrupt):
    """The command is stopping (a signal): no external program starts any more, a lock is not waited for."""


def stopping() -> bool:
    return _STOPPING.is_set()


def stop_all() -> int:
    """Kill every process group `run` started and is still running (in any thread); from now on `run` and
    `wait_lock` raise Stopped. Returns how many groups were killed."""
    _STOPPING.set()
    with _LOCK:
        procs = list(_STARTED)
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return len(procs)


def resume() -> None:
    """After a stopped command, in the same process (tests call the CLI in-process): programs may start again."""
    _STOPPING.clear()


def wait_lock(f, poll: float = 0.1) -> None:
    """flock(f, LOCK_EX), waiting for another process's lock in steps that a stop (`stop_all`) interrupts."""
    import fcntl

    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if _STOPPING.is_set():
                raise Stopped() from None
            time.sleep(poll)


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the process group `proc` leads (started with start_new_session=True), then reap `proc`."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def run(argv: list[str], timeout: float, *, input: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(argv, capture_output=True, text=True, timeout=timeout, ...)` with the program in a
    process group of its own, killed whole when `timeout` passes (subprocess.TimeoutExpired is raised as usual)."""
    stdin = subprocess.PIPE if input is not None else kwargs.pop("stdin", subprocess.DEVNULL)
    if _STOPPING.is_set():
        raise Stopped()
    with subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True, **kwargs) as proc:
        with _LOCK:
            _STARTED.add(proc)
        try:
            if _STOPPING.is_set():  # a stop between the check above and the start: it missed this group
                raise Stopped()
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            try:
                proc.communicate(timeout=5)  # the group is gone: its pipes are closed
            except (subprocess.TimeoutExpired, ValueError, OSError):
                pass
            raise subprocess.TimeoutExpired(argv, timeout) from None
        except BaseException:
            kill_group(proc)
            raise
        finally:
            with _LOCK:
                _STARTED.discard(proc)
    if _STOPPING.is_set():  # killed by a stop: not a failure of the program
        raise Stopped()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
