"""Target specs that cannot lie: what `fp8-check target check [NAME|PATH]` reports, and the cuDNN canary's names.

The cuDNN canary itself runs with the FP8 canary in harness/fp8_check/verdict/_canary.py (every run
checks it); its names are re-exported here.

A target states its compute capability, CUDA runtime and cuDNN versions once
(`harness/fp8_check/targets/__init__.py`); the compile worker writes them where the installed XLA
reads them (`harness/fp8_check/worker/_aot.py: target_config_for`). Which field XLA reads
changed between JAX versions, and a field it does not read is ignored without a
word, so this module *proves* the cuDNN version took effect: on compute
capability >= 10 with a cuDNN version above XLA's block-scaled-dot threshold, a
tiny MXFP8 `jax.nn.scaled_matmul` must become one `__cudnn$blockScaledDot`. When
it does not, the environment is broken (exit 3), and the message names the field
and the JAX version. It runs once per target and JAX version (with the FP8
canary), so it costs nothing per case.
"""

from __future__ import annotations

from fp8_check.targets import Target
from fp8_check.verdict import (
    expects_cudnn,
)
from fp8_check.worker import dnn_field_read


def effective(compiler, target: Target) -> dict:
    """What this worker's XLA gets for `target`: versions, fields, and the spec text."""
    return compiler.target_config(target)


def environment_entry(target: Target, jax_version: str) -> dict:
    """The target's versions as recorded in the results' environment."""
    v = target.versions
    return {
        "compute_capability": ".".join(map(str, target.compute_capability)),
        "cuda_runtime": ".".join(map(str, v.runtime)) if v else None,
        "cudnn": ".".join(map(str, v.dnn)) if v else None,
        "cudnn_field": dnn_field_read(jax_version),
        "cudnn_block_scaled_expected": expects_cudnn(target, jax_version),
        "notes": list(target.notes),
    }
