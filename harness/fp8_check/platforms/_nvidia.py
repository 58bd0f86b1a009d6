"""NVIDIA GPUs through JAX's CUDA plugin (`jax-cuda12-plugin` + `jax-cuda12-pjrt`)."""

from __future__ import annotations

import re

from fp8_check.platforms._base import Engine, GemmTypeTable, Platform, Probe
from fp8_check.platforms._xla_gpu import BLAS_FAMILY, BLAS_FP8_FAMILY, CANARY_PROFILE, PROFILES

DEVICELESS, DEVICE = "deviceless", "device"  # the wheel sets of fp8_check.versions._wheels
# Extra wheels the slim (deviceless) set needs, by JAX versions (specifier). Every supported version needs
# a PTX compiler: without one the plugin stops with "No PTX compilation provider is available.
# Neither ptxas/nvlink nor nvjitlink is available" (a machine with a CUDA toolkit in /usr/local/cuda
# hides this: XLA finds its ptxas). nvidia-cuda-nvcc-cu12 (ptxas) works for all of 0.6.1 .. 0.12.0.1;
# nvidia-nvjitlink-cu12 only for the newer ones (0.6.1 rejects it), at the same size.
SLIM_EXTRAS: dict[str, tuple[str, ...]] = {">=0.6.1": ("nvidia-cuda-nvcc-cu12",)}
# A distribution only the full (device) wheel set has.
DEVICE_MARKER = "nvidia-cublas-cu12"
SMI = "nvidia-smi"
DEVICE_NODE = "/dev/nvidia0"  # present when the NVIDIA driver sees a GPU
CUDNN_BLOCK_SCALED = "cudnn-block-scaled"  # the feature word of an architecture with cuDNN's block-scaled dot


def _rows(pairs, cd) -> tuple[tuple[str, str, str, str], ...]:
    return tuple((a, b, c, d) for a, b in pairs for c, d in cd)


_E4M3, _E5M2 = "f8e4m3fn", "f8e5m2"
# cuBLASLt's FP8 table: NVIDIA's cuBLAS documentation, cublasLtMatmul(), the FP8 type combinations
# (A/B/C/D/bias type, compute CUBLAS_COMPUTE_32F, scale CUDA_R_32F); the same rows XLA's
# stream_executor/cuda/cuda_blas_lt.cc dispatches ("FP8 compatible type combinations (see cuBLASLt
# documentation)"; any other combination: "Unexpected dtype"). E5M2 x E5M2 has no row; E4M3 x E4M3 has no E5M2
# output. docs/device_validity.md shows it.
CUBLASLT_FP8 = GemmTypeTable(
    library="cuBLASLt",
    call_prefix="__cublas$lt$matmul$f8",
    combinations=_rows([(_E4M3, _E4M3)], [("bf16", "bf16"), ("bf16", _E4M3), ("f16", _E4M3), ("f16", "f16"),
                                          ("f32", "f32")])
    + _rows([(_E4M3, _E5M2), (_E5M2, _E4M3)], [("bf16", "bf16"), ("bf16", _E4M3), ("bf16", _E5M2), ("f16", _E4M3),
                                               ("f16", _E5M2), ("f16", "f16"), ("f32", "f32")]),
    bias=(("bf16", "bf16"), ("f16", "f16"), ("f32", "bf16")),
    source="NVIDIA cuBLAS documentation, cublasLtMatmul(): FP8 data type combinations (Atype, Btype, Ctype, Dtype, "
           "bias type); as dispatched by XLA's stream_executor/cuda/cuda_blas_lt.cc",
)


BLOCK_SCALED_DOT = "__cudnn$blockScaledDot"
# The cuDNN canary: a target states its compute capability, CUDA runtime and cuDNN versions once; the compile worker
# writes them where the installed XLA reads them (aot.target_config_for). Which field XLA reads changed between JAX
# versions, and a field it does not read is ignored without a word, so on compute capability >= 10 with a cuDNN
# version above XLA's block-scaled-dot threshold (9.7 up to JAX 0.7.x, 9.10 from 0.8), a tiny MXFP8
# `jax.nn.scaled_matmul` must become one __cudnn$blockScaledDot.
CUDNN_PROBE = Probe(
    id="canary_cudnn_block_scaled",
    feature=CUDNN_BLOCK_SCALED,
    reaches=BLOCK_SCALED_DOT,
    library="cuDNN",
    lacks="compute capability {cc} < 10",
    block=("scaled_matmul", "mxfp8", 32),
    a_dtype="float8_e4m3fn",
    b_dtype="float8_e4m3fn",
    scale_dtype="float8_e8m0fnu",
    shape=(128, 128, 128),
    transpose_b=True,
    thresholds=(("0", (9, 7, 0)), ("0.8", (9, 10, 0))),
    description=f"tiny MXFP8 scaled_matmul: with cuDNN above the threshold on sm >= 10 it must become {BLOCK_SCALED_DOT}",
)


