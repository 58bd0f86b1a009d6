"""Case kinds: each kind is one module here, owning its typed fields, schema, arguments, rendering and reduction.

A kind module defines its spec (a frozen `case_model.Spec` subclass: the fields a case of
the kind states beyond the common ones, `Case.spec`), `NAME`, `KEYS` (the YAML keys a case
of the kind may state), `REDUCIBLE` (whether `fp8-check reduce` and the minimal repro can
simplify it) and `validate(path, line, case_id, merged, raw, common) -> Case`,
`arg_specs(case)`, `render(case) -> source`, `case_options(case) -> XLA flags | None`,
`reduction_fields(case)` and `simplifications(fields)` (`reduce`'s steps). Loading
(harness/fp8_check/cases/_load.py), rendering (render.py), the runner and `reduce` reach a kind
only through `get(name)` / `kind_of(case)` and the spec's methods (production shapes, calibration);
no other module switches on kind names (tests/house/test_architecture.py) or reads a spec's fields
(tests/cases/test_kind_specs.py); a kind's float64 numerics live next to the GPU code
(harness/fp8_check/gpu/_pattern_numerics.py, block_numerics.py). A new kind is one new module added to `KINDS`.
"""

from __future__ import annotations

from typing import Any, Protocol

from fp8_check.cases._model import Case
from fp8_check.cases._source import Rendered
from fp8_check.cases.kinds import block_scaled, pattern, python


class Kind(Protocol):
    """What a kind module provides (a module satisfies it structurally)."""

    @property
    def NAME(self) -> str: ...

    @property
    def KEYS(self) -> tuple[str, ...]: ...

    @property
    def REDUCIBLE(self) -> bool: ...

    def validate(self, path: Any, line: Any, cid: str, merged: dict, raw: dict, kw: dict) -> Case: ...

    def arg_specs(self, case: Case) -> list[tuple[str, tuple[int, ...], str]]: ...

    def render(self, case: Case) -> Rendered: ...

    def case_options(self, case: Case) -> dict | None: ...

    def reduction_fields(self, case: Case) -> dict: ...

    def simplifications(self, fields: dict) -> list[tuple[str, dict]]: ...


KINDS: dict[str, Kind] = {pattern.NAME: pattern, python.NAME: python, block_scaled.NAME: block_scaled}
DEFAULT = pattern.NAME


def get(name: str) -> Kind:
    return KINDS[name]


def kind_of(case: Case) -> Kind:
    return KINDS[case.kind]


def all_keys() -> set[str]:
    return {k for kind in KINDS.values() for k in kind.KEYS}
