"""Target specs that cannot lie: the cuDNN canary and `fp8-check target check [NAME|PATH]`.

A target states its compute capability, CUDA runtime and cuDNN versions once
(`harness/targets.py`); the compile worker writes them where the installed XLA
reads them (`harness/pipeline/aot.py: target_config_for`). Which field XLA reads
changed between JAX versions, and a field it does not read is ignored without a
word, so this module *proves* the cuDNN version took effect: on compute
capability >= 10 with a cuDNN version above XLA's block-scaled-dot threshold, a
tiny MXFP8 `jax.nn.scaled_matmul` must become one `__cudnn$blockScaledDot`. When
it does not, the environment is broken (exit 3), and the message names the field
and the JAX version. It runs once per target and JAX version (with the FP8
canary), so it costs nothing per case.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from harness.pipeline import render, signature
from harness.pipeline.block_cases import Block
from harness.pipeline.cases import Case, Shape
from harness.targets import PROFILES, Target

BLOCK_SCALED_TARGET = "__cudnn$blockScaledDot"

PROBE = Case(
    id="canary_cudnn_block_scaled",
    file="<built-in>",
    line=0,
    kind="block_scaled",
    description="tiny MXFP8 scaled_matmul: with cuDNN above the threshold on sm >= 10 it must become __cudnn$blockScaledDot",
    block=Block("scaled_matmul", "mxfp8", 32),
    a_dtype="float8_e4m3fn",
    b_dtype="float8_e4m3fn",
    scale_dtype="float8_e8m0fnu",
    transpose_b=True,
    shape=Shape(128, 128, 128),
    profiles=("cublas",),
)


class CudnnCanaryError(RuntimeError):
    """The target's cuDNN version did not take effect in this XLA."""


def cudnn_threshold(jax_version: str) -> tuple[int, int, int]:
    """The cuDNN version from which XLA rewrites a block-scaled dot into cuDNN (sm >= 10)."""
    return (9, 7, 0) if Version(jax_version) < Version("0.8") else (9, 10, 0)


def expects_cudnn(target: Target, jax_version: str) -> bool:
    return (target.compute_capability >= (10, 0) and target.versions is not None
            and target.versions.cudnn >= cudnn_threshold(jax_version))


@dataclass
class CanaryResult:
    checked: bool  # the probe ran and was judged
    reached: bool  # __cudnn$blockScaledDot appeared
    note: str = ""


def check_cudnn(compiler, target: Target, jax_version: str) -> CanaryResult:
    """Run the block-scaled probe where cuDNN is expected; raise CudnnCanaryError when it is not reached."""
    from harness.pipeline.aot import dnn_field_read, dnn_fields_written

    if not expects_cudnn(target, jax_version):
        why = (f"compute capability {target.compute_capability[0]}.{target.compute_capability[1]} < 10"
               if target.compute_capability < (10, 0) else
               f"cuDNN {_v(target)} is below XLA's block-scaled threshold {'.'.join(map(str, cudnn_threshold(jax_version)))}")
        return CanaryResult(False, False, f"no cuDNN block-scaled path expected: {why}")
    comp = compiler.compile(render.render(PROBE), target, PROFILES["cublas"])
    if not comp.ok:
        first = (comp.error or "").strip().splitlines()[0] if comp.error else ""
        if first.startswith("ImportError: this JAX"):
            return CanaryResult(False, False, f"not checked: {first.split(': ', 1)[1]}")
        raise CudnnCanaryError(f"the cuDNN canary '{PROBE.id}' did not compile for {target.name} on jax {jax_version}: {first}")
    sig = signature.extract(comp.hlo)
    if not any(g.target == BLOCK_SCALED_TARGET for g in sig.gemms):
        form = sig.block_scaled.form if sig.block_scaled else "no block-scaled op"
        raise CudnnCanaryError(
            f"broken environment: target {target.name} states cuDNN {_v(target)} (written to "
            f"{' and '.join(dnn_fields_written(target.write_for_jax or jax_version))}; jax {jax_version} reads "
            f"{dnn_field_read(jax_version)}), but a tiny MXFP8 scaled_matmul on compute capability "
            f"{target.compute_capability[0]}.{target.compute_capability[1]} did not reach {BLOCK_SCALED_TARGET} "
            f"({sig.kernels} kernels, {form}): XLA did not take the cuDNN version from field '{dnn_field_read(jax_version)}'")
    return CanaryResult(True, True, f"{BLOCK_SCALED_TARGET} reached ({sig.kernels} kernels)")


def _v(target: Target) -> str:
    return ".".join(map(str, target.versions.cudnn)) if target.versions else "none"


def effective(compiler, target: Target) -> dict:
    """What this worker's XLA gets for `target`: versions, fields, and the spec text."""
    reply = compiler.worker.request({"op": "target_config", "target_config": target.config_text,
                                     "target_versions": target.versions_dict()})
    if not reply.get("ok"):
        raise RuntimeError(reply.get("error", "unknown error"))
    return reply


def environment_entry(target: Target, jax_version: str) -> dict:
    """The target's versions as recorded in the results' environment."""
    from harness.pipeline.aot import dnn_field_read

    v = target.versions
    return {
        "compute_capability": ".".join(map(str, target.compute_capability)),
        "cuda_runtime": ".".join(map(str, v.cuda_runtime)) if v else None,
        "cudnn": ".".join(map(str, v.cudnn)) if v else None,
        "cudnn_field": dnn_field_read(jax_version),
        "cudnn_block_scaled_expected": expects_cudnn(target, jax_version),
        "notes": list(target.notes),
    }
