"""The rules for failures outside the signature that classify_extra judges: `numerics` and `filecheck`.

(`layers[…]`, the third, is harness/fp8_check/verdict/rules/layers.py's.) Pure: no I/O, no JAX.
"""

from __future__ import annotations

from typing import Any

from fp8_check.verdict.rules.findings import REGRESSION, explained


@explained('always: wrong numbers', '—')
def numerics(before: Any, after: Any) -> list[tuple[str, str]]:
    return [(REGRESSION, "wrong numbers")]


@explained('always: a FileCheck pattern no longer matches', '—')
def filecheck(before: Any, after: Any) -> list[tuple[str, str]]:
    return [(REGRESSION, "FileCheck patterns no longer match")]
