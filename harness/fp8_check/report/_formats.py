"""The outputs a run writes, in one registry: an output is one class and one option, written in one loop.

The shape of LLVM lit's reports.py: each `ReportFormat` names its option (`--json`, `--html`), what it
is, whether it is the run's record (a primary output that cannot be written is an error; a secondary
one only warns: core/_outputs.py's one policy) and how it writes a list of typed `Results` (one per JAX
version). `run`, `matrix` and `check` add the options with `add_options`, check the paths before
compiling with `check_paths`, and write with `write`; a new output is one class added to `FORMATS`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Callable, ClassVar, Mapping, Sequence, TextIO

from fp8_check import run
from fp8_check.core import Output, check_file, write_all
from fp8_check.report import _page  # _page.write_report, looked up when writing (a test replaces it)
from fp8_check.run import Results


class ReportFormat:
    """One output: its option, what it is, and how it writes the results of a run."""

    option: ClassVar[str]
    what: ClassVar[str]
    help: ClassVar[str]
    primary: ClassVar[bool] = False  # the run's record: failing to write it is an error (exit 2/3)
    announce: ClassVar[str | None] = None  # printed once written, "{path}" replaced
    many: ClassVar[bool] = True  # writes several runs (a matrix: one per JAX version), not only one
    notes: Sequence[str] = ()  # lines for the output's header (a matrix's missing jobs), set per instance

    @classmethod
    def dest(cls) -> str:
        return cls.option.lstrip("-").replace("-", "_")

    def write(self, runs: list[Results], path: Path) -> None:
        raise NotImplementedError


class ResultsJson(ReportFormat):
    """The standard results file (`fp8-check/results/2`, run/_results.py): one JAX version's results."""

    option, what, primary, announce, many = "--json", "results JSON", True, "results: {path}", False
    help = "results JSON (the standard results file, schema fp8-check/results/2)"

    def write(self, runs: list[Results], path: Path) -> None:
        if len(runs) != 1:
            raise ValueError(f"a results file holds one run, not {len(runs)}")
        run.write(path, runs[0])


class HtmlReport(ReportFormat):
    """The self-contained HTML page (report/_page.py) over one or more runs."""

    option, what, announce = "--html", "HTML report", "report: {path}"
    help = "HTML report"

    def write(self, runs: list[Results], path: Path) -> None:
        _page.write_report(runs, path, notes=self.notes)


FORMATS: tuple[type[ReportFormat], ...] = (ResultsJson, HtmlReport)


def registered_formats() -> tuple[type[ReportFormat], ...]:
    """Every output, as the registry is now (read at call time: a format added to `FORMATS` is seen)."""
    return FORMATS


def of_many_runs() -> tuple[type[ReportFormat], ...]:
    """The formats that write several runs (what `matrix` offers)."""
    return tuple(f for f in FORMATS if f.many)


def add_options(parser: argparse.ArgumentParser, defaults: dict[str, Path | str],
                formats: tuple[type[ReportFormat], ...] | None = None, stdout: bool = False) -> None:
    """One option per format. `defaults[option]`: a Path is the option's default; text says, in the command's
    words, where the output goes when the option is not given. `stdout`: `OPTION -` (or no FILE) writes the
    output on stdout instead (`check --json -`). `formats`: a command's own selection (default: every one)."""
    for f in FORMATS if formats is None else formats:
        default = defaults.get(f.option)
        help = f"{f.help} (default: {default})" if default is not None else f.help
        if stdout:
            parser.add_argument(f.option, dest=f.dest(), nargs="?", const="-", metavar="FILE",
                                help=f"{help}; '-' or no FILE: stdout only")
        else:
            parser.add_argument(f.option, dest=f.dest(), type=Path, metavar="FILE", help=help,
                                default=default if isinstance(default, Path) else None)


def chosen(given: Mapping[type[ReportFormat], Path | str | None],
           default_path: Callable[[type[ReportFormat]], Path | None],
           formats: tuple[type[ReportFormat], ...] | None = None) -> list[tuple[ReportFormat, Path]]:
    """The formats to write and where: the path given for the format's option (`given`, the CLI's parsed
    options), else the command's default (None: not written)."""
    out = []
    for f in FORMATS if formats is None else formats:
        path = given.get(f) or default_path(f)
        if path is not None:
            out.append((f(), Path(path)))
    return out


def check_paths(chosen_formats: list[tuple[ReportFormat, Path]]) -> None:
    """Before compiling: every output's path can be written (OutputError, one line naming the option)."""
    for f, path in chosen_formats:
        check_file(path, f.option)


def write(chosen_formats: list[tuple[ReportFormat, Path]], runs: list[Results] | Callable[[], list[Results]]) -> list[Path]:
    """Write every chosen output, in one loop, with core/_outputs.py's one failure policy. `runs` may be a
    function giving them (read from files when the first output is written: a read error is that output's)."""
    loaded: list[list[Results]] = []

    def the_runs() -> list[Results]:
        if not loaded:
            loaded.append(runs() if callable(runs) else runs)
        return loaded[0]

    def writer(f: ReportFormat) -> Callable[[Path], None]:
        return lambda path: f.write(the_runs(), path)

    return write_all([Output(f.what, path, writer(f), primary=f.primary, announce=f.announce)
                              for f, path in chosen_formats])


def print_results(res: Results, out: TextIO) -> None:
    """The standard results document on a stream (`check --json -`): JSON alone."""
    out.write(json.dumps(run.to_json(res), indent=1) + "\n")
    out.flush()
