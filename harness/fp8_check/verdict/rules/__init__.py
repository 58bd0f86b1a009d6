"""Verdict rules, one peer module a part of the signature, and the table that dispatches to them.

- `kernels`: `kernels`, `launches`, `unfused`;
- `gemm`: every field of a gemm (`GEMM_RULES`);
- `block`: every field of the `block_scaled` record (`BLOCK_RULES`);
- `collectives`: every field of a collective (`COLLECTIVE_RULES`);
- `layers`: a golden's layer rules (`layers[PATTERN@PASS]`), and `outside`: `numerics`, `filecheck` — the
  failures outside the signature that classify_extra judges;
- `findings`: what they all speak (the classes, `Finding`, `Neutral`, `@explained`) and the dtype questions
  several ask.

Each rule states what it calls a regression and an improvement next to its code (`@explained`); docs/verdicts.md
generates its table from `FIELD_RULES` below (docs/hooks.py), never retyped. harness/fp8_check/verdict/_classify.py
compares two signatures and hands each differing field to its entry here. Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from fp8_check.verdict.rules import block, collectives, findings, gemm, kernels, layers, outside
from fp8_check.verdict.rules.findings import Findings

__all__ = ["FIELD_RULES", "Record", "block", "collectives", "findings", "gemm", "kernels", "layers", "outside"]


@dataclass(frozen=True)
class Record:
    """A field that holds records (`gemms[i]`, `block_scaled`, `collectives[i]`) or keyed findings (`layers[…]`).

    `paths` matches every path the entry judges (its groups go to `judge`); `whole` is the rule for a
    whole record appearing or going, `rules` one per field of the record (docs/verdicts.md lists both)."""

    paths: re.Pattern
    judge: Callable[[re.Match, Any, Any, dict, dict], Findings]
    whole: object
    rules: Mapping[str, object] = field(default_factory=dict)
    label: str = ""  # how docs/verdicts.md writes a record's path: `gemms[i]`


# The table that dispatches: a path's first word names its entry (`gemms[0].output` -> "gemms"). Every field
# of fp8_check.signature._extract.Signature has one: a rule (before, after) -> findings for a plain field, a
# `Record` for one holding records (each of its fields a rule or `Neutral(reason)`); tests/verdict/test_verdict_fields.py
# fails for a field with neither, and proves every entry reachable. Adding an entry is the whole edit.
FIELD_RULES: dict[str, "Callable[[Any, Any], Findings] | Record"] = {
    "kernels": kernels.count,
    "launches": kernels.launches,
    "unfused": kernels.unfused,
    "gemms": Record(re.compile(r"gemms\[(\d+)\](?:\.(\w+)(?:\.(\w+))?)?"), gemm.judge, gemm.gemm_field, gemm.GEMM_RULES,
                    "gemms[i]"),
    "block_scaled": Record(re.compile(r"block_scaled(?:\.(\w+))?"), block.judge, block.block_field, block.BLOCK_RULES,
                           "block_scaled"),
    "collectives": Record(re.compile(r"collectives(?:\[(\d+)\])?(?:\.(\w+))?"), collectives.judge,
                          collectives.collective_field, collectives.COLLECTIVE_RULES, "collectives[i]"),
    # outside the signature: what classify_extra judges
    "numerics": outside.numerics,
    "filecheck": outside.filecheck,
    "layers": Record(re.compile(r"layers\[.*"), layers.judge, layers.judge, label="layers[PATTERN@PASS]"),
}
