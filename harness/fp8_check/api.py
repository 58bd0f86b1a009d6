"""Check your own model: the fusion signature of any JAX callable, and assertions on it.

    from fp8_check.api import fusion_signature, assert_fusion

    report = fusion_signature(my_fn, x, w, target="h100")          # arrays or jax.ShapeDtypeStruct
    print(report.summary())                                         # 3 kernels; __cublas$lt$matmul$f8 ...
    assert_fusion(my_fn, x, w, target="h100", fp8_gemms=1, epilogue="RELU", fp8_output=True)

Works for plain functions, `jax.jit`-ed ones, flax `model.apply` (variables as an argument) and gradients.
Arguments may be pytrees: array and `jax.ShapeDtypeStruct` leaves become inputs (shapes and dtypes only),
other leaves are static. A callable is lowered *in the caller's process* with `jax.export` (no GPU needed)
and compiled by fp8-check's compile worker exactly as the YAML cases are (deviceless); closures, bound
modules and gradients work, and an XLA abort kills only the worker. Limit: `jax.export` refuses custom calls
without a compatibility guarantee (e.g. cuDNN attention). `FusionReport.estimate()` prices the program
(harness/fp8_check/cost/_model.py); `check_golden`'s FAIL carries the change's cost (`verdict.cost`).

Stable API: `fusion_signature`, `assert_fusion`, `fusion_diffs`, `check_golden`, `judge_golden` (the judgement as the
one result record, `fp8_check.verdict._outcome.Outcome`), `Checker`, `FusionReport`, `FusionMismatch`, `EnvironmentProblem`;
keyword-only past the callable and its arguments.
"""

from __future__ import annotations

import atexit
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fp8_check import cost, platforms, verdict
from fp8_check.compile import (
    cpu_only_without_gpu,
    export_callable,
    non_native_fp8,
    replays_autotune,
    sharding_of,
    target_devices,
)
from fp8_check.core import is_narrow
from fp8_check.platforms import Profile
from fp8_check.report import gemm_summary
from fp8_check.run import CanaryGate, compile_profile, judge_signature, price
from fp8_check.signature import Signature, attributed, coverage, extract, layer_table
from fp8_check.targets import (
    MODES,
    Coverage,
    Target,
    as_profile,
    as_target,
    gpu_present,
    platform_of,
    profile_applies,
    resolve_mode,
)
from fp8_check.verdict import (
    NEW,
    UNRESOLVED,
    FieldDiff,
    LayerRule,
    Outcome,
    Verdict,
    check_layers,
    compare,
    from_dicts,
    parse,
    path_for,
)
from fp8_check.versions import OtherEnvironments
from fp8_check.worker import BACKEND_QUESTIONS, not_representative

cpu_only_without_gpu()  # a CPU-only script that uses JAX after importing this: no cuInit traceback

__all__ = [
    "BoundChecker", "Checker", "EnvironmentProblem", "FusionMismatch", "FusionReport", "assert_fusion", "check_golden",
    "export_callable", "fusion_diffs", "fusion_signature", "judge_golden",
]


class EnvironmentProblem(RuntimeError):
    """The compile worker cannot start, or the target cannot produce FP8 gemms at all (the canary)."""


class FusionMismatch(AssertionError):
    """The compiled fusion differs from what a test expected; `diffs` holds the differing fields."""

    def __init__(self, message: str, diffs: list[FieldDiff], report: "FusionReport | None" = None,
                 verdict: "Verdict | None" = None):
        super().__init__(message)
        self.diffs, self.report = diffs, report
        self.verdict = verdict  # against a golden: regression / improvement / neutral / mixed (harness/fp8_check/verdict/_classify.py)


