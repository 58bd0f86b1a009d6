"""The command half of fp8_check.report._github (the report stage): the subcommands it registers."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from fp8_check.matrix import closing_line, load_matrix, not_run
from fp8_check.report import (
    FilingError,
    case_lines,
    error_annotations,
    file_issues,
    job_summary,
    no_commands,
    not_run_annotations,
    write_issue_bodies,
)


def cmd_ci(args) -> int:
    if args.ci_command == "summary":
        m = load_matrix(args.matrix)
        issues_dir = Path(args.issues_dir)
        try:
            bodies = write_issue_bodies(m, issues_dir)
        except OSError as exc:
            print(f"fp8-check ci summary: error: cannot write the issue bodies into {issues_dir}: {exc.strerror or exc}",
                  file=sys.stderr)
            return 2
        summary_file = args.summary_file or os.environ.get("GITHUB_STEP_SUMMARY")
        text = job_summary(m, str(issues_dir) if bodies else None, os.environ.get("GITHUB_RUN_ID"))
        if summary_file:
            try:
                with open(summary_file, "a", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:  # a directory, /proc/…, a full disk
                print(f"fp8-check ci summary: error: cannot append to the summary file {summary_file}: "
                      f"{exc.strerror or exc}", file=sys.stderr)
                return 2
        else:
            sys.stdout.write(no_commands(text))
        lines_of = case_lines([Path(p) for p in args.cases])
        for line in error_annotations(m, lines_of) + not_run_annotations(not_run(m), lines_of):
            print(line)  # fp8-check's own workflow commands, their data escaped
        print(no_commands(closing_line(m)))
        return 0
    if not Path(args.issues_dir).is_dir():
        print(f"fp8-check ci issues: error: {args.issues_dir} is not a directory of issue bodies", file=sys.stderr)
        return 2
    try:
        for line in file_issues(Path(args.issues_dir), args.label, args.repo, args.gh):
            print(no_commands(line))
    except FilingError as exc:
        print(f"fp8-check ci issues: error: {exc}", file=sys.stderr)
        return 3
    return 0


def register(subparsers) -> dict:
    p = subparsers.add_parser("ci", help="GitHub CI output: job summary, annotations and issue bodies; file issues with gh")
    sub = p.add_subparsers(dest="ci_command", required=True)
    s = sub.add_parser("summary", help="append the job summary to $GITHUB_STEP_SUMMARY, print ::error annotations, "
                                       "write the first-bad-version issue bodies")
    s.add_argument("matrix", type=Path, help="the matrix JSON (fp8-check matrix --out)")
    s.add_argument("--cases", nargs="*", default=["cases"], help="case files or directories, for the annotations' lines")
    s.add_argument("--issues-dir", default="reports/issues", help="where the issue bodies go (default reports/issues)")
    s.add_argument("--summary-file", help="write here instead of $GITHUB_STEP_SUMMARY (unset: stdout)")
    i = sub.add_parser("issues", help="open or update one issue per body in --issues-dir (deduplicated), with gh")
    i.add_argument("--issues-dir", default="reports/issues")
    i.add_argument("--label", default="fp8-check", help="label of the issues (default fp8-check; must exist)")
    i.add_argument("--repo", help="OWNER/NAME (default: gh's current repository)")
    i.add_argument("--gh", default="gh", help=argparse.SUPPRESS)  # the gh program (tests: a stand-in)
    return {"ci": cmd_ci}
