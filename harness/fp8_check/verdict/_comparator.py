"""The one comparator: field-by-field differences between two signature dicts, as `FieldDiff`s.

syrupy's split: goldens are stored and loaded by harness/fp8_check/verdict/_golden.py, compared here,
classified by harness/fp8_check/verdict/_classify.py and shown by the reports. Every difference the harness
names, a FAIL line against a golden (`compare(expected, found)`) or a verdict's classified
line between two signatures (`compare(before, after, symmetric=True)`), comes from `compare`,
so their paths always match; a field absent on one side is `MISSING` there.

Mappings are compared on the keys the first side states (both sides' with `symmetric`);
`gemms` and `collectives` record by record, each paired with its counterpart by identity
(harness/fp8_check/signature/_identity.py: a pure reordering is no difference; an extra or missing gemm
is one); other lists of records item by item; other values as a whole. Pure: no I/O, no JAX.
"""

from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from typing import Any

import yaml

from fp8_check.signature import LISTS, aligned


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()  # a field one side does not state (the one sentinel: golden diffs and verdict lines)


@dataclass(frozen=True)
class FieldDiff:
    """One differing field: `expected` (the golden's, or the earlier signature's) and `found` (MISSING if absent)."""

    path: str
    expected: Any
    found: Any

    def __str__(self) -> str:
        ld = list_diff(self.expected, self.found)
        if ld is not None:  # a long list (a model's launches): what was added, removed and moved, not two walls
            return f"{self.path}: {ld.text()}"
        return f"{self.path}: expected {show(self.expected)}, found {show(self.found)}"

    def to_json(self) -> dict:
        """`expected`/`found` are left out where the field is absent on that side."""
        d: dict[str, Any] = {"path": self.path}
        if self.expected is not MISSING:
            d["expected"] = self.expected
        if self.found is not MISSING:
            d["found"] = self.found
        return d

    @classmethod
    def from_json(cls, d: dict) -> "FieldDiff":
        return cls(str(d["path"]), d.get("expected", MISSING), d.get("found", MISSING))

    @property
    def absent_expected(self) -> bool:
        return self.expected is MISSING

    @property
    def absent_found(self) -> bool:
        return self.found is MISSING


def show(value: Any) -> str:
    """A field's value as the FAIL lines print it."""
    if value is MISSING:
        return "(absent)"
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, (int, float)):
        return repr(_normal(value))
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


def compare(expected: Any, found: Any, path: str = "", symmetric: bool = False) -> list[FieldDiff]:
    """Every differing field of `found` against `expected` (dotted paths, list indices or identity labels).

    Without `symmetric` only the fields `expected` states are compared: a blessed golden states
    them all; a hand-written one (e.g. the fused signature a known issue should get) may state a
    few. With it, a field only `found` has counts too (two whole signatures: a new operand role).
    """
    out: list[FieldDiff] = []
    _walk(expected, found, path, symmetric, out)
    return out


def _walk(e: Any, f: Any, path: str, symmetric: bool, out: list[FieldDiff]) -> None:
    if isinstance(e, dict) and isinstance(f, dict):
        keys = list(e) + ([k for k in f if k not in e] if symmetric else [])
        for key in keys:
            _walk(e.get(key, MISSING), f.get(key, MISSING), f"{path}.{key}" if path else str(key), symmetric, out)
        return
    if isinstance(e, list) and isinstance(f, list) and all(isinstance(x, dict) for x in e + f):
        if path in LISTS:  # gemms and collectives: matched by what they are, not where (_identity.py)
            for label, x, y, has_x, has_y in aligned(path, e, f):
                _walk(x if has_x else MISSING, y if has_y else MISSING, f"{path}[{label}]", symmetric, out)
            return
        for i in range(max(len(e), len(f))):
            _walk(e[i] if i < len(e) else MISSING, f[i] if i < len(f) else MISSING, f"{path}[{i}]", symmetric, out)
        return
    if _normal(e) != _normal(f):
        out.append(FieldDiff(path, e, f))


def _normal(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# ------------------------------------------------------------------ a long list's change as a diff

LONG_LIST = 6  # items: a list longer than this on either side is shown as what changed, not as both values


@dataclass(frozen=True)
class ListDiff:
    """A list field's change as items: `added`/`removed` (item, times), in order of first appearance, and how many
    items both sides hold moved to another place (what a pure reordering is)."""

    before: int
    after: int
    added: tuple[tuple[str, int], ...]
    removed: tuple[tuple[str, int], ...]
    moved: int

    def items(self) -> list[str]:
        """`+1 fusion kLoop [convert]`, `−2 gemm ...` (added first), then `3 moved`: one per line."""
        out = [f"+{n} {x}" for x, n in self.added] + [f"\u2212{n} {x}" for x, n in self.removed]
        return out + ([f"{self.moved} moved"] if self.moved else [])

    def counts(self) -> str:
        """`190 -> 191 items: 2 added, 1 removed, 3 moved`."""
        add, rem = sum(n for _, n in self.added), sum(n for _, n in self.removed)
        return f"{self.before} -> {self.after} items: {add} added, {rem} removed, {self.moved} moved"

    def text(self, limit: int = 4) -> str:
        """One line: the counts, then up to `limit` changed items (`; … N more`)."""
        items = self.items()
        more = f"; … {len(items) - limit} more" if len(items) > limit else ""
        return self.counts() + (": " + "; ".join(items[:limit]) + more if items else "")


def list_diff(before: Any, after: Any, long: int = LONG_LIST) -> ListDiff | None:
    """The change of a list of plain values (launch texts, op names) longer than `long` items on either side; None
    for anything else (short lists, pairs of dtypes, records: their whole values read better)."""
    a = before if isinstance(before, list) else [] if before is MISSING or before is None else None
    b = after if isinstance(after, list) else [] if after is MISSING or after is None else None
    if a is None or b is None or max(len(a), len(b)) <= long:
        return None
    if any(isinstance(x, (dict, list)) for x in [*a, *b]):
        return None
    sa, sb = [str(x) for x in a], [str(x) for x in b]
    ca, cb = Counter(sa), Counter(sb)
    added, removed = cb - ca, ca - cb
    common = ca & cb
    left, keep = [], Counter(common)
    for x in sa:
        if keep[x] > 0:
            keep[x] -= 1
            left.append(x)
    right, keep = [], Counter(common)
    for x in sb:
        if keep[x] > 0:
            keep[x] -= 1
            right.append(x)
    same = sum(m.size for m in difflib.SequenceMatcher(None, left, right, autojunk=False).get_matching_blocks())
    return ListDiff(len(a), len(b), tuple((x, added[x]) for x in dict.fromkeys(sb) if added[x]),
                    tuple((x, removed[x]) for x in dict.fromkeys(sa) if removed[x]), len(left) - same)
