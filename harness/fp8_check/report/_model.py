"""What the report shows, built from typed `Results`: one `Item` per outcome, the case x version grid, baselines.

Inputs are results files (harness/fp8_check/run/_results.py) or matrix documents
(fp8-check/matrix/1), which are read through the per-version results files they
name. Several inputs may hold the same case x target x profile x mode x JAX version:
the later input wins.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from packaging.version import InvalidVersion, Version

from fp8_check.core import ReadError, load_json, shown_path
from fp8_check.matrix import MatrixError, Status, load_matrix
from fp8_check.run import READABLE, Results, ResultsError, from_json, repro_for
from fp8_check.verdict import FAIL, XFAIL, XPASS, Code, Outcome

RUN_WIDE = ("mode", "targets", "profiles", "compiler_options")  # environment keys shared by every JAX version


class ReportError(ValueError):
    """An input the report cannot use: one line naming the file and what is wrong."""


@dataclass
class Inputs:
    results: list[Results] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # versions a matrix could not run, one line each


def load(paths: Iterable[Path]) -> Inputs:
    """Results files and matrix files -> typed Results (one per file or per matrix version)."""
    out = Inputs()
    for path in paths:
        doc = _read_json(Path(path))
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("fp8-check/matrix/"):
            _add_matrix(out, Path(path))
        else:
            out.results.append(_results(doc, str(path)))
    return out


def _read_json(path: Path) -> Any:
    """A results or matrix file, read as every user-given file is (core: a regular file, bounded, UTF-8, JSON
    without duplicate keys); ReportError in one line that quotes none of its content."""
    if not path.exists() and not path.is_symlink():
        raise ReportError(f"{shown_path(path)}: no such file")
    try:
        return load_json(path)
    except ReadError as exc:
        raise ReportError(f"{shown_path(path)}: {exc}") from None


def _results(doc: Any, path: str) -> Results:
    if isinstance(doc, dict) and doc.get("schema") in READABLE and not isinstance(doc.get("results"), list):
        raise ReportError(f"{path}: field 'results': expected a list")
    try:
        return from_json(doc, path)
    except ResultsError as exc:
        raise ReportError(str(exc)) from None


def _add_matrix(out: Inputs, path: Path) -> None:
    """A matrix document's versions: each version's own results file when it can be read (it has the HLO and
    repro texts), else the matrix's lean outcomes; a version that did not run becomes a note."""
    try:
        matrix = load_matrix(path)
    except MatrixError as exc:
        raise ReportError(str(exc)) from None
    for entry in matrix.versions:
        res = _version_results(entry.results_file, path)
        if res is None:
            res = Results(entry.environment or {"jax": entry.jax}, entry.outcomes, path=str(path))
        out.results.append(res)
        if entry.status not in (Status.RAN, Status.UNSUPPORTED) or entry.error:
            error = entry.error.strip().splitlines()
            out.notes.append(f"jax {entry.jax}: {entry.status.value}" + (f": {error[0]}" if error else ""))


def _version_results(results_file: str | None, matrix_path: Path) -> Results | None:
    if not results_file:
        return None
    for cand in (Path(results_file), matrix_path.parent / Path(results_file).name):
        if cand.is_file():
            try:
                return _results(_read_json(cand), str(cand))
            except ReportError:
                pass
    return None


def vkey(v: str):
    """Sort key for JAX versions; unparsable ones last."""
    try:
        return (0, Version(v), v)
    except InvalidVersion:
        return (1, Version("0"), v)


def env_for(res: Results, o: Outcome) -> dict:
    """The environment `o` was produced in. A merged file's environment may be another version's: then only
    what is run-wide is kept."""
    env = res.environment
    if not env.get("jax") or env.get("jax") == o.jax:
        return env
    return {k: env[k] for k in RUN_WIDE if k in env} | {"jax": o.jax}


