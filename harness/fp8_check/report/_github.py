"""GitHub-native CI output for a matrix: the job summary, error annotations on case files, issue bodies,
and opening or updating one issue per regression with `gh`.

    fp8-check ci summary MATRIX.json [--cases DIR…] [--issues-dir reports/issues] [--summary-file F]
    fp8-check ci issues [--issues-dir reports/issues] [--label fp8-check] [--repo OWNER/NAME]

`summary` appends markdown to $GITHUB_STEP_SUMMARY (or --summary-file): the closing verdict, the
results that differ from the goldens (regressions first, each at its first bad version with its
one-line verdict and the file holding its ready issue body), and the case x version grid (rows
with news first). It prints one `::error file=…,line=…::` workflow command per finding, pointing
at the case's YAML, and writes the issue bodies, one per upstream change (`<first case>--<key>.md`, the
body of `fp8-check report --markdown CASE`), into --issues-dir. `issues` files them (report/_issue_filing.py):
each body's last line is its marker; an open issue ending in the same marker is updated (`gh issue edit`),
otherwise one is created (`gh issue create`). Untrusted text is made inert (report/_markup.py). Each writer
is a plain function of the typed matrix, so it can sit beside the terminal and HTML writers.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from fp8_check import run
from fp8_check.cases import CaseError, load
from fp8_check.matrix import CHANGE_MARKS, Finding, Matrix, NotRun, closing_line, findings, first_bad, not_run
from fp8_check.report._issue import first_bad_items, issue_markdown
from fp8_check.report._issue_filing import MARKER, Group, groups
from fp8_check.report._markup import code_span, md_inline
from fp8_check.report._model import build_model
from fp8_check.report._terminal import lost_text
from fp8_check.verdict import NEW, XPASS, answer

SUMMARY_LIMIT = 900_000  # GitHub takes at most 1 MiB of summary per step


def issue_groups(m: Matrix) -> list[Group]:
    """The regressions at their first bad version, one group per upstream change (report/_issue_filing.py)."""
    return groups([f for f in first_bad(m) if f.is_regression])


def one_line(f: Finding) -> str:
    """The finding's one-line verdict, led by its FP8 answer: a FAIL's classified summary, else the first line of
    its reason; a program that quantizes to FP8 and runs no FP8 gemm says so and why."""
    o = f.outcome
    fp8 = answer(o)
    head = f"{fp8.headline}: " if fp8.headline else ""
    lost = lost_text(o)
    if lost:  # what broke: the layers that lost FP8, with their passes
        return f"{head}{o.verdict.cls if o.verdict else 'regression'}: lost FP8: {'; '.join(lost[:3])}" + \
            (f"; and {len(lost) - 3} more layers" if len(lost) > 3 else "")
    if o.verdict is not None and o.verdict.lines:
        return f"{head}{o.verdict.cls}: {o.verdict.summary(limit=1)}"
    if fp8.line():
        return f"{head}{fp8.line()}"[:400]
    lines = (o.reason or o.code.meaning or "").strip().splitlines()
    return (head + lines[0][:200]) if lines else head.rstrip(": ")


def _row(f: Finding) -> tuple:
    o = f.outcome
    return (o.case, o.target, o.profile, o.mode, f.jax)


def _md(text: str) -> str:
    """Text for a markdown table cell: no markup gets through (a case id, a reason, a target are input)."""
    return md_inline(text)


def _how_to_bless(first: list[Finding], run_id: str | None) -> list[str]:
    """For rows without a golden (NEW): the exact commands that record them (green until then)."""
    new = [f for f in first if f.outcome.code is NEW]
    if not new:
        return []
    shown = ", ".join(md_inline(f.outcome.case) for f in new[:10]) + (" …" if len(new) > 10 else "")
    run = md_inline(run_id) if run_id and run_id.isdigit() else "RUN_ID"
    return ["### No golden yet: how to bless", "",
            f"{len(new)} row{'s have' if len(new) != 1 else ' has'} no golden yet ({shown}): told, not failed. "
            "To record the signatures this run found, on every version it ran, from the repository's root:", "",
            "```sh", f"gh run download {run} -n fp8-check-report -D reports   # this run's report artifact",
            "fp8-check bless --from-matrix reports/matrix.json                 # one golden per case, version-ranged",
            "git add goldens && git commit -m 'fp8-check: bless' && git push", "```", "",
            "Or on the JAX installed locally: `fp8-check bless` (the cases) and `pytest tests --fp8-bless` "
            "(the `fp8.check_golden` calls of the tests).", ""]


def job_summary(m: Matrix, issues_dir: str | None = None, run_id: str | None = None) -> str:
    """The markdown job summary: verdict, findings (first bad version each, regressions first), then the grid."""
    first = first_bad(m)
    body_of = {_row(f): g.name for g in issue_groups(m) for f in g.findings}
    lines = ["## fp8-check", "", f"**{_md(closing_line(m))}**", ""]
    if first:
        lines += ["### Differs from the golden (regressions first)", "",
                  "| case | target/profile | first bad jax | outcome | verdict | issue body |", "|---|---|---|---|---|---|"]
        for f in first:
            o = f.outcome
            if f.is_regression:
                where = (code_span(f"{issues_dir}/{body_of.get(_row(f), '?')}").replace("|", "\\|") + " (artifact)" if issues_dir
                         else "`fp8-check report --markdown CASE`")
            else:  # nothing to file upstream
                where = {NEW: "none: bless it", XPASS: "none: the known issue is fixed, update the case"}.get(
                    o.code, "none: not a regression, update the golden")
            lines.append(f"| {_md(o.case)} | {_md(o.target)}/{_md(o.profile)} | {_md(f.jax)} | {o.code.name} | "
                         f"{_md(one_line(f))} | {where} |")
        lines.append("")
    lines += _how_to_bless(first, run_id)
    unrun = not_run(m)
    if unrun:
        lines += ["### Did not run", "", "| what | cases | target/profile | jax | why | what to do |", "|---|---|---|---|---|---|"]
        for n in unrun:
            todo = "; ".join(x for x in (n.hint, "ran on the newest version only: a failure under `fail-on: newest`"
                                         if n.only_newest else "") if x)
            lines.append(f"| {_md(n.what)} | {_md(', '.join(n.cases[:20]) + (' …' if len(n.cases) > 20 else ''))} | "
                         f"{_md(', '.join(n.rows))} | {_md(', '.join(n.versions))} | {_md(n.reason)} | {_md(todo)} |")
        lines.append("")
    lines += grid_markdown(m, {(f.outcome.case, f.outcome.target, f.outcome.profile) for f in findings(m)})
    text = "\n".join(lines) + "\n"
    if len(text.encode()) > SUMMARY_LIMIT:
        text = text.encode()[:SUMMARY_LIMIT].decode(errors="ignore") + "\n\n…(truncated: see the report artifact)\n"
    return text


def grid_markdown(m: Matrix, news_rows: set) -> list[str]:
    changed = {(c.case, c.target, c.profile, c.after): c.cls for c in m.changes()}
    rows = sorted(m.rows(), key=lambda r: (r not in news_rows,))  # rows with news first, else in run order
    out = ["### Grid", "", "<details" + (" open" if news_rows else "") + "><summary>case × JAX version "
           f"({len(rows)} rows; ✓ PASS, ✗ FAIL, x XFAIL, - UNSUPPORTED, ? UNRESOLVED, N NEW; ▼▲~± changed since the "
           "previous version)</summary>", "",
           "| case | target/profile | " + " | ".join(_md(e.jax) for e in m.versions) + " |",
           "|---|---|" + "---|" * len(m.versions)]
    for row in rows:
        cells = []
        for e in m.versions:
            o = e.outcome(row)
            if e.status.not_run:
                cells.append(_md(e.status.not_run))
            elif o is None:
                cells.append("")
            else:
                fp8 = answer(o)
                cells.append(o.code.symbol + (" " + fp8.headline if fp8.headline else "")
                             + (" ⚠ no FP8" if fp8.warns else "")
                             + CHANGE_MARKS.get(changed.get(row + (e.jax,), ""), ""))
        out.append(f"| {_md(row[0])} | {_md(row[1])}/{_md(row[2])} | " + " | ".join(cells) + " |")
    return out + ["", "</details>", ""]


def _escape_command(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def error_annotations(m: Matrix, case_lines: dict[str, tuple[str, int]], root: Path | None = None) -> list[str]:
    """One `::error` workflow command per row that differs from its golden (at its first bad version)."""
    root = (root or Path.cwd()).resolve()
    out = []
    for f in first_bad(m):
        o = f.outcome
        file, line = case_lines.get(o.case, (o.file, 0))
        try:
            file = str(Path(file).resolve().relative_to(root))
        except ValueError:
            pass
        props = f"file={_escape_command(file, True)}" + (f",line={line}" if line else "")
        title = f"fp8-check {o.code.name}: {o.case} on {o.target}/{o.profile} since jax {f.jax}"
        out.append(f"::error {props},title={_escape_command(title, True)}::{_escape_command(one_line(f))}")
    return out


def not_run_annotations(unrun: list[NotRun], case_lines: dict[str, tuple[str, int]], root: Path | None = None,
                        limit: int = 50) -> list[str]:
    """One workflow command per reason something did not run: an `::error` for a version that could not be installed
    or is broken, a `::warning` at each case's `- id:` line for an UNSUPPORTED case whose reason names a missing
    module or that ran on the newest version only (other UNSUPPORTED reasons, e.g. a profile that needs a GPU, stay
    in the summary)."""
    root = (root or Path.cwd()).resolve()
    out = []
    for n in unrun:
        if not n.cases:
            if n.is_error:
                title = f"fp8-check: jax {', '.join(n.versions)} {n.what}"
                out.append(f"::error title={_escape_command(title, True)}::{_escape_command(n.line())}")
            continue
        if not (n.hint or n.only_newest):
            continue
        for case in n.cases:
            file, line = case_lines.get(case, ("", 0))
            try:
                file = str(Path(file).resolve().relative_to(root)) if file else ""
            except ValueError:
                pass
            props = ",".join(x for x in ((f"file={_escape_command(file, True)}" if file else ""),
                                         (f"line={line}" if file and line else "")) if x)
            title = f"fp8-check UNSUPPORTED: {case} on jax {', '.join(n.versions)}"
            one = dataclasses.replace(n, cases=(case,))
            out.append(f"::warning {props + ',' if props else ''}title={_escape_command(title, True)}::"
                       f"{_escape_command(one.line())}")
    return out[:limit]


def write_issue_bodies(m: Matrix, issues_dir: Path) -> list[Path]:
    """One first-bad-version issue body per upstream change (a group of regressions), from the per-version results.
    The model is built once: 3000 findings take linear time."""
    inputs = [run.load(Path(e.results_file)) for e in m.versions if e.results_file and Path(e.results_file).is_file()]
    model = build_model(inputs)
    bad_of: dict[tuple, list] = {}
    for it in model.items:
        if it.code.file_upstream:
            bad_of.setdefault(it.row, []).append(it)
    written = []
    for g in issue_groups(m):
        o = g.findings[0].outcome
        items = first_bad_items(model, bad_of.get((o.case, o.target, o.profile, o.mode), []))
        body = issue_markdown(items[0], model).rstrip("\n") if items else (
            f"# fp8-check: {o.code.name} of {o.case} on {o.target}/{o.profile} since jax {g.findings[0].jax}\n\n"
            f"{md_inline(one_line(g.findings[0]))}\n\n(The per-version results file is missing: `fp8-check report "
            "--markdown` on it writes the full body.)")
        if len(g.findings) > 1:
            body += ("\n\n### The same change in other cases\n\n" + "\n".join(
                f"- {md_inline(f.outcome.case)} ({md_inline(f.outcome.target)}/{md_inline(f.outcome.profile)})"
                for f in g.findings[1:]))
        path = issues_dir / g.name
        _write_body(path, body + "\n\n" + MARKER.format(key=g.key) + "\n")
        written.append(path)
    return written


def _write_body(path: Path, text: str) -> None:
    """Whole or not at all (a temporary file renamed), without atomic_write's fsync and folder scan per file:
    bodies are an artifact rebuilt on every run, and thousands of them must take linear time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def case_lines(paths: list[Path]) -> dict[str, tuple[str, int]]:
    try:
        return {c.id: (str(c.file), c.line) for c in load(paths)}
    except CaseError:
        return {}
