"""`fp8-check bless --from-matrix MATRIX.json…`: version-ranged goldens from a matrix run.

For every case x target x profile (x mode) in the matrix, the versions that
compiled are grouped into runs of consecutive versions with an identical
signature; each run becomes one expectation with its JAX range:

    oldest run   jax: ">=FIRST,<NEXT_RUN_FIRST"
    middle runs  jax: ">=FIRST,<NEXT_RUN_FIRST"
    newest run   jax: ">=FIRST"            (open-ended: a new release is judged by it)

so a release the matrix did not run falls under the run of the newest tested
version before it. A row with one run gets one expectation without a range.
Existing expectations of the golden are kept after the new ones when they cover
none of the matrix's versions for that row (e.g. hand-written ones for older JAX)
or reach below its oldest tested version with an explicit lower bound (a matrix
over the newest releases only); then the oldest new run gets a lower bound too.

Not blessed: rows with a known issue active on any of the versions (their goldens
state the fused signature and are written by hand), and versions whose result has
no signature (UNSUPPORTED, UNRESOLVED). Each golden is written atomically
(`golden.atomic_write`) and the unified diff is printed.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fp8_check import verdict
from fp8_check.outcome import UNRESOLVED, UNSUPPORTED, Outcome
from fp8_check.pipeline import golden, names
from fp8_check.versions.matrix_document import MatrixError, Status, load_matrix

Row = tuple[str, str, str, str]  # case, target, profile, mode


MatrixFileError = MatrixError  # a file given to --from-matrix is unreadable or not a matrix (one line, names it)


@dataclass
class Run:
    """Consecutive versions with one signature."""

    versions: list[str]
    signature: dict


@dataclass
class RowPlan:
    row: Row
    runs: list[Run] = field(default_factory=list)
    skipped: str = ""  # why the row is not blessed
    no_signature: list[str] = field(default_factory=list)  # versions without a signature (not blessed)

    def expectations(self, bounded: bool = False) -> list[golden.Expectation]:
        """One expectation per run, newest first; `bounded`: give a single run a lower bound too (older
        expectations are kept after it)."""
        out = []
        for i, run in enumerate(self.runs):
            first = run.versions[0]
            nxt = self.runs[i + 1].versions[0] if i + 1 < len(self.runs) else None
            if len(self.runs) == 1 and not bounded:
                spec = ""
            elif nxt is None:
                spec = f">={first}"
            else:
                spec = f">={first},<{nxt}"
            tested = run.versions[0] if len(run.versions) == 1 else f"{run.versions[0]}..{run.versions[-1]}"
            out.append(golden.Expectation(run.signature, spec, f"jax {tested} (fp8-check matrix, "
                                                                f"{len(run.versions)} version{'s' if len(run.versions) > 1 else ''})"))
        return list(reversed(out))


def load_rows(paths: list[Path]) -> dict[Row, list[tuple[str, Outcome]]]:
    """(version, outcome) per row, oldest version first, from one or more matrix files (later files win)."""
    rows: dict[Row, dict[str, Outcome]] = {}
    for path in paths:
        m = load_matrix(Path(path))
        for entry in m.versions:
            if entry.status is not Status.RAN:
                continue
            for o in entry.outcomes:
                key = (o.case, o.target, o.profile, o.mode or m.mode or "deviceless")
                try:  # every name becomes a path part: all are checked before any golden is written
                    golden.path_for(Path("goldens"), *key)
                except names.UnsafeName as exc:
                    raise MatrixError(f"{path}: {exc}") from None
                rows.setdefault(key, {})[o.jax or entry.jax] = o
    return {k: sorted(v.items(), key=lambda kv: Version(kv[0])) for k, v in rows.items()}


def plan_row(row: Row, results: list[tuple[str, Outcome]]) -> RowPlan:
    plan = RowPlan(row)
    issue = next(((v, o.known_issue) for v, o in results if o.known_issue), None)
    if issue:
        v, ki = issue
        plan.skipped = (f"known issue {ki.get('url') or ki.get('summary')!r} is active on jax {v}: its golden states the "
                        "fused signature and is written by hand")
        return plan
    for v, o in results:
        sig = o.signature.to_dict() if o.signature is not None else None
        if o.code in (UNSUPPORTED, UNRESOLVED) or not sig:
            plan.no_signature.append(v)
            continue
        if plan.runs and not verdict.diff(plan.runs[-1].signature, sig, symmetric=True):
            plan.runs[-1].versions.append(v)
        else:
            plan.runs.append(Run([v], sig))
    if not plan.runs:
        plan.skipped = "no version compiled it"
    return plan


def apply(plan: RowPlan, root: Path) -> str:
    """Write the row's golden (atomically); returns the unified diff ('' when the expectations are unchanged)."""
    case, target, profile, mode = plan.row
    path = golden.path_for(root, case, target, profile, mode)
    old = golden.load(path)
    old_text = path.read_text() if path.exists() else ""
    tested = [v for run in plan.runs for v in run.versions]
    kept = [e for e in (old.expect if old else []) if _still_needed(e, tested)]
    new = golden.Golden(case, target, profile, mode, plan.expectations(bounded=bool(kept)) + kept,
                        list(old.layers) if old else [])
    new_text = new.to_yaml()
    if golden._same_expectations(old_text, new_text):
        return ""
    golden.atomic_write(path, new_text)
    return "".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True), f"a/{path}", f"b/{path}"))


def _still_needed(e: golden.Expectation, tested: list[str]) -> bool:
    """Keep an old expectation that covers none of the tested versions, or that reaches below the oldest tested
    one with an explicit lower bound (a matrix over the newest versions only: older versions fall through to it).
    The new expectations come first, so they win for every tested version."""
    if not any(e.covers(v) for v in tested):
        return True
    lows = [Version(s.version) for s in SpecifierSet(e.jax) if s.operator in (">=", ">", "==", "~=")] if e.jax else []
    return bool(lows) and max(lows) < Version(tested[0])


def bless_from_matrix(paths: list[Path], root: Path, case_filter: str | None = None, targets: list[str] | None = None,
                      profiles: list[str] | None = None, out=print) -> tuple[int, int]:
    """Bless every selected row of the matrices; returns (goldens changed, rows skipped)."""
    rows = load_rows(paths)
    wanted = [w.strip() for w in case_filter.split(",")] if case_filter else None
    changed = skipped = 0
    for row in sorted(rows):
        case, target, profile, mode = row
        if wanted and not any(w in case for w in wanted):
            continue
        if (targets and target not in targets) or (profiles and profile not in profiles):
            continue
        plan = plan_row(row, rows[row])
        name = f"{target}/{profile} {case}"
        if plan.skipped:
            if "no version compiled" not in plan.skipped or plan.no_signature:
                out(f"skipped {name}: {plan.skipped}")
            skipped += 1
            continue
        diff = apply(plan, root)
        ranges = ", ".join(f"{e.jax or 'every version'}" for e in plan.expectations())
        if diff:
            changed += 1
            out(diff.rstrip("\n"))
            out(f"blessed {name}: {len(plan.runs)} expectation(s): {ranges}")
        else:
            out(f"unchanged {name}: {ranges}")
    return changed, skipped
