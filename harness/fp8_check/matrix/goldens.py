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
(`fp8_check.core.files.atomic_write`) and the unified diff is printed.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fp8_check.core.files import atomic_write
from fp8_check.verdict.outcome import UNRESOLVED, UNSUPPORTED, Outcome
from fp8_check.verdict import comparator, golden
from fp8_check.core import names
from fp8_check.matrix.matrix_document import MatrixError, Status, load_matrix
from fp8_check.verdict import contract, contract_judge

Row = tuple[str, str, str, str]  # case, target, profile, mode


MatrixFileError = MatrixError  # a file given to --from-matrix is unreadable or not a matrix (one line, names it)


@dataclass
class Run:
    """Consecutive versions with one signature (a model: one contract)."""

    versions: list[str]
    signature: dict
    contract: dict | None = None


@dataclass
class RowPlan:
    row: Row
    runs: list[Run] = field(default_factory=list)
    skipped: str = ""  # why the row is not blessed
    no_signature: list[str] = field(default_factory=list)  # versions without a signature (not blessed)
    known_issue: list[str] = field(default_factory=list)  # a contract's versions under an active known issue
    contract_options: dict | None = None  # a contract row (kept from its golden)

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
                                                                f"{len(run.versions)} version{'s' if len(run.versions) > 1 else ''})",
                                          run.contract))
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


def one_version_hint(out: Outcome, matrix: Path) -> str | None:
    """Blessing `out` on one version while `matrix` shows its case on others: the one command that blesses
    a golden valid over all of them (a model's contract over the whole range unless an FP8 fact changed)."""
    try:
        rows = load_rows([matrix]) if matrix.is_file() else {}
    except (MatrixError, OSError, ValueError):
        return None
    versions = [v for v, o in rows.get((out.case, out.target, out.profile, out.mode), []) if o.signature is not None]
    if not [v for v in versions if v != out.jax]:
        return None
    span = versions[0] if len(versions) == 1 else f"{versions[0]}..{versions[-1]}"
    return (f"note: {matrix} shows {out.case} on jax {span} ({len(versions)} versions); blessed on jax {out.jax} "
            f"only. To bless one golden valid over all of them: fp8-check bless --from-matrix {matrix} -k {out.case} "
            f"--target {out.target} --profile {out.profile}")


def plan_row(row: Row, results: list[tuple[str, Outcome]], root: Path | None = None) -> RowPlan:
    """Runs of consecutive versions with one signature; for a model's contract (`contract_row`), runs with the
    same FP8 facts (the estimated cost may differ: the run's newest version states it), versions under an active
    known issue left out (the contract states what they should be)."""
    if root is not None:
        is_contract, options = _contract_row(root, row, results)
        if is_contract:
            return _plan_contract(row, results, options)
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
        if plan.runs and not comparator.compare(plan.runs[-1].signature, sig, symmetric=True):
            plan.runs[-1].versions.append(v)
        else:
            plan.runs.append(Run([v], sig))
    if not plan.runs:
        plan.skipped = "no version compiled it"
    return plan


def _contract_row(root: Path, row: Row, results: list[tuple[str, Outcome]]) -> tuple[bool, dict | None]:
    with_sig = [o for _v, o in results if o.signature is not None]
    if not with_sig:
        return False, None
    return contract_judge.wants_contract(root, with_sig[-1])


def _plan_contract(row: Row, results: list[tuple[str, Outcome]], options: dict | None) -> RowPlan:
    plan = RowPlan(row, contract_options=options or {})
    for v, o in results:
        if o.code in (UNSUPPORTED, UNRESOLVED) or o.signature is None:
            plan.no_signature.append(v)
            continue
        if o.known_issue:
            plan.known_issue.append(v)
            continue
        facts = contract_judge.facts_of(o, options)
        if plan.runs and plan.runs[-1].contract is not None \
                and contract.fp8_facts(plan.runs[-1].contract) == contract.fp8_facts(facts):
            plan.runs[-1].versions.append(v)
            plan.runs[-1].contract = facts  # the newest version's cost
        else:
            plan.runs.append(Run([v], {}, facts))
    if not plan.runs:
        plan.skipped = "no version compiled it" if not plan.known_issue else \
            f"every version that compiled it has an active known issue ({', '.join(plan.known_issue)})"
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
                        list(old.layers) if old else [], plan.contract_options)
    new_text = new.to_yaml()
    if golden._same_expectations(old_text, new_text):
        return ""
    atomic_write(path, new_text)
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
        plan = plan_row(row, rows[row], root)
        name = f"{target}/{profile} {case}"
        if plan.skipped:
            if "no version compiled" not in plan.skipped or plan.no_signature:
                out(f"skipped {name}: {plan.skipped}")
            skipped += 1
            continue
        diff = apply(plan, root)
        ranges = ", ".join(f"{e.jax or 'every version'}" for e in plan.expectations())
        if plan.known_issue:
            out(f"note {name}: not blessed from jax {', '.join(plan.known_issue)} (an active known issue); "
                "the contract states what those versions should be")
        if diff:
            changed += 1
            out(diff.rstrip("\n"))
            out(f"blessed {name}: {len(plan.runs)} {'contract' if plan.contract_options is not None else 'expectation'}(s): "
                f"{ranges}")
        else:
            out(f"unchanged {name}: {ranges}")
    return changed, skipped
