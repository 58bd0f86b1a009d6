"""The canaries: is this environment able to produce FP8 gemms at all, and did the target's cuDNN version take effect?

Every run, bless, matrix version and pytest session checks them once per target before
judging anything (`check_canary`), compiled alongside the cases (`requests`, queued
first by `runner.prefetch`):

- the FP8 canary: a plain E4M3 x E4M3 matmul under the `cublas` profile must become an
  FP8 gemm on an FP8-capable target (sm_89 and newer); if not, the environment is broken
  (typically a target config without `runtime_version`) and reporting every case as a
  regression would be noise;
- a platform's own probes (Platform.probes; NVIDIA's cuDNN canary, fp8_check.platforms._nvidia.CUDNN_PROBE): on a
  target with the probe's feature (`cudnn-block-scaled`: compute capability >= 10) and a DNN library version at or
  above XLA's threshold, a tiny MXFP8 `jax.nn.scaled_matmul` must become the probe's call
  (`__cudnn$blockScaledDot`); when it does not, the version the target states did not take effect, and the message
  names the field the worker wrote it to and the JAX version.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fp8_check.cases import Block, BlockScaledSpec, Case, PatternSpec, Shape
from fp8_check.compile import CompileRequest, CompileService, render
from fp8_check.core import BrokenEnvironmentError
from fp8_check.platforms import DEFAULT, Probe
from fp8_check.signature import Signature, extract
from fp8_check.targets import PROFILES, Target
from fp8_check.worker import dnn_field_read, dnn_fields_written

CANARY = Case(
    id="canary_e4m3_plain",
    file="<built-in>",
    line=0,
    description="plain E4M3 x E4M3 matmul; on an FP8-capable target it must become an FP8 gemm",
    spec=PatternSpec(out_dtype="float32"),
    profiles=(DEFAULT.canary_profile,),
)
CANARY_FP8 = "float8_e4m3fn"  # the canary's operand type (PatternSpec's default)


def canary_for(target: Target) -> Case:
    """The FP8 canary in the target's own FP8 type: E4M3 (OCP) on NVIDIA and gfx950, E4M3 fnuz on gfx942."""
    native = target.native_fp8
    if not native or native[0] == CANARY_FP8:
        return CANARY
    short = native[0].replace("float8_", "")
    return replace(CANARY, id=f"canary_{short}_plain", spec=PatternSpec(a_dtype=native[0], b_dtype=native[0]),
                   description=f"plain {short} x {short} matmul; on {target.arch} it must become an FP8 gemm")


class CanaryError(BrokenEnvironmentError, RuntimeError):
    """The environment cannot produce FP8 gemms at all: reporting regressions would be noise."""

    prefix = ""  # its message says "broken environment" itself



def probe_case(probe: Probe) -> Case:
    """A platform's probe (Platform.probes) as the case the compile service runs."""
    api, recipe, size = probe.block
    return Case(id=probe.id, file="<built-in>", line=0, description=probe.description,
                spec=BlockScaledSpec(block=Block(api, recipe, size), a_dtype=probe.a_dtype, b_dtype=probe.b_dtype,
                                     scale_dtype=probe.scale_dtype, transpose_b=probe.transpose_b, shape=Shape(*probe.shape)),
                profiles=(DEFAULT.canary_profile,))


def probe_of(target: Target) -> Probe | None:
    """The probe of the target's platform (the first; None: its platform has none)."""
    return next(iter(target.platform.probes()), None)


# The default platform's probe (the cuDNN block-scaled one), as the faces name it.
_DEFAULT_PROBE = next(iter(DEFAULT.probes()), None)
BLOCK_SCALED_TARGET = _DEFAULT_PROBE.reaches if _DEFAULT_PROBE else ""
PROBE = probe_case(_DEFAULT_PROBE) if _DEFAULT_PROBE else None


class CudnnCanaryError(RuntimeError):
    """The target's DNN library version (cuDNN) did not take effect in this XLA."""


def cudnn_threshold(jax_version: str, probe: Probe | None = _DEFAULT_PROBE) -> tuple[int, ...]:
    """The DNN library version from which XLA rewrites the probe's block-scaled dot (cuDNN on sm >= 10)."""
    return probe.min_dnn(jax_version) if probe else ()


def expects_cudnn(target: Target, jax_version: str) -> bool:
    probe = probe_of(target)
    return (probe is not None and probe.feature in target.features and target.versions is not None
            and target.versions.dnn >= probe.min_dnn(jax_version))


@dataclass
class CanaryResult:
    checked: bool  # the probe ran and was judged
    reached: bool  # the probe's call (__cudnn$blockScaledDot) appeared
    note: str = ""


