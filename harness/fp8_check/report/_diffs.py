"""What changed for one result: the expected vs found signature table and the diff against its baseline."""

from __future__ import annotations

import difflib
import json
from typing import Any

import yaml

from fp8_check.report._hlo_text import normalize_hlo
from fp8_check.report._model import Item, vkey
from fp8_check.signature import Signature, coverage
from fp8_check.verdict import FAIL, KEY, PASS, XFAIL, FieldDiff, matmul_rows

ABSENT = "(absent)"


def show(value: Any) -> str:
    """A signature value as one short text (JSON for lists and mappings)."""
    if value is None:
        return ABSENT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, separators=(", ", ": "))


def show_expected(d: FieldDiff) -> str:
    return ABSENT if d.absent_expected else show(d.expected)


def show_found(d: FieldDiff) -> str:
    return ABSENT if d.absent_found else show(d.found)


def sig_dict(sig: Signature | None) -> dict | None:
    """The signature as the golden states it (dotted paths, YAML)."""
    return sig.to_dict() if sig is not None else None


def _flatten(value: Any, path: str = "", out: dict | None = None) -> dict:
    """Signature -> {dotted path: leaf}, the paths comparator.compare reports."""
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for i, v in enumerate(value):
            _flatten(v, f"{path}[{i}]", out)
    else:
        out[path] = value
    return out


def contract_rows(c: dict, found: Signature | None, diffs: list[FieldDiff]) -> list[list]:
    """[layer x pass, expected, found, differs] of a contract golden: per layer x pass as the judge pairs them, then
    its stated FP8 FLOP share, cost and kernels (never the raw signature's fields against a contract)."""
    if found is None:
        return []
    changed = {d.path for d in diffs}
    rows: list[list] = [[where, want, have, where in changed or f"{where} amax" in changed or f"{where} epilogue" in changed]
                        for where, want, have in matmul_rows(c, found)]
    share = coverage(found).flop_fraction
    if c.get("fp8_flops") is not None:
        rows.append(["FP8 share of matmul FLOPs", f"{c['fp8_flops']:g} %",
                     "?" if share is None else f"{round(100 * share, 1):g} %", "fp8_flops" in changed])
    by_path = {d.path: d for d in diffs}
    if c.get("cost_us") is not None:
        d = by_path.get("cost_us")
        rows.append(["estimated cost (µs)", f"{c['cost_us']:g}", show(d.found) if d else "within the tolerance", d is not None])
    if c.get("kernels") is not None:
        rows.append(["kernels", str(c["kernels"]), str(found.kernels), found.kernels != c["kernels"]])
    for d in diffs:  # collectives and anything else the judge reported
        if not any(r[0] == d.path for r in rows) and d.path not in ("cost_us", "fp8_flops", "kernels") \
                and not d.path.endswith((" amax", " epilogue")):
            rows.append([d.path, show_expected(d), show_found(d), True])
    return rows


def signature_rows(expected: dict | None, found: Signature | None, diffs: list[FieldDiff]) -> list[list]:
    """[field, expected, found, differs] for the side-by-side table (a contract golden: `contract_rows`)."""
    if isinstance(expected, dict) and isinstance(expected.get(KEY), dict):
        return contract_rows(expected[KEY], found, diffs)
    found_d = sig_dict(found)
    e, f = _flatten(expected or {}), _flatten(found_d or {})
    diff_paths = {d.path for d in diffs}
    rows = []
    for path in list(e) + [p for p in f if p not in e]:
        es = show(e[path]) if path in e else ABSENT
        fs = show(f[path]) if path in f else ABSENT
        differs = path in diff_paths or (expected is not None and found_d is not None and es != fs)
        rows.append([path, es if expected is not None else "", fs if found_d is not None else "", bool(differs)])
    # a diff whose path is a prefix that was not flattened (e.g. a whole list of records vs absent)
    known = set(e) | set(f)
    for d in diffs:
        if d.path not in known:
            rows.append([d.path, show_expected(d), show_found(d), True])
    return rows


def to_yaml(value: Any) -> str:
    if value is None:
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=None, width=10_000)


def hlo_diff(it: Item) -> tuple[str, str]:
    """(unified diff text, note) for `it`: normalized HLO vs its baseline, else its signature vs the golden."""
    base, o = it.baseline, it.outcome
    if base is not None and o.hlo:
        a, b = normalize_hlo(base.outcome.hlo), normalize_hlo(o.hlo)
        diff = "".join(difflib.unified_diff(
            a.splitlines(True), b.splitlines(True),
            f"jax {base.jax} ({base.code}): normalized optimized HLO",
            f"jax {it.jax} ({it.code}): normalized optimized HLO", n=3))
        note = (f"Normalized optimized HLO of jax {base.jax} ({base.code}, the "
                f"{'last' if vkey(base.jax) < vkey(it.jax) else 'first'} "
                f"{'failing' if base.code in (FAIL, XFAIL) else 'good'} version in these results) vs jax {it.jax}; "
                "metadata, fingerprints and scheduling names removed, names renamed in order of appearance.")
        if not diff:
            note += " The two are identical."
        return diff, note
    exp, found = o.expected, sig_dict(o.signature)
    if exp is None and found is None:
        return "", "No signature to compare (the case did not compile or was not judged)."
    diff = "".join(difflib.unified_diff(
        to_yaml(exp).splitlines(True), to_yaml(found).splitlines(True), "golden signature (expected)",
        f"jax {it.jax} signature (found)", n=3))
    why = ("no other JAX version in these results is good for this case" if it.code is not PASS
           else "this result matches it")
    return diff, ("The golden stores only the fusion signature, not HLO, and " + why +
                  ": showing the diff of the signatures (golden vs found) instead of an HLO diff.")
