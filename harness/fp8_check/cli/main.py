"""The `fp8-check` command line: collects the commands that modules register, maps errors to exit codes.

`fp8-check --version` prints fp8-check's version and the JAX it runs with; a bare `fp8-check`
prints the help and exits 0.

Exit codes (harness/fp8_check/core/_errors.py): 0 every outcome is PASS/XFAIL/UNSUPPORTED; 1 any
FAIL/XPASS/UNRESOLVED/NEW; 2 bad input or usage (one line on stderr); 3 broken environment
(the canary, or JAX/the CUDA plugin missing). Every error is an `errors.Fp8CheckError` that
knows its exit code; nothing here lists error classes. Nothing imports this module: it is
only the entry point.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from fp8_check.core import Fp8CheckError, resume, stop_all, stopping, version_line

# Modules with `register(subparsers) -> {command: handler(args) -> exit code}`, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "fp8_check.cli.commands",
    "fp8_check.cli.matrix",
    "fp8_check.cli.bisect",
    "fp8_check.cli.report",
    "fp8_check.cli.ci",
    "fp8_check.cli.capture",
    "fp8_check.cli.fidelity",
    "fp8_check.cli.calibrate",
    "fp8_check.cli.check",
    "fp8_check.cli.scaffold",
    "fp8_check.cli.reduce",
)


class _OneLineErrors(argparse.ArgumentParser):
    """A usage error is one line on stderr, exit 2 (argparse's own prints the usage block first); `-h` still
    prints the usage. Subcommands' parsers are of the same class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = _OneLineErrors(prog="fp8-check", description="Regression tests for XLA's FP8 matmul fusions.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print fp8-check's version and the JAX (jaxlib, CUDA plugin) it runs with")
    sub = parser.add_subparsers(dest="command")
    handlers: dict = {}
    for name in COMMAND_MODULES:
        handlers.update(importlib.import_module(name).register(sub))
    return parser, handlers


class _Version(argparse.Action):
    """`--version`: one unwrapped line (argparse's own action would wrap it to the terminal's width)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit(0)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop like Ctrl-C (compile workers are killed on the way out)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    stop_all()  # uv and every other program started, in any thread, at once: nothing waits for them
    raise Terminated(signum)


STOP_GRACE_S = 1.0  # how long the threads still running when a signal stopped the command get to finish


def _leave(code: int) -> int:
    """After a signal, in the fp8-check process itself: threads that still run (an environment build waiting on
    another process's lock, a compile in a pool thread) get STOP_GRACE_S; then the process ends without them, so
    a stop takes well under two seconds."""
    import os
    import threading

    deadline = time.monotonic() + STOP_GRACE_S
    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    return code


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `fp8-check`: the help, not an error
        parser.print_help()
        return 0
    resume()  # an earlier command in this process (the tests) may have been stopped
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        code = _dispatch(handlers, args)
        return _leave(code) if argv is None and stopping() else code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _dispatch(handlers, args) -> int:
    try:
        code = handlers[args.command](args)
        sys.stdout.flush()  # inside the try: a closed pipe (`| head`) is met here, not at interpreter exit
        return code
    except Terminated as exc:
        print(f"fp8-check: stopped by signal {exc.signum}", file=sys.stderr)
        return 128 + exc.signum
    except Fp8CheckError as exc:  # bad input (2) or a broken environment (3): harness/fp8_check/core/_errors.py
        print(exc.message_line(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        stop_all()  # Ctrl-C: the programs started in other threads too
        print("fp8-check: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `fp8-check list | head`: the reader is gone; stop quietly
        _silence_stdout()
        return 141  # 128 + SIGPIPE, as a process the pipe had stopped


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush does not raise again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
