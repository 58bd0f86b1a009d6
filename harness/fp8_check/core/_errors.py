"""One error hierarchy, and the exit codes it maps to (in one place: `exit_code`, used by harness/fp8_check/cli/main.py).

Exit codes: 0 every outcome is PASS/XFAIL/UNSUPPORTED; 1 any FAIL/XPASS/UNRESOLVED/NEW (or
what `--fail-on` selects); 2 bad input or usage (one line on stderr); 3 broken environment.

Every error a user can cause or a machine can be broken by derives from `Fp8CheckError`:
`BadInput` (exit 2: a case file, a golden, a results file, an option, an output path) or
`BrokenEnvironmentError` (exit 3: the canary, the compile worker, a target spec XLA would
misread). Each error says how its line starts (`prefix`), so the CLI prints every one the
same way: `fp8-check: PREFIX MESSAGE`.
"""

from __future__ import annotations

from pathlib import Path

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_ENV = 0, 1, 2, 3


class Fp8CheckError(Exception):
    """An error fp8-check reports as one line and an exit code (never a traceback)."""

    exit_code = EXIT_USAGE
    prefix = "error: "

    def message_line(self) -> str:
        return f"fp8-check: {self.prefix}{self}"


class BadInput(Fp8CheckError):
    """Bad input or usage: exit 2."""

    exit_code = EXIT_USAGE
    prefix = "error: "


class BrokenEnvironmentError(Fp8CheckError):
    """The environment cannot produce meaningful results (reporting regressions would be noise): exit 3."""

    exit_code = EXIT_ENV
    prefix = "broken environment: "


def exit_code(exc: BaseException) -> int | None:
    """The exit code for `exc`, or None when it is not one of fp8-check's errors (a bug: let it raise)."""
    return exc.exit_code if isinstance(exc, Fp8CheckError) else None


EXCERPT = 40  # characters of a file an error may quote (escaped: one line, control characters shown)


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """`text` as an error may quote it: escaped (repr: one line, control characters shown), at most `limit`
    characters; never a whole line of a file."""
    short = text if len(text) <= limit else text[:limit - 3] + "..."
    return repr(short)


def shown_path(path: Path | str) -> str:
    """A path as a message names it: as given when printable and short, else a short escaped excerpt."""
    s = str(path)
    return s if s.isprintable() and len(s) <= 200 else excerpt(s, 80)
