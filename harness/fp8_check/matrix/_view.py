"""The matrix on a terminal: the case x version grid (rich), its legend, the summaries, and build/compile progress.

Symbols and styles come from the outcome codes (`fp8_check.verdict._outcome`); a version where
nothing ran shows its status letter (`Status.not_run`).
"""

from __future__ import annotations

import sys
import threading
from typing import Any, TextIO

from fp8_check.matrix._document import Matrix, Status, VersionEntry
from fp8_check.matrix._news import not_run, split_changes
from fp8_check.verdict import FAIL, NEW, PASS, UNRESOLVED, UNSUPPORTED, XFAIL, XPASS, answer, is_contract
from fp8_check.versions import Env

# The signature changed since the previous version: marker and background by the change's class.
CHANGE_MARKS = {"regression": "▼", "improvement": "▲", "neutral": "~", "mixed": "±"}
CHANGE_BACKGROUNDS = {"regression": "red", "improvement": "green", "neutral": "yellow", "mixed": "magenta"}
# A FAIL against the golden: r/i/n/m for its verdict.
VERDICT_MARKS = {"regression": "r", "improvement": "i", "neutral": "n", "mixed": "m"}

LEGEND = ("  ".join(f"{c.symbol} {c.name}" for c in (PASS, FAIL, XFAIL, XPASS, UNSUPPORTED, UNRESOLVED)) + f"  {NEW.symbol} {NEW.name} (no golden for "
          "the version); then the FP8 answer (FP8 gemms/matmuls; ⚠ no FP8 where it was asked for), the change mark "
          "and, last, the kernel count; the signature changed since the previous version: "
          "▼ regression, ▲ improvement, ~ neutral (rename), ± mixed — on a coloured background when the result differs "
          "from the golden, plain when the golden expects the change (blessed history); a FAIL's verdict against the "
          "golden: r i n m; "
          f"{Status.INSTALL_FAILED.not_run} the version could not be installed, {Status.BROKEN.not_run} its "
          "environment is broken")


def grid_table(m: Matrix, sort: str = "case"):
    """A rich Table: one row per case x target x profile, one column per version (`sort="cost"`: costliest
    change first, with an "est. Δ" column)."""
    from rich.table import Table
    from rich.text import Text

    news, history = split_changes(m)
    changed = {(c.case, c.target, c.profile, c.after): c.cls for c in news}
    blessed = {(c.case, c.target, c.profile, c.after): c.cls for c in history}
    costs = m.row_costs() if sort == "cost" else {}
    table = Table(title=f"fp8-check matrix ({m.mode or '?'})", show_lines=False, pad_edge=False)
    table.add_column("case", no_wrap=True)
    table.add_column("target/profile", no_wrap=True)
    for e in m.versions:
        table.add_column(e.jax, justify="center", no_wrap=True)
    rows = m.rows()
    if sort == "cost":
        table.add_column("est. Δ", justify="right", no_wrap=True)
        rows = sorted(rows, key=lambda r: -costs.get(r, float("-inf")))  # stable: ties keep the run order
    for row in rows:
        cells = []
        for e in m.versions:
            if e.status.not_run:
                cells.append(Text(e.status.not_run, style="bold red"))
                continue
            o = e.outcome(row)
            if o is None:
                cells.append(Text(""))
                continue
            text = o.code.symbol + fp8_cell(o)  # the FP8 answer first, as the HTML cell and the job summary
            style = o.code.style
            if row + (e.jax,) in changed:  # news: differs from the golden
                cls = changed[row + (e.jax,)]
                text += CHANGE_MARKS.get(cls, "*")
                style += " on " + CHANGE_BACKGROUNDS.get(cls, "yellow")
            elif row + (e.jax,) in blessed:  # as the golden expects: the mark alone, no alarm colour
                text += CHANGE_MARKS.get(blessed[row + (e.jax,)], "*")
            if o.code is FAIL and o.verdict is not None:
                text += VERDICT_MARKS.get(o.verdict.cls, "")
            if o.signature is not None:
                text += f" {o.signature.kernels}"
            cells.append(Text(text, style=style))
        if sort == "cost":
            cells.append(Text(f"{costs[row]:+.1f} µs" if row in costs else ""))
        table.add_row(row[0], f"{row[1]}/{row[2]}", *cells)
    return table


