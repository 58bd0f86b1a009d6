"""The command half of fp8_check.upstream._bisect (the upstream stage): the subcommands it registers."""

from __future__ import annotations

import sys
from pathlib import Path

from fp8_check import platforms, run, verdict, versions
from fp8_check.cases import CaseError
from fp8_check.cli._options import requirement_options
from fp8_check.targets import PROFILES
from fp8_check.upstream import BY_REFERENCE, CRITERIA, NO_COMPILE, Tester, Verdict, commit_ranges, investigate, save, search
from fp8_check.verdict import GoldenError, change
from fp8_check.versions import InstallError, Manager, VersionError, extras_of, kind_for_mode


def register(subparsers) -> dict:
    p = subparsers.add_parser("bisect", help="find the first JAX release where a case's signature changed (git bisect run exit codes)")
    p.add_argument("case", help="case id")
    run.add_options(p)
    _set_help(p, "--profile", f"one profile: {', '.join(x.name for x in platforms.DEFAULT.profiles)} (default: "
                              f"{platforms.default_profile()}, or the mode's only profile)")
    p.add_argument("--good", help="a version known good (the reference, with --criterion signature)")
    p.add_argument("--bad", help="a version known bad (newer than --good)")
    p.add_argument("--test", metavar="VERSION", help="judge only this version ('current': this interpreter's JAX) and exit 0/1/125")
    p.add_argument("--criterion", choices=CRITERIA, default="signature",
                   help="signature: equal to the --good version's signature is good (default); golden: equal to the golden "
                        "is good; regression: bad when the change from the --good version is a regression (or mixed); "
                        "compiles: bad when the case compiles where --good did not (the first compiling version), or "
                        "the other way round")
    p.add_argument("--explain", action="store_true",
                   help="also compile the last good and first bad version with per-pass dumps: first diverging XLA pass, "
                        "minimal repro, XLA-style FileCheck test (saved for the report's issue body)")
    p.add_argument("--upstream-dir", type=Path, default=Path("reports/upstream"),
                   help="with --explain: where the explanation JSON goes (default reports/upstream)")
    p.add_argument("--cache", type=Path, help="environments directory (default: $FP8_CHECK_CACHE/envs or ~/.cache/fp8-check/envs)")
    versions.add_with_options(p)
    p.set_defaults(mode="deviceless")
    return {"bisect": cmd_bisect}


def _set_help(parser, option: str, text: str) -> None:
    for action in parser._actions:
        if option in action.option_strings:
            action.help = text


def cmd_bisect(args) -> int:
    try:
        return _cmd_bisect(args)
    except (run.UsageError, CaseError, GoldenError, VersionError) as exc:
        print(f"fp8-check bisect: error: {exc}", file=sys.stderr)
        return Verdict.ABORT.exit_code


