"""`fp8-check bisect CASE --good V1 --bad V2`: the first released JAX version where a case changed.

What "good" and "bad" mean (`--criterion`):
- `signature` (default): a version is good when the case's fusion signature is
  equal, field by field, to its signature on the --good version; bad when it
  differs. This finds where XLA's behaviour changed, whatever the goldens say.
- `golden`: good when the signature equals the golden expectation covering that
  version (goldens/<target>/<profile>/<mode>/<case>.yaml, known issues ignored);
  bad when it differs. This finds where a case started failing `fp8-check run`.
- `regression`: bad when the change from the --good version's signature is a
  regression or mixed (harness/fp8_check/verdict/verdict.py); improvements and renames are good.
  This finds where fusion got worse, stepping over renames and improvements.
- `compiles`: good when the case compiles, or fails to compile, as on the --good
  (older) version; bad when that changed. With an older side that does not
  compile, this finds the first version that compiles it (a fix); with one that
  does, the first that no longer does.
A version is untestable (skipped) when it cannot be installed, when deviceless
compilation is impossible (JAX < 0.6.1), when the case does not compile there,
or (`golden`) when no expectation covers it (`compiles`: a compile error is a
verdict, not untestable).

The versions searched are the released JAX versions strictly between --good and
--bad, asked from the package index (fp8_check.versions). Each version runs in
its cached environment (fp8_check.versions.envs), one worker per version.

Exit codes follow `git bisect run`, so the command is also a test command for
other bisection tools:
- search (--good and --bad): 1 a first bad version was found (the --bad version
  is bad), 0 the --bad version is good (nothing changed), 125 undecidable (an
  endpoint or every candidate is untestable);
- one version (`--test V`, or `--test current` for this interpreter's JAX, e.g.
  inside `git bisect run` over JAX/XLA commits): 0 good, 1 bad, 125 untestable;
- 128: bad usage or a broken setup (it aborts a `git bisect run`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from fp8_check.verdict import comparator
from fp8_check.verdict import golden
from fp8_check.verdict.outcome import FAIL, NEW, UNRESOLVED, UNSUPPORTED, XFAIL, Outcome
from fp8_check.verdict import contract_judge
from fp8_check.run import runner
from fp8_check.signature.signature import Signature
from fp8_check.compile.compile import Compiler, WorkerError
from fp8_check.versions import requirements, wheels
from fp8_check.versions.envs import InstallError, Manager
from fp8_check.versions.releases import VersionError, between, parse_version
from fp8_check.run import selection
from fp8_check.cases.cases import CaseError
from fp8_check.verdict import verdict as verdict_mod
from fp8_check.targets import PROFILES
from fp8_check.upstream import explain
from fp8_check.versions import xla_commits

CRITERIA = ("signature", "golden", "regression", "compiles")
_BY_REFERENCE = ("signature", "regression", "compiles")  # criteria judged against the --good version
_NO_COMPILE = "does not compile: "


class Verdict(Enum):
    """What a version (or a whole search) comes to; the value is the `git bisect run` exit code it maps to."""

    GOOD = 0
    BAD = 1
    SKIP = 125  # untestable
    ABORT = 128  # bad usage or a broken setup

    @property
    def exit_code(self) -> int:
        return self.value

    def __str__(self) -> str:
        return self.name.lower()


@dataclass
class Judgment:
    """The verdict on one version, why, and the signature it was judged on."""

    version: str
    verdict: Verdict
    reason: str = ""
    signature: Signature | None = None
    diffs: list[comparator.FieldDiff] = field(default_factory=list)


class Tester:
    """Compiles one case on a version (one worker per version) and judges it."""

    def __init__(self, case, target, profile, mode: str, goldens_root: Path, criterion: str = "signature",
                 manager: Manager | None = None, log=print):
        self.case, self.target, self.profile, self.mode = case, target, profile, mode
        self.goldens_root, self.criterion = Path(goldens_root), criterion
        self.manager = manager or Manager()
        self.log = log
        self.reference: Signature | None = None
        self.reference_version: str | None = None
        self.reference_compiles: bool | None = None
        self.cache: dict[str, tuple[Signature | None, str]] = {}

    def signature_on(self, version: str) -> tuple[Signature | None, str]:
        """(signature, the jax version it ran on) or (None, why it is untestable) for `version`
        ('current': this interpreter's JAX)."""
        if version in self.cache:
            return self.cache[version]
        self.cache[version] = out = self._signature_on(version)
        return out

    def _signature_on(self, version: str):
        python = None
        if version != "current":
            if self.mode == "deviceless" and runner.deviceless_unsupported(version, [self.target]):
                return None, runner.deviceless_unsupported(version, [self.target])
            try:
                env = self.manager.ensure(version)
            except InstallError as exc:
                return None, f"cannot install jax {version}: {exc}"
            python = str(env.python)
        with Compiler(self.mode, python=python) as compiler:
            try:
                compiler.environment()
            except WorkerError as exc:
                return None, f"the compile worker does not start: {str(exc).strip().splitlines()[0]}"
            # the one plan -> compile -> judge path (fp8_check.run.runner), as run and matrix take it
            outcomes = runner.run([self.case], [self.target], [self.profile.name], self.mode, compiler,
                                  self.goldens_root)
        if not outcomes:
            return None, f"the case does not run on {self.target.name}/{self.profile.name}"
        out = outcomes[0]
        if out.code is UNSUPPORTED:
            return None, out.reason
        if out.signature is None:
            return None, f"{_NO_COMPILE}{out.reason.strip().splitlines()[0] if out.reason else '?'}"
        return out.signature, out.jax

    def compiles_on(self, version: str) -> tuple[bool | None, str]:
        """(whether the case compiles on `version`, why); None when the version is untestable."""
        sig, why = self.signature_on(version)
        if sig is not None:
            return True, "compiles"
        return (False, why) if why.startswith(_NO_COMPILE) else (None, why)

    def set_reference(self, version: str) -> Judgment:
        if self.criterion == "compiles":
            compiles, why = self.compiles_on(version)
            if compiles is None:
                return Judgment(version, Verdict.SKIP, why)
            self.reference_compiles, self.reference_version = compiles, version
            return Judgment(version, Verdict.GOOD, f"reference: {why}", self.signature_on(version)[0])
        sig, why = self.signature_on(version)
        if sig is None:
            return Judgment(version, Verdict.SKIP, why)
        self.reference, self.reference_version = sig, version
        return Judgment(version, Verdict.GOOD, "reference signature", sig)

    def judge(self, version: str) -> Judgment:
        if self.criterion == "compiles":
            compiles, why = self.compiles_on(version)
            if compiles is None:
                return Judgment(version, Verdict.SKIP, why)
            same = compiles == self.reference_compiles
            return Judgment(version, Verdict.GOOD if same else Verdict.BAD,
                            f"{why}, {'as' if same else 'unlike'} jax {self.reference_version}", self.signature_on(version)[0])
        sig, info = self.signature_on(version)
        if sig is None:
            return Judgment(version, Verdict.SKIP, info)
        jax_version = info
        if self.criterion == "golden":
            judged = runner.judge_signature(
                Outcome(self.case.id, self.target.name, self.profile.name, self.mode, jax_version, UNRESOLVED),
                sig, self.goldens_root)
            if judged.code is NEW:
                return Judgment(version, Verdict.SKIP, f"no golden expectation covers jax {jax_version}", sig)
            expected, against = judged.expected or {}, f"the golden ({judged.expected_range or 'every version'})"
        else:
            if self.reference is None:
                raise RuntimeError("no reference signature")
            expected, against = self.reference.to_dict(), f"jax {self.reference_version}"
        if self.criterion == "golden" and contract_judge.is_contract(judged):  # a model's contract
            bad = judged.code is FAIL or judged.code is XFAIL
            why = judged.verdict.summary() if judged.verdict else f"{len(judged.diffs)} FP8 fact(s) changed"
            return Judgment(version, Verdict.BAD if bad else Verdict.GOOD,
                            f"{why} against {against}" if bad else f"every FP8 fact of {against} holds", sig, judged.diffs)
        if self.criterion != "golden" and self.reference is not None and contract_judge.is_model(self.reference):
            diffs, change = contract_judge.signature_change(self.reference, sig)  # layers and passes, not indices
            if self.criterion == "signature" or change.is_regression:
                if diffs:
                    return Judgment(version, Verdict.BAD, f"{change.cls} against {against}: {change.summary()}", sig, diffs)
            return Judgment(version, Verdict.GOOD, f"the FP8 facts of {against} hold", sig)
        diffs = comparator.compare(expected, sig.to_dict())
        if self.criterion == "regression":
            change = verdict_mod.classify(expected, sig)
            if change.is_regression:
                return Judgment(version, Verdict.BAD, f"{change.cls} against {against}: {change.summary()}", sig, diffs)
            if change.lines:
                return Judgment(version, Verdict.GOOD, f"{change.cls} against {against}, not a regression", sig, diffs)
            return Judgment(version, Verdict.GOOD, f"signature equal to {against}", sig)
        if diffs:
            return Judgment(version, Verdict.BAD, f"signature differs from {against} in {len(diffs)} field(s)", sig, diffs)
        return Judgment(version, Verdict.GOOD, f"signature equal to {against}", sig)


@dataclass
class Result:
    verdict: Verdict  # BAD: a first bad version was found
    first_bad: str | None = None
    last_good: str | None = None
    skipped: list[str] = field(default_factory=list)  # untestable versions between last_good and first_bad
    diffs: list[comparator.FieldDiff] = field(default_factory=list)
    steps: list[Judgment] = field(default_factory=list)
    message: str = ""


def search(tester: Tester, good: str, bad: str, versions: list[str] | None = None, log=print) -> Result:
    """Binary search for the first bad version in (good, bad]; untestable versions are skipped like `git bisect skip`."""
    steps: list[Judgment] = []

    def note(j: Judgment) -> Judgment:
        steps.append(j)
        log(f"  jax {j.version:<9} {str(j.verdict):<5} {j.reason}")
        return j

    if parse_version(good) >= parse_version(bad):
        return Result(Verdict.ABORT, message=f"--good {good} must be older than --bad {bad}")
    if tester.criterion in _BY_REFERENCE:
        ref = note(tester.set_reference(good))
        if ref.verdict is not Verdict.GOOD:
            return Result(Verdict.SKIP, steps=steps, message=f"the good version {good} is untestable: {ref.reason}")
    else:
        ref = note(tester.judge(good))
        if ref.verdict is not Verdict.GOOD:
            return Result(Verdict.SKIP, steps=steps, message=f"the good version {good} is {ref.verdict}: {ref.reason}")
    end = note(tester.judge(bad))
    if end.verdict is Verdict.SKIP:
        return Result(Verdict.SKIP, steps=steps, message=f"the bad version {bad} is untestable: {end.reason}")
    if end.verdict is Verdict.GOOD:
        return Result(Verdict.GOOD, steps=steps, message=f"jax {bad} is good: " + (
            f"no regression against {good} ({end.reason})" if tester.criterion == "regression"
            else f"it compiles or fails to compile as {good} does ({end.reason})" if tester.criterion == "compiles"
            else f"nothing changed between {good} and {bad}"))
    pool = between(good, bad, versions)
    lo, hi = good, bad
    judged = {good: ref, bad: end}
    skipped: set[str] = set()
    while True:
        inside = [v for v in pool if parse_version(lo) < parse_version(v) < parse_version(hi)]
        untested = [v for v in inside if v not in skipped]
        if not untested:
            break
        middle = (len(inside) - 1) / 2
        pick = min(untested, key=lambda v: (abs(inside.index(v) - middle), inside.index(v)))
        j = note(tester.judge(pick))
        judged[pick] = j
        if j.verdict is Verdict.GOOD:
            lo = pick
        elif j.verdict is Verdict.BAD:
            hi = pick
        else:
            skipped.add(pick)
    left = sorted((v for v in skipped if parse_version(lo) < parse_version(v) < parse_version(hi)), key=parse_version)
    before, after = judged[lo].signature, judged[hi].signature
    diffs = comparator.compare(before.to_dict(), after.to_dict()) if before and after else []
    if before and after and contract_judge.is_model(before):
        diffs = contract_judge.signature_change(before, after)[0]
    return Result(Verdict.BAD, first_bad=hi, last_good=lo, skipped=left, diffs=diffs, steps=steps)


def register(subparsers) -> dict:
    p = subparsers.add_parser("bisect", help="find the first JAX release where a case's signature changed (git bisect run exit codes)")
    p.add_argument("case", help="case id")
    selection.add_options(p)
    _set_help(p, "--profile", "one profile: cublas, triton, default (default: cublas, or the mode's only profile)")
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
    requirements.add_with_options(p)
    p.set_defaults(mode="deviceless")
    return {"bisect": cmd_bisect}


def _set_help(parser, option: str, text: str) -> None:
    for action in parser._actions:
        if option in action.option_strings:
            action.help = text


def cmd_bisect(args) -> int:
    try:
        return _cmd_bisect(args)
    except (selection.UsageError, CaseError, golden.GoldenError, VersionError) as exc:
        print(f"fp8-check bisect: error: {exc}", file=sys.stderr)
        return Verdict.ABORT.exit_code


def _cmd_bisect(args) -> int:
    case = selection.find_case(args.paths, args.case)
    targets = selection.targets(args.target)
    mode = selection.mode(args.mode)
    profiles = selection.profiles(args.profile, mode, for_targets=targets)
    if len(targets) != 1 or len(profiles) != 1:
        if not args.profile and "cublas" in profiles:
            profiles = ["cublas"]
        else:
            raise selection.UsageError("bisect one target and one profile at a time (--target T --profile P)")
    target, profile = targets[0], PROFILES[profiles[0]]
    if profile.name not in case.profiles or (case.targets and target.name not in case.targets):
        raise selection.UsageError(f"case '{case.id}' does not run on {target.name}/{profile.name}")
    selection.check_spec_files(args.target, mode)
    try:
        extras, jax_range = requirements.extras_from_args(args, [case])  # and the case's `requirements:`
    except ValueError as exc:
        print(f"fp8-check bisect: error: {exc}", file=sys.stderr)
        return Verdict.ABORT.exit_code
    manager = Manager(args.cache, extras=extras, jax_range=jax_range, kind=wheels.kind_for_mode(mode),  # device: full set
                      platform=selection.env_platform([target]))  # mi300x: the ROCm environments
    tester = Tester(case, target, profile, mode, args.goldens, args.criterion, manager)
    where = f"{case.id} on {target.name}/{profile.name} ({mode}), criterion {args.criterion}"
    if args.test:
        if args.criterion in _BY_REFERENCE:
            if not args.good:
                raise selection.UsageError(f"--test with --criterion {args.criterion} needs --good (the reference version)")
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
        raise selection.UsageError("give --good V1 --bad V2 (or --test V)")
    print(f"fp8-check bisect: {where}: between jax {args.good} (good) and {args.bad} (bad)", flush=True)
    res = search(tester, args.good, args.bad, log=lambda s: print(s, flush=True))
    if res.verdict is not Verdict.BAD or res.first_bad is None or res.last_good is None:
        print(f"fp8-check bisect: {res.message}")
        if res.verdict is Verdict.SKIP and args.criterion != "compiles" and _NO_COMPILE in res.message:
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
        print(xla_commits.xla_range(res.last_good, res.first_bad).text())
        return Verdict.BAD.exit_code
    sig_good, sig_bad = tester.signature_on(res.last_good)[0], tester.signature_on(res.first_bad)[0]
    step = verdict_mod.classify(sig_good, sig_bad)
    if sig_good is not None and sig_bad is not None and contract_judge.is_model(sig_good):
        step = contract_judge.signature_change(sig_good, sig_bad)[1]  # by layer and pass
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

    print(xla_commits.xla_range(res.last_good, res.first_bad).text())
    if args.explain:
        if mode != "deviceless":
            raise selection.UsageError("--explain compiles deviceless only (give --mode deviceless)")
        print(f"\nexplaining jax {res.last_good} -> {res.first_bad}:", flush=True)
        known = {v: sig.to_dict() for v in (res.last_good, res.first_bad)
                 if v in tester.cache and (sig := tester.cache[v][0]) is not None}
        try:
            exp = explain.investigate(case, target, profile, res.last_good, res.first_bad, known, manager)
        except (RuntimeError, InstallError, ValueError) as exc:
            print(f"fp8-check bisect: --explain failed: {exc}", file=sys.stderr)
            return Verdict.ABORT.exit_code
        print("\n" + exp.text())
        print(f"saved for the report's issue body: {explain.save(exp, args.upstream_dir)}")
    return Verdict.BAD.exit_code