class _Nvidia(Platform):
    def probes(self) -> tuple[Probe, ...]:
        return (CUDNN_PROBE,)

    def device_info(self) -> dict:
        """The local GPU as the CUDA plugin and nvidia-smi see it: driver, runtime, cuBLAS, cuDNN versions."""
        return {**cuda_versions(), **nvidia_smi()}

    def device_line(self, device: dict) -> str:
        return (f"driver {device.get('driver_version')}, CUDA runtime {device.get('cuda_runtime')}, "
                f"cuBLAS {device.get('cublas')}")

    def arch_of_spec(self, config_text: str) -> tuple[str, tuple[int, int]]:
        cc = re.search(r"cuda_compute_capability\s*\{([^}]*)\}", config_text)
        if not cc:
            raise ValueError(f"no {self.arch_field} in its GpuTargetConfig")
        major = re.search(r"major:\s*(\d+)", cc.group(1))
        minor = re.search(r"minor:\s*(\d+)", cc.group(1))
        version = (int(major.group(1)) if major else 0, int(minor.group(1)) if minor else 0)
        return f"sm_{version[0]}{version[1]}", version

    def native_fp8(self, arch: str, compute_capability: tuple[int, int]) -> tuple[str, ...]:
        """FP8 tensor cores exist from sm_89 (Ada) on, for the OCP types."""
        return ("float8_e4m3fn", "float8_e5m2") if compute_capability >= (8, 9) else ()

    def features(self, arch: str, compute_capability: tuple[int, int]) -> frozenset[str]:
        """Besides the FP8 words: `cudnn-block-scaled` from sm_100 (Blackwell) on, where XLA rewrites a block-scaled
        dot into one cuDNN call (given a cuDNN above its threshold: the cuDNN canary checks it)."""
        extra = {CUDNN_BLOCK_SCALED} if compute_capability >= (10, 0) else set()
        return super().features(arch, compute_capability) | extra

    def requirements(self, jax_version: str, kind: str, extras: list[str] | None = None) -> list[str]:
        if kind == DEVICE:
            return [f"jax[cuda12]=={jax_version}"]
        if kind != DEVICELESS:
            raise ValueError(f"unknown environment kind {kind!r} (one of {DEVICELESS}, {DEVICE})")
        return [f"jax[cuda12-local]=={jax_version}", *(slim_extras(jax_version) if extras is None else extras)]


def _cuda_version_text(value, parts):
    """12090 -> '12.9' (CUDA runtime/driver), 120903 -> '12.9.3' (cuBLAS, cuDNN 9: major*10000+minor*100+patch)."""
    if not value:
        return None
    if parts == 2:
        return "%d.%d" % (value // 1000, value % 1000 // 10)
    return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)


def cuda_versions():
    """CUDA driver/runtime, cuBLAS and cuDNN versions as loaded by the CUDA plugin (empty if unknown)."""
    try:
        from jax._src.lib import cuda_versions as versions
    except ImportError:
        versions = None
    if versions is None:
        return {}
    out = {}
    for key, getter, parts in (
        ("cuda_driver", "cuda_driver_get_version", 2),
        ("cuda_runtime", "cuda_runtime_get_version", 2),
        ("cuda_runtime_build", "cuda_runtime_build_version", 2),
        ("cublas", "cublas_get_version", 3),
        ("cublas_build", "cublas_build_version", 3),
        ("cudnn", "cudnn_get_version", 3),
    ):
        try:
            out[key] = _cuda_version_text(getattr(versions, getter)(), parts)
        except Exception:  # an older plugin lacks a getter, or the library is missing
            out[key] = None
    return out


def nvidia_smi():
    """Driver version, name and compute capability of GPU 0 as nvidia-smi reports them (empty without it)."""
    import shutil
    import subprocess

    smi = shutil.which(SMI)
    if not smi:
        return {}
    fields = ("driver_version", "name", "compute_cap", "memory.total", "clocks.max.sm")
    try:
        out = subprocess.run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0 or not out.stdout.strip():
        return {}
    values = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")]
    keys = ("driver_version", "smi_name", "smi_compute_capability", "memory_total", "max_sm_clock")
    return dict(zip(keys, values))


def slim_extras(version: str, table: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    v = Version(version)
    out: list[str] = []
    for spec, wheels in (SLIM_EXTRAS if table is None else table).items():
        if v in SpecifierSet(spec, prereleases=True):
            out += [w for w in wheels if w not in out]
    return out


NVIDIA = _Nvidia(
    name="nvidia",
    vendor="NVIDIA",
    jax_platform="cuda",
    spec_platform_name="CUDA",
    arch_field="cuda_compute_capability",
    plugin_label="CUDA plugin",
    report_key="cuda",
    runtime_header="cuda_runtime",
    dnn_header="cudnn",
    default_target="h100",
    default_profile="cublas",
    plugin_distributions=("jax-cuda12-plugin", "jax-cuda13-plugin"),
    pjrt_distributions=("jax-cuda12-pjrt", "jax-cuda13-pjrt"),
    plugin_modules=("jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13", "jax_cuda12_plugin"),
    # The plugin's CUDA version check calls cuInit, which fails without a driver: skipped.
    deviceless_env={"JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"},
    engines=(
        Engine("__cublas$lt$matmul$f8", BLAS_FP8_FAMILY, "cuBLASLt FP8", fp8=True, blas=True),
        Engine("__cublas", BLAS_FAMILY, "cuBLAS", blas=True),
        Engine("__cudnn", "cudnn", "cuDNN", fp8_label="cuDNN block-scaled"),
    ),
    block_scaled_targets={BLOCK_SCALED_DOT: "cudnn"},
    install_hint="jax[cuda12]",
    fp8_gemm_types=CUBLASLT_FP8,
    profiles=PROFILES,
    canary_profile=CANARY_PROFILE,
    replays_autotune=True,
    rates_by_capability=True,
    extra_literals=("jax[cuda12", "cuda12-local", "jax-cuda12", "jax-cuda13", DEVICE_MARKER, SMI, DEVICE_NODE, "nvidia-cuda-nvcc"),
)