@dataclass(eq=False)
class Item:
    """One outcome as the report shows it."""

    outcome: Outcome
    results: Results  # the input it came from (its repro is rendered from it)
    env: dict
    idx: int = 0
    baseline: "Item | None" = None

    @property
    def code(self) -> Code:
        return self.outcome.code

    @property
    def case(self) -> str:
        return self.outcome.case

    @property
    def target(self) -> str:
        return self.outcome.target

    @property
    def profile(self) -> str:
        return self.outcome.profile

    @property
    def mode(self) -> str:
        return self.outcome.mode

    @property
    def jax(self) -> str:
        return self.outcome.jax

    @property
    def description(self) -> str:
        return self.outcome.description

    @property
    def source_file(self) -> str:
        return self.results.path or ""

    @property
    def row(self) -> tuple[str, str, str, str]:
        return (self.case, self.target, self.profile, self.mode)

    @functools.cached_property
    def repro(self) -> str | None:
        """The standalone repro script, or None when the result has no rendered case."""
        return repro_for(self.results, self.outcome) if self.outcome.source else None


@dataclass
class Model:
    items: list[Item]
    versions: list[str]
    rows: list[tuple]  # (case, target, profile, mode)
    cells: dict  # (row, jax) -> Item
    inputs: list[str]
    duplicates: int = 0
    version_notes: list[str] = field(default_factory=list)

    def row_items(self, row: tuple) -> list[Item]:
        return [self.cells[(row, v)] for v in self.versions if (row, v) in self.cells]


def build_model(inputs: list[Results], notes: Iterable[str] = ()) -> Model:
    cells: dict = {}
    order: list[tuple] = []
    duplicates = 0
    items: list[Item] = []
    for res in inputs:
        for o in res.outcomes:
            it = Item(o, res, env_for(res, o))
            key = (it.row, it.jax)
            if key in cells:
                duplicates += 1  # a later file wins
                items.remove(cells[key])
            else:
                order.append(it.row)
            cells[key] = it
            items.append(it)
    rows = list(dict.fromkeys(order))
    case_order = {c: i for i, c in enumerate(dict.fromkeys(r[0] for r in rows))}
    rows.sort(key=lambda r: (case_order[r[0]], r[1], r[2], r[3]))
    versions = sorted({it.jax for it in items}, key=vkey)
    row_pos = {r: i for i, r in enumerate(rows)}
    items.sort(key=lambda it: (row_pos[it.row], vkey(it.jax)))
    for i, it in enumerate(items):
        it.idx = i
    model = Model(items, versions, rows, cells, list(dict.fromkeys(res.path or "" for res in inputs)), duplicates,
                  list(notes))
    for it in items:
        it.baseline = _baseline(it, model)
    return model


def _baseline(it: Item, model: Model) -> Item | None:
    """The result to diff `it` against: the last good JAX version before it, else the first good one after.

    For an XPASS (a known issue no longer reproduces), the last version where it still failed.
    """
    others = [o for o in model.row_items(it.row) if o is not it and o.outcome.hlo]
    if it.code is XPASS:
        bad = [o for o in others if o.code in (XFAIL, FAIL) and vkey(o.jax) < vkey(it.jax)]
        if bad:
            return bad[-1]
    good = [o for o in others if o.code.matches_golden]
    older = [o for o in good if vkey(o.jax) < vkey(it.jax)]
    if older:
        return older[-1]
    newer = [o for o in good if vkey(o.jax) > vkey(it.jax)]
    return newer[0] if newer else None


def version_story(it: Item, model: Model) -> tuple[list[str], list[str], list[str]]:
    """JAX versions of `it`'s row: (matching the golden, broken, 'version (OUTCOME)' for the others)."""
    good: list[Item] = []
    bad: list[Item] = []
    other: list[Item] = []
    for o in model.row_items(it.row):
        (good if o.code.matches_golden else bad if o.code in (FAIL, XFAIL) else other).append(o)
    return [o.jax for o in good], [o.jax for o in bad], [f"{o.jax} ({o.code.name})" for o in other]
