"""Reporting: the self-contained HTML report and upstream issue bodies."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['FilingError', 'REPORT_LIMIT', 'ReportError', 'case_lines', 'error_annotations', 'estimate_line', 'file_issues', 'formats', 'gemm_summary', 'job_summary', 'kernels_text', 'load', 'markdown_for', 'md_inline', 'no_commands', 'not_run_annotations', 'price_hint', 'saving_from_loss', 'terminal', 'unsharded_note', 'write_issue_bodies', 'write_report']

_MODULES = {  # module -> the names of the face it defines
    'github': ('case_lines', 'error_annotations', 'job_summary', 'not_run_annotations', 'write_issue_bodies'),
    'issue': ('markdown_for',),
    'issue_filing': ('FilingError', 'file_issues'),
    'markup': ('md_inline', 'no_commands'),
    'model': ('ReportError', 'load'),
    'page': ('REPORT_LIMIT', 'write_report'),
    'terminal': ('estimate_line', 'gemm_summary', 'kernels_text', 'price_hint', 'saving_from_loss', 'unsharded_note'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.report._github import case_lines, error_annotations, job_summary, not_run_annotations, write_issue_bodies
    from fp8_check.report._issue import markdown_for
    from fp8_check.report._issue_filing import FilingError, file_issues
    from fp8_check.report._markup import md_inline, no_commands
    from fp8_check.report._model import ReportError, load
    from fp8_check.report._page import REPORT_LIMIT, write_report
    from fp8_check.report._terminal import estimate_line, gemm_summary, kernels_text, price_hint, saving_from_loss, unsharded_note


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
