"""What executes a kernel, and at which rate: the cost model's engines (harness/fp8_check/cost/_model.py prices with them).

A gemm is priced by what runs it, not by its dtypes alone:

| engine | kernels | rate |
|---|---|---|
| `fp4/fp8/bf16/tf32/fp64 tensor cores` | a gemm in a library: cuBLAS / cuBLASLt custom-calls, Triton gemm fusions (`__triton_gemm`, `__triton_nested_gemm_fusion`, ...) | the part's dense tensor-core rate of the operands' class (the wider operand decides) |
| `cuDNN block-scaled fp8/fp4` | `__cudnn$blockScaledDot` (MXFP8, NVFP4) | the tensor-core rate of its class |
| `CUDA cores: dot in a loop fusion` | a dot XLA did not hand to a gemm library: emitted inside a loop / input (reduction) fusion, or left bare | the CUDA-core FP32 rate: no tensor cores, whatever the dtypes |
| `CUDA cores` | every other kernel (one FLOP per element per op) | the CUDA-core FP32 rate |
| `NVLink` / `network` | collectives | the link's one-way per-GPU bandwidth |
| `fp8 MXU` / `bf16 MXU` (TPU) | every matmul fusion (a `convolution` in an output fusion) | the generation's published per-chip peak of the operands' class; FP8 at the bf16 rate where no higher FP8 rate is published, f32 at the bf16 rate (a lower bound) |
| `TPU vector unit (HBM-bound)` | every other TPU fusion | its HBM traffic only (no vector-unit rate is published) |
| `ICI` (TPU) | collectives | half the published bidirectional inter-chip bandwidth per chip |

Every rate comes from the part's table (harness/fp8_check/targets/rates/*.yaml, read by cost_table.py) or the target
spec; `cost_rates.rate_table` lists them, with their sources, for one target. Pure: no I/O beyond the shipped tables.
"""

from __future__ import annotations

from fp8_check import platforms

LOOP_DOT = "CUDA cores: dot in a loop fusion"
CUDA_CORES = "CUDA cores"
VECTOR_UNIT = "TPU vector unit (HBM-bound)"  # a TPU's non-matmul fusion: priced by its traffic alone
LIBRARY_PREFIX = "__"  # custom-call targets and fusion backend kinds of the gemm libraries (__cublas, __triton, __cudnn)
BLOCK_SCALED = frozenset(platforms.DEFAULT.block_scaled_targets)  # custom calls of cuDNN's block-scaled dot
LIBRARY_GEMM = platforms.DEFAULT.engines[1].prefix  # the gemm library's plain custom call (a dot's default engine)
FP8_LIBRARY_GEMM = platforms.DEFAULT.engines[0].prefix  # its FP8 gemm


def in_library(gemm_target: str) -> bool:
    """A gemm a library runs on tensor cores (not a dot XLA emitted itself as a `fusion kLoop`/`kInput` or bare `dot`)."""
    return gemm_target.startswith(LIBRARY_PREFIX)


def gemm_engine(gemm_target: str, cls: str, hw) -> tuple[str, float]:
    """(engine, FLOP/s) of a gemm of class `cls` ('fp8', 'bf16', ...) run by `gemm_target` on `hw` (a cost.Hardware)."""
    if getattr(hw, "matmul_unit", ""):  # a TPU: every matmul is a fusion on the MXU, at its class's published peak
        used = cls if cls in hw.peak else "bf16"
        return f"{used} {hw.matmul_unit}", hw.peak[used]
    if not in_library(gemm_target):
        return LOOP_DOT, hw.fp32
    used = hw.class_used(cls)
    if gemm_target in BLOCK_SCALED:
        return f"cuDNN block-scaled {used}", hw.peak_for(cls)
    if used == "fp32":
        return CUDA_CORES, hw.fp32
    return f"{used} tensor cores", hw.peak_for(cls)


def narrow(engine: str) -> bool:
    """An engine running FP8 or FP4 operands (the share of a step a model case reports)."""
    return engine.startswith(("fp8 ", "fp4 ", "cuDNN block-scaled fp8", "cuDNN block-scaled fp4"))
