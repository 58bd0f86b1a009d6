"""The one comparator: field-by-field differences between two signature dicts, as `FieldDiff`s.

syrupy's split: goldens are stored and loaded by harness/fp8_check/verdict/golden.py, compared here,
classified by harness/fp8_check/verdict/classify.py and shown by the reports. Every difference the harness
names, a FAIL line against a golden (`compare(expected, found)`) or a verdict's classified
line between two signatures (`compare(before, after, symmetric=True)`), comes from `compare`,
so their paths always match; a field absent on one side is `MISSING` there.

Mappings are compared on the keys the first side states (both sides' with `symmetric`);
`gemms` and `collectives` record by record, each paired with its counterpart by identity
(harness/fp8_check/signature/identity.py: a pure reordering is no difference; an extra or missing gemm
is one); other lists of records item by item; other values as a whole. Pure: no I/O, no JAX.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from fp8_check.signature import identity


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
        if path in identity.LISTS:  # gemms and collectives: matched by what they are, not where (identity.py)
            for label, x, y, has_x, has_y in identity.aligned(path, e, f):
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
