"""Stage 6: run cases through the pipeline and judge each against its golden: an `Outcome` per case x target x profile.

Outcome codes (harness/outcome.py) follow LLVM lit: PASS, FAIL, XFAIL, XPASS,
UNSUPPORTED, UNRESOLVED, plus NEW (no golden yet).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Iterator

from packaging.version import Version

from harness.pipeline import cost
from harness.pipeline import cost_policy
from harness.pipeline import golden, golden_source
from harness.pipeline import render
from harness.pipeline import signature
from harness.outcome import FAIL, NEW, PASS, UNRESOLVED, UNSUPPORTED, XFAIL, XPASS, Outcome
from harness.pipeline.block_cases import case_options  # noqa: F401  (re-exported for the commands)
from harness.pipeline.cases import Case
from harness.pipeline.compile import Compilation, CompileRequest, Compiler
from harness.targets import PROFILES, Profile, Target
from harness.verdict import NEUTRAL, Verdict, classify, classify_extra

MIN_DEVICELESS_JAX = Version("0.6.1")

CANARY = Case(
    id="canary_e4m3_plain",
    file="<built-in>",
    line=0,
    description="plain E4M3 x E4M3 matmul; on an FP8-capable target it must become an FP8 gemm",
    out_dtype="float32",
    profiles=("cublas",),
)


class CanaryError(RuntimeError):
    """The environment cannot produce FP8 gemms at all: reporting regressions would be noise."""


def deviceless_unsupported(jax_version: str) -> str | None:
    if Version(jax_version) < MIN_DEVICELESS_JAX:
        return (
            f"deviceless compilation needs JAX >= {MIN_DEVICELESS_JAX} (older XLA rejects runtime_version in the "
            "target config and then never emits FP8 gemms); run this version on a real GPU"
        )
    return None


def check_canary(compiler: Compiler, target: Target, cudnn: bool = True) -> signature.Signature | None:
    """Compile the canary for `target`; raise CanaryError if an FP8-capable target gets no FP8 gemm.

    With `cudnn` (deviceless), also prove that the target's cuDNN version took effect
    (`harness/target_check.py`): a CanaryError naming the field and the JAX version if not.
    """
    comp = compiler.compile(render.render(CANARY), target, PROFILES["cublas"])
    if not comp.ok:
        raise CanaryError(f"canary '{CANARY.id}' did not compile for {target.name}: {comp.error.splitlines()[0] if comp.error else ''}")
    sig = signature.extract(comp.hlo)
    if target.fp8_capable and sig.fp8_gemms == 0:
        hint = "" if target.has_runtime_version else " (its target config has no runtime_version)"
        found = ", ".join(f"{g.target} {'x'.join(g.operand_dtypes)}" for g in sig.gemms) or "no gemm"
        raise CanaryError(
            f"broken environment: a plain E4M3 x E4M3 matmul did not become an FP8 gemm on FP8-capable target "
            f"{target.name}{hint}; found {found}"
        )
    if cudnn and compiler.mode == "deviceless":
        from harness import target_check

        try:
            target_check.check_cudnn(compiler, target, compiler.environment()["jax"])
        except target_check.CudnnCanaryError as exc:
            raise CanaryError(str(exc)) from None
    return sig


def judge(case: Case, comp: Compilation, jax_version: str, goldens_root: Path) -> Outcome:
    out = Outcome(
        case=case.id, target=comp.target, profile=comp.profile, mode=comp.mode, jax=jax_version, code=UNRESOLVED,
        compile_seconds=comp.seconds, hlo=comp.hlo, stablehlo=comp.stablehlo, cached=comp.cached,
        description=case.description, yaml=case.yaml_text, file=case.file,
    )
    issue = case.known_issue(jax_version, comp.target, comp.profile)
    if issue:
        out.known_issue = {"url": issue.url, "jax": issue.jax, "summary": issue.summary}
    if not comp.ok:
        first = (comp.error or "").strip().splitlines()[0] if comp.error else "unknown error"
        if comp.unsupported:  # only an optional dependency the case declares (`requires:`)
            out.code, out.reason = UNSUPPORTED, comp.unsupported
        elif first.startswith("UnsupportedFlag"):  # an XLA flag this version lacks (block_cases.case_options)
            out.code, out.reason = UNSUPPORTED, first.split(": ", 1)[1]
        elif first.startswith("ImportError: this JAX"):  # a block-scaled case's API is missing in this JAX
            out.code, out.reason = UNSUPPORTED, f"the case's API is missing: {first.split(': ', 1)[1]}"
        elif issue:  # lit's XFAIL: a known issue active here expects this case to fail, also by not compiling
            name = issue.url or "(no upstream issue)"
            out.code = XFAIL
            out.reason = f"known issue {name}" + (f": {issue.summary}" if issue.summary else "") + f"; compile error: {first}"
        else:  # an import error of the case's own module or callable is an error like any other
            out.code, out.reason = UNRESOLVED, comp.error or "unknown error"
        return out
    try:
        sig = signature.extract(comp.hlo)
    except Exception as exc:  # a parser bug must not hide the rest of the run
        out.reason = f"could not parse the optimized HLO: {type(exc).__name__}: {exc}"
        return out
    out.signature = sig
    fc_problem = None
    if case.filecheck.get(comp.profile):
        from harness.pipeline.filecheck import run_filecheck

        out.filecheck = case.filecheck[comp.profile]
        fc_problem = run_filecheck(out.filecheck, comp.hlo)
    try:  # the mode's own golden, else (device mode) the deviceless one: golden_source.py
        source = golden_source.find(goldens_root, case.id, comp.target, comp.profile, comp.mode, jax_version)
        g, gpath = source.golden, source.path
    except golden.GoldenError as exc:
        out.reason = str(exc)
        return out
    exp = g.expected_for(jax_version) if g else None
    if exp is None:
        out.code = NEW
        out.reason = "no golden yet" if g is None else f"the golden has no expectation covering jax {jax_version}"
        out.reason += f"; bless it with: fp8-check bless -k {case.id} --target {comp.target} --profile {comp.profile}"
        return out
    out.expected = exp.signature
    out.diffs = golden.compare(exp.signature, sig.to_dict())
    if fc_problem:
        out.diffs.append(golden.FieldDiff("filecheck", "patterns match", fc_problem))
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
            out.verdict = classify(exp.signature, sig)
            if fc_problem:
                out.verdict = classify_extra(out.verdict, "filecheck", "patterns match", fc_problem)
    if source.fallback:
        out.reason = (f"fidelity finding: {out.reason}; " if out.code is FAIL else (out.reason + "; " if out.reason else "")) \
            + source.fidelity_note()
    return out


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
        if not is_regression(out):
            return False
        priced = out.verdict.cost if out.verdict is not None else None
        return priced is None or cost_policy.parse_threshold(fail_on[5:]).met_by(priced)
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
                cost_policy.parse_threshold(text[5:])
                return text
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {', '.join(allowed)}, cost:PCT% (e.g. cost:1%), cost:USus")
    return parse


def plan(cases: list[Case], targets: list[Target], profiles: list[str]) -> Iterator[tuple[Case, Target, Profile]]:
    """Every (case, target, profile) to run: a case runs on the targets and profiles it lists."""
    for target in targets:
        for profile in profiles:
            for case in cases:
                if case.targets and target.name not in case.targets:
                    continue
                if profile not in case.profiles:
                    continue
                yield case, target, PROFILES[profile]


Job = tuple[Case, Target, Profile, "str | None", "CompileRequest | None"]


def _jobs(cases: list[Case], targets: list[Target], profiles: list[str], mode: str, jax_version: str,
          numerics: bool) -> list[Job]:
    """Every planned (case, target, profile) with why it does not compile (UNSUPPORTED) or its compile request."""
    jobs: list[Job] = []
    for case, target, profile in plan(cases, targets, profiles):
        reason = None
        if mode == "deviceless":
            reason = deviceless_unsupported(jax_version)
            if reason is None and not profile.deviceless:
                reason = f"profile '{profile.name}' autotunes and needs a real GPU (use --mode device)"
        request = None
        if not reason:
            inputs = None
            if numerics:
                from harness.gpu import numerics as numerics_mod

                if numerics_mod.skip_reason(case) is None:
                    inputs = numerics_mod.encode_inputs(case)
            request = CompileRequest(render.render(case), target, profile, inputs, case_options(case))
        jobs.append((case, target, profile, reason, request))
    return jobs


def prefetch(compiler, targets: list[Target], mode: str, planned: list[CompileRequest], canary: bool = True) -> None:
    """Start compiling the canaries (see `check_canary`) and then `planned`, all at once.

    Call it before `check_canary`: the canary then no longer holds the other workers up,
    and `run` (or `check_canary`) takes each compilation as it is asked for. A compiler
    without `prefetch` (one worker) compiles when asked, as before.
    """
    if not hasattr(compiler, "prefetch"):
        return
    first: list[CompileRequest] = []
    if canary:
        from harness import target_check

        jax_version = compiler.environment()["jax"]
        for t in targets:
            first.append(CompileRequest(render.render(CANARY), t, PROFILES["cublas"]))
            if mode == "deviceless" and target_check.expects_cudnn(t, jax_version):
                first.append(CompileRequest(render.render(target_check.PROBE), t, PROFILES["cublas"]))
    compiler.prefetch(first + list(planned))


def run(
    cases: list[Case],
    targets: list[Target],
    profiles: list[str],
    mode: str,
    compiler: Compiler,
    goldens_root: Path,
    on_outcome: Callable[[Outcome], None] | None = None,
    numerics: bool = False,
    canary: bool = False,
) -> list[Outcome]:
    """Judge every planned (case, target, profile); compiles go through `compiler.imap` (a pool compiles
    several at once) and outcomes are reported and returned in plan order.

    With `canary`, each target's canary is checked first (`check_canary`; CanaryError before any
    outcome), compiled alongside the cases (`prefetch`)."""
    env = compiler.environment()
    jax_version = env["jax"]
    jobs = _jobs(cases, targets, profiles, mode, jax_version, numerics)
    requests = []
    for case, _t, _p, _r, request in jobs:
        if request is not None:  # a case with `price_at` is compiled a second time, at those shapes, right behind
            requests += [request] + ([price_request(case, request)] if case.price_at else [])
    prefetch(compiler, targets, mode, requests, canary=canary)
    for t in targets if canary else ():
        check_canary(compiler, t)
    compiled = compiler.imap(requests) if requests else iter(())
    outcomes: list[Outcome] = []
    for case, target, profile, reason, request in jobs:
        if reason:
            out = Outcome(case.id, target.name, profile.name, mode, jax_version, UNSUPPORTED, reason,
                          description=case.description, yaml=case.yaml_text, file=case.file)
        else:
            comp = next(compiled)
            priced = next(compiled) if case.price_at else None
            out = judge(case, comp, jax_version, goldens_root)
            out.source = request.rendered.source
            price(out, target, priced, case)
            if numerics:
                apply_numerics(out, case, comp)
        outcomes.append(out)
        if on_outcome:
            on_outcome(out)
    return outcomes


def price_request(case: Case, request: CompileRequest) -> CompileRequest:
    """The compilation of `case` at its production shapes (`price_at`), which its cost estimate is priced at."""
    return dataclasses.replace(request, rendered=render.render(dataclasses.replace(case, shape=case.price_at)), inputs=None)


def shape_text(shape) -> str:
    return f"m={shape.m}, n={shape.n}, k={shape.k}" + (f", batch={shape.batch}" if shape.batch else "")


def price(out: Outcome, target: Target, priced: Compilation | None = None, case: Case | None = None) -> None:
    """Attach the roofline estimate of the compiled program (`out.estimate`) and, on a FAIL against a golden,
    what the change costs (`out.verdict.cost`); at the case's `price_at` shapes when it states them and they compiled.
    Pricing never changes an outcome: a program it cannot price stays unpriced."""
    if out.signature is None or not out.hlo:
        return
    try:
        hw = cost.hardware(target)
        text, sig, where = out.hlo, out.signature, ""
        if priced is not None and priced.ok and case is not None and case.price_at:
            text, sig, where = priced.hlo, signature.extract(priced.hlo), shape_text(case.price_at)
        out.estimate = cost.estimate(text, hw, where)
        if out.verdict is not None and isinstance(out.expected, dict):
            out.verdict = dataclasses.replace(out.verdict, cost=cost.against_expected(out.expected, sig, out.estimate, hw))
    except (ValueError, KeyError, TypeError, IndexError, ZeroDivisionError):  # a parser gap must not stop the run
        out.estimate = None


def apply_numerics(out: Outcome, case: Case, comp: Compilation) -> None:
    """Judge the executed outputs of `comp` against the float64 reference; a mismatch is a FAIL of its own."""
    from harness.gpu import numerics

    if numerics.skip_reason(case):
        result = numerics.skipped(numerics.skip_reason(case))
    elif not comp.ok:
        result = numerics.skipped("the case did not compile")
    elif comp.execute_error or comp.outputs is None:
        result = numerics.NumericsResult("error", f"could not execute the compiled case: {comp.execute_error or 'no outputs'}")
    else:
        try:
            result = numerics.check(case, comp.outputs)
        except Exception as exc:  # a reference bug must not hide the rest of the run
            result = numerics.NumericsResult("error", f"could not compare: {type(exc).__name__}: {exc}")
    out.numerics = result
    if result.status == "fail":
        # A wrong result is a FAIL whatever the signature says (also for NEW and known fusion issues).
        prior = f" (signature: {out.code}{': ' + out.reason if out.reason else ''})" if out.code is not PASS else ""
        out.code, out.reason = FAIL, result.reason + prior
        # Shown under the FAIL line and kept in the results JSON's diffs.
        out.diffs.append(golden.FieldDiff("numerics", "within tolerance of the float64 reference", result.reason))
        out.verdict = classify_extra(out.verdict or Verdict(NEUTRAL), "numerics",
                                     "within tolerance of the float64 reference", result.reason)
    elif result.status == "error" and not out.code.is_failure:
        out.code, out.reason = UNRESOLVED, "numerics: " + result.reason
