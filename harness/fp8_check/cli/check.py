"""`fp8-check check module:function`: the fusion signature of one of your own JAX functions.

    fp8-check check mymodel:forward --arg x=bfloat16[64,128] --arg w=bfloat16[128,256]
    fp8-check check mymodel:forward --args mymodel:example_args --target h100,a100 --json -
    fp8-check check mymodel:forward --args mymodel:example_args --expect fp8_gemms=1 --expect epilogue=RELU

The function is imported from the current directory or PYTHONPATH and exported with
`jax.export` here; the compile worker compiles it for each target x profile (see
`fp8_check.api`). Arguments come from `--arg NAME=DTYPE[SHAPE]` (in order; `DTYPE[]` is a
scalar) or from `--args module:factory`, a function of no arguments returning a tuple
of positional arguments or a dict of keyword arguments (arrays or ShapeDtypeStructs).

Exit codes as `fp8-check run`: 0 compiled (and every `--expect`/golden holds), 1 a
difference, a missing golden, or a compile error, 2 bad input, 3 broken environment.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from fp8_check import platforms
from fp8_check.core import EXIT_ENV, EXIT_FAIL, EXIT_OK, EXIT_USAGE  # noqa: E402  (one home for exit codes)
from fp8_check.signature import baked_in
from fp8_check.verdict import FAIL, NEUTRAL, NEW, PASS, UNRESOLVED, GoldenError, Outcome, Verdict, classify_extra, diffs, path_for

if TYPE_CHECKING:  # the API starts JAX on import: the child process imports it when it checks
    from fp8_check.api import FusionReport
from fp8_check.cli._check_args import ArgSpec, CheckUsage, build_args, parse_arg, parse_expect, resolve
from fp8_check.compile import replays_autotune, target_devices
from fp8_check.core import OutputError, WriteError, check_file
from fp8_check.report import estimate_line, gemm_summary, kernels_text, price_hint, saving_from_loss, unsharded_note
from fp8_check.signature import KERNEL_CONVENTION, attributed, coverage, layer_table
from fp8_check.targets import PROFILES, load_target, platform_of, profile_alias, profile_applies, profile_label, resolve_mode
from fp8_check.verdict import LayerRuleError, answer, parse
from fp8_check.worker import target_view


def run_check(fn, label: str, args: tuple, kwargs: dict, targets: list[str], profiles: list[str], mode: str,
              expect: dict, goldens: Path | None, bless: bool, on_result=None,
              timeout: float | None = None, asked_outside: list[str] | None = None,
              ) -> list[tuple[Outcome, "FusionReport | None"]]:
    """Each target x profile as the one result record (`Outcome`: PASS, FAIL with its field diffs, NEW or
    UNRESOLVED), with the compiled `FusionReport` (None when the function did not compile)."""
    from fp8_check import api

    out: list[tuple[Outcome, FusionReport | None]] = []
    bless_hint = f"the same `fp8-check check` command plus `--golden {label} --bless`"  # not pytest's way: this is the CLI
    checker = api.Checker(mode, timeout=timeout)
    checker.asked_outside = list(asked_outside or [])
    checker.goldens_root = goldens  # deviceless `default` replays the autotune results committed beside them
    try:
        for t in targets:
            target = load_target(t)
            own = [p for p in profiles if profile_applies(p, target)] if profiles else [target.platform.canary_profile]
            if not own:
                raise CheckUsage(f"--profile: none of {', '.join(profiles)} is a profile of {target.platform.vendor} "
                                 f"targets ({t}: {', '.join(x.name for x in target.platform.profiles)})")
            for p in own:
                res = Outcome(label, t, p, checker.mode, "", PASS)
                try:
                    report = checker.signature(fn, *args, target=t, profile=p, name=label, **kwargs)
                except api.EnvironmentProblem:
                    raise
                except (ValueError, TypeError) as exc:
                    raise CheckUsage(str(exc)) from None
                except Exception as exc:  # the function does not trace or compile
                    res.code, res.reason = UNRESOLVED, f"{type(exc).__name__}: {exc}"
                    out.append((res, None))
                    if on_result:
                        on_result(res, None)
                    continue
                res.jax, res.signature, res.compile_seconds = report.jax, report.signature, report.seconds
                res.hlo, res.stablehlo, res.estimate = report.hlo, report.stablehlo, report.estimate()
                res.autotune = report.autotune  # deviceless `default`: which decisions a results file made
                res.not_representative = report.not_representative  # as `run` records it (also in --json)
                res.diffs = api.fusion_diffs(report.signature, **expect)
                for warning in report.warnings:
                    print(f"fp8-check check: warning: {label} on {t}/{profile_label(t, p)}: {warning}", file=sys.stderr)
                if report.warnings:  # also in the results file: the result's reason (a NEW's hint replaces it)
                    res.reason = "warning: " + "; ".join(report.warnings)
                for problem in baked_in(report.hlo, report.stablehlo):
                    print(f"fp8-check check: warning: {label} on {t}/{p}: {problem}: XLA may fold them (and FP8 scales) "
                          "at compile time, which makes the fusion rosier than with real inputs; pass parameters and FP8 "
                          "state as arguments (shapes only: jax.eval_shape(model.init, ...))", file=sys.stderr)
                if goldens is not None:
                    if bless:
                        diff = api.check_golden(report, goldens, bless=True, name=label)
                        res.reason = "golden changed" if diff else "golden unchanged"
                    else:
                        judged = api.judge_golden(report, goldens, name=label)  # as check_golden and `run` judge
                        if judged.code is NEW:  # nothing blessed, or no regression against the nearest release's
                            res.code = NEW
                            res.reason = api.new_golden_message(report, judged, path_for(
                                goldens, label, report.target, report.profile, report.mode), how=bless_hint)
                            res.diffs += judged.diffs  # the differences from the nearest golden, listed
                            res.verdict, res.expected = judged.verdict, judged.expected
                        elif judged.diffs:
                            res.diffs += judged.diffs
                            res.verdict, res.expected = judged.verdict, judged.expected
                        if judged.code is not NEW and judged.reason.startswith("against the golden of"):
                            res.reason = judged.reason  # this release has no golden of its own: says whose
                # a gemm the platform's library has no kernel for (the golden's judge already added it)
                unrunnable = [d for d in diffs(report.signature, platform_of(t)) if d not in res.diffs]
                res.diffs += unrunnable
                for d in unrunnable:
                    res.verdict = classify_extra(res.verdict or Verdict(NEUTRAL), d.path, d.expected, d.found)
                if res.diffs:
                    res.code = FAIL
                elif goldens is None and not expect and res.code is PASS:  # nothing asserted: its first word says so
                    res.reason = NOTHING_JUDGED + (f"; {res.reason}" if res.reason else "")
                out.append((res, report))
                if on_result:
                    on_result(res, report)
    finally:
        checker.close()
    return out


NOTHING_JUDGED = ("nothing to judge against: no golden and no --expect, so this is what compiled, not a check; "
                  "`--golden NAME --bless` records a golden, `--expect`/`--expect-layer` state facts")


def _word(res: Outcome) -> str:
    """A result's first word: its code, or COMPILED for a PASS that asserted nothing (its reason says so)."""
    return "COMPILED" if res.code is PASS and res.reason.startswith(NOTHING_JUDGED) else res.code.name


