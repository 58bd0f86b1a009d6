"""The `fp8-check` command line.

Exit codes: 0 every outcome is PASS/XFAIL/UNSUPPORTED; 1 any FAIL/XPASS/UNRESOLVED/NEW;
2 bad input or usage; 3 broken environment (the canary, or JAX/the CUDA plugin missing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.pipeline import cases as case_mod
from harness.pipeline import golden
from harness.pipeline import render
from harness.pipeline import results
from harness.pipeline import runner
from harness.pipeline import signature
from harness.pipeline.compile import Compiler, WorkerError
from harness.targets import MODES, PROFILES, load_target, resolve_mode, target_names

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_ENV = 0, 1, 2, 3


class UsageError(Exception):
    pass


class BrokenEnvironment(Exception):
    pass


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _add_selection(p: argparse.ArgumentParser, paths: bool = True) -> None:
    if paths:
        p.add_argument("paths", nargs="*", type=Path, help="case files or directories (default: cases/)")
    p.add_argument("-k", dest="filter", help="only cases whose id contains this text (alternatives separated by ',')")
    p.add_argument("--target", default="h100", help=f"target(s), comma-separated: {', '.join(target_names())} (default: h100)")
    p.add_argument("--profile", help="profile(s), comma-separated: cublas, triton, default (default: every profile the mode supports)")
    p.add_argument("--mode", default="auto", choices=MODES, help="deviceless: compile for the target spec without a GPU; device: on the local GPU; auto: device if a GPU is present (default)")
    p.add_argument("--goldens", type=Path, default=Path("goldens"), help="goldens directory (default: goldens/)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fp8-check", description="Regression tests for XLA's FP8 matmul fusions.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="compile cases and check their fusion signatures against goldens")
    _add_selection(p)
    p.add_argument("--json", type=Path, default=Path("reports/results.json"), help="results JSON (default: reports/results.json)")
    p.add_argument("--html", type=Path, help="HTML report (default: report.html next to the results JSON)")
    p.add_argument("-v", "--verbose", action="store_true", help="print field diffs and full error texts")
    p.add_argument("--numerics", action="store_true",
                   help="also execute each case on the GPU and compare with a float64 reference (needs --mode device)")

    p = sub.add_parser("bless", help="record the current signatures as goldens (atomically) and print the diff")
    _add_selection(p)

    p = sub.add_parser("show", help="print a case's repro script, StableHLO, optimized HLO and signature")
    p.add_argument("case", help="case id")
    _add_selection(p)
    p.add_argument("--repro", type=Path, help="also write the standalone repro script to this file")

    p = sub.add_parser("list", help="list the cases")
    p.add_argument("paths", nargs="*", type=Path)
    p.add_argument("-k", dest="filter")

    for module in _plugin_modules():
        COMMANDS.update(module.register(sub, _add_selection))
    return parser


# Stages that add their own subcommands. Each module has
# `register(subparsers, add_selection) -> {name: handler(args) -> exit code}`.
PLUGIN_MODULES: list[str] = ["harness.versions.matrix", "harness.versions.bisect", "harness.report.page", "harness.gpu.capture", "harness.gpu.fidelity"]


def _plugin_modules():
    import importlib

    return [importlib.import_module(name) for name in PLUGIN_MODULES]


def _load_cases(args) -> list[case_mod.Case]:
    paths = args.paths or [Path("cases")]
    cases = case_mod.select(case_mod.load(paths), args.filter)
    if not cases:
        raise UsageError(f"no case matches{' -k ' + args.filter if args.filter else ''} in {', '.join(map(str, paths))}")
    return cases


def _targets(args):
    out = []
    for name in _csv(args.target):
        try:
            out.append(load_target(name))
        except KeyError as exc:
            raise UsageError(f"--target: {exc.args[0]}") from None
    return out


def _profiles(args, mode: str) -> list[str]:
    if args.profile:
        names = _csv(args.profile)
        for n in names:
            if n not in PROFILES:
                raise UsageError(f"--profile: unknown profile '{n}'; allowed: {', '.join(PROFILES)}")
        return names
    return [n for n, p in PROFILES.items() if p.deviceless or mode == "device"]


def _start(mode: str) -> tuple[Compiler, dict]:
    from harness.targets import gpu_present

    if mode == "device" and not gpu_present():
        raise UsageError("--mode device compiles on a local NVIDIA GPU and this machine has none; use --mode deviceless")
    compiler = Compiler(mode)
    try:
        env = compiler.environment()
    except WorkerError as exc:
        compiler.close()
        raise BrokenEnvironment(f"cannot start the compile worker (is jax[cuda12] installed?): {exc}") from None
    return compiler, env


def cmd_run(args) -> int:
    cases = _load_cases(args)
    targets = _targets(args)
    mode = resolve_mode(args.mode)
    profiles = _profiles(args, mode)
    if getattr(args, "numerics", False) and mode != "device":
        raise UsageError("--numerics executes the compiled cases and needs a GPU: --mode device (this run is deviceless)")
    compiler, env = _start(mode)
    with compiler:
        print(f"fp8-check: jax {env['jax']} (jaxlib {env['jaxlib']}, CUDA plugin {env.get('cuda_plugin')}), "
              f"mode {mode}, targets {', '.join(t.name for t in targets)}, profiles {', '.join(profiles)}, "
              f"{len(cases)} cases", flush=True)
        if mode == "device":
            device = str((env.get("device") or {}).get("name", "?"))
            for t in targets:
                if t.name.lower() not in device.lower().replace(" ", ""):
                    print(f"fp8-check: warning: device mode compiles for the local GPU ({device}); "
                          f"its results are filed under --target {t.name}", file=sys.stderr)
        if mode == "device" or not runner.deviceless_unsupported(env["jax"]):
            for t in targets:
                runner.check_canary(compiler, t)
        outcomes = runner.run(cases, targets, profiles, mode, compiler, args.goldens,
                              on_outcome=lambda o: _print_outcome(o, args.verbose),
                              numerics=getattr(args, "numerics", False))
    results.print_summary(outcomes)
    doc = results.document(outcomes, env, {"mode": mode, "targets": [t.name for t in targets], "profiles": profiles,
                                           "compiler_options": {p: PROFILES[p].compiler_options for p in profiles}})
    results.write(args.json, doc)
    print(f"results: {args.json}")
    html = args.html or args.json.parent / "report.html"
    try:
        from harness.report.page import write_report

        print(f"report: {write_report([{**doc, '_path': str(args.json)}], html)}")
    except Exception as exc:  # the results are written; a report problem must not change the verdict
        print(f"fp8-check: warning: could not write the HTML report {html}: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_FAIL if any(o.code in runner.BAD_CODES for o in outcomes) else EXIT_OK


def _print_outcome(o, verbose: bool) -> None:
    results.print_outcome(o, verbose=verbose)
    if o.numerics is not None and o.code != "FAIL":
        from harness.gpu.numerics import NumericsResult, OutputCheck

        n = NumericsResult(o.numerics["status"], o.numerics.get("reason", ""),
                           outputs=[OutputCheck(**x) for x in o.numerics.get("outputs", [])])
        print(f"      {n.summary()}", flush=True)


def cmd_bless(args) -> int:
    cases = _load_cases(args)
    targets = _targets(args)
    mode = resolve_mode(args.mode)
    profiles = _profiles(args, mode)
    compiler, env = _start(mode)
    changed = unresolved = 0
    with compiler:
        for t in targets:
            runner.check_canary(compiler, t)
        for case, target, profile in runner.plan(cases, targets, profiles):
            if mode == "deviceless" and not profile.deviceless:
                continue
            issue = case.known_issue(env["jax"], target.name, profile.name)
            if issue:
                print(f"skipped {target.name}/{profile.name} {case.id}: known issue {issue.url or issue.summary!r} is active on jax "
                      f"{env['jax']}; a golden states the fused signature, so it is not blessed from a broken version")
                continue
            comp = compiler.compile(render.render(case), target, profile)
            if not comp.ok:
                unresolved += 1
                print(f"UNRESOLVED {target.name}/{profile.name} {case.id}: {comp.error.strip().splitlines()[0]}")
                continue
            sig = signature.extract(comp.hlo).to_dict()
            diff = golden.bless(args.goldens, case.id, target.name, profile.name, mode, env["jax"], sig)
            if diff:
                changed += 1
                sys.stdout.write(diff)
            else:
                print(f"unchanged {target.name}/{profile.name} {case.id}")
    print(f"blessed: {changed} golden(s) changed" + (f", {unresolved} case(s) did not compile" if unresolved else ""))
    return EXIT_FAIL if unresolved else EXIT_OK


def cmd_show(args) -> int:
    args.paths = args.paths or [Path("cases")]
    all_cases = case_mod.load(args.paths)
    matches = [c for c in all_cases if c.id == args.case]
    if not matches:
        raise UsageError(f"no case with id '{args.case}' in {', '.join(map(str, args.paths))}")
    case = matches[0]
    target = _targets(args)[0]
    mode = resolve_mode(args.mode)
    profile = PROFILES[_profiles(args, mode)[0]]
    compiler, env = _start(mode)
    with compiler:
        comp = compiler.compile(render.render(case), target, profile)
    script = render.repro(case, target, profile, env["jax"])
    if args.repro:
        args.repro.write_text(script)
    print(f"# ---- repro: {case.id} for {target.name}/{profile.name} ({mode}), jax {env['jax']}")
    print(script)
    if not comp.ok:
        print(f"# ---- compile error\n{comp.error}")
        return EXIT_FAIL
    print("# ---- StableHLO")
    print(comp.stablehlo)
    print("# ---- optimized HLO")
    print(comp.hlo)
    print("# ---- signature")
    import yaml

    print(yaml.safe_dump(signature.extract(comp.hlo).to_dict(), sort_keys=False))
    if args.repro:
        print(f"# repro written to {args.repro}: run it with `python {args.repro}`")
    return EXIT_OK


def cmd_list(args) -> int:
    cases = case_mod.select(case_mod.load(args.paths or [Path("cases")]), args.filter)
    for c in cases:
        print(f"{c.id:<40} {c.description}")
    return EXIT_OK


COMMANDS = {"run": cmd_run, "bless": cmd_bless, "show": cmd_show, "list": cmd_list}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (case_mod.CaseError, golden.GoldenError, UsageError) as exc:
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except runner.CanaryError as exc:
        print(f"fp8-check: {exc}", file=sys.stderr)
        return EXIT_ENV
    except BrokenEnvironment as exc:
        print(f"fp8-check: broken environment: {exc}", file=sys.stderr)
        return EXIT_ENV
    except KeyboardInterrupt:
        print("fp8-check: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
