"""What the compile worker does so that a case's code cannot disturb it (imported by `worker.py`; stdlib only,
so it runs inside per-version environments that hold only JAX).

- `private_stdin()`: the worker reads its requests from a private copy of stdin and fd 0 becomes
  /dev/null, so `input()` or a leftover `breakpoint()` in a case fails at once (EOF) instead of
  waiting on the request pipe until `--timeout`; `error_text` says so in the case's error.
- `forget_project_modules()`: before each case, the project modules (neither stdlib nor installed)
  an earlier case imported are dropped, so each case imports its python module afresh, as when it
  was the only one: JAX never answers from its cache of an earlier case's identical function
  (XLA would then neither compile nor dump again).
- `die_with_parent()`: the worker ends (and removes its dump directory) when fp8-check does.
"""

import os
import sys

_KEPT: set[str] = set()  # what the worker had imported before its first case (itself, JAX, ...)


def private_stdin():
    requests = os.fdopen(os.dup(0), "r")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return requests


def error_text(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    if isinstance(exc, EOFError) or type(exc).__name__ == "BdbQuit":
        text += " (input() or breakpoint() in the case: the compile worker has no terminal, its stdin is closed)"
    return text


def forget_project_modules(site_dirs):
    if not _KEPT:
        _KEPT.update(sys.modules)
        return
    sites = tuple(d + os.sep for d in site_dirs)
    for name in [n for n in sys.modules if n not in _KEPT]:
        path = getattr(sys.modules[name], "__file__", None)
        if path and not os.path.realpath(path).startswith(sites):
            del sys.modules[name]


def die_with_parent(dump_dir):
    """Linux: get SIGTERM when the parent process dies, so that no worker outlives fp8-check; on SIGTERM
    remove `dump_dir` and leave (the parent, gone, cannot remove it). Linux sends it when the parent's
    *thread* that started this process ends, so the parent starts workers from one long-lived thread
    (`fp8_check.compile._service`)."""
    import signal

    def leave(signum, frame):
        import shutil

        shutil.rmtree(dump_dir, ignore_errors=True)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
