"""The command half of fp8_check.upstream._reduce (the upstream stage): the subcommands it registers."""

from __future__ import annotations

import sys
from pathlib import Path

from fp8_check import platforms
from fp8_check.cases import CaseError, kind_of, load
from fp8_check.run import add_options
from fp8_check.targets import PROFILES, load_target
from fp8_check.upstream import RegressionError, reduce, to_yaml
from fp8_check.versions import InstallError, VersionError, available, parse_version


def register(subparsers) -> dict:
    p = subparsers.add_parser("reduce", help="drop case features one at a time while a regression between two JAX versions persists")
    p.add_argument("case", help="case id")
    add_options(p)
    p.add_argument("--jax", required=True, help="the bad JAX version")
    p.add_argument("--good", help="the good JAX version (default: the release just before --jax)")
    p.set_defaults(mode="deviceless")
    return {"reduce": cmd_reduce}


def cmd_reduce(args) -> int:
    def usage(msg: str) -> int:
        print(f"fp8-check reduce: error: {msg}", file=sys.stderr)
        return 2

    try:
        found = [c for c in load(args.paths or [Path("cases")]) if c.id == args.case]
    except CaseError as exc:
        return usage(str(exc))
    if not found:
        return usage(f"no case with id '{args.case}'")
    case = found[0]
    if not kind_of(case).REDUCIBLE:
        return usage(f"case '{case.id}' is kind: {case.kind}; only pattern cases can be reduced")
    if "," in args.target:
        return usage("--target: reduce one target at a time")
    try:
        target = load_target(args.target)
    except KeyError as exc:
        return usage(f"--target: {exc.args[0]}")
    profile_name = args.profile or platforms.default_profile()
    if profile_name not in PROFILES or not PROFILES[profile_name].deviceless:
        return usage(f"--profile: '{profile_name}' is not a deviceless profile "
                     f"({', '.join(n for n, p in PROFILES.items() if p.deviceless)})")
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