@dataclass(frozen=True)
class FusionReport:
    """One callable compiled for one target and profile."""

    name: str
    target: str
    profile: str
    mode: str
    jax: str
    signature: Signature
    hlo: str
    stablehlo: str
    seconds: float
    # What the target cannot run natively, one line each (an FP8 type its gemm library lacks: XLA upcasts it)
    warnings: tuple[str, ...] = ()
    # Why the signature may not be what the GPU runs: the traced code asked JAX for the device and saw the CPU
    not_representative: str = ""
    # deviceless `default`: which autotuned decisions the committed results file made, which XLA's defaults made
    autotune: Coverage | None = None

    @property
    def kernels(self) -> int:
        return self.signature.kernels

    @property
    def gemms(self):
        return self.signature.gemms

    @property
    def fp8_gemms(self) -> int:
        return self.signature.fp8_gemms

    def summary(self) -> str:
        """`3 kernels; __cublas$lt$matmul$f8 f8e4m3fnxf8e4m3fn->f8e4m3fn RELU +amax`, as `fp8-check run` prints it."""
        return gemm_summary(self.signature)

    def layer_table(self) -> str:
        """Per layer and pass: the engine and operand dtypes of its matmuls, then the coverage line."""
        return "\n".join([*layer_table(self.signature, p := platform_of(self.target)), coverage(self.signature, p).line()])

    def where(self) -> str:
        return f"{self.name} on {self.target}/{self.profile} ({self.mode}, jax {self.jax})"

    def estimate(self):
        """The program's roofline estimate on its target (fp8_check.cost._model.Estimate: `total_us`, `fp8_us`, `kernels`)."""
        try:
            return cost.estimate(self.hlo, cost.hardware(as_target(self.target)))
        except (ValueError, KeyError, TypeError, IndexError, ZeroDivisionError):
            return None

    def to_dict(self, with_text: bool = False) -> dict:
        d: dict = {"name": self.name, "target": self.target, "profile": self.profile, "mode": self.mode, "jax": self.jax,
             "compile_seconds": round(self.seconds, 4), "signature": self.signature.to_dict(annotations=True)}

        d["coverage"] = coverage(self.signature, platform_of(self.target)).to_dict()
        d.update({"warnings": list(self.warnings)} if self.warnings else {})
        if attributed(self.signature):
            d["coverage"]["line"] = coverage(self.signature, platform_of(self.target)).line()
        if (est := self.estimate()) is not None:
            d["estimate"] = est.to_dict(kernels=with_text)
        d.update({"not_representative": self.not_representative} if self.not_representative else {})
        if self.autotune is not None:
            d["autotune"] = dict(self.autotune.to_json(), summary=self.autotune.summary())
        if with_text:
            d.update(hlo=self.hlo, stablehlo=self.stablehlo)
        return d


def _name_of(fn: Callable) -> str:
    inner = getattr(fn, "func", None) or getattr(fn, "__wrapped__", None) or fn
    return getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or type(fn).__name__


# ------------------------------------------------------------------ compiling


