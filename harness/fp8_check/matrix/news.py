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

from fp8_check.verdict.outcome import CODES, FAIL, Outcome
from fp8_check.run.runner import is_regression
from fp8_check.matrix.matrix_document import Change, Matrix

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


def closing_line(m: Matrix) -> str:
    """The one-line verdict every view ends with."""
    ran = m.ran()
    total = sum(len(e.outcomes) for e in ran)
    found = findings(m)
    versions = f"{len(ran)} JAX version{'s' if len(ran) != 1 else ''}"
    if not found:
        counts = {c.name: sum(o.code is c for e in ran for o in e.outcomes) for c in CODES}
        told = ", ".join(f"{n} {name}" for name, n in counts.items() if n) or "nothing ran"
        return f"verdict: {NO_REGRESSIONS} ({told} on {versions})"
    rows: dict[tuple, list[Finding]] = {}
    for f in found:
        rows.setdefault((f.outcome.case, f.outcome.target, f.outcome.profile), []).append(f)
    kinds: dict[str, int] = {}
    for fs in rows.values():  # a row counts once: by its newest finding
        k = max(fs, key=lambda f: order_of(m, f.jax)).kind
        kinds[k] = kinds.get(k, 0) + 1
    order = sorted(kinds, key=lambda k: (_RANK.get(k, 2) if k.islower() else 2, k))
    told = ", ".join(f"{k} {kinds[k]}" for k in order)
    regressed = sum(any(f.is_regression for f in fs) for fs in rows.values())
    head = (f"{regressed} regression{'s' if regressed != 1 else ''} against goldens" if regressed
            else f"{NO_REGRESSIONS}, but {len(rows)} row{'s' if len(rows) != 1 else ''} to review")
    return (f"verdict: {head} (case/target/profile rows: {told}; {len(found)} of {total} results on {versions} "
            "differ from the goldens)")


def order_of(m: Matrix, jax: str) -> int:
    return next((i for i, e in enumerate(m.versions) if e.jax == jax), -1)
