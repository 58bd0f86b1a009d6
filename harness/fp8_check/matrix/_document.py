"""The matrix document: typed version entries, their changes and regressions, and its JSON (read and written here only).

A `Matrix` holds one `VersionEntry` per JAX version, oldest first. Each entry keeps its
status, environment, the path of its full per-version results file (the HTML report
reads the HLO and source texts from there) and its typed `Outcome`s (stored lean:
without those texts). Signature changes between adjacent versions and the regressions
on the newest version are derived from the entries, never stored as the source of truth.

Schema `fp8-check/matrix/2`; `/1` documents still load (their per-version results are
the same lean results records; their stored `changes`, written as `{path, before, after}`,
are recomputed). `load_matrix(path)` is the API for other stages (the HTML report).
"""

from __future__ import annotations

import glob
import json
import os
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from packaging.version import Version

from fp8_check import run
from fp8_check.core import BadInput, ReadError, atomic_write, load_json, shown_path
from fp8_check.matrix._jobs import MissingJob
from fp8_check.run import deviceless_unsupported, fails
from fp8_check.verdict import CODES, NEW, UNSUPPORTED, Code, FieldDiff, Outcome, Verdict, change, changed
from fp8_check.versions import parse_version

SCHEMA = "fp8-check/matrix/2"
READABLE = ("fp8-check/matrix/1", SCHEMA)
from fp8_check.core import EXIT_ENV, EXIT_FAIL, EXIT_OK, EXIT_USAGE  # noqa: E402,F401  (one home for exit codes)

FAIL_ON = ("any", "newest", "regression", "never")

Row = tuple[str, str, str]  # (case, target, profile)


class MatrixError(BadInput, ValueError):
    """A matrix (or results) file that cannot be read: one line naming the file and what is wrong (exit 2)."""


class Status(StrEnum):
    RAN = "ran"
    UNSUPPORTED = "unsupported"  # deviceless compilation impossible: every case UNSUPPORTED, no environment
    INSTALL_FAILED = "install-failed"
    BROKEN = "broken"  # the worker does not start, or the canary finds no FP8 gemm

    @property
    def not_run(self) -> str:
        """The grid's letter for a version where nothing ran ('' when something did)."""
        return {Status.INSTALL_FAILED: "E", Status.BROKEN: "B"}.get(self, "")


@dataclass
class VersionEntry:
    jax: str
    status: Status = Status.RAN
    error: str = ""
    environment: dict = field(default_factory=dict)  # what the worker reported (jax, jaxlib, plugin, ...)
    env: dict = field(default_factory=dict)  # the uv environment: path, built, seconds, ...
    run_seconds: float = 0.0
    results_file: str | None = None  # the full per-version results (with HLO and source texts)
    outcomes: list[Outcome] = field(default_factory=list)
    # targets whose canary failed on this version (name -> why): their rows are UNRESOLVED, the others ran
    broken_targets: dict[str, str] = field(default_factory=dict)
    _index: dict[Row, Outcome] | None = field(default=None, init=False, repr=False, compare=False)

    def summary(self) -> dict[str, int]:
        return {c.name: sum(o.code is c for o in self.outcomes) for c in CODES}

    def outcome(self, row: Row) -> Outcome | None:
        if self._index is None:
            self._index = {(o.case, o.target, o.profile): o for o in self.outcomes}
        return self._index.get(row)


@dataclass(frozen=True)
class Change:
    """A row's signature differs from the one of the previous version that has one."""

    case: str
    target: str
    profile: str
    before: str  # jax version
    after: str
    diffs: list[FieldDiff]
    verdict: Verdict | None = None  # regression / improvement / neutral / mixed, per field line (harness/fp8_check/verdict/_classify.py)

    @property
    def cls(self) -> str:
        return self.verdict.cls if self.verdict else ""


@dataclass(frozen=True)
class Regression:
    """A bad outcome on the newest version that ran, and the row's outcome on the version before it."""

    case: str
    target: str
    profile: str
    jax: str
    code: Code
    reason: str
    previous: tuple[str, Code] | None  # (jax, code) on the version that ran before, if the row ran there