def fp8_cell(o) -> str:
    """A grid cell's FP8 answer (`verdict.answer`, as the HTML cell and the job summary show it): ` FP8 n/m`
    (FP8 gemms / matmuls), ` ⚠` where FP8 was asked for and none runs; '' without a matmul."""
    fp8 = answer(o)
    return (f" FP8 {fp8.fp8}/{fp8.matmuls}" if fp8.matmuls else "") + (" ⚠" if fp8.warns else "")


def summary_text(e: VersionEntry) -> str:
    return ", ".join(f"{n} {name}" for name, n in e.summary().items() if n)


def same_xla_note(e: VersionEntry) -> str:
    rep = (e.env or {}).get("same_xla_as")
    return f" (same XLA commit as jax {rep}: compiled once, judged for both)" if rep else ""


def print_report(m: Matrix, stream: TextIO | None = None, max_diffs: int = 3, sort: str = "case",
                 history: bool = False) -> None:
    """The grid, news (changes whose result differs from the golden, regressions first), the blessed history
    collapsed to one line (`history=True`: listed), per-version counts. The command ends with the closing verdict
    line (news.closing_line), after the paths it wrote."""
    from rich.console import Console

    stream = stream or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    width = 40 + 18 + 7 * len(m.versions)
    console = Console(file=stream, force_terminal=tty, no_color=not tty, width=None if tty else max(100, width),
                      highlight=False, soft_wrap=not tty)
    console.print(grid_table(m, sort))
    console.print(LEGEND, style="dim", soft_wrap=True)
    for e in m.versions:
        if e.status in (Status.INSTALL_FAILED, Status.BROKEN):
            console.print(f"jax {e.jax}: {e.status}: {e.error}", style="red", markup=False, soft_wrap=True)
    unrun = [n for n in not_run(m) if not n.version_failed]  # install-failed and broken: their whole error above
    if unrun:
        console.print(f"\nDid not run ({len(unrun)} reason{'s' if len(unrun) != 1 else ''}):", markup=False)
        for n in unrun:
            console.print(f"  {n.line()}", style="yellow" if n.only_newest or n.hint else None, markup=False,
                          soft_wrap=True)
    news, blessed = split_changes(m)
    if news:
        _print_changes(console, f"Signature changes whose result differs from the golden ({len(news)}, regressions first; "
                       "expected: the earlier version, found: the later):", news, max_diffs)
    if blessed and history:
        _print_changes(console, f"Blessed history: signature changes the goldens expect ({len(blessed)}):", blessed, max_diffs)
    if blessed and not history:
        console.print(f"\n{len(blessed)} signature change(s) between versions match the goldens (blessed history; "
                      "`--history` lists them)", markup=False, soft_wrap=True)
    known = [(e.jax, o) for e in m.versions for o in e.outcomes if o.code is XFAIL and o.verdict and o.verdict.cost]
    if known:
        console.print(f"\nKnown issues, priced against their goldens ({len(known)}):", markup=False)
        for jax, o in known:
            cost = o.verdict.cost if o.verdict else None
            assert cost is not None  # `known` holds only priced verdicts
            console.print(f"  jax {jax} {o.target}/{o.profile} {o.case}: {cost.text()} ({cost.detail()})", markup=False,
                          soft_wrap=True)
    for line in contract_lines(m):
        console.print(line, markup=False, soft_wrap=True)
    console.print("\nPer version:", markup=False)
    for e in m.versions:
        console.print(f"  jax {e.jax:<9} {summary_text(e) or e.status}{same_xla_note(e)}", markup=False)
    regressions = m.regressions()
    if regressions:
        console.print(f"\nBad on the newest version ({regressions[0].jax}):", style="bold red", markup=False)
        for r in regressions:
            prev = f" (was {r.previous[1]} on {r.previous[0]})" if r.previous else ""
            console.print(f"  {r.code.name:<10} {r.target}/{r.profile} {r.case}{prev}", markup=False)


