"""The command half of fp8_check.report._page (the report stage): the subcommands it registers."""

from __future__ import annotations

import sys
from pathlib import Path

from fp8_check.core import OutputError, check_file
from fp8_check.report import REPORT_LIMIT, ReportError, load, markdown_for, no_commands, write_report


def cmd_report(args) -> int:
    try:
        if not args.markdown:
            check_file(args.output, "-o")  # before reading and rendering everything
        inputs = load(args.results)
        if args.markdown:
            bodies = markdown_for(inputs.results, args.markdown, args.target, args.profile, args.jax)
            sys.stdout.write(no_commands("\n\n---\n\n".join(bodies)))  # a reason's line is not a workflow command
            return 0
        out = write_report(inputs.results, args.output, args.title, inputs.notes)
    except (ReportError, OutputError) as exc:
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return 2
    size = out.stat().st_size
    print(f"report: {out} ({size / 1e6:.2f} MB)")
    if size > REPORT_LIMIT:
        print(f"fp8-check: warning: the report is {size / 1e6:.1f} MB, over the 5 MB it aims for even with texts left "
              "out: select fewer cases or versions", file=sys.stderr)
    return 0


def register(subparsers) -> dict:
    p = subparsers.add_parser(
        "report", help="write the self-contained HTML report (or an upstream issue body) from results files",
        description="Write one self-contained HTML report from one or more results files (several JAX versions "
                    "make the case x version grid), or print the upstream issue body for a case with --markdown.")
    p.add_argument("results", nargs="+", type=Path, help="results JSON files (from `fp8-check run` or a merged matrix)")
    p.add_argument("-o", "--output", type=Path, default=Path("reports/report.html"),
                   help="HTML file to write (default: reports/report.html)")
    p.add_argument("--markdown", metavar="CASE", help="print the markdown issue body for CASE's FAIL/XPASS/UNRESOLVED result(s) instead")
    p.add_argument("--target", help="with --markdown: only this target")
    p.add_argument("--profile", help="with --markdown: only this profile")
    p.add_argument("--jax", help="with --markdown: only this JAX version (default: the first bad version of the newest failing run)")
    p.add_argument("--title", help="the page title")
    return {"report": cmd_report}
