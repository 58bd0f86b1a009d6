"""The `fp8-check` command line: collects the commands that modules register, maps errors to exit codes.

Exit codes: 0 every outcome is PASS/XFAIL/UNSUPPORTED; 1 any FAIL/XPASS/UNRESOLVED/NEW;
2 bad input or usage (one line on stderr); 3 broken environment (the canary, or JAX/the
CUDA plugin missing). Nothing imports this module: it is only the entry point.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from harness.pipeline.cases import CaseError
from harness.pipeline.golden import GoldenError
from harness.pipeline.names import UnsafeName
from harness.pipeline.outputs import OutputError, WriteError
from harness.pipeline.results import ResultsError
from harness.pipeline.runner import CanaryError
from harness.selection import EXIT_ENV, EXIT_USAGE, BrokenEnvironment, UsageError
from harness.targets import TargetSpecError

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
    except (CaseError, GoldenError, ResultsError, UsageError, OutputError, UnsafeName) as exc:
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WriteError as exc:  # a full disk after the checks passed: what was printed above is the record
        print(f"fp8-check: {exc.strerror}", file=sys.stderr)
        return EXIT_ENV
    except CanaryError as exc:
        print(f"fp8-check: {exc}", file=sys.stderr)
        return EXIT_ENV
    except BrokenEnvironment as exc:
        print(f"fp8-check: broken environment: {exc}", file=sys.stderr)
        return EXIT_ENV
    except TargetSpecError as exc:  # a spec XLA would silently misread
        print(f"fp8-check: refused target spec: {exc}", file=sys.stderr)
        return EXIT_ENV
    except KeyboardInterrupt:
        print("fp8-check: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