class Checker:
    """A compile worker for one mode, reusable across many callables; close it (or use `with`) when done.

    `fusion_signature` and `assert_fusion` use a shared `Checker` per mode, closed at exit.
    """

    def __init__(self, mode: str = "deviceless", python: str | None = None, timeout: float | None = None):
        from fp8_check.compile import DEFAULT_TIMEOUT, Compiler  # start-up: see tests/house/test_imports.py

        if mode not in MODES:
            raise ValueError(f"mode: unknown mode '{mode}'; allowed: {', '.join(MODES)}")
        self.mode = resolve_mode(mode)
        if self.mode == "device":
            if not gpu_present():
                raise ValueError("mode 'device' compiles on a local NVIDIA GPU and this machine has none; use 'deviceless'")
        self.compiler = Compiler(self.mode, python=python, timeout=timeout or DEFAULT_TIMEOUT)
        self._others = OtherEnvironments(self.mode, timeout or DEFAULT_TIMEOUT)  # mi300x: the ROCm environment
        self._gate = CanaryGate(self.mode, refuse_unsupported=True)  # the environment's problem, once per target
        self.not_representative = ""
        # Questions the checked code asked before tracing (importing it, its --args factory) that this machine
        # answered, not the target: `fp8-check check` sets them; every result then says NOT REPRESENTATIVE.
        self.asked_outside: list[str] = []
        # where deviceless `default` finds the committed autotune results (<root>/<target>/autotune/<jax>.txt);
        # None: the checkout's goldens/, else ./goldens
        self.goldens_root: Path | None = None
        self._lock = threading.Lock()

    def compiler_for(self, target: Target):
        """The compiler that compiles for `target` (this environment's, or its platform's own)."""
        return self._others.compiler_for(target, self.compiler, EnvironmentProblem)

    def environment(self, target: Target | None = None) -> dict:
        from fp8_check.compile import WorkerError

        try:
            return (self.compiler if target is None else self.compiler_for(target)).environment()
        except WorkerError as exc:
            hint = platforms.of_targets([] if target is None else [target]).start_hint()
            raise EnvironmentProblem(f"cannot start the compile worker ({hint}): {exc}") from None

    def signature(self, fn: Callable, *args: Any, target: str | Target = platforms.DEFAULT.default_target, profile: str | Profile | None = None,
                  name: str | None = None, **kwargs: Any) -> FusionReport:
        """Compile `fn(*args, **kwargs)` for `target` under `profile`; its `FusionReport`.

        Raises `ValueError` for an unknown target/profile, `TypeError` for a non-array
        argument, `EnvironmentProblem` for a broken environment, and `RuntimeError` with
        XLA's error when the function does not compile.
        """
        t = as_target(target)
        p = as_profile(t.platform.canary_profile if profile is None else profile)  # None: the platform's first
        if not profile_applies(p, t):
            theirs = ", ".join(x.name for x in t.platform.profiles)
            raise ValueError(f"profile: '{p.name}' is no profile of {t.platform.vendor} targets ({t.name}: {theirs})")
        if self.mode == "deviceless" and not p.deviceless and not replays_autotune(p, t):
            raise ValueError(f"profile '{p.name}' autotunes and needs a real GPU (deviceless, it replays autotune "
                             f"results on NVIDIA targets only); use one of {', '.join(x.name for x in t.platform.profiles if x.deviceless)} "
                             "deviceless")
        sharding = sharding_of(args, kwargs)
        if sharding is not None:
            devices = 1
            for _, size in sharding["mesh"]:
                devices *= size
            if devices != t.devices:
                raise ValueError(f"target: the inputs are sharded over a mesh of {devices} devices "
                                 f"({', '.join(f'{a}={n}' for a, n in sharding['mesh'])}); target '{t.name}' has "
                                 f"{t.devices} GPU(s)" + (f" (use a multi-device target such as h100x{devices})" if devices > 1 else ""))
        asked: list[str] = []  # what the traced code asked JAX about the device, answered with the target's devices
        own = (lambda: target_devices(t, t.versions_dict())) if self.mode == "deviceless" else None
        data = export_callable(fn, args, kwargs, platform=t.platform.jax_platform, devices=own, asked=asked)
        target_answered = own is not None and own() is not None
        local = [] if own is None else [q for q in asked if not target_answered or q in BACKEND_QUESTIONS]
        local = list(dict.fromkeys([*self.asked_outside, *local]))
        self.not_representative = not_representative(local, t.name)
        with self._lock:
            env = self.environment(t)
            if (problem := self._gate.problem(self.compiler_for(t), t)) is not None:
                raise EnvironmentProblem(problem)
            # deviceless `default`: the results file committed for the target and release (_runner.compile_profile)
            compile_as = compile_profile(p, t, self.mode, env["jax"], self.goldens_root)
            comp = self.compiler_for(t).compile_exported(name or _name_of(fn), data, t, compile_as, sharding=sharding)
        label = name or _name_of(fn)
        if not comp.ok:
            raise RuntimeError(f"{label} did not compile for {t.name}/{p.name} ({self.mode}): {comp.error}")
        hlo = comp.hlo or ""  # set whenever the compilation succeeded
        return FusionReport(label, t.name, p.name, self.mode, env["jax"], extract(hlo), hlo,
                            comp.stablehlo or "", comp.seconds, non_native_fp8(t, args, kwargs), self.not_representative,
                            comp.autotune)

    def close(self) -> None:
        self.compiler.close()
        self._others.close()

    def __enter__(self) -> "Checker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_SHARED: dict[str, Checker] = {}
_SHARED_LOCK = threading.Lock()


def _shared(mode: str) -> Checker:
    with _SHARED_LOCK:
        if mode not in _SHARED:
            _SHARED[mode] = Checker(mode)
        return _SHARED[mode]


@atexit.register
def _close_shared() -> None:
    for checker in _SHARED.values():
        checker.close()
    _SHARED.clear()


