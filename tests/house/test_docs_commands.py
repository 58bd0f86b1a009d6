"""Every fp8-check command the docs show is one the CLI accepts: code lines are parsed by the real argument parser,
and the values of the version, target, profile and criterion options anywhere in the docs by the code that reads
them. A typo like `--jax-range 0.9.1:0.12.0` (issue 44, docs/amd.md) fails here instead of in a reader's shell.

Nothing runs: the examples that run are tests/house/test_docs.py's. Lines with placeholders (`CASE`, `V1`, `…`, `[...]`,
`A|B`) are synopses and are left alone.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from fp8_check.cli.main import build_parser
from fp8_check.targets import PROFILES, all_target_names, profile_alias
from fp8_check.upstream._bisect import CRITERIA
from fp8_check.versions.releases import VersionError, parse_range, parse_version

from ..conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
COMMAND = re.compile(r"^\s*(?:\$\s+)?(?:bash scripts/env\.sh\s+)?fp8-check\s+(.*)$")
PLACEHOLDER = re.compile(r"…|\.\.\.(?!\d)|\||\[|<|\{|\bA\.\.B\b|\b[A-Z][A-Z0-9_]+\b|\$\w")
OPTION = re.compile(r"(--jax-range|--jax|--target|--profile|--criterion)[ =]['\"]?([^\s`'\")]+)")


def code_lines(path: Path):
    """(line number, text) of each line in a fenced or an indented code block, continuation lines joined."""
    fence, pending, start = None, "", 0
    for i, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^\s*(`{3,})", line)
        if m and not pending:
            fence = None if fence else m.group(1)
            continue
        if not (fence or line.startswith("    ") or pending):
            continue
        if pending:
            pending += " " + line.strip()
        else:
            pending, start = line, i
        if pending.rstrip().endswith("\\"):
            pending = pending.rstrip()[:-1]
            continue
        yield start, pending
        pending = ""


def commands() -> list[tuple[str, str]]:
    out = []
    for path in PAGES:
        for line, text in code_lines(path):
            m = COMMAND.match(text)
            if not m:
                continue
            args = re.split(r"\s+#\s", m.group(1))[0].strip()
            words = args.split()
            first = words[0] if words else ""
            if not first or any(w.endswith(":") for w in words[:2]) or first.startswith(("#", "-")) \
                    or PLACEHOLDER.search(args):
                continue  # program output (`fp8-check check: warning`), a comment, a synopsis
            out.append((f"{path.relative_to(REPO)}:{line}", args))
    return out


@pytest.mark.parametrize("where,args", commands(), ids=[w for w, _ in commands()])
def test_a_command_in_the_docs_parses(where, args):
    parser, _ = build_parser()
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            parser.parse_args(shlex.split(args))
    except SystemExit as exc:
        assert not exc.code, f"{where}: fp8-check {args}\n{err.getvalue().strip()}"


def option_values() -> list[tuple[str, str, str]]:
    out = []
    for path in PAGES:
        for i, line in enumerate(path.read_text().splitlines(), 1):
            for m in OPTION.finditer(line):
                value = m.group(2).rstrip(",;:]")
                if value.endswith(".") and not value.endswith(".."):  # the end of a sentence
                    value = value[:-1]
                if not value or PLACEHOLDER.search(value) or re.search(r"[A-Z]", value):
                    continue
                out.append((f"{path.relative_to(REPO)}:{i}", m.group(1), value))
    return out


def _problem(option: str, value: str) -> str | None:
    try:
        if option == "--jax-range":
            parse_range(value)
        elif option == "--jax":
            for v in value.split(","):
                if v not in ("nightly", "current"):
                    parse_version(v)
        elif option == "--target":
            unknown = [t for t in value.split(",") if t not in all_target_names() and not t.endswith(".txtpb")]
            return f"unknown target(s) {unknown}" if unknown else None
        elif option == "--profile":
            unknown = [p for p in value.split(",") if profile_alias(p) not in PROFILES]  # a shown name (hipblaslt) is its profile
            return f"unknown profile(s) {unknown}" if unknown else None
        elif option == "--criterion" and value not in CRITERIA:
            return f"not one of {CRITERIA}"
    except VersionError as exc:
        return str(exc)
    return None


def test_option_values_in_the_docs_are_ones_the_cli_reads():
    found = option_values()
    assert len(found) > 30  # the docs do show these options: the reader sees them
    bad = [f"{where}: {opt} {value}: {why}" for where, opt, value in found if (why := _problem(opt, value))]
    assert not bad, "\n".join(bad)


def test_the_check_catches_the_typo_that_shipped():
    assert _problem("--jax-range", "0.9.1:0.12.0") is not None
    assert _problem("--jax-range", "0.9.1..0.12.0") is None
    assert _problem("--target", "mi300x,mi350x") is None and _problem("--target", "mi300") is not None
