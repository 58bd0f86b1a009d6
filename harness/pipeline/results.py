"""Stage 6: report outcomes — one line per case on the terminal, and the versioned results JSON."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TextIO

from harness.pipeline.golden import atomic_write
from harness.pipeline.runner import ALL_CODES, BAD_CODES, Outcome

SCHEMA = "fp8-check/results/1"

_COLORS = {
    "PASS": "32", "XFAIL": "36", "UNSUPPORTED": "33", "FAIL": "31;1", "XPASS": "35;1",
    "UNRESOLVED": "31;1", "NEW": "34;1",
}


def _paint(code: str, stream: TextIO) -> str:
    if hasattr(stream, "isatty") and stream.isatty():
        return f"\033[{_COLORS.get(code, '0')}m{code}\033[0m"
    return code


def gemm_summary(sig: dict | None) -> str:
    if not sig:
        return ""
    gemms = sig.get("gemms", [])
    parts = []
    for g in gemms:
        text = f"{g['target']} {'x'.join(g['operand_dtypes'])}->{g.get('output', '?')}"
        if g.get("epilogue") and g["epilogue"] != "DEFAULT":
            text += f" {g['epilogue']}"
        if g.get("amax"):
            text += " +amax"
        parts.append(text)
    return f"{sig['kernels']} kernel{'s' if sig['kernels'] != 1 else ''}; " + ("; ".join(parts) if parts else "no gemm")


def print_outcome(out: Outcome, stream: TextIO | None = None, verbose: bool = False) -> None:
    stream = stream or sys.stdout
    line = f"{_paint(out.code, stream):<11} {out.target}/{out.profile:<7} {out.case}"
    detail = gemm_summary(out.signature)
    if detail:
        line += f"  ({detail})"
    if out.compile_seconds:
        line += f" {out.compile_seconds:.2f}s"
    print(line, file=stream)
    if out.code == "FAIL" or (verbose and out.diffs):
        for d in out.diffs:
            print(f"      {d}", file=stream)
    if out.code in ("UNRESOLVED", "UNSUPPORTED", "NEW", "XPASS", "XFAIL") and out.reason:
        text = out.reason if verbose or out.code != "UNRESOLVED" else out.reason.strip().splitlines()[0]
        print(f"      {text}", file=stream)
    stream.flush()


def summary(outcomes: list[Outcome]) -> Counter:
    return Counter(o.code for o in outcomes)


def print_summary(outcomes: list[Outcome], stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    counts = summary(outcomes)
    parts = [f"{counts[c]} {c}" for c in ALL_CODES if counts[c]]
    print(f"\n{len(outcomes)} results: " + (", ".join(parts) if parts else "nothing ran"), file=stream)
    bad = [o for o in outcomes if o.code in BAD_CODES]
    if bad:
        print("Not OK:", file=stream)
        for o in bad:
            print(f"  {o.code:<10} {o.target}/{o.profile} {o.case}", file=stream)


def document(outcomes: list[Outcome], environment: dict, run_info: dict, with_text: bool = True) -> dict:
    counts = summary(outcomes)
    return {
        "schema": SCHEMA,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "environment": {**environment, **run_info},
        "summary": {c: counts[c] for c in ALL_CODES},
        "results": [o.to_dict(with_text) for o in outcomes],
    }


def write(path: Path, doc: dict) -> None:
    atomic_write(Path(path), json.dumps(doc, indent=1, sort_keys=False) + "\n")


def load(path: Path) -> dict:
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("fp8-check/results/"):
        raise ValueError(f"{path}: not an fp8-check results file (no 'schema': '{SCHEMA}')")
    return doc
