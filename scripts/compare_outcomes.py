"""Compare the outcomes of two results or matrix JSON files, ignoring timings and environment noise.

    python scripts/compare_outcomes.py BEFORE.json AFTER.json

Both files are results JSON (`fp8-check run --json`) or matrix JSON (`fp8-check matrix --out`).
Each outcome is keyed by (jax, case, target, profile, mode) and compared on what a verdict is
made of: the outcome code, the reason (paths and durations masked), the signature, the
expected signature, the field diffs, the known issue and the verdict class and lines. A matrix
also compares its adjacent-version changes (class, diffs, classified lines) and regressions. Timings (`compile_seconds`,
`run_seconds`, `wall_seconds`, `created`), cache hits and the directories files were in (a run's
checkout, where results were written) are ignored.

Prints every difference; exit 0 when there is none, 1 otherwise, 2 on unreadable input.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

COMPARED = ("outcome", "reason", "signature", "expected", "diffs", "known_issue", "verdict")
_SECONDS = re.compile(r"\b\d+(?:\.\d+)?\s?s\b")
_PATHS = re.compile(r"(?:/[\w.+-]+)+/")


def _mask(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    return _PATHS.sub("<dir>/", _SECONDS.sub("<n>s", text))


def _mask_dirs(value: Any) -> Any:
    """Directory prefixes masked in every string (a gemm's `source` names the checkout it ran from)."""
    if isinstance(value, str):
        return _PATHS.sub("<dir>/", value)
    if isinstance(value, list):
        return [_mask_dirs(v) for v in value]
    if isinstance(value, dict):
        return {k: _mask_dirs(v) for k, v in value.items()}
    return value


def _outcomes(doc: dict) -> dict[tuple, dict]:
    if "versions" in doc:  # a matrix: every version's outcomes
        rows = [r for v in doc["versions"] for r in v.get("results", [])]
    else:
        rows = doc.get("results", [])
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r.get("jax"), r.get("case"), r.get("target"), r.get("profile"), r.get("mode"))
        out[key] = {k: _mask(r.get(k)) if k == "reason" else _mask_dirs(r.get(k)) for k in COMPARED}
    return out


def _matrix_extras(doc: dict) -> dict[str, Any]:
    if "versions" not in doc:
        return {}
    return {
        "versions": [(v.get("jax"), v.get("status"), v.get("summary")) for v in doc["versions"]],
        "regressions": sorted(json.dumps(r, sort_keys=True) for r in doc.get("regressions", [])),
    }


def _changes(doc: dict) -> dict[tuple, dict]:
    """A matrix's adjacent-version changes by (case, target, profile, from, to)."""
    return {(c.get("case"), c.get("target"), c.get("profile"), c.get("from"), c.get("to")): c
            for c in doc.get("changes", [])}


def compare(before: dict, after: dict) -> list[str]:
    problems: list[str] = []
    b, a = _outcomes(before), _outcomes(after)
    for key in sorted(set(b) | set(a), key=str):
        name = "/".join(str(x) for x in key)
        if key not in a:
            problems.append(f"{name}: only before ({b[key]['outcome']})")
        elif key not in b:
            problems.append(f"{name}: only after ({a[key]['outcome']})")
        else:
            for field in COMPARED:
                if b[key][field] != a[key][field]:
                    problems.append(f"{name}: {field}: {json.dumps(b[key][field])[:300]} -> {json.dumps(a[key][field])[:300]}")
    cb, ca = _changes(before), _changes(after)
    for key in sorted(set(cb) | set(ca), key=str):
        name = "change " + "/".join(str(x) for x in key)
        if key not in ca or key not in cb:
            problems.append(f"{name}: only {'before' if key in cb else 'after'}")
            continue
        for field in ("class", "diffs", "lines"):
            if cb[key].get(field) != ca[key].get(field):
                if field == "lines":
                    lb = {(x["path"], x["class"], x["why"]) for x in cb[key]["lines"]}
                    la = {(x["path"], x["class"], x["why"]) for x in ca[key]["lines"]}
                    problems.append(f"{name}: lines: only before {sorted(lb - la)}; only after {sorted(la - lb)}")
                else:
                    problems.append(f"{name}: {field}: {json.dumps(cb[key].get(field))[:300]} -> "
                                    f"{json.dumps(ca[key].get(field))[:300]}")
    eb, ea = _matrix_extras(before), _matrix_extras(after)
    for field in sorted(set(eb) | set(ea)):
        if eb.get(field) != ea.get(field):
            problems.append(f"matrix {field} differ: {str(eb.get(field))[:300]} -> {str(ea.get(field))[:300]}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        before, after = (json.loads(Path(p).read_text()) for p in argv)
    except (OSError, ValueError) as exc:
        print(f"compare_outcomes: cannot read: {exc}", file=sys.stderr)
        return 2
    problems = compare(before, after)
    for p in problems:
        print(p)
    n = len(_outcomes(before))
    print(f"{n} outcome(s) before, {len(_outcomes(after))} after: "
          + ("identical (timings ignored)" if not problems else f"{len(problems)} difference(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