def check_cudnn(compiler, target: Target, jax_version: str) -> CanaryResult:
    """Run the platform's probe where it applies; raise CudnnCanaryError when its call is not reached."""
    probe = probe_of(target)
    if probe is None:
        return CanaryResult(False, False, f"no probe on {target.platform.vendor} targets")
    cc = f"{target.compute_capability[0]}.{target.compute_capability[1]}"
    if not expects_cudnn(target, jax_version):
        why = (probe.lacks.format(arch=target.arch, cc=cc) if probe.feature not in target.features else
               f"{probe.library} {_v(target)} is below XLA's block-scaled threshold "
               f"{'.'.join(map(str, probe.min_dnn(jax_version)))}")
        return CanaryResult(False, False, f"no {probe.library} block-scaled path expected: {why}")
    case = probe_case(probe)
    comp = compiler.compile(render(case), target, PROFILES[target.platform.canary_profile])
    if not comp.ok:
        first = (comp.error or "").strip().splitlines()[0] if comp.error else ""
        if comp.unsupported:  # this JAX has no jax.nn.scaled_matmul
            return CanaryResult(False, False, f"not checked: {comp.unsupported}")
        raise CudnnCanaryError(f"the {probe.library} canary '{probe.id}' did not compile for {target.name} on jax "
                               f"{jax_version}: {first}")
    sig = extract(comp.hlo or "")
    if not any(g.target == probe.reaches for g in sig.gemms):
        form = sig.block_scaled.form if sig.block_scaled else "no block-scaled op"
        raise CudnnCanaryError(
            f"broken environment: target {target.name} states {probe.library} {_v(target)} (written to "
            f"{' and '.join(dnn_fields_written(target.write_for_jax or jax_version))}; jax {jax_version} reads "
            f"{dnn_field_read(jax_version)}), but a tiny MXFP8 scaled_matmul on compute capability "
            f"{cc} did not reach {probe.reaches} "
            f"({sig.kernels} kernels, {form}): XLA did not take the {probe.library} version from field "
            f"'{dnn_field_read(jax_version)}'")
    return CanaryResult(True, True, f"{probe.reaches} reached ({sig.kernels} kernels)")


def _v(target: Target) -> str:
    return ".".join(map(str, target.versions.dnn)) if target.versions else "none"


def check_canary(compiler: CompileService, target: Target, cudnn: bool = True) -> Signature | None:
    """Compile the canary for `target`; raise CanaryError if an FP8-capable target gets no FP8 gemm.

    With `cudnn` (deviceless), also prove that the target's cuDNN version took effect
    (`harness/fp8_check/run/_target_check.py`): a CanaryError naming the field and the JAX version if not.
    """
    canary = canary_for(target)
    comp = compiler.compile(render(canary), target, PROFILES[target.platform.canary_profile])
    if not comp.ok:
        hint = target.platform.flags_hint()  # a flags variable the user set: the probable cause, said first
        raise CanaryError(f"canary '{canary.id}' did not compile for {target.name}{f' ({hint})' if hint else ''}: "
                          f"{comp.error.splitlines()[0] if comp.error else ''}")
    sig = extract(comp.hlo or "")
    if target.fp8_capable and sig.fp8_gemms == 0:
        hint = "" if target.has_runtime_version else " (its target config has no runtime_version)"
        found = ", ".join(f"{g.target} {'x'.join(g.operand_dtypes)}" for g in sig.gemms) or "no gemm"
        raise CanaryError(
            f"broken environment: a plain {'E4M3 x E4M3' if canary is CANARY else target.native_fp8[0] + ' x ' + target.native_fp8[0]} "
            f"matmul did not become an FP8 gemm on FP8-capable target "
            f"{target.name}{hint}; found {found}"
        )
    if cudnn and compiler.mode == "deviceless":
        try:
            check_cudnn(compiler, target, compiler.environment()["jax"])
        except CudnnCanaryError as exc:
            raise CanaryError(str(exc)) from None
    return sig


def requests(targets: list[Target], mode: str, jax_version: str) -> list[CompileRequest]:
    """The canaries' compilations for `targets` (queued before the cases by runner.prefetch)."""
    out: list[CompileRequest] = []
    for t in targets:
        out.append(CompileRequest(render(canary_for(t)), t, PROFILES[t.platform.canary_profile]))
        if mode == "deviceless" and expects_cudnn(t, jax_version):
            out.append(CompileRequest(render(probe_case(t.platform.probes()[0])), t,
                                      PROFILES[t.platform.canary_profile]))
    return out