def _cmd_bisect(args) -> int:
    case = run.find_case(args.paths, args.case)
    targets = run.targets_from(args.target)
    mode = run.mode_from(args.mode)
    profiles = run.profiles_from(args.profile, mode, for_targets=targets)
    if len(targets) != 1 or len(profiles) != 1:
        if not args.profile and platforms.default_profile() in profiles:
            profiles = [platforms.default_profile()]
        else:
            raise run.UsageError("bisect one target and one profile at a time (--target T --profile P)")
    target, profile = targets[0], PROFILES[profiles[0]]
    if profile.name not in case.profiles or (case.targets and target.name not in case.targets):
        raise run.UsageError(f"case '{case.id}' does not run on {target.name}/{profile.name}")
    run.check_spec_files(args.target, mode)
    try:
        extras, jax_range = extras_of(requirement_options(args))  # --with, --with-requirements
        if case.requirements:  # and the case's `requirements:`, where its range includes the release (Tester)
            extras += case.requirements.requirements
    except ValueError as exc:
        print(f"fp8-check bisect: error: {exc}", file=sys.stderr)
        return Verdict.ABORT.exit_code
    manager = Manager(args.cache, extras=extras, jax_range=jax_range, kind=kind_for_mode(mode),  # device: full set
                      platform=run.env_platform([target]))  # mi300x: the ROCm environments
    tester = Tester(case, target, profile, mode, args.goldens, args.criterion, manager)
    where = f"{case.id} on {target.name}/{profile.name} ({mode}), criterion {args.criterion}"
    if args.test:
        if args.criterion in BY_REFERENCE:
            if not args.good:
                raise run.UsageError(f"--test with --criterion {args.criterion} needs --good (the reference version)")
            ref = tester.set_reference(args.good)
            if ref.verdict is not Verdict.GOOD:
                print(f"fp8-check bisect: the reference jax {args.good} is untestable: {ref.reason}", file=sys.stderr)
                return Verdict.SKIP.exit_code
        j = tester.judge(args.test)
        print(f"{where}: jax {args.test}: {j.verdict}: {j.reason}")
        for d in j.diffs:
            print(f"    {d}")
        return j.verdict.exit_code
    if not (args.good and args.bad):
        raise run.UsageError("give --good V1 --bad V2 (or --test V)")
    print(f"fp8-check bisect: {where}: between jax {args.good} (good) and {args.bad} (bad)", flush=True)
    res = search(tester, args.good, args.bad, log=lambda s: print(s, flush=True))
    if res.verdict is not Verdict.BAD or res.first_bad is None or res.last_good is None:
        print(f"fp8-check bisect: {res.message}")
        if res.verdict is Verdict.SKIP and args.criterion != "compiles" and NO_COMPILE in res.message:
            print("fp8-check bisect: an end that does not compile is untestable for this criterion; to find where the "
                  f"case started (or stopped) compiling: fp8-check bisect {case.id} --good {args.good} --bad {args.bad} "
                  "--criterion compiles")
        return res.verdict.exit_code
    if args.criterion == "compiles":
        now = "compiles" if tester.compiles_on(res.first_bad)[0] else "no longer compiles"
        print(f"\nfirst version where the case {now}: jax {res.first_bad} (last where it "
              f"{'did not' if now == 'compiles' else 'did'}: jax {res.last_good})")
        if res.skipped:
            print(f"untestable versions in between (the first changed one may be any of): {', '.join(res.skipped)}")
        print("\n".join(commit_ranges(tester, res.last_good, res.first_bad)))
        return Verdict.BAD.exit_code
    good_out, bad_out = tester.outcome_on(res.last_good)[0], tester.outcome_on(res.first_bad)[0]
    step = change(good_out, bad_out)[1] if good_out is not None and bad_out is not None \
        else verdict.Verdict("")  # the comparison matrix uses (a model: by layer and pass)
    if step.lines and not step.is_regression:  # an improvement or a rename: nothing went bad
        print(f"\nfirst changed version: jax {res.first_bad} (last unchanged: jax {res.last_good}) — "
              f"{step.cls}, not a regression; `--criterion regression` finds where fusion got worse")
    else:
        print(f"\nfirst bad version: jax {res.first_bad} (last good: jax {res.last_good})")
    if res.skipped:
        print(f"untestable versions in between (the first changed one may be any of): {', '.join(res.skipped)}")
    print(f"signature diff (expected: jax {res.last_good}, found: jax {res.first_bad}) [{step.cls}]:")
    for d in res.diffs:
        why = "; ".join(f"{x.cls}: {x.why}" for x in step.for_path(d.path))
        print(f"    {d}" + (f"  [{why}]" if why else ""))

    print("\n".join(commit_ranges(tester, res.last_good, res.first_bad)))
    if args.explain:
        if mode != "deviceless":
            raise run.UsageError("--explain compiles deviceless only (give --mode deviceless)")
        print(f"\nexplaining jax {res.last_good} -> {res.first_bad}:", flush=True)
        known = {v: sig.to_dict() for v in (res.last_good, res.first_bad)
                 if v in tester.cache and (sig := tester.signature_on(v)[0]) is not None}
        try:
            exp = investigate(case, target, profile, res.last_good, res.first_bad, known, manager)
        except (RuntimeError, InstallError, ValueError) as exc:
            print(f"fp8-check bisect: --explain failed: {exc}", file=sys.stderr)
            return Verdict.ABORT.exit_code
        print("\n" + exp.text())
        print(f"saved for the report's issue body: {save(exp, args.upstream_dir)}")
    return Verdict.BAD.exit_code
