"""The one runner: plan -> canary -> compile -> signature -> judge -> an `Outcome` per case x target x profile.

LLVM lit's shape: a test (a planned case x target x profile), a result code that knows whether
it is a failure (harness/fp8_check/verdict/_outcome.py: PASS, FAIL, XFAIL, XPASS, UNSUPPORTED, UNRESOLVED, plus
NEW), one runner (`run`), and displays that belong to the entry points. run, bless, matrix,
bisect and the pytest plugin call `run`; the API and `check` judge through `judge_signature`;
every failed compilation is classified by `compile_failure`. Entry points differ only in how
they select cases and present outcomes.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Callable, Iterator, Protocol

from packaging.version import Version

from fp8_check import verdict
from fp8_check.cases import Case
from fp8_check.compile import (
    Compilation,
    CompileRequest,
    CompileService,
    FailureKind,
    case_options,
    default_profile_for,
    render,
    replays_autotune,
    repro_needs,
)
from fp8_check.cost import against_expected, estimate, hardware, parse_threshold
from fp8_check.platforms import Profile
from fp8_check.signature import Signature, extract, run_filecheck
from fp8_check.targets import FORMAT_OPTION, PROFILES, Target, platform_of, profile_applies
from fp8_check.verdict import (
    FAIL,
    LOW,
    NEUTRAL,
    NEW,
    PASS,
    UNRESOLVED,
    UNSUPPORTED,
    XFAIL,
    XPASS,
    CanaryError,
    Code,
    Expectation,
    FieldDiff,
    Golden,
    GoldenError,
    NumericsResult,
    Outcome,
    Verdict,
    check_canary,
    check_layers,
    classify,
    classify_extra,
    compare,
    diffs,
    find,
    from_dicts,
    lost_fp8,
    requests,
)
from fp8_check.worker import not_representative

MIN_DEVICELESS_JAX = Version("0.6.1")


def deviceless_unsupported(jax_version: str, targets=()) -> str | None:
    """Why nothing compiles deviceless on `jax_version` (for `targets`: their platform may have no plugin
    for that version, e.g. ROCm on JAX 0.8.x), or None."""
    if Version(jax_version) < MIN_DEVICELESS_JAX:
        return (
            f"deviceless compilation needs JAX >= {MIN_DEVICELESS_JAX} (older XLA rejects runtime_version in the "
            "target config and then never emits FP8 gemms); run this version on a real GPU"
        )
    for target in targets:
        reason = target.platform.unsupported_reason(jax_version)
        if reason:
            return reason
    return None


def supported(targets, jax_version: str) -> list:
    """The targets whose architecture exists in `jax_version`'s compiler (tpu7x from 0.8.1): the others' cases are
    UNSUPPORTED with the reason, and their canary is not compiled."""
    return [t for t in targets if not t.platform.unsupported_reason(jax_version, t.arch)]


def canary_applies(mode: str, jax_version: str) -> bool:
    """Deviceless on a JAX too old to compile deviceless gives UNSUPPORTED results, not a canary failure."""
    return mode == "device" or not deviceless_unsupported(jax_version)


class CanaryGate:
    """The canary gate, the one place that decides, once per target, whether this environment may judge it:
    `run` (run, bless, matrix, bisect), the pytest plugin and the API ask `problem` (harness/fp8_check/verdict/_canary.py
    compiles and checks the canaries). Where the canary does not apply (`canary_applies`) the cases come out
    UNSUPPORTED by themselves; with `refuse_unsupported` (the API: no case to carry it) that is the problem."""

    def __init__(self, mode: str, refuse_unsupported: bool = False):
        self.mode, self.refuse_unsupported = mode, refuse_unsupported
        self._problems: dict[str, str | None] = {}

    def problem(self, compiler: CompileService, target: Target) -> str | None:
        """Why outcomes on `target` would be noise (the canary's CanaryError, ...), or None: judge them."""
        if target.name not in self._problems:
            self._problems[target.name] = self._check(compiler, target)
        return self._problems[target.name]

    def _check(self, compiler: CompileService, target: Target) -> str | None:
        if self.mode != "device":
            jax_version = compiler.environment()["jax"]
            why = deviceless_unsupported(jax_version, [target] if self.refuse_unsupported else [])
            why = why or target.platform.unsupported_reason(jax_version, target.arch)  # no such chip in this release
            if why:
                return why if self.refuse_unsupported else None
        try:
            check_canary(compiler, target)
        except CanaryError as exc:
            return str(exc)
        return None


def compile_failure(comp: Compilation, issue=None) -> tuple[Code, str]:
    """The outcome of a compilation that failed: UNSUPPORTED (what this environment lacks), XFAIL (a known
    issue active here expects it, lit's rule) or UNRESOLVED (an error like any other).

    The only place a failed compilation is classified: run, bless, matrix, bisect and the pytest plugin
    all reach it through `judge`."""
    first = (comp.error or "").strip().splitlines()[0] if comp.error else "unknown error"
    failure = comp.failure
    if failure is not None and failure.kind is FailureKind.UNSUPPORTED:
        return UNSUPPORTED, failure.message
    if issue:  # lit's XFAIL: a known issue active here expects this case to fail, also by not compiling
        name = issue.url or "(no upstream issue)"
        return XFAIL, f"known issue {name}" + (f": {issue.summary}" if issue.summary else "") + f"; compile error: {first}"
    return UNRESOLVED, comp.error or "unknown error"


def judge(case: Case, comp: Compilation, jax_version: str, goldens_root: Path) -> Outcome:
    """One compilation of `case` -> its Outcome: the compile failure classified, or the signature judged."""
    out = Outcome(
        case=case.id, target=comp.target, profile=comp.profile, mode=comp.mode, jax=jax_version, code=UNRESOLVED,
        compile_seconds=comp.seconds, hlo=comp.hlo, stablehlo=comp.stablehlo, cached=comp.cached,
        description=case.description, yaml=case.yaml_text, file=case.file, autotune=comp.autotune,
        not_representative=not_representative(comp.asked_locally, comp.target),
    )
    issue = case.known_issue(jax_version, comp.target, comp.profile)
    if issue:
        out.known_issue = {"url": issue.url, "jax": issue.jax, "summary": issue.summary}
    if not comp.ok:
        out.code, out.reason = compile_failure(comp, issue)
        return out
    try:
        sig = extract(comp.hlo or "")
    except Exception as exc:  # a parser bug must not hide the rest of the run
        out.reason = f"could not parse the optimized HLO: {type(exc).__name__}: {exc}"
        return out
    fc_problem = None
    if case.filecheck.get(comp.profile):
        out.filecheck = case.filecheck[comp.profile]
        fc_problem = run_filecheck(out.filecheck, comp.hlo or "")
    try:
        return judge_signature(out, sig, goldens_root, issue, fc_problem)
    except GoldenError as exc:
        out.signature = sig
        out.reason = str(exc)
        return out


def judge_signature(out: Outcome, sig: Signature, goldens_root: Path, issue=None,
                    fc_problem: str | None = None) -> Outcome:
    """Judge `sig` against the golden of `out` (case, target, profile, mode, jax): PASS, FAIL with its
    verdict, XFAIL/XPASS under an active known issue, or NEW. Raises GoldenError for an unreadable golden.

    Shared by `judge` (every case of every entry point) and fp8_check.api.check_golden (your own functions)."""
    out.signature = sig
    # the mode's own golden, else (device mode) the deviceless one: golden_source.py
    # and, for a release without an expectation of its own, the nearest release's (source.settle decides)
    source = find(goldens_root, out.case, out.target, out.profile, out.mode, out.jax)
    g, gpath, exp = source.golden, source.path, source.expectation
    hint = f"bless it with: fp8-check bless -k {out.case} --target {out.target} --profile {out.profile}"
    if g is None or exp is None:
        out.code = NEW
        out.reason = "no golden yet" if g is None else f"the golden has no expectation covering jax {out.jax}"
        out.reason += f"; {hint}"
        return out
    if exp.contract is not None:  # a model's contract: FP8 facts per layer x pass (_contract_judge.py)
        try:
            rules = _layer_diffs(g, sig)
        except ValueError as exc:
            out.reason = f"{gpath}: field {exc}"
            return out
        return source.settle(verdict.judge(out, sig, g, exp, gpath, issue, rules), hint)
    out.expected, out.expected_range = exp.signature, exp.jax or ""
    out.diffs = compare(exp.signature, sig.to_dict())
    try:
        layer_diffs = _layer_diffs(g, sig)
    except ValueError as exc:  # a malformed rule in the golden's `layers:`
        out.reason = f"{gpath}: field {exc}"
        out.diffs = []
        return out
    out.diffs += layer_diffs
    # a gemm the platform's library has no kernel for: compiles here, fails on the device (device_validity.py)
    device_diffs = diffs(sig, platform_of(out.target))
    out.diffs += device_diffs
    autotune_diffs = _autotune_diffs(exp, out)
    out.diffs += autotune_diffs
    if fc_problem:
        out.diffs.append(FieldDiff("filecheck", "patterns match", fc_problem))
    matches = not out.diffs
    if issue:
        out.code = XPASS if matches else XFAIL
        name = issue.url or "(no upstream issue)"
        out.reason = (
            f"known issue {name} ({issue.jax}) no longer reproduces: the expected fused signature is back"
            if matches else f"known issue {name}" + (f": {issue.summary}" if issue.summary else "")
        )
    else:
        out.code = PASS if matches else FAIL
        if not matches:
            out.reason = f"{len(out.diffs)} field(s) differ from {gpath}"
    if not matches and out.code in (FAIL, XFAIL):  # a known issue is classified and priced (price) too
        out.verdict = classify(exp.signature, sig)
        if fc_problem:
            out.verdict = classify_extra(out.verdict, "filecheck", "patterns match", fc_problem)
        for d in layer_diffs + device_diffs + autotune_diffs:
            out.verdict = classify_extra(out.verdict, d.path, d.expected, d.found)
    if source.fallback:
        out.reason = (f"fidelity finding: {out.reason}; " if out.code is FAIL else (out.reason + "; " if out.reason else "")) \
            + source.fidelity_note()
    return source.settle(out, hint)


def _autotune_diffs(exp: Expectation, out: Outcome) -> list:
    """What the results file decided, against what the golden recorded when it was blessed (`autotune:`): a later
    capture that changes a decision is a visible change, even where the signature stays the same."""
    if exp.autotune is None or out.autotune is None:
        return []
    found = out.autotune.record()
    return [FieldDiff(f"autotune.{k}", exp.autotune.get(k), found[k]) for k in found
            if exp.autotune.get(k) != found[k]]


def _layer_diffs(g: Golden, sig) -> list:
    """The golden's layer rules (`layers:`) checked against the signature's attributed matmuls."""
    if not g.layers:
        return []

    return check_layers(from_dicts(g.layers), sig)


def is_regression(out: Outcome) -> bool:
    """What `--fail-on regression` fails on: a FAIL whose verdict is a regression (or mixed), a FAIL
    without a verdict (nothing to tell it by), or a case that no longer compiles (UNRESOLVED)."""
    if out.code is UNRESOLVED:
        return True
    return out.code is FAIL and (out.verdict is None or out.verdict.is_regression)


def fails(out: Outcome, fail_on: str) -> bool:
    """Whether `out` makes the exit code 1 under `--fail-on`: `any` (lit's failures), `regression` (`is_regression`)
    or `cost:THRESHOLD` — a regression whose estimated cost reaches the threshold (`1%` of the golden's estimate,
    `40us`), a regression that could not be priced, or a case that no longer compiles."""
    if fail_on.startswith("cost:"):
        if verdict.is_contract(out) and out.code in (PASS, FAIL):
            return verdict.cost_reaches(out, parse_threshold(fail_on[5:]))
        if not is_regression(out):
            return False
        priced = out.verdict.cost if out.verdict is not None else None
        return priced is None or parse_threshold(fail_on[5:]).met_by(priced)
    if fail_on == "regression":
        return is_regression(out)
    return out.code.is_failure


def fail_on_type(allowed: tuple[str, ...]):
    """An argparse `type` for `--fail-on`: one of `allowed`, or `cost:PCT%` / `cost:USus`."""
    import argparse

    def parse(text: str) -> str:
        if text in allowed:
            return text
        if text.startswith("cost:"):
            try:
                parse_threshold(text[5:])
                return text
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {', '.join(allowed)}, cost:PCT% (e.g. cost:1%), cost:USus")
    return parse


def plan(cases: list[Case], targets: list[Target], profiles: list[str],
         skip: frozenset[tuple[str, str]] = frozenset()) -> Iterator[tuple[Case, Target, Profile]]:
    """Every (case, target, profile) to run: a case runs on the targets and profiles it lists; `skip`: (target,
    profile) pairs left out (`selection.unshipped_profiles`). Only the profiles of each
    target's platform run."""
    for target in targets:
        for profile in profiles:
            if (target.name, profile) in skip or not profile_applies(profile, target):
                continue
            for case in cases:
                if case.targets and target.name not in case.targets:
                    continue
                if profile not in case.profiles:
                    continue
                yield case, target, PROFILES[profile]


Job = tuple[Case, Target, Profile, "str | None", "CompileRequest | None"]


def unsupported_reason(profile: Profile, mode: str, jax_version: str, target: Target | None = None) -> str | None:
    """Why nothing compiles for `profile` (and `target`) here (UNSUPPORTED without compiling), or None."""
    if mode == "deviceless":
        reason = deviceless_unsupported(jax_version, [target] if target is not None else [])
        if reason is None and target is not None:  # the version compiles for the platform, not this architecture
            reason = target.platform.unsupported_reason(jax_version, target.arch) or None
        if reason is None and not profile.deviceless and not (target is not None and replays_autotune(profile, target)):
            reason = f"profile '{profile.name}' autotunes and needs a real GPU (use --mode device)"
            if target is not None and profile.name == "default":
                reason = (f"profile '{profile.name}' autotunes: deviceless, fp8-check replays the device's autotune "
                          f"results on NVIDIA targets only, not on {target.name} (use --mode device)")
        return reason
    return None


def compile_profile(profile: Profile, target: Target, mode: str, jax_version: str, goldens_root: Path | None) -> Profile:
    """The profile a planned compile runs under: deviceless `default` on NVIDIA replays the results file committed
    for the target and release under `goldens_root` (`<target>/autotune/<jax>.txt`; none: an empty one, XLA's
    deviceless defaults, said in each result); every other profile as it is."""
    if mode == "deviceless" and replays_autotune(profile, target) and jax_version:
        return default_profile_for(target, jax_version, goldens_root)
    return profile


def job_unsupported(case: Case, target: Target, profile: Profile, mode: str, jax_version: str) -> str | None:
    """Why one planned (case, target, profile) does not compile on `jax_version` (UNSUPPORTED), or None: the
    profile, target or release (`unsupported_reason`), or the case's requirement set's range. Nothing is built:
    `matrix --plan` asks it for every release."""
    reason = unsupported_reason(profile, mode, jax_version, target)
    if reason is None and case.requirements:  # its requirements do not install with this JAX
        reason = case.requirements.unsupported(jax_version)
        reason = reason and f"{reason} (run it on another with `fp8-check matrix --jax VERSION`)"
    return reason


def request_for(case: Case, target: Target, profile: Profile, numerics: "NumericsCheck | None" = None,
                mode: str = "", jax_version: str = "", goldens_root: Path | None = None) -> CompileRequest:
    """The compile request of one planned (case, target, profile): the only place requests for cases are built
    (with `mode`, `jax_version` and `goldens_root`: deviceless `default` replays autotune results, `compile_profile`)."""
    inputs = None
    if numerics is not None and numerics.skip_reason(case) is None:
        inputs = numerics.encode_inputs(case)
    replayed = compile_profile(profile, target, mode, jax_version, goldens_root)
    options = case_options(case)
    if replayed is not profile:  # XLA's text format flag, only where this XLA has it (JAX 0.11.1 on): else UNSUPPORTED
        fmt = FORMAT_OPTION
        options = dict(options or {}, **{fmt: replayed.compiler_options[fmt]})
        replayed = dataclasses.replace(replayed, compiler_options={k: v for k, v in replayed.compiler_options.items()
                                                                   if k != fmt})
    return CompileRequest(render(case), target, replayed, inputs, options,
                          case.requirements.requirements if case.requirements else (), case.env)


def _jobs(cases: list[Case], targets: list[Target], profiles: list[str], mode: str, jax_version: str,
          numerics: "NumericsCheck | None", skip: frozenset[tuple[str, str]] = frozenset(),
          goldens_root: Path | None = None) -> list[Job]:
    """Every planned (case, target, profile) with why it does not compile (UNSUPPORTED) or its compile request."""
    jobs: list[Job] = []
    for case, target, profile in plan(cases, targets, profiles, skip):
        reason = job_unsupported(case, target, profile, mode, jax_version)
        request = None if reason else request_for(case, target, profile, numerics, mode, jax_version, goldens_root)
        jobs.append((case, target, profile, reason, request))
    return jobs


def prefetch(compiler, targets: list[Target], mode: str, planned: list[CompileRequest], canary: bool = True) -> None:
    """Start compiling the canaries (see `canary.check_canary`) and then `planned`, all at once.

    Call it before `check_canary`: the canary then no longer holds the other workers up,
    and `run` (or `check_canary`) takes each compilation as it is asked for. A compiler
    without `prefetch` (one worker) compiles when asked, as before.
    """
    if not hasattr(compiler, "prefetch"):
        return
    jax_version = compiler.environment()["jax"]
    first = requests(supported(targets, jax_version), mode, jax_version) if canary else []
    compiler.prefetch(first + list(planned))


def run(
    cases: list[Case],
    targets: list[Target],
    profiles: list[str],
    mode: str,
    compiler: CompileService,
    goldens_root: Path,
    on_outcome: Callable[[Outcome], None] | None = None,
    numerics: "NumericsCheck | None" = None,
    canary: bool = False,
    skip: frozenset[tuple[str, str]] = frozenset(),
    broken_targets: dict[str, str] | None = None,
) -> list[Outcome]:
    """Judge every planned (case, target, profile); compiles go through `compiler.imap` (a pool compiles
    several at once) and outcomes are reported and returned in plan order.

    With `canary`, each target passes the canary gate first (`CanaryGate`), its canaries compiled alongside the
    cases (`prefetch`): a target whose canary fails is broken in this environment, its rows UNRESOLVED saying
    why, and the other targets go on; CanaryError (before any outcome) only when every target's canary fails.
    `broken_targets` (a dict) gets target name -> why, also for a broken target no case runs on."""
    env = compiler.environment()
    jax_version = env["jax"]
    canary = canary and canary_applies(mode, jax_version)
    jobs = _jobs(cases, targets, profiles, mode, jax_version, numerics, skip, goldens_root)
    requests = []
    for case, _t, _p, _r, request in jobs:
        if request is not None:  # a case with `price_at` is compiled a second time, at those shapes, right behind
            requests += [request] + ([price_request(case, request)] if case.priced_elsewhere else [])
    prefetch(compiler, targets, mode, requests, canary=canary)
    gate = CanaryGate(mode)
    checked = supported(targets, jax_version) if canary else []
    broken = {t.name: problem for t in checked if (problem := gate.problem(compiler, t)) is not None}
    if broken_targets is not None:
        broken_targets.update(broken)
    if checked and len(broken) == len(checked):  # no target may be judged here: the environment is broken
        raise CanaryError("; ".join(dict.fromkeys(broken.values())))
    compiled = compiler.imap(requests) if requests else iter(())
    outcomes: list[Outcome] = []
    for case, target, profile, reason, request in jobs:
        if reason or request is None:
            out = Outcome(case.id, target.name, profile.name, mode, jax_version, UNSUPPORTED, reason or "",
                          description=case.description, yaml=case.yaml_text, file=case.file)
        elif target.name in broken:  # this target's canary failed: its outcomes would be noise, the others go on
            next(compiled)
            if case.priced_elsewhere:
                next(compiled)
            out = Outcome(case.id, target.name, profile.name, mode, jax_version, UNRESOLVED,
                          f"target {target.name} is broken on jax {jax_version}: {broken[target.name]}",
                          description=case.description, yaml=case.yaml_text, file=case.file)
        else:
            comp = next(compiled)
            priced = next(compiled) if case.priced_elsewhere else None
            out = judge(case, comp, jax_version, goldens_root)
            if out.code is UNSUPPORTED and FORMAT_OPTION in out.reason:
                out.reason = ("deviceless `default` replays autotune results in XLA's AutotuneResults text format, "
                              "which this release cannot be told to read: " + out.reason)
            out.source = request.rendered.source
            out.repro_needs = repro_needs(case, request.rendered)
            price(out, target, priced, case)
            if priced is not None and not priced.ok and comp.ok:  # never priced at the test shapes instead
                first = (priced.error or "").strip().splitlines() or ["unknown error"]
                out.code, out.estimate = UNRESOLVED, None
                out.reason = f"price_at ({case.production_text()}) does not compile: {first[0][:500]}"
            if numerics is not None:
                apply_numerics(out, case, comp, numerics)
        outcomes.append(out)
        if on_outcome:
            on_outcome(out)
    return outcomes


def price_request(case: Case, request: CompileRequest) -> CompileRequest:
    """The compilation of `case` at its production shapes (`price_at`), which its cost estimate is priced at."""
    return dataclasses.replace(request, rendered=render(case.at_production()), inputs=None)


def shape_text(shape) -> str:
    return f"m={shape.m}, n={shape.n}, k={shape.k}" + (f", batch={shape.batch}" if shape.batch else "")


def price(out: Outcome, target: Target, priced: Compilation | None = None, case: Case | None = None) -> None:
    """Attach the roofline estimate of the compiled program (`out.estimate`) and, on a FAIL against a golden,
    what the change costs (`out.verdict.cost`); at the case's `price_at` shapes when it states them and they compiled.
    Pricing never changes an outcome: a program it cannot price stays unpriced."""
    if out.signature is None or not out.hlo:
        return
    try:
        hw = hardware(target)
        text, sig, where = out.hlo, out.signature, ""
        if priced is not None and priced.ok and priced.hlo and case is not None and case.priced_elsewhere:
            text, sig, where = priced.hlo, extract(priced.hlo), case.production_text()
        out.estimate = estimate(text, hw, where)
        if out.verdict is not None and verdict.is_contract(out):
            # a contract's own cost line compares estimates at the judged shapes; a layer that lost FP8 is priced
            # here, at the production shapes, as against a golden whose layer rule wants it in FP8
            assert out.expected is not None  # a contract is judged against its expectation
            lost = lost_fp8(out.expected[verdict.KEY], out.signature)
            if lost:
                out.verdict = dataclasses.replace(out.verdict, cost=against_expected({}, sig, out.estimate, hw,
                                                                                          out.signature, lost))
        elif out.verdict is not None and isinstance(out.expected, dict):
            rules = tuple(int(m.group(1)) for d in out.diffs if d.expected == LOW
                          and (m := re.fullmatch(r"layers\[.*\]\.gemms\[(\d+)\]", d.path)))  # layers a rule wants in FP8
            out.verdict = dataclasses.replace(out.verdict, cost=against_expected(out.expected, sig, out.estimate, hw,
                                                                                      out.signature, rules))
    except (ValueError, KeyError, TypeError, IndexError, ZeroDivisionError):  # a parser gap must not stop the run
        out.estimate = None


class NumericsCheck(Protocol):
    """`run --numerics`: executes each case and compares with a reference (harness/fp8_check/gpu/_numerics.py provides it;
    the runner takes it as an argument so that the pipeline does not import the GPU layer)."""

    def skip_reason(self, case: Case) -> str | None: ...

    def encode_inputs(self, case: Case) -> list[dict]: ...

    def check(self, case: Case, encoded_outputs: list[dict]) -> NumericsResult: ...


def apply_numerics(out: Outcome, case: Case, comp: Compilation, numerics: NumericsCheck) -> None:
    """Judge the executed outputs of `comp` against the float64 reference; a mismatch is a FAIL of its own."""
    skip = numerics.skip_reason(case)
    if skip:
        result = NumericsResult("skipped", skip)
    elif not comp.ok:
        result = NumericsResult("skipped", "the case did not compile")
    elif comp.execute_error or comp.outputs is None:
        result = NumericsResult("error", f"could not execute the compiled case: {comp.execute_error or 'no outputs'}")
    else:
        try:
            result = numerics.check(case, comp.outputs)
        except Exception as exc:  # a reference bug must not hide the rest of the run
            result = NumericsResult("error", f"could not compare: {type(exc).__name__}: {exc}")
    out.numerics = result
    if result.status == "fail":
        # A wrong result is a FAIL whatever the signature says (also for NEW and known fusion issues).
        prior = f" (signature: {out.code}{': ' + out.reason if out.reason else ''})" if out.code is not PASS else ""
        out.code, out.reason = FAIL, result.reason + prior
        # Shown under the FAIL line and kept in the results JSON's diffs.
        out.diffs.append(FieldDiff("numerics", "within tolerance of the float64 reference", result.reason))
        out.verdict = classify_extra(out.verdict or Verdict(NEUTRAL), "numerics",
                                     "within tolerance of the float64 reference", result.reason)
    elif result.status == "error" and not out.code.is_failure:
        out.code, out.reason = UNRESOLVED, "numerics: " + result.reason
