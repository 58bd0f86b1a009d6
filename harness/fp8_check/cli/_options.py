"""The command line's options as the stages' typed records, built here, once per command, from argparse's namespace.

Nothing below `cli/` sees the namespace (tests/test_options.py): a stage that has options declares them as a
frozen record next to the code that reads them (`run.selection.SelectionOptions`, `compile.pool.PoolOptions`,
`versions.requirements.RequirementOptions`, `matrix.VersionOptions`) and takes that record; the command builds
it with one of these functions, from the flags the stage's `add_options` put on its parser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fp8_check.compile import pool
from fp8_check.matrix import VersionOptions
from fp8_check.report import formats
from fp8_check.run import selection
from fp8_check.versions import requirements


def selection_options(args: argparse.Namespace) -> selection.SelectionOptions:
    """`paths`, `-k`, `--target`, `--profile`, `--mode`, `--goldens` (`selection.add_options`)."""
    return selection.SelectionOptions(
        paths=tuple(getattr(args, "paths", None) or ()),
        filter=getattr(args, "filter", None),
        target=getattr(args, "target", None),
        profile=getattr(args, "profile", None),
        mode=getattr(args, "mode", None) or "auto",
        goldens=Path(getattr(args, "goldens", None) or "goldens"),
    )


def pool_options(args: argparse.Namespace) -> pool.PoolOptions:
    """`-j/--workers` and `--no-cache` (`pool.add_options`)."""
    return pool.PoolOptions(workers=getattr(args, "workers", None), cache=not getattr(args, "no_cache", False))


def requirement_options(args: argparse.Namespace) -> requirements.RequirementOptions:
    """`--with REQ` and `--with-requirements FILE` (`requirements.add_with_options`)."""
    return requirements.RequirementOptions(requirements=tuple(getattr(args, "with_", None) or ()),
                                           requirements_file=getattr(args, "with_requirements", None))


def version_options(args: argparse.Namespace) -> VersionOptions:
    """`--jax`, `--jax-range`, `--select`, `--jax-index` (`fp8-check matrix`)."""
    return VersionOptions(jax=args.jax, jax_range=args.jax_range, select=args.select, jax_index=args.jax_index)


def output_paths(args: argparse.Namespace) -> dict[type[formats.ReportFormat], Path | str | None]:
    """The path given for each output's option (`formats.add_options`; None: not given)."""
    return {f: getattr(args, f.dest(), None) for f in formats.FORMATS}
