"""`fp8-check bless --from-matrix MATRIX.json…`: version-ranged goldens from a matrix run.

For every case x target x profile (x mode) in the matrix, the versions that
compiled are grouped into runs of consecutive releases with an identical
signature; each run becomes one expectation with its JAX range. A range never
reaches over a release the matrix did not measure: the releases the library
knows (`known_releases`: the shipped release table `versions/xla_commits.json`
plus every version the matrices name) are walked in order, and a run ends at
its last measured release whenever the next known release was not measured for
the row (or gave no signature):

    each run     jax: ">=FIRST,<NEXT_KNOWN"  (NEXT_KNOWN: the known release after the run's last)
    newest run   jax: ">=FIRST"              only when its last is the newest known release
                                             (a release after it is judged by it: the nightly's purpose)

so a known release the matrix skipped is covered by no expectation and is NEW
there, never a false FAIL against a neighbour's signature. Existing expectations
of the golden are kept after the new ones for the known releases none of the new
ones cover, clipped so that no two expectations cover one release
(`bless` keeps the goldens free of gaps and overlaps; tests/matrix/test_library_goldens.py
checks the shipped library).

Not blessed: rows with a known issue active on any of the versions (their goldens
state the fused signature and are written by hand), and versions whose result has
no signature (UNSUPPORTED, UNRESOLVED). Each golden is written atomically
(`fp8_check.core._files.atomic_write`) and the unified diff is printed.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from fp8_check import verdict
from fp8_check.core import UnsafeName, atomic_write
from fp8_check.matrix._document import MatrixError, Status, load_matrix
from fp8_check.targets import platform_of
from fp8_check.verdict import (
    UNRESOLVED,
    UNSUPPORTED,
    Expectation,
    Outcome,
    compare,
    facts_of,
    fp8_facts,
    path_for,
    same_expectations,
    wants_contract,
)
from fp8_check.versions import sort_versions, tabled_releases

Row = tuple[str, str, str, str]  # case, target, profile, mode


MatrixFileError = MatrixError  # a file given to --from-matrix is unreadable or not a matrix (one line, names it)


@dataclass
class Run:
    """Consecutive versions with one signature (a model: one contract)."""

    versions: list[str]
    signature: dict
    contract: dict | None = None
    since: str = ""  # the range's lower bound when it reaches back over versions not blessed from (a known issue's)


@dataclass
class RowPlan:
    row: Row
    runs: list[Run] = field(default_factory=list)
    skipped: str = ""  # why the row is not blessed
    no_signature: list[str] = field(default_factory=list)  # versions without a signature (not blessed)
    known_issue: list[str] = field(default_factory=list)  # a contract's versions under an active known issue
    contract_options: dict | None = None  # a contract row (kept from its golden)
    known: list[str] = field(default_factory=list)  # the known releases, oldest first (`known_releases`)

    def expectations(self) -> list[Expectation]:
        """One expectation per run, newest first: `>=FIRST,<NEXT_KNOWN`, the newest known release's run open."""
        out = []
        for run in self.runs:
            first, nxt = run.since or run.versions[0], next_release(self.known, run.versions[-1])
            spec = f">={first}" if nxt is None else f">={first},<{nxt}"
            tested = run.versions[0] if len(run.versions) == 1 else f"{run.versions[0]}..{run.versions[-1]}"
            out.append(Expectation(run.signature, spec, f"jax {tested} (fp8-check matrix, "
                                                                f"{len(run.versions)} version{'s' if len(run.versions) > 1 else ''})",
                                          run.contract))
        return list(reversed(out))

    def measured(self) -> list[str]:
        return [v for run in self.runs for v in run.versions]


def known_releases(paths: list[Path] | None = None, extra: list[str] | None = None) -> list[str]:
    """The JAX releases the library knows, oldest first: the shipped release table (`versions/xla_commits.json`,
    updated when a release comes out), every version the matrices `paths` name (whatever its status) and `extra`."""
    found = set(tabled_releases())
    for path in paths or []:
        found.update(entry.jax for entry in load_matrix(Path(path)).versions)
    found.update(extra or [])
    return sort_versions(found)


