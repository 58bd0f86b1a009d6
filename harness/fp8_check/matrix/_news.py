"""What a matrix has to say: news (results that differ from the goldens) apart from blessed history.

A signature change between two adjacent versions whose later result still matches its golden
(PASS, or XFAIL under a declared known issue) is *blessed history*: the golden expects it, and a
healthy matrix shows it only on request (`matrix --history`). A result that differs from its golden
(FAIL, XPASS, UNRESOLVED, NEW) is *news*, regressions first. Every view ends with one closing
verdict line (`closing_line`): the terminal, the HTML report and the CI job summary say the same.
Pure functions over the typed matrix; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from fp8_check.matrix._document import Change, Matrix, Status
from fp8_check.run import is_regression
from fp8_check.verdict import CODES, FAIL, UNRESOLVED, UNSUPPORTED, Outcome
from fp8_check.worker import missing_module

NO_REGRESSIONS = "no regressions against goldens"
# The order news is told in: what got worse first.
_RANK = {"regression": 0, "mixed": 1, "": 2, "neutral": 3, "improvement": 4}


@dataclass(frozen=True)
class Finding:
    """One result that differs from its golden, with its class (FAIL: its verdict; otherwise the code's name)."""

    jax: str
    outcome: Outcome

    @property
    def kind(self) -> str:
        o = self.outcome
        if o.code is FAIL and o.verdict is not None:
            return o.verdict.cls
        return o.code.name

    @property
    def is_regression(self) -> bool:
        """As `--fail-on regression` counts it (runner.is_regression)."""
        return is_regression(self.outcome)


def change_is_blessed(m: Matrix, c: Change) -> bool:
    """The later version's result still matches its golden: the golden expects this change."""
    e = next((e for e in m.versions if e.jax == c.after), None)
    o = e.outcome((c.case, c.target, c.profile)) if e else None
    return o is not None and not o.code.is_failure


def split_changes(m: Matrix) -> tuple[list[Change], list[Change]]:
    """(news, blessed history): the adjacent-version changes, news regressions first."""
    news: list[Change] = []
    history: list[Change] = []
    for c in m.changes():
        (history if change_is_blessed(m, c) else news).append(c)
    news.sort(key=lambda c: _RANK.get(c.cls, 2))
    return news, history


def findings(m: Matrix) -> list[Finding]:
    """Every result that differs from its golden, regressions first, then by version (oldest first)."""
    out = [Finding(e.jax, o) for e in m.ran() for o in e.outcomes if o.code.is_failure]
    order = {e.jax: i for i, e in enumerate(m.versions)}
    out.sort(key=lambda f: (_RANK.get(f.kind, 2) if f.outcome.code is FAIL else (0 if f.is_regression else 2),
                            f.outcome.case, f.outcome.target, f.outcome.profile, order.get(f.jax, 0)))
    return out


def first_bad(m: Matrix) -> list[Finding]:
    """Per row that differs from its golden on the newest version that ran: the first version of that run of
    failures with the same signature (the version an issue should be filed against)."""
    newest = m.newest_ran()
    if newest is None:
        return []
    ran = m.ran()
    out = []
    for o in newest.outcomes:
        if not o.code.is_failure:
            continue
        row, first = (o.case, o.target, o.profile), Finding(newest.jax, o)
        for e in reversed(ran[:-1]):
            p = e.outcome(row)
            if p is None or p.code is not o.code or p.signature != o.signature:
                break
            first = Finding(e.jax, p)
        out.append(first)
    out.sort(key=lambda f: (0 if f.is_regression else 1, f.outcome.case, f.outcome.target, f.outcome.profile))
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def closing_line(m: Matrix) -> str:
    """The one-line verdict every view ends with, led by the planned jobs that uploaded nothing, if any (the rest:
    `_closing_line`)."""
    line = _closing_line(m)
    if not m.missing_jobs:
        return line
    n = len(m.missing_jobs)
    told = "; ".join(f"jax {j.jax} {j.group} ({j.targets})" for j in m.missing_jobs[:5]) + ("; …" if n > 5 else "")
    return (f"verdict: {n} planned job{'s' if n != 1 else ''} missing, not checked: {told}; "
            + line.removeprefix("verdict: "))


def _closing_line(m: Matrix) -> str:
    """The verdict but for missing jobs. It counts what it names, each apart: regressions (a FAIL
    classified a regression), errors (UNRESOLVED: a case that cannot compile or import on a release, with the
    first one's cause) and rows to review (the other findings); a row counts once, by its worst finding. It never
    says "no regressions" when a release did not run (install-failed, broken): "nothing ran on V1, V2: why"."""
    ran = m.ran()
    total = sum(len(e.outcomes) for e in ran)
    found = findings(m)
    versions = f"{len(ran)} JAX version{'s' if len(ran) != 1 else ''}"
    missing = [e for e in m.versions if e.status in (Status.INSTALL_FAILED, Status.BROKEN)]
    nothing = ""
    if missing:
        nothing = (f"nothing ran on {', '.join(e.jax for e in missing)}: {missing[0].status}: "
                   f"{_first_line(missing[0].error, 'no error text')[:200]}")
    broken = [(e.jax, t, why) for e in m.versions for t, why in e.broken_targets.items()]
    if broken:
        nothing += ("; " if nothing else "") + (
            f"nothing ran for {', '.join(f'{t} on {v}' for v, t, _ in broken)}: broken target: "
            f"{_first_line(broken[0][2], 'no error text')[:200]}")
    if not found:
        counts = {c.name: sum(o.code is c for e in ran for o in e.outcomes) for c in CODES}
        told = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "nothing ran"
        return f"verdict: {nothing or NO_REGRESSIONS} ({told} on {versions})"
    rows: dict[tuple, list[Finding]] = {}
    for f in found:
        rows.setdefault((f.outcome.case, f.outcome.target, f.outcome.profile), []).append(f)
    kinds: dict[str, int] = {}
    for fs in rows.values():  # a row counts once: by its newest finding
        k = max(fs, key=lambda f: order_of(m, f.jax)).kind
        kinds[k] = kinds.get(k, 0) + 1
    order = sorted(kinds, key=lambda k: (_RANK.get(k, 2) if k.islower() else 2, k))
    told = ", ".join(f"{k} {kinds[k]}" for k in order)
    regressed = sum(any(f.is_regression and f.outcome.code is not UNRESOLVED for f in fs) for fs in rows.values())
    erring = [fs for fs in rows.values() if not any(f.is_regression and f.outcome.code is not UNRESOLVED for f in fs)
              and any(f.outcome.code is UNRESOLVED for f in fs)]
    review = len(rows) - regressed - len(erring)
    parts = []
    if regressed:
        parts.append(f"{_plural(regressed, 'regression')} against goldens")
    if erring:
        cause = next(f for f in erring[0] if f.outcome.code is UNRESOLVED).outcome
        parts.append(f"{_plural(len(erring), 'error')} (UNRESOLVED: a case that does not compile or import; "
                     f"{cause.case} on jax {cause.jax}: {_first_line(cause.reason, 'no error text')[:160]})")
    if review:
        parts.append(_plural(review, "row") + " to review")
    head = ", ".join(parts)
    if not (regressed or erring) and not nothing:
        head = f"{NO_REGRESSIONS}, but {head}"
    if nothing:
        head = f"{nothing}; {head}"
    return (f"verdict: {head} (case/target/profile rows: {told}; {len(found)} of {total} results on {versions} "
            "differ from the goldens)")


@dataclass(frozen=True)
class NotRun:
    """Why something did not run: cases UNSUPPORTED for one reason (on one or more versions, targets and profiles),
    or JAX versions that could not be installed, are broken, or cannot compile deviceless. `hint` says what to add
    when a required module is missing; `only_newest` marks cases UNSUPPORTED on every version that ran but the
    newest (a warning; under `--fail-on newest` a failure: they were checked on one release only)."""

    cases: tuple[str, ...]  # () for whole versions
    rows: tuple[str, ...]  # target/profile
    versions: tuple[str, ...]
    what: str  # for people: UNSUPPORTED, install-failed, broken
    reason: str  # its first line
    hint: str = ""
    only_newest: bool = False
    status: Status | None = None  # a whole version's status (install-failed, broken, unsupported); None for results
    missing_job: bool = False  # a planned job (version x target group) that uploaded nothing (matrix/_jobs.py)

    @property
    def version_failed(self) -> bool:
        """A version that could not be installed or is broken (an error, not a skip)."""
        return self.status in (Status.INSTALL_FAILED, Status.BROKEN)

    @property
    def is_error(self) -> bool:
        """An error, not a skip: a version that failed, or a job whose results never came."""
        return self.version_failed or self.missing_job

    def line(self, limit: int = 5) -> str:
        """One line for the terminal, the job summary and an annotation."""
        on = f"jax {', '.join(self.versions)}"
        if self.missing_job:
            return f"{self.what}: {on}, targets {', '.join(self.rows)}: {self.reason}"
        if self.cases:
            shown = ", ".join(self.cases[:limit]) + (f", … ({len(self.cases)} cases)" if len(self.cases) > limit else "")
            head = f"{self.what} {shown} ({', '.join(self.rows)}) on {on}"
        else:
            head = f"{self.what} {on}"
        return (f"{head}: {self.reason}" + (f"; {self.hint}" if self.hint else "")
                + ("; it ran on the newest version only (a failure under --fail-on newest)" if self.only_newest else ""))


def missing_hint(reason: str) -> str:
    """What to add when an UNSUPPORTED reason names a missing module ('' otherwise)."""
    name = missing_module(reason)
    return (f"no {name} in this environment: add `with: {name}` (the workflow's input; `fp8-check matrix --with {name}`)"
            if name else "")


def _first_line(text: str, default: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:300] if lines else default


def not_run(m: Matrix) -> list[NotRun]:
    """Every reason something did not run: planned jobs that uploaded nothing, versions that could not be installed or are broken, versions where
    deviceless compilation is impossible (one line), then the UNSUPPORTED results of versions that ran, grouped by
    reason (cases that ran on the newest version only first, then reasons that name a missing module)."""
    out = [NotRun((), tuple(j.targets.split(",")), (j.jax,), f"missing job ({j.group})", j.why, missing_job=True)
           for j in m.missing_jobs]
    out += [NotRun((), (), (e.jax,), str(e.status), _first_line(e.error, "no error text"), status=e.status)
            for e in m.versions if e.status in (Status.INSTALL_FAILED, Status.BROKEN)]
    out += [NotRun((), (t,), (e.jax,), f"broken target {t} on", _first_line(why, "no error text"), status=Status.BROKEN)
            for e in m.versions for t, why in e.broken_targets.items()]
    whole = [e for e in m.versions if e.status is Status.UNSUPPORTED]
    if whole:
        first = next((o.reason for e in whole for o in e.outcomes if o.reason), "")
        out.append(NotRun((), (), tuple(e.jax for e in whole), UNSUPPORTED.name, _first_line(first, "nothing compiles"),
                          status=Status.UNSUPPORTED))
    newest_only = m.only_newest_rows()
    groups: dict[tuple[str, bool], dict[str, dict]] = {}
    for e in m.ran():
        for o in e.outcomes:
            if o.code is not UNSUPPORTED:
                continue
            key = (_first_line(o.reason, "unsupported"), (o.case, o.target, o.profile) in newest_only)
            g = groups.setdefault(key, {"cases": {}, "rows": {}, "versions": {}})
            g["cases"][o.case] = g["rows"][f"{o.target}/{o.profile}"] = g["versions"][e.jax] = None
    cases = [NotRun(tuple(g["cases"]), tuple(g["rows"]), tuple(g["versions"]), UNSUPPORTED.name, reason,
                    missing_hint(reason), newest) for (reason, newest), g in groups.items()]
    cases.sort(key=lambda n: (not n.only_newest, not n.hint))
    return out + cases


def order_of(m: Matrix, jax: str) -> int:
    return next((i for i, e in enumerate(m.versions) if e.jax == jax), -1)