def contract_lines(m: Matrix, limit: int = 3) -> list[str]:
    """Models judged against their contracts: each changed FP8 fact once per row, by layer and pass, with the
    versions it holds on (`since jax V`: the first version where it changed; `on every version tested`)."""
    out: list[str] = []
    for row in m.rows():
        ran = [(e.jax, o) for e in m.versions if (o := e.outcome(row)) is not None and o.signature is not None]
        facts: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
        for jax, o in ran:
            if is_contract(o) and o.verdict is not None:
                for x in o.verdict.lines:
                    facts.setdefault((x.why, x.cls, x.path), []).append((jax, o.code.name))
        if not facts:
            continue
        out.append(f"\n{row[1]}/{row[2]} {row[0]}: FP8 facts that differ from its contract (by layer and pass):")
        for (why, cls, _path), seen in list(facts.items())[: limit * 4]:
            versions = [v for v, _ in seen]
            codes = "/".join(dict.fromkeys(c for _, c in seen))
            when = "on every version tested" if len(versions) == len(ran) > 1 else \
                f"since jax {versions[0]}" + (f" (jax {', '.join(versions)})" if len(versions) > 1 else "")
            out.append(f"  [{cls}] {why}  {when}  {codes}")
    return out


def _print_changes(console, title: str, changes, max_diffs: int) -> None:
    console.print(f"\n{title}", markup=False)
    for c in changes:
        console.print(f"  {c.target}/{c.profile} {c.case}: {c.before} -> {c.after}"
                      + (f"  [{c.cls}] {c.verdict.summary()}" if c.verdict else "")
                      + (f"; {c.verdict.cost.text()}" if c.verdict and c.verdict.cost else ""), markup=False, soft_wrap=True)
        for d in c.diffs[:max_diffs]:
            console.print(f"      {_short(str(d))}", markup=False, soft_wrap=True)
        if len(c.diffs) > max_diffs:
            console.print(f"      ... {len(c.diffs) - max_diffs} more field(s)", markup=False)


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Progress:
    """Progress of environment builds and compiles: a rich bar with ETA on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.live = (hasattr(self.stream, "isatty") and self.stream.isatty()) if live is None else live
        self._lock = threading.Lock()
        self._bar: Any = None  # a rich progress bar while one is shown
        self._done: dict[str, int] = {}
        self._per_version = 0

    def start(self, versions: list[str], needs_env: list[str], per_version: int) -> None:
        self._per_version = per_version
        if self.live:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress as Bar,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Bar(TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=Console(file=self.stream), transient=False)
            self._envs = self._bar.add_task("environments", total=len(needs_env))
            self._cases = self._bar.add_task("cases", total=per_version * len(versions))
            self._bar.start()
        else:
            self._say(f"matrix: {len(versions)} version(s) x {per_version} case run(s); "
                      f"{len(needs_env)} environment(s) to check or build")

    def _say(self, text: str) -> None:
        with self._lock:
            if self._bar:
                self._bar.console.print(text, markup=False, highlight=False)
            else:
                print(text, file=self.stream, flush=True)

    def say(self, text: str) -> None:
        """One line among the progress (a requirement set's environment built, or not installable)."""
        self._say(text)

    def env_started(self, version: str) -> None:
        if self._bar:
            self._bar.update(self._envs, description=f"environment jax {version}")

    def env_done(self, version: str, env: Env | None, error: str) -> None:
        if self._bar:
            self._bar.advance(self._envs)
            self._bar.update(self._envs, description="environments")
        if env is None:
            self._say(f"jax {version}: environment could not be installed: {error.splitlines()[0] if error else ''}")
        elif env.built or not self._bar:
            self._say(f"jax {version}: environment {'built' if env.built else 'cached'} in {env.seconds:.1f}s "
                      f"(jaxlib {env.info.get('jaxlib')}, plugin {env.info.get('cuda_plugin')})")

    def version_started(self, version: str) -> None:
        self._done[version] = 0

    def case_done(self, version: str, outcome) -> None:
        self._done[version] = self._done.get(version, 0) + 1
        if self._bar:
            self._bar.update(self._cases, advance=1, description=f"cases (jax {version})")

    def cases_skipped(self, version: str, n: int) -> None:
        if self._bar:
            self._bar.advance(self._cases, n)

    def version_done(self, e: VersionEntry) -> None:
        if self._bar:
            left = self._per_version - self._done.get(e.jax, 0)
            if e.status is Status.RAN and left > 0:
                self._bar.advance(self._cases, left)
        text = summary_text(e) + same_xla_note(e)
        self._say(f"jax {e.jax}: {e.status} in {e.run_seconds:.1f}s" + (f": {text}" if text else "")
                  + (f": {e.error.splitlines()[0]}" if e.error else ""))

    def stop(self) -> None:
        if self._bar:
            self._bar.stop()
            self._bar = None