def next_release(known: list[str], version: str) -> str | None:
    """The known release after `version` (None: `version` is the newest)."""
    v = Version(version)
    return next((k for k in known if Version(k) > v), None)


def _gap(known: list[str], before: str, after: str) -> bool:
    """A known release lies strictly between `before` and `after`: a run may not reach over it."""
    lo, hi = Version(before), Version(after)
    return any(lo < Version(k) < hi for k in known)


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
                    path_for(Path("goldens"), *key)
                except UnsafeName as exc:
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


def plan_row(row: Row, results: list[tuple[str, Outcome]], root: Path | None = None,
             known: list[str] | None = None) -> RowPlan:
    """Runs of consecutive known releases with one signature (a run ends where the next known release has no
    signature for the row, measured or not); for a model's contract (`contract_row`), runs with the same FP8 facts
    (the estimated cost may differ: the run's newest version states it), versions under an active known issue
    left out (the contract states what they should be). `known`: the known releases (default: the row's own)."""
    known = sort_versions(set(known or []) | {v for v, _o in results})
    if root is not None:
        is_contract, options = _contract_row(root, row, results)
        if is_contract:
            return _plan_contract(row, results, options, known)
    # a known issue that expects a compile failure there (XFAIL, no signature): the golden is never read on that
    # version, so the runs reach over it; a known issue about the signature makes the golden hand-written
    known = [k for k in known if k not in {v for v, o in results if o.known_issue and o.signature is None}]
    plan = RowPlan(row, known=known)
    issue = next(((v, o.known_issue) for v, o in results if o.known_issue and o.signature is not None), None)
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
        if plan.runs and not _gap(known, plan.runs[-1].versions[-1], v) \
                and not compare(plan.runs[-1].signature, sig, symmetric=True):
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
    return wants_contract(root, with_sig[-1])


def _plan_contract(row: Row, results: list[tuple[str, Outcome]], options: dict | None, known: list[str]) -> RowPlan:
    # a version under an active known issue was measured: the contract reaches over it (it states what it should be)
    known = [k for k in known if k not in {v for v, o in results if o.known_issue and o.signature is not None}]
    plan = RowPlan(row, contract_options=options or {}, known=known)
    for v, o in results:
        if o.code in (UNSUPPORTED, UNRESOLVED) or o.signature is None:
            plan.no_signature.append(v)
            continue
        if o.known_issue:
            plan.known_issue.append(v)
            continue
        facts = facts_of(o, options)
        if plan.runs and plan.runs[-1].contract is not None and not _gap(known, plan.runs[-1].versions[-1], v) \
                and fp8_facts(plan.runs[-1].contract) == fp8_facts(facts):
            plan.runs[-1].versions.append(v)
            plan.runs[-1].contract = facts  # the newest version's cost
        else:  # the oldest run reaches back over the known issue's versions before it (later ones: the run before)
            plan.runs.append(Run([v], {}, facts, since="" if plan.runs or not plan.known_issue else plan.known_issue[0]))
    if not plan.runs:
        plan.skipped = "no version compiled it" if not plan.known_issue else \
            f"every version that compiled it has an active known issue ({', '.join(plan.known_issue)})"
    return plan


def apply(plan: RowPlan, root: Path) -> str:
    """Write the row's golden (atomically); returns the unified diff ('' when the expectations are unchanged)."""
    case, target, profile, mode = plan.row
    path = path_for(root, case, target, profile, mode)
    old = verdict.load(path)
    old_text = path.read_text() if path.exists() else ""
    tested = plan.measured()
    kept = [k for e in (old.expect if old else []) if (k := _kept(e, tested)) is not None]
    new = verdict.Golden(case, target, profile, mode, plan.expectations() + kept,
                        list(old.layers) if old else [], plan.contract_options)
    new_text = new.to_text(path)  # within what a golden is read with, or GoldenError before anything is written
    if same_expectations(old_text, new_text):
        return ""
    atomic_write(path, new_text)
    return "".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True), f"a/{path}", f"b/{path}"))