@dataclass
class Matrix:
    versions: list[VersionEntry]
    mode: str | None = None
    targets: list[str] | None = None
    profiles: list[str] | None = None
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    wall_seconds: float | None = None
    merged_from: list[str] | None = None
    missing_jobs: list[MissingJob] = field(default_factory=list)  # planned jobs that uploaded nothing (matrix/_jobs.py)

    def __post_init__(self) -> None:
        self.versions = sorted(self.versions, key=lambda e: Version(e.jax))

    def rows(self) -> list[Row]:
        """Every (case, target, profile) in the matrix, in the order they ran."""
        seen: dict[Row, None] = {}
        for e in self.versions:
            for o in e.outcomes:
                seen.setdefault((o.case, o.target, o.profile), None)
        return list(seen)

    def ran(self) -> list[VersionEntry]:
        return [e for e in self.versions if e.status is Status.RAN]

    def only_newest_rows(self) -> set[Row]:
        """The rows UNSUPPORTED on every version that ran but the newest, where they ran (of two versions or more):
        checked on one release only. A warning; under `--fail-on newest` a failure (`exit_code`)."""
        ran = self.ran()
        if len(ran) < 2:
            return set()
        out = set()
        for o in ran[-1].outcomes:
            row = (o.case, o.target, o.profile)
            if o.code is not UNSUPPORTED and all((p := e.outcome(row)) is not None and p.code is UNSUPPORTED
                                                 for e in ran[:-1]):
                out.add(row)
        return out

    def newest_ran(self) -> VersionEntry | None:
        ran = self.ran()
        return ran[-1] if ran else None

    def changes(self) -> list[Change]:
        """Per row, each change from the previous version with a signature: `_contract_judge.change`, the one
        comparison the HTML report and bisect use too (a model against its contract: by layer and pass)."""
        out = []
        for row in self.rows():
            prev: tuple[str, Outcome] | None = None
            for e in self.versions:
                o = e.outcome(row)
                if o is None or o.signature is None:
                    continue
                if prev is not None:
                    found = change(prev[1], o)
                    if changed(found):
                        out.append(Change(*row, prev[0], e.jax, *found))
                prev = (e.jax, o)
        return out

    def row_costs(self) -> dict[Row, float]:
        """Per row, the largest estimated cost (µs per call) of a change between versions or of a FAIL against its
        golden; rows never priced are absent. `matrix --sort cost` orders the grid by it."""
        out: dict[Row, float] = {}
        priced = [((c.case, c.target, c.profile), c.verdict.cost) for c in self.changes() if c.verdict and c.verdict.cost]
        priced += [((o.case, o.target, o.profile), o.verdict.cost) for e in self.versions for o in e.outcomes
                   if o.verdict is not None and o.verdict.cost is not None]
        for row, delta in priced:
            out[row] = max(out.get(row, delta.delta_us), delta.delta_us)
        return out

    def regressions(self) -> list[Regression]:
        ran = self.ran()
        if not ran:
            return []
        newest, before = ran[-1], (ran[-2] if len(ran) > 1 else None)
        out = []
        for o in newest.outcomes:
            if o.code.is_failure:
                prev = before.outcome((o.case, o.target, o.profile)) if before else None
                reason = o.reason.splitlines()[0] if o.reason else ""
                out.append(Regression(o.case, o.target, o.profile, newest.jax, o.code, reason,
                                      (before.jax, prev.code) if before is not None and prev else None))
        return out

    def exit_code(self, fail_on: str) -> int:
        code = self._exit_code(fail_on)
        # a planned job that uploaded nothing: its versions and targets were not checked, under any --fail-on
        return EXIT_ENV if self.missing_jobs and code == EXIT_OK else code

    def _exit_code(self, fail_on: str) -> int:
        if fail_on == "never":
            return EXIT_OK
        if fail_on == "newest":
            if self.newest_ran() is None:
                return EXIT_ENV
            # a NEW (no golden yet) is told with how to bless it, not failed: a fresh project's first run is green
            if any(r.code is not NEW for r in self.regressions()) or self.only_newest_rows():
                # a case checked on the newest release only fails too
                return EXIT_FAIL
            # a version asked for could not be installed (or is broken): a broken release must not pass, and the
            # closing line says "nothing ran on" it
            return EXIT_ENV if any(e.status.not_run or e.broken_targets for e in self.versions) else EXIT_OK
        if fail_on == "regression" or fail_on.startswith("cost:"):
            if any(fails(o, fail_on) for e in self.versions for o in e.outcomes):
                return EXIT_FAIL
        elif any(o.is_failure for e in self.versions for o in e.outcomes):
            return EXIT_FAIL
        if any(e.status.not_run or e.broken_targets for e in self.versions):
            return EXIT_ENV
        return EXIT_OK


