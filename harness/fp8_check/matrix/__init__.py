"""The case library across JAX versions: the matrix document, its views, news and version-ranged goldens (stage `matrix`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._document import FAIL_ON, Matrix, MatrixError, Status, entry_from_results, load_matrix, merge, write
    from ._goldens import MatrixFileError, bless_from_matrix, one_version_hint
    from ._jobs import format_plan, load_plan, missing, plan, uploaded
    from ._news import NO_REGRESSIONS, Finding, NotRun, closing_line, findings, first_bad, not_run
    from ._run import VersionOptions, needed_sets, plan_release, run_matrix, versions_of
    from ._view import CHANGE_MARKS, Progress, print_report
else:
    __getattr__, __dir__, __all__ = attach(__name__)
