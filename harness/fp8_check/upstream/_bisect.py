"""`fp8-check bisect CASE --good V1 --bad V2`: the first released JAX version where a case changed.

What "good" and "bad" mean (`--criterion`):
- `signature` (default): a version is good when the case's result is unchanged from
  the --good version's, bad when it changed — by the one comparison `matrix` uses
  (`verdict.change`: the signatures field by field, or a model judged
  against its contract by its FP8 facts per layer and pass), so that bisect names
  the release the matrix flags. This finds where XLA's behaviour changed.
- `golden`: good when the signature equals the golden expectation covering that
  version (goldens/<target>/<profile>/<mode>/<case>.yaml, known issues ignored);
  bad when it differs. This finds where a case started failing `fp8-check run`.
- `regression`: bad when that change from the --good version is a regression or
  mixed (its classification, as `matrix` classifies it); improvements and renames are good.
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
its cached environment (fp8_check.versions._envs), one worker per version.

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

import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from fp8_check import verdict
from fp8_check.compile import Compiler, WorkerError
from fp8_check.run import deviceless_unsupported, judge_signature, run
from fp8_check.signature import Signature
from fp8_check.verdict import (
    FAIL,
    NEW,
    UNRESOLVED,
    UNSUPPORTED,
    XFAIL,
    FieldDiff,
    Outcome,
    compare,
)
from fp8_check.versions import InstallError, Manager, between, jax_range, parse_version, xla_range

CRITERIA = ("signature", "golden", "regression", "compiles")
BY_REFERENCE = ("signature", "regression", "compiles")  # criteria judged against the --good version
NO_COMPILE = "does not compile: "


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
    """The verdict on one version, why, and the signature (the result) it was judged on."""

    version: str
    verdict: Verdict
    reason: str = ""
    signature: Signature | None = None
    diffs: list[FieldDiff] = field(default_factory=list)
    outcome: Outcome | None = None  # the version's result (judged against the goldens, as `run` and `matrix` judge)


class Tester:
    """Compiles one case on a version (one worker per version) and judges it."""

    def __init__(self, case, target, profile, mode: str, goldens_root: Path, criterion: str = "signature",
                 manager: Manager | None = None, log=print):
        self.case, self.target, self.profile, self.mode = case, target, profile, mode
        self.goldens_root, self.criterion = Path(goldens_root), criterion
        self.manager = manager or Manager()
        self.log = log
        self.reference: Outcome | None = None  # the --good version's result
        self.reference_version: str | None = None
        self.reference_compiles: bool | None = None
        self.cache: dict[str, tuple[Outcome | None, str]] = {}

    def outcome_on(self, version: str) -> tuple[Outcome | None, str]:
        """(the result, with a signature, the jax version it ran on) or (None, why it is untestable) for `version`
        ('current': this interpreter's JAX)."""
        if version not in self.cache:
            self.cache[version] = self._outcome_on(version)
        return self.cache[version]

    def signature_on(self, version: str) -> tuple[Signature | None, str]:
        """(signature, the jax version it ran on) or (None, why it is untestable) for `version`."""
        out, why = self.outcome_on(version)
        return (out.signature, out.jax) if out is not None else (None, why)

    def _outcome_on(self, version: str) -> tuple[Outcome | None, str]:
        python = None
        if version != "current":
            if self.mode == "deviceless" and deviceless_unsupported(version, [self.target]):
                return None, deviceless_unsupported(version, [self.target]) or ""
            if self.case.requirements and (why := self.case.requirements.unsupported(version)):
                return None, why  # the case's set does not install with this JAX: untestable, nothing built
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
            # the one plan -> compile -> judge path (fp8_check.run._runner), as run and matrix take it
            outcomes = run([self.case], [self.target], [self.profile.name], self.mode, compiler,
                                  self.goldens_root)
        if not outcomes:
            return None, f"the case does not run on {self.target.name}/{self.profile.name}"
        out = outcomes[0]
        if out.code is UNSUPPORTED:
            return None, out.reason
        if out.signature is None:
            return None, f"{NO_COMPILE}{out.reason.strip().splitlines()[0] if out.reason else '?'}"
        return out, out.jax

    def compiles_on(self, version: str) -> tuple[bool | None, str]:
        """(whether the case compiles on `version`, why); None when the version is untestable."""
        sig, why = self.signature_on(version)
        if sig is not None:
            return True, "compiles"
        return (False, why) if why.startswith(NO_COMPILE) else (None, why)

    def set_reference(self, version: str) -> Judgment:
        if self.criterion == "compiles":
            compiles, why = self.compiles_on(version)
            if compiles is None:
                return Judgment(version, Verdict.SKIP, why)
            self.reference_compiles, self.reference_version = compiles, version
            return Judgment(version, Verdict.GOOD, f"reference: {why}", self.signature_on(version)[0])
        out, why = self.outcome_on(version)
        if out is None:
            return Judgment(version, Verdict.SKIP, why)
        self.reference, self.reference_version = out, version
        return Judgment(version, Verdict.GOOD, "reference signature", out.signature, outcome=out)

    def judge(self, version: str) -> Judgment:
        if self.criterion == "compiles":
            compiles, why = self.compiles_on(version)
            if compiles is None:
                return Judgment(version, Verdict.SKIP, why)
            alike = compiles == self.reference_compiles
            return Judgment(version, Verdict.GOOD if alike else Verdict.BAD,
                            f"{why}, {'as' if alike else 'unlike'} jax {self.reference_version}", self.signature_on(version)[0])
        out, info = self.outcome_on(version)
        if out is None or out.signature is None:
            return Judgment(version, Verdict.SKIP, info)
        sig = out.signature
        if self.criterion == "golden":  # against the goldens, known issues ignored
            judged = judge_signature(
                Outcome(self.case.id, self.target.name, self.profile.name, self.mode, out.jax, UNRESOLVED),
                sig, self.goldens_root)
            against = f"the golden ({judged.expected_range or 'every version'})"
            if judged.code is NEW:  # nothing blessed, or no regression against the nearest release's golden
                return Judgment(version, Verdict.SKIP, judged.reason.split("; bless it")[0] or
                                f"no golden expectation covers jax {out.jax}", sig, judged.diffs, out)
            if judged.code is FAIL or judged.code is XFAIL:
                why = judged.verdict.summary() if judged.verdict else f"{len(judged.diffs)} field(s) differ"
                return Judgment(version, Verdict.BAD, f"{why} against {against}", sig, judged.diffs, out)
            return Judgment(version, Verdict.GOOD, f"as {against} expects", sig, [], out)
        if self.reference is None:
            raise RuntimeError("no reference signature")
        against = f"jax {self.reference_version}"
        # the one comparison matrix flags changes by (a model against its contract: by layer and pass)
        found = verdict.change(self.reference, out)
        diffs, change = found
        by_facts = verdict.is_contract(out)  # a model against its contract: its FP8 facts by layer and pass
        same = f"the FP8 facts of {against} hold" if by_facts else f"signature equal to {against}"
        if self.criterion == "regression":
            if change.is_regression:
                return Judgment(version, Verdict.BAD, f"{change.cls} against {against}: {change.summary()}", sig, diffs, out)
            if verdict.changed(found):
                return Judgment(version, Verdict.GOOD, f"{change.cls} against {against}, not a regression", sig, diffs, out)
            return Judgment(version, Verdict.GOOD, same, sig, outcome=out)
        if verdict.changed(found):
            what = "FP8 facts differ" if by_facts else "signature differs"
            return Judgment(version, Verdict.BAD, f"{what} from {against} in {len(diffs)} field(s) [{change.cls}]: "
                            f"{change.summary()}", sig, diffs, out)
        return Judgment(version, Verdict.GOOD, same, sig, outcome=out)


_LOCATIONS = re.compile(r"^#loc.*$|\s*loc\((?:[^()]|\([^()]*\))*\)", re.M)


def lowering_changed(before: Outcome | None, after: Outcome | None) -> bool | None:
    """Whether JAX lowered the case differently on the two releases: their StableHLO differs (source locations
    aside); None when either has none to compare."""
    if before is None or after is None or not before.stablehlo or not after.stablehlo:
        return None
    return _LOCATIONS.sub("", before.stablehlo).strip() != _LOCATIONS.sub("", after.stablehlo).strip()


def commit_ranges(tester: "Tester", good: str, bad: str) -> list[str]:
    """The commit ranges to look at between the last good and the first bad release: XLA's, and JAX's beside it
    when JAX's lowering changed (the StableHLO differs), from what the installed distributions record."""
    lines = [xla_range(good, bad).text()]
    changed = lowering_changed(tester.outcome_on(good)[0], tester.outcome_on(bad)[0])
    if changed:
        lines.append(f"JAX's lowering changed too (the StableHLO differs): {jax_range(good, bad).text()}")
    elif changed is False:
        lines.append("the StableHLO is the same on both: the change is in XLA")
    return lines


def step(before: Judgment, after: Judgment) -> tuple[list[FieldDiff], verdict.Verdict]:
    """The change from the last good version to the first bad one, by the comparison matrix uses
    (`verdict.change`); the signatures field by field where the results are not at hand."""
    if before.outcome is not None and after.outcome is not None:
        return verdict.change(before.outcome, after.outcome)
    b = before.signature.to_dict() if before.signature else {}
    a = after.signature.to_dict() if after.signature else {}
    return compare(b, a), verdict.classify(b, a)


@dataclass
class Result:
    verdict: Verdict  # BAD: a first bad version was found
    first_bad: str | None = None
    last_good: str | None = None
    skipped: list[str] = field(default_factory=list)  # untestable versions between last_good and first_bad
    diffs: list[FieldDiff] = field(default_factory=list)
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
    if tester.criterion in BY_REFERENCE:
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
    diffs = step(judged[lo], judged[hi])[0] if judged[lo].signature and judged[hi].signature else []
    return Result(Verdict.BAD, first_bad=hi, last_good=lo, skipped=left, diffs=diffs, steps=steps)