# ------------------------------------------------------------------ JSON: the one place


def entry_to_json(e: VersionEntry, base: Path | None = None) -> dict:
    rf = e.results_file
    if rf and base is not None and Path(rf).exists():
        rf = _relative(Path(rf), base)
    return {"jax": e.jax, "status": e.status.value, "error": e.error, "environment": e.environment, "env": e.env,
            "run_seconds": e.run_seconds, "results_file": rf, "summary": e.summary(),
            **({"broken_targets": e.broken_targets} if e.broken_targets else {}),
            "results": [run.outcome_to_json(o, with_text=False) for o in e.outcomes]}


def entry_from_json(d: dict, base: Path | None = None) -> VersionEntry:
    rf = d.get("results_file")
    if rf and base is not None and not Path(rf).is_absolute():  # relative to the file it was read from
        rf = str((base / rf).resolve())
    return VersionEntry(str(parse_version(str(d["jax"]))), Status(d.get("status") or "ran"), d.get("error") or "",
                        dict(d.get("environment") or {}), dict(d.get("env") or {}), float(d.get("run_seconds") or 0.0),
                        rf, [run.outcome_from_json(r) for r in d.get("results") or []],
                        {str(k): str(v) for k, v in (d.get("broken_targets") or {}).items()})


def to_json(m: Matrix, base: Path | None = None) -> dict:
    """The document; `base`: the directory it is written to (results_file paths are stored relative to it)."""
    doc: dict = {"schema": SCHEMA, "created": m.created, "mode": m.mode, "targets": m.targets, "profiles": m.profiles}
    if m.wall_seconds is not None:
        doc["wall_seconds"] = m.wall_seconds
    if m.merged_from is not None:
        doc["merged_from"] = m.merged_from
    if m.missing_jobs:
        doc["missing_jobs"] = [j.to_json() for j in m.missing_jobs]
    doc["versions"] = [entry_to_json(e, base) for e in m.versions]
    # derived, for readers of the file (the nightly, people); recomputed when it is read back
    doc["changes"] = [{"case": c.case, "target": c.target, "profile": c.profile, "from": c.before, "to": c.after,
                       "diffs": [d.to_json() for d in c.diffs], "class": c.cls,
                       "summary": c.verdict.summary() if c.verdict else "",
                       "lines": [x.to_dict() for x in c.verdict.lines] if c.verdict else [],
                       "cost": c.verdict.cost.to_dict() if c.verdict and c.verdict.cost else None} for c in m.changes()]
    doc["regressions"] = [{"case": r.case, "target": r.target, "profile": r.profile, "jax": r.jax,
                           "outcome": r.code.name, "reason": r.reason,
                           "previous": {"jax": r.previous[0], "outcome": r.previous[1].name} if r.previous else None}
                          for r in m.regressions()]
    return doc