def fusion_signature(fn: Callable, *args: Any, target: str | Target = platforms.DEFAULT.default_target, profile: str | Profile | None = None,
                     mode: str = "deviceless", name: str | None = None, **kwargs: Any) -> FusionReport:
    """The fusion signature of `fn(*args, **kwargs)` compiled for `target` (default h100, no GPU needed).

    `profile`: on GPUs `cublas` (XLA's FP8 GEMM rewriter, default) or `triton`; `default` on the GPU
    (`mode="device"`), or deviceless on NVIDIA replaying the committed autotune results (`report.autotune` says
    which decisions they made and which XLA's deviceless defaults made); on TPUs `tpu` (None: the target platform's first profile). Keyword arguments other than these are passed to `fn`.
    """
    return _shared(mode).signature(fn, *args, target=target, profile=profile, name=name, **kwargs)


# ------------------------------------------------------------------ expectations

EXPECTATIONS = ("kernels", "gemms", "fp8_gemms", "epilogue", "damax", "fp8_output", "no_upcast_dot", "signature")


def fusion_diffs(sig: Signature | dict, *, kernels: int | None = None, gemms: int | None = None,
                 fp8_gemms: int | None = None, epilogue: str | None = None, damax: bool | None = None,
                 fp8_output: bool | None = None, no_upcast_dot: bool | None = None,
                 signature: dict | None = None, layers: list | None = None) -> list[FieldDiff]:
    """The fields of `sig` that differ from the stated expectations (empty: as expected).

    - `kernels`, `gemms`, `fp8_gemms`: how many kernels / gemms / gemms on FP8 operands;
    - `epilogue` (`RELU`, `GELU`, `BIAS`, `BIAS_RELU`, `DEFAULT`, …), `damax` (the gemm also
      writes the abs-max of its output) and `fp8_output` (the gemm writes an FP8 type):
      checked on every FP8 gemm, and a difference when there is none;
    - `no_upcast_dot`: every gemm runs on FP8 operands and no `dot` is left outside a gemm;
    - `signature`: a partial signature dict compared like a golden (only the fields it states);
    - `layers`: layer rules, `{"layer": "*/Dense_[01]/*", "pass": "backward", "fp8": True}` dicts or
      `"*/Dense_[01]/*@backward=fp8"` strings (harness/fp8_check/verdict/rules/layers.py).
    """
    if isinstance(sig, dict):
        sig = Signature.from_dict(sig)
    out: list[FieldDiff] = []
    if kernels is not None and sig.kernels != kernels:
        out.append(FieldDiff("kernels", kernels, sig.kernels))
    if gemms is not None and len(sig.gemms) != gemms:
        out.append(FieldDiff("gemms", f"{gemms} gemm(s)", f"{len(sig.gemms)}: {_gemm_list(sig)}"))
    if fp8_gemms is not None and sig.fp8_gemms != fp8_gemms:
        out.append(FieldDiff("fp8_gemms", fp8_gemms, f"{sig.fp8_gemms} ({_gemm_list(sig)})"))
    fp8 = [(i, g) for i, g in enumerate(sig.gemms) if g.fp8]
    per_gemm = [(k, v) for k, v in (("epilogue", epilogue), ("damax", damax), ("fp8_output", fp8_output)) if v is not None]
    if per_gemm and not fp8:
        for key, value in per_gemm:
            out.append(FieldDiff(f"gemms[*].{key}", value, f"(no FP8 gemm; found {_gemm_list(sig)})"))
    for i, g in fp8:
        if epilogue is not None and (g.epilogue or "DEFAULT") != epilogue:
            out.append(FieldDiff(f"gemms[{i}].epilogue", epilogue, g.epilogue or "(none)"))
        if damax is not None and bool(g.damax_output or g.amax) != damax:
            out.append(FieldDiff(f"gemms[{i}].damax_output", damax, bool(g.damax_output or g.amax)))
        if fp8_output is not None and is_narrow(g.output) != fp8_output:
            out.append(FieldDiff(f"gemms[{i}].output", "an FP8 type" if fp8_output else "not an FP8 type", g.output))
    if no_upcast_dot:
        for i, g in enumerate(sig.gemms):
            if not g.fp8:
                out.append(FieldDiff(f"gemms[{i}].operand_dtypes", "FP8 operands (no upcast dot)",
                                     f"[{', '.join(g.operand_dtypes)}] ({g.target})"))
        if "dot" in sig.unfused:
            out.append(FieldDiff("unfused", "no dot outside a gemm", ", ".join(sig.unfused)))
    if signature:
        out += compare(signature, sig.to_dict())
    if layers:
        rules = [r if isinstance(r, LayerRule) else parse(r)
                 if isinstance(r, str) else from_dicts([r])[0] for r in layers]
        out += check_layers(rules, sig)
    return out


