"""The `fp8-check` command line: collects the commands that modules register, maps errors to exit codes.

Exit codes (harness/errors.py): 0 every outcome is PASS/XFAIL/UNSUPPORTED; 1 any
FAIL/XPASS/UNRESOLVED/NEW; 2 bad input or usage (one line on stderr); 3 broken environment
(the canary, or JAX/the CUDA plugin missing). Every error is an `errors.Fp8CheckError` that
knows its exit code; nothing here lists error classes. Nothing imports this module: it is
only the entry point.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from harness.errors import Fp8CheckError

# Modules with `register(subparsers) -> {command: handler(args) -> exit code}`, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "harness.commands",
    "harness.versions.matrix",
    "harness.versions.bisect",
    "harness.report.page",
    "harness.gpu.capture",
    "harness.gpu.fidelity",
    "harness.gpu.calibrate",
    "harness.check",
    "harness.scaffold",
    "harness.upstream.reduce",
)


def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = argparse.ArgumentParser(prog="fp8-check", description="Regression tests for XLA's FP8 matmul fusions.")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers: dict = {}
    for name in COMMAND_MODULES:
        handlers.update(importlib.import_module(name).register(sub))
    return parser, handlers


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop like Ctrl-C (compile workers are killed on the way out)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, frame):
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    parser, handlers = build_parser()
    args = parser.parse_args(argv)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, _on_signal)
    try:
        return _dispatch(handlers, args)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _dispatch(handlers, args) -> int:
    try:
        return handlers[args.command](args)
    except Terminated as exc:
        print(f"fp8-check: stopped by signal {exc.signum}", file=sys.stderr)
        return 128 + exc.signum
    except Fp8CheckError as exc:  # bad input (2) or a broken environment (3): harness/errors.py
        print(exc.message_line(), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("fp8-check: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
