"""Reporting: the self-contained HTML report and upstream issue bodies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._formats import (
        HtmlReport,
        ReportFormat,
        ResultsJson,
        add_options,
        check_paths,
        chosen,
        of_many_runs,
        print_results,
        registered_formats,
        write,
    )
    from ._github import case_lines, error_annotations, job_summary, not_run_annotations, write_issue_bodies
    from ._issue import markdown_for
    from ._issue_filing import FilingError, file_issues
    from ._markup import md_inline, no_commands
    from ._model import ReportError, load
    from ._page import REPORT_LIMIT, write_report
    from ._terminal import (
        estimate_line,
        gemm_summary,
        kernels_text,
        plain,
        price_hint,
        print_outcome,
        print_summary,
        saving_from_loss,
        unsharded_note,
    )
else:
    __getattr__, __dir__, __all__ = attach(__name__)