def _print_result(res: Outcome, report: "FusionReport | None", label: str, verbose: bool = False) -> None:
    """The verdict with the FP8 answer first, then a missing-FP8 line, the differences, the layer table and the
    coverage line; kernels, gemms and unfused ops under -v."""
    import yaml

    fp8 = answer(res)
    line = f"{_word(res):<11} {res.target}/{profile_label(res.target, res.profile):<7} {label}" + (f"  {fp8.headline}" if fp8.headline else "")
    if report is not None:
        line += f"  ({gemm_summary(report.signature) if verbose else kernels_text(report.signature)}) {report.seconds:.2f}s"
    if res.autotune is not None:  # deviceless `default`: whose autotuned decisions, as `run` says it
        line += f"  [{res.autotune.line()}]"
    if res.verdict is not None:
        line += f"  [{res.verdict.cls}]"
    print(line)
    if fp8.line():
        print(f"      {'warning: ' if fp8.warns else ''}{fp8.line()}")
    sharding = unsharded_note(res if res.hlo or report is None else replace(res, hlo=report.hlo))
    if sharding:
        print(f"      {sharding}")
    if res.verdict is not None and saving_from_loss(res):
        print(f"      {price_hint(res)}")
    for d in res.diffs:
        print(f"      {d}")
    if res.reason:
        print(f"      {res.reason}")
    if res.not_representative:
        print(f"      NOT REPRESENTATIVE: {res.not_representative}")
    if report is not None:
        platform = platform_of(report.target)
        if attributed(report.signature):
            print("  layers:")
            for row in layer_table(report.signature, platform):
                print(f"    {row}")
        print(f"  {coverage(report.signature, platform).line()}")
        est = report.estimate()
        if est is not None:
            print(f"  estimate: {estimate_line(est)}")
        if res.verdict is not None and res.verdict.cost is not None and not saving_from_loss(res):
            print(f"  cost against the golden: {res.verdict.cost.text()} ({res.verdict.cost.detail()})")
        if report.signature.collectives:
            print(f"  collectives: {len(report.signature.collectives)}")
            for c in report.signature.collectives:
                print(f"    {c.text()}")
        sig = report.signature.to_dict()
        if not verbose:
            print(f"  ({sig['kernels']} kernels, {len(sig['gemms'])} gemms, unfused: {', '.join(sig['unfused']) or 'none'}; "
                  "every kernel and gemm with -v)")
        else:
            print(f"  kernels: {sig['kernels']}  ({KERNEL_CONVENTION})")
            for launch in sig["launches"]:
                print(f"    {launch}")
            print(f"  gemms: {len(sig['gemms'])} ({report.fp8_gemms} on FP8 operands)")
            for i, g in enumerate(sig["gemms"]):
                print(f"    [{i}] " + yaml.safe_dump(g, default_flow_style=True, width=10_000, sort_keys=False).strip())
            print(f"  unfused: {', '.join(sig['unfused']) or '(none)'}")
    sys.stdout.flush()


