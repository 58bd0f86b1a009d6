"""What the GPU platforms share: XLA's GPU compiler, and so its profiles (ROCm's XLA is the same compiler with
hipBLASLt behind the gemm custom-calls)."""

from __future__ import annotations

from fp8_check.platforms._base import Profile

GPU_PLATFORMS = ("nvidia", "amd")
# What a deviceless `triton` row shows (goldens/h100/triton: 76 of the library's 88 rows read `FP8 0/1 gemms`): the
# kernels, one Triton gemm fusion per matmul reading the FP8 inputs, which is what the autotuned `default` compiles
# on an H200 at the library's shapes (reports/fidelity.md); not FP8 arithmetic: the deviceless fusion converts the
# dequantized operands to f32 inside itself, so its dot runs on f32 operands and the FP8 answer counts it wide.
TRITON_SHOWS = ("triton rows show the kernels (one Triton gemm fusion reading the FP8 inputs), not FP8 arithmetic: "
                "the deviceless fusion converts the dequantized operands to f32 inside itself, so most read FP8 0/N "
                "gemms, by design (docs/gpu.md)")
PROFILES = (
    Profile("cublas", {"xla_gpu_enable_triton_gemm": False},
            description="Triton gemm off: exercises XLA's FP8 GEMM rewriter (cuBLASLt FP8 custom-calls)",
            platforms=GPU_PLATFORMS),
    Profile("triton", {"xla_gpu_autotune_level": 0},
            description="autotuning off: Triton gemm fusions with their default tiling", platforms=GPU_PLATFORMS,
            shows=TRITON_SHOWS),
    # deviceless where the platform replays autotune results (NVIDIA: fp8_check.compile._autotune_replay), opt-in
    # (`--profile default`): a run without --profile lists the profiles with `deviceless` only
    Profile("default", {}, deviceless=False,
            description="XLA's defaults, autotuning on: on the GPU, or deviceless on NVIDIA replaying the device's "
                        "autotune results (goldens/<target>/autotune/<jax>.txt) where a file has them",
            platforms=GPU_PLATFORMS),
)
CANARY_PROFILE = "cublas"  # the gemm rewriter's profile
# The verdict's gemm families of XLA's GPU BLAS calls (`__cublas$...`: cuBLASLt on CUDA, hipBLASLt on ROCm).
BLAS_FP8_FAMILY, BLAS_FAMILY = "cublas-fp8", "cublas"