def _gemm_list(sig: Signature) -> str:
    return "; ".join(f"{g.target} {'x'.join(g.operand_dtypes)}->{g.output}" for g in sig.gemms) or "no gemm"


def mismatch_message(report: FusionReport, diffs: list[FieldDiff], headline: str = "") -> str:
    lines = [headline or f"fusion mismatch: {report.where()}: {len(diffs)} field(s) differ"]
    lines += [f"    {d}" for d in diffs]
    lines.append(f"  found: {report.summary()}")
    return "\n".join(lines)


def assert_fusion(fn: Callable | FusionReport, *args: Any, target: str | Target = platforms.DEFAULT.default_target,
                  profile: str | Profile | None = None, mode: str = "deviceless", name: str | None = None,
                  kernels: int | None = None, gemms: int | None = None, fp8_gemms: int | None = None,
                  epilogue: str | None = None, damax: bool | None = None, fp8_output: bool | None = None,
                  no_upcast_dot: bool | None = None, signature: dict | None = None, layers: list | None = None,
                  **kwargs: Any) -> FusionReport:
    """Compile `fn(*args, **kwargs)` (or take a `FusionReport`) and check the expected fusion.

    Raises `FusionMismatch` (an AssertionError) listing each differing field as
    `path: expected X, found Y`, the way `fp8-check run` prints a FAIL. Returns the report.
    """
    __tracebackhide__ = True  # pytest: show the field diff, not these frames
    if isinstance(fn, FusionReport):
        report = fn
    else:
        report = fusion_signature(fn, *args, target=target, profile=profile, mode=mode, name=name, **kwargs)
    diffs = fusion_diffs(report.signature, kernels=kernels, gemms=gemms, fp8_gemms=fp8_gemms, epilogue=epilogue,
                         damax=damax, fp8_output=fp8_output, no_upcast_dot=no_upcast_dot, signature=signature,
                         layers=layers)
    if diffs:
        raise FusionMismatch(mismatch_message(report, diffs), diffs, report)
    return report


# ------------------------------------------------------------------ goldens for user tests


def check_golden(report: FusionReport, goldens_root: str | Path, *, bless: bool = False, name: str | None = None) -> str:
    """Compare `report` with its golden `<root>/<target>/<profile>/<mode>/<name>.yaml` (the CLI's layout).

    With `bless=True` the golden is (re)written atomically instead and the unified diff applied
    is returned ('' when unchanged). Without it, a missing golden or a difference raises
    `FusionMismatch`; returns ''.
    """

    __tracebackhide__ = True  # pytest: show the field diff, not these frames
    case = _golden_name(name or report.name)
    path = path_for(Path(goldens_root), case, report.target, report.profile, report.mode)
    if bless:
        return verdict.bless(Path(goldens_root), case, report.target, report.profile, report.mode, report.jax,
                            report.signature.to_dict(),
                            autotune=report.autotune.record() if report.autotune is not None else None)
    out = judge_golden(report, goldens_root, name=case)
    if out.code is NEW:  # nothing blessed; or, against the nearest release's golden, differences but no regression
        message = new_golden_message(report, out, path)
        if out.diffs:
            message = mismatch_message(report, out.diffs, message)
        raise FusionMismatch(message, out.diffs, report, out.verdict)
    if out.diffs:
        nearest = out.reason.split(";")[0] if out.reason.startswith("against the golden of") else ""
        raise FusionMismatch(mismatch_message(report, out.diffs, f"FAIL {report.where()}: {len(out.diffs)} field(s) "
                                                                 f"differ from {path}"
                                              + (f" ({nearest})" if nearest else "")
                                              + (f" [{out.verdict.cls}]" if out.verdict else "")
                                              + (f"; {out.verdict.cost.text()}" if out.verdict and out.verdict.cost
                                                 else "")),
                             out.diffs, report, out.verdict)
    return ""


