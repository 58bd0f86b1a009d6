"""The case library across JAX versions: the matrix document, its views, news and version-ranged goldens (stage `matrix`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['CHANGE_MARKS', 'EXIT_OK', 'EXIT_USAGE', 'FAIL_ON', 'Finding', 'Matrix', 'MatrixError', 'NO_REGRESSIONS', 'NotRun', 'Progress', 'Status', 'VersionOptions', 'closing_line', 'entry_from_results', 'findings', 'first_bad', 'goldens', 'jobs', 'load_matrix', 'merge', 'needed_sets', 'not_run', 'plan_release', 'print_report', 'run_matrix', 'versions_of', 'write']

_MODULES = {  # module -> the names of the face it defines
    'document': ('EXIT_OK', 'EXIT_USAGE', 'FAIL_ON', 'Matrix', 'MatrixError', 'Status', 'entry_from_results', 'load_matrix', 'merge', 'write'),
    'news': ('Finding', 'NO_REGRESSIONS', 'NotRun', 'closing_line', 'findings', 'first_bad', 'not_run'),
    'run': ('VersionOptions', 'needed_sets', 'plan_release', 'run_matrix', 'versions_of'),
    'view': ('CHANGE_MARKS', 'Progress', 'print_report'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.matrix._document import (
        EXIT_OK,
        EXIT_USAGE,
        FAIL_ON,
        Matrix,
        MatrixError,
        Status,
        entry_from_results,
        load_matrix,
        merge,
        write,
    )
    from fp8_check.matrix._news import NO_REGRESSIONS, Finding, NotRun, closing_line, findings, first_bad, not_run
    from fp8_check.matrix._run import VersionOptions, needed_sets, plan_release, run_matrix, versions_of
    from fp8_check.matrix._view import CHANGE_MARKS, Progress, print_report


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use (PEP 562): start-up stays lazy."""
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
# ---- end of the face