def from_json(doc: dict, path: str | None = None) -> Matrix:
    where = path or "matrix"
    if not isinstance(doc, dict) or doc.get("schema") not in READABLE:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise MatrixError(f"{where}: not an fp8-check matrix file (schema {found!r}; readable: {', '.join(READABLE)})")
    base = Path(path).parent if path else None
    try:
        entries = [entry_from_json(e, base) for e in doc.get("versions") or []]
        missing = [MissingJob.from_json(j) for j in doc.get("missing_jobs") or []]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MatrixError(f"{where}: malformed version entry: {type(exc).__name__}: {exc}") from None
    return Matrix(entries, doc.get("mode"), doc.get("targets"), doc.get("profiles"), str(doc.get("created", "")),
                  doc.get("wall_seconds"), doc.get("merged_from"), missing)


def write(path: Path, m: Matrix) -> None:
    path = Path(path)
    atomic_write(path, json.dumps(to_json(m, path.parent), indent=1) + "\n")


def _read(path: Path) -> dict:
    if not Path(path).exists():
        raise MatrixError(f"{path}: no such file")
    try:
        return load_json(path)
    except ReadError as exc:
        raise MatrixError(f"{path}: cannot read JSON: {exc}") from None


def load_matrix(path: Path) -> Matrix:
    """A matrix file (schema fp8-check/matrix/1 or /2); `MatrixError` (one line) otherwise.

    Each entry's `results_file` is resolved against the file's directory: `_results.load(e.results_file)`
    gives that version's full results.
    """
    return from_json(_read(path), str(path))


def entry_from_results(res: run.Results) -> VersionEntry:
    """A version entry from one version's results file."""
    jax = res.jax
    status = Status.RAN
    if res.outcomes and all(o.code is UNSUPPORTED for o in res.outcomes) and _too_old(jax):
        status = Status.UNSUPPORTED
    return VersionEntry(jax, status, environment=dict(res.environment), results_file=res.path, outcomes=res.outcomes)


def _too_old(jax: str) -> bool:
    return bool(deviceless_unsupported(jax))


MergeKey = tuple[str, str, str, str]  # (version, target, profile, case): what one result of a merge is


def merge_inputs(paths: list[str]) -> list[tuple[str, list[VersionEntry], dict]]:
    """The files a merge reads (globs expanded, each a regular file: core's one reader), each with its version
    entries and its `mode`, `targets` and `profiles`; MatrixError (one line naming the file) otherwise."""
    files: list[str] = []
    for p in paths:
        found = sorted(glob.glob(str(p), recursive=True))
        if not found:
            raise MatrixError(f"no file matches {shown_path(p)}")
        files += [f for f in found if f not in files]
    inputs = []
    for f in files:
        doc = _read(Path(f))
        schema = str(doc.get("schema", "")) if isinstance(doc, dict) else ""
        if schema.startswith("fp8-check/results/"):
            try:
                res = run.from_json(doc, f)
            except run.ResultsError as exc:
                raise MatrixError(str(exc)) from None
            inputs.append((f, [entry_from_results(res)],
                           {k: res.environment.get(k) for k in ("mode", "targets", "profiles")}))
        elif schema.startswith("fp8-check/matrix/"):
            m = from_json(doc, f)
            inputs.append((f, list(m.versions), {"mode": m.mode, "targets": m.targets, "profiles": m.profiles}))
        else:
            raise MatrixError(f"{shown_path(f)}: neither a matrix nor a results file (schema {schema or None!r})")
    return inputs


_WORST = (Status.RAN, Status.UNSUPPORTED, Status.INSTALL_FAILED, Status.BROKEN)  # a merged version says the worst
_VOLATILE = ("compile_seconds", "cached")  # differ between two runs of the same result


def _same(a: Outcome, b: Outcome) -> bool:
    ja, jb = (run.outcome_to_json(o, with_text=False) for o in (a, b))
    return all(ja.get(k) == jb.get(k) for k in set(ja) | set(jb) if k not in _VOLATILE)


