"""The command line's options as the stages' typed records, built here, once per command, from argparse's namespace.

Nothing below `cli/` sees the namespace (tests/house/test_typed_options.py): a stage that has options declares them as a
frozen record next to the code that reads them (`run.selection.SelectionOptions`, `compile.pool.PoolOptions`,
`versions.requirements.RequirementOptions`, `matrix.VersionOptions`) and takes that record; the command builds
it with one of these functions, from the flags the stage's `add_options` put on its parser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fp8_check.compile import PoolOptions
from fp8_check.matrix import VersionOptions
from fp8_check.report import ReportFormat, registered_formats
from fp8_check.run import SelectionOptions
from fp8_check.versions import RequirementOptions


def selection_options(args: argparse.Namespace) -> SelectionOptions:
    """`paths`, `-k`, `--target`, `--profile`, `--mode`, `--goldens` (`_selection.add_options`)."""
    return SelectionOptions(
        paths=tuple(getattr(args, "paths", None) or ()),
        filter=getattr(args, "filter", None),
        target=getattr(args, "target", None),
        profile=getattr(args, "profile", None),
        mode=getattr(args, "mode", None) or "auto",
        goldens=Path(getattr(args, "goldens", None) or "goldens"),
    )


def pool_options(args: argparse.Namespace) -> PoolOptions:
    """`-j/--workers` and `--no-cache` (`_pool.add_options`)."""
    return PoolOptions(workers=getattr(args, "workers", None), cache=not getattr(args, "no_cache", False))


def requirement_options(args: argparse.Namespace) -> RequirementOptions:
    """`--with REQ` and `--with-requirements FILE` (`_requirements.add_with_options`)."""
    return RequirementOptions(requirements=tuple(getattr(args, "with_", None) or ()),
                                           requirements_file=getattr(args, "with_requirements", None))


def version_options(args: argparse.Namespace) -> VersionOptions:
    """`--jax`, `--jax-range`, `--select`, `--jax-index` (`fp8-check matrix`)."""
    return VersionOptions(jax=args.jax, jax_range=args.jax_range, select=args.select, jax_index=args.jax_index)


def output_paths(args: argparse.Namespace) -> dict[type[ReportFormat], Path | str | None]:
    """The path given for each output's option (`_formats.add_options`; None: not given)."""
    return {f: getattr(args, f.dest(), None) for f in registered_formats()}