def judge_golden(report: FusionReport, goldens_root: str | Path, *, name: str | None = None) -> Outcome:
    """`report` judged against its golden exactly as `fp8-check run` judges a case (_runner.judge_signature):
    the one result record (`fp8_check.verdict._outcome.Outcome`: PASS, FAIL with its structured `diffs` and a verdict that
    carries what the change costs, or NEW). Raises GoldenError for an unreadable golden."""
    out = judge_signature(Outcome(_golden_name(name or report.name), report.target, report.profile, report.mode, report.jax,
                                         UNRESOLVED, autotune=report.autotune), report.signature, Path(goldens_root))
    out.hlo, out.stablehlo, out.compile_seconds = report.hlo, report.stablehlo, report.seconds
    price(out, as_target(report.target))  # a FAIL's verdict carries what the change costs (verdict.cost)
    return out


def _golden_name(case: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", case):
        raise ValueError(f"golden name {case!r}: use letters, digits, '_', '.', '-' (pass name=...)")
    return case


PYTEST_BLESS = "pytest --fp8-bless (or check_golden(..., bless=True))"


def new_golden_message(report: FusionReport, out: Outcome, path: Path, how: str = PYTEST_BLESS) -> str:
    """A NEW result's line: no golden at `path` yet, and `how` the caller records it (pytest's way by default;
    `fp8-check check` names its own command)."""
    why = out.reason.split(";")[0]
    return f"NEW {report.where()}: {why} at {path}; record it with {how}"


# ------------------------------------------------------------------ bound to one target/profile (the pytest fixture)


class BoundChecker:
    """`Checker` methods bound to one target, profile and goldens directory: what the pytest fixture `fp8` is.

        def test_dense(fp8):
            fp8.assert_fusion(forward, x, w, fp8_gemms=1, epilogue="RELU")
            fp8.check_golden("dense_forward", forward, x, w)     # goldens/<target>/<profile>/<mode>/dense_forward.yaml
    """

    def __init__(self, checker: Checker, target: str | Target, profile: str | Profile,
                 goldens_root: str | Path = "goldens", bless: bool = False):
        self.checker = checker
        self.target, self.profile = as_target(target), as_profile(profile)
        self.goldens_root, self.bless = Path(goldens_root), bless

    @property
    def mode(self) -> str:
        return self.checker.mode

    def signature(self, fn: Callable, *args: Any, name: str | None = None, **kwargs: Any) -> FusionReport:
        return self.checker.signature(fn, *args, target=self.target, profile=self.profile, name=name, **kwargs)

    def assert_fusion(self, fn: Callable | FusionReport, *args: Any, kernels: int | None = None,
                      gemms: int | None = None, fp8_gemms: int | None = None, epilogue: str | None = None,
                      damax: bool | None = None, fp8_output: bool | None = None, no_upcast_dot: bool | None = None,
                      signature: dict | None = None, name: str | None = None, layers: list | None = None,
                      **kwargs: Any) -> FusionReport:
        __tracebackhide__ = True
        report = fn if isinstance(fn, FusionReport) else self.signature(fn, *args, name=name, **kwargs)
        return assert_fusion(report, kernels=kernels, gemms=gemms, fp8_gemms=fp8_gemms, epilogue=epilogue,
                             damax=damax, fp8_output=fp8_output, no_upcast_dot=no_upcast_dot, signature=signature,
                             layers=layers)

    def check_golden(self, name: str, fn: Callable | FusionReport, *args: Any, **kwargs: Any) -> FusionReport:
        """Compare with (or, blessing, record) the golden `name`; raises FusionMismatch on a difference or a missing golden."""
        __tracebackhide__ = True  # pytest: show the field diff, not these frames
        report = fn if isinstance(fn, FusionReport) else self.signature(fn, *args, name=name, **kwargs)
        diff = check_golden(report, self.goldens_root, bless=self.bless, name=name)
        if diff:
            print(diff)
        return report
