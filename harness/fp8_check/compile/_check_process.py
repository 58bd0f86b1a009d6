"""`fp8-check check` runs your code in a process of its own, as `fp8-check run` does with cases.

Importing your module, calling the `--args` factory and tracing the function all happen in a
child process (`python -m fp8_check.cli.check`, which calls `child`), with stdin closed (an `input()` or a leftover
`breakpoint()` fails at once) and under `--timeout`. Whatever that code does — raise, call
`exit()`, segfault, hang — the command ends with one line and an exit code:

    the child's own exit code     0 / 1 / 2 / 3, as `fp8-check run` (it printed the results)
    the code ends the process     1: "... ended the checking process (exit status N)" / "(signal SIGSEGV)"
    past --timeout                1: "... did not finish within N s (--timeout): stopped"

The child writes its exit code to a status file as its very last step, so a process the checked
code ended early (`os._exit(0)`) is never mistaken for a passing check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from fp8_check.compile._service import harness_path, remove_harness_link
from fp8_check.core import EXIT_FAIL, kill_group


def run(options: dict[str, Any], limit: float, what: str, module: str = "fp8_check.cli.check") -> int:
    """Run the check in a child process, `python -m module`, which gets `options` (the command's already
    validated options, JSON values) back; `limit`: seconds it may take in all; `what`: the checked function."""
    doc = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
    fd, status = tempfile.mkstemp(prefix="fp8-check-check-", suffix=".status")
    os.close(fd)
    os.unlink(status)
    env = dict(os.environ)

    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(harness_path()), os.getcwd()]
                                                      + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])))
    proc = subprocess.Popen([sys.executable, "-m", module, json.dumps(doc), status],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)  # its own process group: killed whole (what the code started too)
    relays = [threading.Thread(target=_relay, args=(src, name), daemon=True)
              for src, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr"))]
    for t in relays:
        t.start()
    try:
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            print(f"fp8-check check: error: {what} did not finish within {limit:g} s (--timeout): stopped", file=sys.stderr)
            return EXIT_FAIL
    finally:
        if proc.poll() is None:  # interrupted (Ctrl-C, SIGTERM): the child goes too
            kill_group(proc)
        for t in relays:
            t.join(timeout=10)
    try:
        with open(status) as f:
            return int(json.load(f)["code"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    finally:
        try:
            os.unlink(status)
        except OSError:
            pass
    how = (f"signal {signal.Signals(-proc.returncode).name}" if proc.returncode < 0 and -proc.returncode in
           signal.valid_signals() else f"exit status {proc.returncode}")
    print(f"fp8-check check: error: the checked code ({what}) ended the checking process ({how}) before a result",
          file=sys.stderr)
    return EXIT_FAIL


def _relay(src, name: str) -> None:
    """Copy the child's output to this process's stdout/stderr as it comes (looked up per line: capturable)."""
    for line in iter(src.readline, b""):
        stream = getattr(sys, name)
        stream.write(line.decode("utf-8", "replace"))
        stream.flush()
    src.close()


def child(check_here: Callable[[dict[str, Any]], int], argv: list[str]) -> None:
    """The child's side: `check_here(options)` with the parent's options (argv: JSON, status file); never returns."""
    options, status = json.loads(argv[0]), argv[1]
    code = EXIT_FAIL
    try:
        code = check_here(options)
    except SystemExit as exc:  # the checked code called exit() / sys.exit()
        print(f"fp8-check check: error: the checked code ({options['function']}) called exit({exc.code!r})", file=sys.stderr)
        code = EXIT_FAIL
    except KeyboardInterrupt:
        code = 130
    finally:
        sys.stdout.flush()
        with open(status, "w") as f:
            json.dump({"code": code}, f)
    sys.stderr.flush()

    remove_harness_link()  # fp8-check's own clean-up, which os._exit skips
    os._exit(code)  # no atexit handler of the checked code runs after the verdict