def print_across_targets(results: list[Outcome]) -> None:
    """Where FP8 holds and where it does not, one line per target x profile, side by side."""
    width = max(len(f"{r.target}/{profile_label(r.target, r.profile)}") for r in results)
    wide = max(len(answer(r).headline or "no matmul") for r in results)
    print("\nFP8 across targets:")
    for r in results:
        fp8 = answer(r)
        print(f"  {r.target + '/' + profile_label(r.target, r.profile):<{width}}  {_word(r):<10} {fp8.headline or 'no matmul':<{wide}}"
              + (f"  {fp8.line()}" if fp8.line() else ""))


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def register(subparsers) -> dict:
    from fp8_check.run import add_timeout  # start-up of the checking child: see tests/house/test_imports.py

    p = subparsers.add_parser("check", help="print the fusion signature of your own JAX function (module:function)")
    p.add_argument("function", help="module:function, imported from the current directory or PYTHONPATH")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=DTYPE[SHAPE]",
                   help="an argument, in order (repeat): x=bfloat16[64,128]; DTYPE[] is a scalar")
    p.add_argument("--args", dest="factory", metavar="MODULE:FACTORY",
                   help="a function returning the arguments (a tuple, or a dict of keyword arguments)")
    p.add_argument("--target", default=platforms.default_target(), help=f"target(s), comma-separated (default: {platforms.default_target()})")
    firsts = ", ".join(dict.fromkeys(pl.canary_profile for pl in platforms.registered() if pl.canary_profile))
    p.add_argument("--profile", help=f"profile(s), comma-separated: {', '.join(platforms.profiles())} (default: each target's "
                                     f"first: {firsts}); a profile of another platform's targets is skipped")
    p.add_argument("--mode", default="deviceless", choices=("auto", "deviceless", "device"), help="default: deviceless")
    p.add_argument("--expect", action="append", default=[], metavar="KEY=VALUE",
                   help="expected fusion (repeat): kernels=N, gemms=N, fp8_gemms=N, epilogue=RELU, damax=true, "
                        "fp8_output=true, no_upcast_dot=true")
    p.add_argument("--expect-layer", action="append", default=[], metavar="PATTERN[@PASS]=fp8|wide",
                   help="every matmul of the layers matching the glob (against the layer path from the HLO metadata, "
                        "e.g. '*/Dense_[01]/*'; PASS: forward, backward, backward-input, backward-weight) runs in "
                        "FP8/FP4 (fp8) or wider (wide); repeat")
    p.add_argument("--golden", metavar="NAME", help="also compare with the golden NAME under --goldens (the run layout)")
    p.add_argument("--goldens", type=Path, default=Path("goldens"), help="goldens directory (default: goldens/)")
    p.add_argument("--bless", action="store_true", help="with --golden: record the signature as the golden instead")
    from fp8_check.report import (  # the parent's parser only: see tests/house/test_imports.py
        ResultsJson,
        add_options,
    )

    add_options(p, {}, formats=(ResultsJson,), stdout=True)

    p.add_argument("-v", "--verbose", action="store_true", help="also every kernel launch and every gemm")
    add_timeout(p)
    return {"check": cmd_check}