def merge(paths: list[str]) -> Matrix:
    """One matrix from matrix and/or results files (globs allowed; the CI's per version x target jobs), keyed by
    (version, target, profile, case): every result of every file is kept; the same key in two files must be the
    same result, else MatrixError naming both files (exit 2). `targets` and `profiles` are the union of the files';
    a merge that finds no version is an error. A version's entry is the union of its files' entries (its status the
    worst of theirs; its results_file kept only when one file gave it)."""
    inputs = merge_inputs(paths)
    by_version: dict[str, VersionEntry] = {}
    seen: dict[MergeKey, tuple[Outcome, str]] = {}
    sources: dict[str, list[str]] = {}
    info: dict = {"mode": None, "targets": [], "profiles": []}
    mode_from = ""
    for f, entries, meta in inputs:
        if meta.get("mode"):
            if info["mode"] and meta["mode"] != info["mode"]:
                raise MatrixError(f"{shown_path(f)}: mode {meta['mode']} but {shown_path(mode_from)} is mode "
                                  f"{info['mode']}: a merge is of one mode")
            info["mode"], mode_from = meta["mode"], mode_from or f
        for k in ("targets", "profiles"):
            info[k] += [x for x in (meta.get(k) or []) if x not in info[k]]
        for e in entries:
            for o in e.outcomes:
                key = (e.jax, o.target, o.profile, o.case)
                if key in seen and not _same(seen[key][0], o):
                    raise MatrixError(f"{shown_path(f)} and {shown_path(seen[key][1])} both have jax {e.jax}, target "
                                      f"{o.target}, profile {o.profile}, case {o.case}, with different results "
                                      f"({o.code.name} and {seen[key][0].code.name}): merge each result once")
                for k, x in (("targets", o.target), ("profiles", o.profile)):
                    if x not in info[k]:
                        info[k].append(x)
            _union(by_version, e, seen, f)
            sources.setdefault(e.jax, []).append(f)
    if not by_version:
        raise MatrixError(f"nothing to merge: no JAX version in {', '.join(shown_path(f) for f, _, _ in inputs)}")
    return Matrix(sorted(by_version.values(), key=_version_order), merged_from=[f for f, _, _ in inputs],
                  mode=info["mode"], targets=info["targets"] or None, profiles=info["profiles"] or None)


def _union(by_version: dict[str, VersionEntry], e: VersionEntry, seen: dict[MergeKey, tuple[Outcome, str]],
           f: str) -> None:
    """Add entry `e` (read from file `f`) to the merged entry of its version: its results not yet seen, the worse
    status, both errors; `seen` records which file gave each key."""
    new = [o for o in e.outcomes if (e.jax, o.target, o.profile, o.case) not in seen]
    for o in new:
        seen[(e.jax, o.target, o.profile, o.case)] = (o, f)
    have = by_version.get(e.jax)
    if have is None:
        by_version[e.jax] = VersionEntry(e.jax, e.status, e.error, dict(e.environment), dict(e.env), e.run_seconds,
                                         e.results_file, list(new))
        return
    have.outcomes = have.outcomes + new
    have._index = None
    if _WORST.index(e.status) > _WORST.index(have.status):
        have.status = e.status
    have.error = "; ".join(x for x in dict.fromkeys((have.error, e.error)) if x)
    have.run_seconds = max(have.run_seconds, e.run_seconds)
    targets = list(dict.fromkeys([*(have.environment.get("targets") or []), *(e.environment.get("targets") or [])]))
    have.environment = {**e.environment, **have.environment, **({"targets": targets} if targets else {})}
    if e.results_file != have.results_file:
        have.results_file = None  # the full texts are in more than one file: the report shows the lean results


def _version_order(e: VersionEntry) -> tuple:
    """Oldest first, so that `--fail-on newest` judges the newest version (file names sort 0.10 before 0.6)."""
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(str(e.jax)), "")
    except InvalidVersion:
        return (1, Version("0"), str(e.jax))


def _relative(path: Path, base: Path) -> str:
    try:
        return os.path.relpath(path.resolve(), base.resolve())
    except ValueError:
        return str(path.resolve())

