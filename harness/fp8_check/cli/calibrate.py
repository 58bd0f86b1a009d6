"""The command half of fp8_check.gpu._calibrate (the gpu stage): the subcommands it registers."""

from __future__ import annotations

import os
import sys

from fp8_check import platforms
from fp8_check.core import EXIT_ENV, EXIT_OK
from fp8_check.gpu import NO_GPU, measure, table
from fp8_check.run import UsageError, add_options, comma_list, load_cases, targets_from
from fp8_check.targets import PROFILES, gpu_present


def register(sub) -> dict:
    p = sub.add_parser("calibrate", help="print the cost model's estimates next to times measured on the local GPU")
    add_options(p)
    p.add_argument("--repeats", type=int, default=50, help="timed calls per case (default 50; median)")
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu",
                   help="gpu (default); cpu: time JAX's CPU backend (checks the machinery, not the model)")
    p.set_defaults(profile=platforms.default_profile())
    return {"calibrate": cmd_calibrate}


def cmd_calibrate(args) -> int:
    if args.backend == "gpu" and not gpu_present():
        print(f"fp8-check calibrate: {NO_GPU}", file=sys.stderr)
        return EXIT_ENV
    if args.backend == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"  # before JAX is imported: the CUDA plugin is not initialised
    cases = load_cases(args.paths, args.filter)
    [target] = targets_from(args.target)[:1]
    rows = []
    for name in comma_list(args.profile):
        if name not in PROFILES:
            raise UsageError(f"--profile: unknown profile '{name}'; allowed: {', '.join(PROFILES)}")
        for case in cases:
            if case.timed_at() is None or (case.targets and target.name not in case.targets) or name not in case.profiles:
                continue
            try:
                rows.append(measure(case, target, PROFILES[name], args.repeats, args.backend))
            except Exception as exc:  # one case that does not compile or run never stops the others
                print(f"{case.id} ({name}): not measured: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    print(table(rows))
    return EXIT_OK