def cmd_check(args) -> int:
    """Validate the options here, then run the user's code in a child process (fp8_check.compile._check_process)."""
    try:
        _validate(args)
    except CheckUsage as exc:
        print(f"fp8-check check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from fp8_check.compile import run  # the parent's side only: see tests/house/test_imports.py

    limit = args.timeout * max(1, len(_csv(args.target)) * len(_csv(args.profile or "")))
    options = {k: v for k, v in vars(args).items() if k != "func"}
    return run(options, limit, args.function)


def cmd_check_here(options: dict) -> int:
    """The check itself, in this process, with the parent's options (JSON values): the child process of
    `cmd_check` runs it."""
    args = argparse.Namespace(**options)
    args.goldens = Path(args.goldens)
    try:
        return _cmd_check(args)
    except CheckUsage as exc:
        print(f"fp8-check check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except WriteError as exc:
        print(f"fp8-check check: {exc.strerror}", file=sys.stderr)
        return EXIT_ENV
    except OutputError as exc:  # the results file could not be written (core/_outputs.py's policy)
        print(f"fp8-check check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _validate(args) -> tuple[list[ArgSpec], dict, list[str], list[str], str]:
    """Everything about the options that needs none of the user's code; CheckUsage when one is bad."""
    if args.arg and args.factory:
        raise CheckUsage("give --arg NAME=DTYPE[SHAPE] ... or --args MODULE:FACTORY, not both")
    if args.bless and not args.golden:
        raise CheckUsage("--bless records a golden: give its name with --golden NAME")
    specs = [parse_arg(a) for a in args.arg]
    expect = parse_expect(args.expect)
    if args.expect_layer:
        try:
            expect["layers"] = [parse(x) for x in args.expect_layer]
        except LayerRuleError as exc:
            raise CheckUsage(str(exc)) from None
    targets = _csv(args.target)
    for t in targets:
        try:
            load_target(t)
        except KeyError as exc:
            raise CheckUsage(f"--target: {exc.args[0]}") from None
    profiles = list(dict.fromkeys(profile_alias(p) for p in _csv(args.profile or "")))  # `hipblaslt` is AMD's cublas
    for p in profiles:
        if p not in PROFILES:
            raise CheckUsage(f"--profile: unknown profile '{p}'; allowed: {', '.join(PROFILES)}")
    mode = resolve_mode(args.mode)
    if mode == "deviceless":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")  # only tracing happens here; never touch a GPU
        # `default` deviceless replays autotune results on NVIDIA targets (fp8_check.compile._autotune_replay)
        bad = [(p, t) for p in profiles for t in targets
               if not PROFILES[p].deviceless and not replays_autotune(p, load_target(t))]
        if bad:
            raise CheckUsage(f"--profile {bad[0][0]}: autotunes and needs a real GPU (--mode device)"
                             + (f"; deviceless it replays autotune results on NVIDIA targets only, not on {bad[0][1]}"
                                if bad[0][0] == "default" else ""))
    for spec in [args.function] + ([args.factory] if args.factory else []):
        module, sep, attr = spec.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z_][\w.]*", module) or not re.fullmatch(r"[A-Za-z_][\w.]*", attr):
            raise CheckUsage(f"{'--args' if spec is args.factory else 'check'} {spec!r}: expected module:function "
                             "(e.g. mymodel:forward)")
    if args.golden and not re.fullmatch(r"[A-Za-z0-9_.-]+", args.golden):
        raise CheckUsage(f"--golden {args.golden!r}: use letters, digits, '_', '.', '-'")
    if args.json and args.json != "-":
        try:
            check_file(args.json, "--json")
        except OutputError as exc:
            raise CheckUsage(str(exc)) from None
    return specs, expect, targets, profiles, mode


def _cmd_check(args) -> int:
    specs, expect, targets, profiles, mode = _validate(args)
    json_out = None
    if args.json == "-":  # stdout carries the JSON alone: what the checked code prints goes to stderr
        sys.stdout.flush()
        json_out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    from fp8_check import api  # before the checked module imports JAX: its CPU-only hook runs at import

    # Importing the module and calling the factory see the first target's devices, as the tracing does
    # (api.Checker): code that asks jax.devices() at import, or a library that caches what it said (qwix), must
    # not take this machine's CPU path. What this machine answered instead (a backend) marks every result.
    first = load_target(targets[0])
    with target_view((lambda: target_devices(first, first.versions_dict())) if mode == "deviceless" else None) as view:
        fn = resolve(args.function, "check")
        factory = resolve(args.factory, "--args") if args.factory else None
        call_args, call_kwargs = build_args(specs, factory)
    asked_outside = view.local if mode == "deviceless" else []
    label = args.golden or args.function.replace(":", ".")
    quiet = args.json == "-"

    try:
        results = run_check(fn, label, call_args, call_kwargs, targets, profiles, mode, expect,
                            args.goldens if args.golden else None, args.bless,
                            on_result=None if quiet else (lambda r, rep: _print_result(r, rep, label, bool(getattr(args, "verbose", False)))),
                            timeout=getattr(args, "timeout", None), asked_outside=asked_outside)
    except api.EnvironmentProblem as exc:
        print(f"fp8-check check: broken environment: {exc}", file=sys.stderr)
        return EXIT_ENV
    except GoldenError as exc:
        raise CheckUsage(str(exc)) from None
    if len(results) > 1 and not quiet:
        print_across_targets([r for r, _ in results])
    if args.json:  # the standard results file (schema fp8-check/results/2), as `run` writes it
        from fp8_check.report import ResultsJson, print_results, write  # after the check: see tests/house/test_imports.py
        from fp8_check.run import Results

        outcomes = [r for r, _ in results]
        env = {"jax": next((r.jax for r in outcomes if r.jax), ""), "mode": mode, "targets": targets,
               "profiles": profiles, "function": args.function,
               "compiler_options": {p: PROFILES[p].compiler_options for p in profiles}}
        res = Results(env, outcomes, target_specs={t: load_target(t).config_text for t in targets})
        if json_out is not None:
            print_results(res, json_out)
        else:
            write([(ResultsJson(), Path(args.json))], [res])
    return EXIT_FAIL if any(r.code.is_failure for r, _ in results) else EXIT_OK


if __name__ == "__main__":  # the child process of `fp8-check check` (fp8_check.compile._check_process)
    from fp8_check.compile import child

    child(cmd_check_here, sys.argv[1:])