def _kept(e: Expectation, tested: list[str]) -> Expectation | None:
    """An old expectation that still says something the matrix did not measure: one that covers none of the tested
    versions (unchanged), or one that reaches below the oldest tested one with an explicit lower bound (a matrix
    over the newest versions only: clipped to `<OLDEST_TESTED`, so that no release is covered twice). None: the
    matrix superseded it (a release it covered that the matrix skipped is NEW until measured)."""
    if not any(e.covers(v) for v in tested):
        return e
    lows = [Version(s.version) for s in SpecifierSet(e.jax) if s.operator in (">=", ">", "==", "~=")] if e.jax else []
    if not lows or max(lows) >= Version(tested[0]):
        return None
    return Expectation(e.signature, f"{e.jax},<{tested[0]}", e.blessed_with, e.contract)


def bless_from_matrix(paths: list[Path], root: Path, case_filter: str | None = None, targets: list[str] | None = None,
                      profiles: list[str] | None = None, out=print) -> tuple[int, int]:
    """Bless every selected row of the matrices; returns (goldens changed, rows skipped)."""
    rows = load_rows(paths)
    known = known_releases(paths)
    wanted = [w.strip() for w in case_filter.split(",")] if case_filter else None
    changed = skipped = 0
    for row in sorted(rows):
        case, target, profile, mode = row
        if wanted and not any(w in case for w in wanted):
            continue
        if (targets and target not in targets) or (profiles and profile not in profiles):
            continue
        platform = platform_of(target)  # a release its platform has no plugin for bounds no range
        plan = plan_row(row, rows[row], root, [v for v in known if not platform.unsupported_reason(v)])
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


# ---- what the library claims: every supported release of each target, once -----------------------------------

def claimed_releases(target: str) -> list[str]:
    """The releases a golden of `target` must describe: the shipped release table's releases (oldest first) for
    which the target's platform has a plugin (every one for NVIDIA; AMD: the ROCm plugin's releases)."""
    platform = platform_of(target)
    return [v for v in sort_versions(tabled_releases()) if not platform.unsupported_reason(v)]


def coverage_problems(root: Path) -> list[str]:
    """One line per golden under `root` whose expectations do not describe its target's claimed releases as one
    unbroken stretch ending at the newest release: a release covered twice (an overlap), a release between two
    covered ones covered by none (a gap: NEW there for no reason), or the newest release uncovered. The oldest
    covered release may be later than the target's oldest (a case needs a newer JAX); nothing is compiled."""
    problems = []
    for path in verdict.golden_files(root):
        try:
            g = verdict.load(path)
        except verdict.GoldenError as exc:
            problems.append(str(exc))
            continue
        if g is None:
            continue
        claimed = claimed_releases(g.target)
        counts = [sum(e.covers(v) for e in g.expect) for v in claimed]
        covered = [v for v, n in zip(claimed, counts) if n]
        twice = [v for v, n in zip(claimed, counts) if n > 1]
        if twice:
            problems.append(f"{path}: jax {', '.join(twice)} covered by more than one expectation")
        if not covered:
            problems.append(f"{path}: covers none of {g.target}'s releases {claimed[0]}..{claimed[-1]}")
            continue
        first = claimed.index(covered[0])
        gaps = [v for v, n in zip(claimed[first:], counts[first:]) if not n]
        if gaps:
            problems.append(f"{path}: jax {', '.join(gaps)} covered by no expectation, between covered releases "
                            f"{covered[0]}..{claimed[-1]} (NEW there)" if claimed[-1] in covered else
                            f"{path}: jax {', '.join(gaps)} covered by no expectation (the newest, {claimed[-1]}, "
                            "included)")
    return problems
