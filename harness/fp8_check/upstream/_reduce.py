"""`fp8-check reduce CASE --jax V [--good G]`: the smallest case that still shows a regression.

The regression is the change of the case's signature from the good version G
(default: the release just before V) to V, summarised by *which top-level
signature fields differ* (e.g. `kernels`, `launches`). Reduction is greedy, one
feature at a time (epilogue parts, amax, bias, input and output scales, clamp,
bitcast requantization, the requantization itself, scale dtype, transpose,
batch, then halving m, n, k down to 16): a simplification is kept when the
simplified case is valid, compiles on both versions and the same fields still
differ. It repeats until nothing more can go. Each candidate is written as
case YAML and loaded by the normal case loader, so only valid cases are tried.
Both versions compile in their own long-lived workers (fp8_check.versions._envs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from fp8_check.cases import Case, CaseError, from_mapping, kind_of
from fp8_check.compile import Compiler, render
from fp8_check.signature import extract
from fp8_check.verdict import compare
from fp8_check.versions import Manager


def case_fields(case: Case) -> dict:
    """The kind's fields of `case` that differ from the schema defaults (what a case YAML needs)."""
    return kind_of(case).reduction_fields(case)


def to_yaml(case: Case) -> str:
    doc = {"id": case.id}
    if case.description:
        doc["description"] = case.description
    doc.update(case_fields(case))
    return yaml.safe_dump({"cases": [doc]}, sort_keys=False, default_flow_style=None)


def _load(fields: dict, case_id: str, description: str) -> Case | None:
    """A validated case with these fields, or None if the schema rejects the combination."""
    doc = {"id": case_id, "description": description, **fields}
    try:
        return from_mapping(doc, "<reduce>")  # validated as a case file's entry, without writing one
    except CaseError:
        return None


def candidates(case: Case, fields: dict) -> list[tuple[str, dict]]:
    """(what is dropped, the simplified fields), simplest-first: the kind's own reduction steps."""
    return kind_of(case).simplifications(fields)


@dataclass
class Reduction:
    original: Case
    reduced: Case
    fields: list[str]  # the signature fields that differ (the regression)
    dropped: list[str] = field(default_factory=list)
    tried: int = 0


class RegressionError(RuntimeError):
    """The case does not show a regression between the two versions (or does not compile)."""


def _top_fields(a: dict, b: dict) -> set[str]:
    return {d.path.split(".")[0].split("[")[0] for d in compare(a, b)}


def reduce(case: Case, target, profile, good: str, bad: str, manager=None, log=print) -> Reduction:
    manager = manager or Manager()
    envs = {v: manager.ensure(v) for v in (good, bad)}
    compilers = {v: Compiler("deviceless", python=str(e.python)) for v, e in envs.items()}
    try:
        def sigs(c: Case) -> dict | None:
            out = {}
            for v, comp in compilers.items():
                res = comp.compile(render(c), target, profile)
                if not res.ok:
                    return None
                out[v] = extract(res.hlo or "").to_dict()
            return out

        first = sigs(case)
        if first is None:
            raise RegressionError(f"case '{case.id}' does not compile on jax {good} and {bad}")
        want = _top_fields(first[good], first[bad])
        if not want:
            raise RegressionError(f"case '{case.id}' has the same signature on jax {good} and {bad}: nothing to reduce")
        log(f"regression: {', '.join(sorted(want))} differ between jax {good} and {bad}")
        fields = case_fields(case)
        current, dropped, tried = case, [], 0
        progress = True
        while progress:
            progress = False
            for what, new in candidates(case, fields):
                cand = _load(new, case.id + "_reduced", f"reduced from {case.id}")
                if cand is None:
                    continue
                tried += 1
                s = sigs(cand)
                keep = s is not None and _top_fields(s[good], s[bad]) == want
                log(f"  without {what}: " + ("still regresses, dropped" if keep else
                                             "does not compile" if s is None else "regression gone, kept"))
                if keep:
                    fields, current = case_fields(cand), cand
                    dropped.append(what)
                    progress = True
                    break
        return Reduction(case, current, sorted(want), dropped, tried)
    finally:
        for comp in compilers.values():
            comp.close()
