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
Both versions compile in their own long-lived workers (fp8_check.versions.envs).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from fp8_check.cases import cases as case_mod
from fp8_check.verdict import comparator
from fp8_check.cases import kinds
from fp8_check.compile import render
from fp8_check.compile.compile import Compiler
from fp8_check.signature.signature import extract
from fp8_check.run import selection
from fp8_check.targets import PROFILES, load_target
from fp8_check.versions.envs import InstallError, Manager
from fp8_check.versions.releases import VersionError, available, parse_version

def case_fields(case: case_mod.Case) -> dict:
    """The kind's fields of `case` that differ from the schema defaults (what a case YAML needs)."""
    return kinds.of(case).reduction_fields(case)


def to_yaml(case: case_mod.Case) -> str:
    doc = {"id": case.id}
    if case.description:
        doc["description"] = case.description
    doc.update(case_fields(case))
    return yaml.safe_dump({"cases": [doc]}, sort_keys=False, default_flow_style=None)


def _load(fields: dict, case_id: str, description: str) -> case_mod.Case | None:
    """A validated case with these fields, or None if the schema rejects the combination."""
    doc = {"id": case_id, "description": description, **fields}
    try:
        return case_mod.from_mapping(doc, "<reduce>")  # validated as a case file's entry, without writing one
    except case_mod.CaseError:
        return None


def candidates(case: case_mod.Case, fields: dict) -> list[tuple[str, dict]]:
    """(what is dropped, the simplified fields), simplest-first: the kind's own reduction steps."""
    return kinds.of(case).simplifications(fields)


@dataclass
class Reduction:
    original: case_mod.Case
    reduced: case_mod.Case
    fields: list[str]  # the signature fields that differ (the regression)
    dropped: list[str] = field(default_factory=list)
    tried: int = 0


class RegressionError(RuntimeError):
    """The case does not show a regression between the two versions (or does not compile)."""


def _top_fields(a: dict, b: dict) -> set[str]:
    return {d.path.split(".")[0].split("[")[0] for d in comparator.compare(a, b)}


def reduce(case: case_mod.Case, target, profile, good: str, bad: str, manager=None, log=print) -> Reduction:
    manager = manager or Manager()
    envs = {v: manager.ensure(v) for v in (good, bad)}
    compilers = {v: Compiler("deviceless", python=str(e.python)) for v, e in envs.items()}
    try:
        def sigs(c: case_mod.Case) -> dict | None:
            out = {}
            for v, comp in compilers.items():
                res = comp.compile(render.render(c), target, profile)
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


def register(subparsers) -> dict:
    p = subparsers.add_parser("reduce", help="drop case features one at a time while a regression between two JAX versions persists")
    p.add_argument("case", help="case id")
    selection.add_options(p)
    p.add_argument("--jax", required=True, help="the bad JAX version")
    p.add_argument("--good", help="the good JAX version (default: the release just before --jax)")
    p.set_defaults(mode="deviceless")
    return {"reduce": cmd_reduce}


def cmd_reduce(args) -> int:
    def usage(msg: str) -> int:
        print(f"fp8-check reduce: error: {msg}", file=sys.stderr)
        return 2

    try:
        found = [c for c in case_mod.load(args.paths or [Path("cases")]) if c.id == args.case]
    except case_mod.CaseError as exc:
        return usage(str(exc))
    if not found:
        return usage(f"no case with id '{args.case}'")
    case = found[0]
    if not kinds.of(case).REDUCIBLE:
        return usage(f"case '{case.id}' is kind: {case.kind}; only pattern cases can be reduced")
    if "," in args.target:
        return usage("--target: reduce one target at a time")
    try:
        target = load_target(args.target)
    except KeyError as exc:
        return usage(f"--target: {exc.args[0]}")
    profile_name = args.profile or "cublas"
    if profile_name not in PROFILES or not PROFILES[profile_name].deviceless:
        return usage(f"--profile: '{profile_name}' is not a deviceless profile (cublas, triton)")
    try:
        bad = str(parse_version(args.jax))
        if args.good:
            good = str(parse_version(args.good))
        else:
            older = [v for v in available() if parse_version(v) < parse_version(bad)]
            if not older:
                return usage(f"--jax {bad}: no older release to compare with; give --good")
            good = older[-1]
    except VersionError as exc:
        return usage(str(exc))
    print(f"fp8-check reduce: {case.id} on {target.name}/{profile_name}, jax {good} (good) -> {bad}", flush=True)
    try:
        red = reduce(case, target, PROFILES[profile_name], good, bad, log=lambda s: print(s, flush=True))
    except RegressionError as exc:
        print(f"fp8-check reduce: {exc}", file=sys.stderr)
        return 1
    except InstallError as exc:
        print(f"fp8-check reduce: cannot install jax: {exc}", file=sys.stderr)
        return 3
    print(f"\ndropped: {', '.join(red.dropped) or 'nothing'} ({red.tried} candidates compiled)")
    print(f"# minimal case: {', '.join(red.fields)} still differ between jax {good} and {bad}")
    print(to_yaml(red.reduced), end="")
    return 0
