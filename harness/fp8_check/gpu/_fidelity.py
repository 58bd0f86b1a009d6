"""`fp8-check fidelity`: how faithful is deviceless compilation to compiling on the real GPU?

Every selected case is compiled deviceless for the target spec (each pinned
profile: cublas, triton) and on the local GPU (the autotuned `default` profile
and the pinned profiles), and the fusion signatures are compared:

  pinned     deviceless P  vs  device P         (same XLA options: differences
                                                 come from the target spec alone)
  autotuned  deviceless P  vs  device default   (what the pinned profile misses
                                                 of what autotuning picks)
  replayed   deviceless default  vs  device default   (deviceless `default` replaying the
                                                 device's autotune results: fp8_check.compile._autotune_replay)

The table goes to a Markdown file and a JSON file. Without a GPU the command
can still build the table from two results files of `fp8-check run`
(`--from DEVICELESS.json DEVICE.json`), which is also how its logic is tested on
CPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from fp8_check import platforms
from fp8_check.compile import ReplayCompiler, case_options, render, results_for
from fp8_check.core import atomic_write
from fp8_check.report import md_inline
from fp8_check.run import Results, UsageError
from fp8_check.signature import Signature, extract
from fp8_check.targets import PROFILES, AutotuneResultsError
from fp8_check.verdict import UNSUPPORTED, FieldDiff, compare

SCHEMA = "fp8-check/fidelity/2"

PINNED = tuple(p.name for p in platforms.DEFAULT.profiles if p.deviceless)
DEVICE_PROFILES = ("default",) + PINNED


@dataclass
class Cell:
    case: str
    left: str  # "deviceless/cublas"
    right: str  # "device/default"
    status: str  # agree, differ, error, missing
    diffs: list[FieldDiff] = field(default_factory=list)  # expected: the left side, found: the right side
    detail: str = ""

    def text(self, limit: int = 2) -> str:
        if self.status == "agree":
            return "agree"
        if self.status == "differ":
            shown = "; ".join(md_inline(d) for d in self.diffs[:limit])  # md_inline escapes | too
            more = f"; +{len(self.diffs) - limit} more" if len(self.diffs) > limit else ""
            return f"**differ**: {shown}{more}"
        if self.status == "missing":
            return "not run"
        return "error: " + md_inline(self.detail.splitlines()[0][:120]) if self.detail else "error"


    def to_json(self) -> dict:
        return {"case": self.case, "left": self.left, "right": self.right, "status": self.status,
                "diffs": [d.to_json() for d in self.diffs], "detail": self.detail}


@dataclass(frozen=True)
class Compiled:
    """One side of a comparison: the signature, or why there is none."""

    signature: Signature | None = None
    error: str = ""


# By (case, "mode/profile"), e.g. ("seed_relu_f32", "deviceless/cublas")
Signatures = dict[tuple[str, str], Compiled]


REPLAYED = "deviceless/default"  # deviceless `default` with the device's autotune results replayed


def comparisons() -> list[tuple[str, str, str]]:
    """(column title, left side, right side) of the table, in order."""
    cols = [(f"{p}: deviceless vs device", f"deviceless/{p}", f"device/{p}") for p in PINNED]
    cols += [(f"{p} (deviceless) vs default (device)", f"deviceless/{p}", "device/default") for p in PINNED]
    cols += [("default: deviceless (autotune replayed) vs device", REPLAYED, "device/default")]
    return cols


def agreement(cells: list[Cell], sigs: Signatures, left: str = REPLAYED, right: str = "device/default") -> dict:
    """Over the cases compiled on both sides of one column: how many agree on the gemm engines (the gemms'
    targets, in order) and on the launch list."""
    both = [(sigs[(c.case, left)].signature, sigs[(c.case, right)].signature) for c in cells
            if c.left == left and c.right == right and c.status in ("agree", "differ")]
    pairs = [(a, b) for a, b in both if a is not None and b is not None]
    engine = sum([g.target for g in a.gemms] == [g.target for g in b.gemms] for a, b in pairs)
    launches = sum(a.launches == b.launches for a, b in pairs)
    return {"cases": len(pairs), "gemm_engine": engine, "launches": launches}


def compare_one(case: str, left: str, right: str, sigs: Signatures) -> Cell:
    a, b = sigs.get((case, left)), sigs.get((case, right))
    if a is None or b is None:
        return Cell(case, left, right, "missing")
    errors = [f"{side}: {x.error}" for side, x in ((left, a), (right, b)) if x.signature is None]
    if errors or a.signature is None or b.signature is None:
        return Cell(case, left, right, "error", detail="; ".join(errors))
    diffs = compare(a.signature.to_dict(), b.signature.to_dict())
    return Cell(case, left, right, "differ" if diffs else "agree", diffs)


def build(sigs: Signatures) -> list[Cell]:
    cases = sorted({c for c, _ in sigs})
    return [compare_one(case, left, right, sigs) for case in cases for _, left, right in comparisons()]


def markdown(cells: list[Cell], meta: dict) -> str:
    cols = comparisons()
    by = {(c.case, c.left, c.right): c for c in cells}
    cases = sorted({c.case for c in cells})
    lines = ["# Deviceless fidelity", ""]
    for key in ("left", "right", "target", "device", "jax", "created", "note", "autotune_results"):
        if meta.get(key):
            lines.append(f"- {key}: {md_inline(meta[key])}")
    agreed = meta.get("replayed_agreement") or {}
    if agreed.get("cases"):
        n = agreed["cases"]
        lines.append(f"- deviceless `default` (replayed) vs device `default`: gemm engine agrees in {agreed['gemm_engine']} "
                     f"of {n} cases ({100 * agreed['gemm_engine'] / n:.0f} %), launch list in {agreed['launches']} "
                     f"({100 * agreed['launches'] / n:.0f} %)")
    for case, text in sorted((meta.get("autotune_coverage") or {}).items()):  # HLO and paths from XLA's log: inert
        lines.append(f"- autotune replay, {md_inline(case)}: {md_inline(text)}")
    counts = {s: sum(c.status == s for c in cells) for s in ("agree", "differ", "error", "missing")}
    lines += ["", "Summary: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n), ""]
    lines.append("| case | " + " | ".join(title for title, _, _ in cols) + " |")
    lines.append("|---" * (len(cols) + 1) + "|")
    for case in cases:
        lines.append(f"| {md_inline(case)} | " + " | ".join(by[(case, left, right)].text() for _, left, right in cols) + " |")
    return "\n".join(lines) + "\n"


def document(cells: list[Cell], meta: dict) -> dict:
    return {"schema": SCHEMA, **meta, "cells": [c.to_json() for c in cells]}


def from_results(deviceless: Results, device: Results) -> Signatures:
    """Signatures from two `fp8-check run` results: the first is the deviceless side, the second the device side."""
    sigs: Signatures = {}
    for side, res in (("deviceless", deviceless), ("device", device)):
        for o in res.outcomes:
            key = (o.case, f"{side}/{o.profile}")
            if o.signature is not None:
                sigs[key] = Compiled(o.signature)
            elif o.code is UNSUPPORTED:
                continue  # not run on that side (e.g. `default` deviceless): a missing cell
            else:
                sigs[key] = Compiled(error=o.reason or o.code.name)
    return sigs


def collect(compiler, cases, target, profiles, side: str, sigs: Signatures) -> None:
    """Compile `cases` for `target` with each profile; record signatures (or errors) under `side`."""
    for case in cases:
        for name in profiles:
            if name not in case.profiles:
                continue
            comp = compiler.compile(render(case), target, PROFILES[name], optional_options=case_options(case))
            key = (case.id, f"{side}/{name}")
            if not comp.ok:
                sigs[key] = Compiled(error=comp.error or "unknown error")
                continue
            try:
                sigs[key] = Compiled(extract(comp.hlo))
            except Exception as exc:
                sigs[key] = Compiled(error=f"could not parse the optimized HLO: {type(exc).__name__}: {exc}")


def autotune_results_for(given: Path | None, target: str, jax_version: str) -> Path | None:
    """The results file deviceless `default` replays: `given` (a file, or a folder holding <jax>.txt), else the
    committed one for `target` and this JAX (None: XLA's deviceless defaults, said in the table)."""
    try:
        return results_for(target, jax_version, given=given)
    except AutotuneResultsError as exc:
        raise UsageError(f"--autotune-results: {exc}" if given is not None else str(exc)) from None


def collect_replayed(cases, target, results: Path | None, sigs: Signatures) -> dict[str, str]:
    """Deviceless `default` of every case, replaying `results`; what the file covered, by case."""
    coverage: dict[str, str] = {}
    with ReplayCompiler() as rc:
        for case in cases:
            try:
                got = rc.compile(render(case), target, results, optional_options=case_options(case))
            except AutotuneResultsError as exc:
                raise UsageError(f"--autotune-results: {exc}") from None
            coverage[case.id] = got.coverage.summary()
            if not got.compilation.ok or got.compilation.hlo is None:
                sigs[(case.id, REPLAYED)] = Compiled(error=got.compilation.error or "no optimized HLO")
                continue
            try:
                sigs[(case.id, REPLAYED)] = Compiled(extract(got.compilation.hlo))
            except Exception as exc:
                sigs[(case.id, REPLAYED)] = Compiled(error=f"could not parse the optimized HLO: {type(exc).__name__}: {exc}")
    return coverage


def write(cells: list[Cell], meta: dict, md_path: Path, json_path: Path) -> None:
    atomic_write(Path(md_path), markdown(cells, meta))
    atomic_write(Path(json_path), json.dumps(document(cells, meta), indent=1) + "\n")


# ------------------------------------------------------------ CLI
