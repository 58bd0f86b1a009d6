"""AMD Instinct GPUs through JAX's ROCm plugin (`jax-rocm7-plugin` + `jax-rocm7-pjrt`).

The ROCm XLA backend shares the GPU compiler: its gemm rewriter emits the same `__cublas$lt$matmul$f8`
custom-call, backed by hipBLASLt, so the engines below name the same prefixes with AMD's labels.
Deviceless, the plugin needs two things the CUDA one does not (docs/amd.md):
- ROCm runtime libraries PyPI does not ship: generated stand-ins (fp8_check.platforms._standins);
- JAX's plugin start-up refuses a machine without an AMD GPU: `allow_deviceless` answers its GPU
  count check with one device (only the compile-only topology is ever used).
"""

from __future__ import annotations

import re
from pathlib import Path

from fp8_check.platforms import _standins
from fp8_check.platforms._base import Engine, GemmTypeTable, Platform, version_tuple
from fp8_check.platforms._standins import STRICT_VARIABLE
from fp8_check.platforms._xla_gpu import BLAS_FAMILY, BLAS_FP8_FAMILY, CANARY_PROFILE, PROFILES

# JAX releases with a ROCm 7 plugin on PyPI that compiles deviceless here (measured: 0.9.0's does not
# install; none for 0.6.x, 0.7.0, 0.7.2, 0.8.x, 0.9.0.1, 0.12.0.1; 0.7.1's is left out, see LEFT_OUT).
PLUGIN_RELEASES = ("0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0")
LEFT_OUT = {
    "0.7.1": "JAX 0.7.1's ROCm plugin links the GPU code it compiles with an external ld.lld (newer than Debian 12's "
             "lld 14) and ROCm's device bitcode (it says 'couldn't locate amdgpu bitcode / ld.lld'), neither on PyPI; "
             "fp8-check does not provide them, so 0.7.1 is not compiled for AMD targets (docs/amd.md)",
}
PLUGIN = "jax-rocm7-plugin"
PJRT = "jax-rocm7-pjrt"
# Where the plugins look first for their runtime libraries (their RUNPATH: `$ORIGIN/../rocm/lib` from
# jax_rocm7_plugin/, `$ORIGIN/../../rocm/lib` from jax_plugins/xla_rocm7/): site-packages/rocm/lib.
STANDIN_DIR = ("rocm", "lib")
ARCH_NAME = "gcn_arch_name"
# ml_dtypes names of the FP8 types each architecture's hipBLASLt runs: gfx942 (MI300) the fnuz
# variants only, gfx950 (MI350) and RDNA4 (gfx12) the OCP ones only.
FNUZ = ("float8_e4m3fnuz", "float8_e5m2fnuz")
OCP = ("float8_e4m3fn", "float8_e5m2")
NATIVE_FP8 = {"gfx940": FNUZ, "gfx941": FNUZ, "gfx942": FNUZ, "gfx950": OCP, "gfx1200": OCP, "gfx1201": OCP}


def _rows(pairs, cd) -> tuple[tuple[str, str, str, str], ...]:
    return tuple((a, b, c, d) for a, b in pairs for c, d in cd)


_E4, _E5, _E4Z, _E5Z = "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz"
_WIDE = [("f16", "f16"), ("f32", "f32"), ("bf16", "bf16")]
# hipBLASLt's FP8 table as XLA's stream_executor/rocm/hip_blas_lt.cc dispatches it (any other combination:
# "Unexpected dtype"; it cites hipBLASLt's API reference for the full table): the fnuz types (gfx942) since
# ROCm 6.0/6.2, the OCP ones (gfx950) since ROCm 6.3. hipBLASLt states no bias types there. As on cuBLASLt,
# E4M3 x E4M3 has no E5M2 output, E5M2 x E5M2 no row; fnuz E4M3 x E5M2 writes only E5M2 (or a wide type).
HIPBLASLT_FP8 = GemmTypeTable(
    library="hipBLASLt",
    call_prefix="__cublas$lt$matmul$f8",
    combinations=_rows([(_E4Z, _E4Z)], _WIDE + [(_E4Z, _E4Z)])
    + _rows([(_E4Z, _E5Z), (_E5Z, _E4Z)], _WIDE + [(_E5Z, _E5Z)])
    + _rows([(_E4, _E4)], [("bf16", "bf16"), ("bf16", _E4), ("f16", _E4), ("f16", "f16"), ("f32", "f32"), (_E4, _E4)])
    + _rows([(_E4, _E5), (_E5, _E4)], [("bf16", "bf16"), ("bf16", _E4), ("bf16", _E5), ("f16", _E4), ("f16", _E5),
                                       ("f16", "f16"), ("f32", "f32")]),
    source="XLA's stream_executor/rocm/hip_blas_lt.cc FP8 type combinations (after hipBLASLt's API reference and "
           "data type support pages)",
)


class _Amd(Platform):
    def arch_of_spec(self, config_text: str) -> tuple[str, tuple[int, int]]:
        m = re.search(r"rocm_compute_capability\s*\{[^}]*gcn_arch_name\s*:\s*\"(gfx(\d+)[0-9a-f]?)[^\"]*\"", config_text)
        if not m:
            raise ValueError(f"no {self.arch_field} {{ {ARCH_NAME}: ... }} in its GpuTargetConfig")
        digits = m.group(2)  # gfx942: major 9, minor 4 (stepping 2); gfx1200: 12, 0
        return m.group(1), (int(digits[:-2] or 0), int(digits[-2])) if len(digits) >= 3 else (int(digits), 0)

    def native_fp8(self, arch: str, compute_capability: tuple[int, int]) -> tuple[str, ...]:
        return NATIVE_FP8.get(arch, ())

    def requirements(self, jax_version: str, kind: str, extras: list[str] | None = None) -> list[str] | None:
        if jax_version not in PLUGIN_RELEASES:
            return None
        # flatbuffers: `check` and the API compile functions serialized with jax.export here (mi300x has no
        # other environment), and JAX deserializes them only with it
        return [f"jax=={jax_version}", f"jaxlib=={jax_version}", f"{PLUGIN}=={jax_version}", f"{PJRT}=={jax_version}",
                "flatbuffers", *(extras or [])]

    def install(self, jax_version: str) -> str:
        return f"jax=={jax_version} {PLUGIN}=={jax_version}"

    def unsupported_reason(self, jax_version: str, arch: str = "") -> str:
        if jax_version in PLUGIN_RELEASES:
            return ""
        if jax_version in LEFT_OUT:
            return LEFT_OUT[jax_version]
        return (f"no ROCm plugin for JAX {jax_version} on PyPI ({PLUGIN} exists for "
                f"{', '.join(PLUGIN_RELEASES)})")

    def needs_runtime_version(self, jax_version: str) -> bool:
        """Before 0.12.0 the ROCm XLA reads the spec's runtime_version to decide whether hipBLASLt
        has FP8: without `runtime_version { major: 7 }` nothing is rewritten to FP8."""
        return version_tuple(jax_version) < (0, 12, 0)

    def allow_deviceless(self) -> None:
        """Each release counts AMD GPUs in its own place before it registers the plugin (measured): 0.11.0 on
        `jax._src.hardware_utils.num_available_amd_gpus`, 0.9.1-0.10.0 the plugin module's own
        `count_amd_gpus`. Both read /sys (KFD) and find none here: answered with one device, only ever used
        for the compile-only topology (nothing runs on it)."""
        import importlib

        for name in ("jax._src.hardware_utils", *self.plugin_modules):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            for attr in dir(module):
                if re.fullmatch(r"(num_available|count|has_visible)_amd_gpus?", attr) and callable(getattr(module, attr)):
                    setattr(module, attr, _one_gpu)

    def standin_dir(self, site_packages: Path) -> Path:
        return site_packages.joinpath(*STANDIN_DIR)

    def plugin_elves(self, site_packages: Path) -> list[Path]:
        return sorted(site_packages.glob("jax_plugins/xla_rocm*/*.so")) + sorted(site_packages.glob("jax_rocm*_plugin/*.so"))

    def finished(self, record: dict) -> bool:
        return record.get("generator") == _standins.GENERATOR

    def finish_environment(self, site_packages: Path) -> dict:
        return _standins.ensure(self.plugin_elves(site_packages), self.standin_dir(site_packages))

    def damaged(self, site_packages: Path) -> list[str]:
        return [f"runtime stand-in {d}" for d in _standins.damaged(self.standin_dir(site_packages))]


def _one_gpu(*args, **kwargs):
    return 1


AMD = _Amd(
    name="amd",
    vendor="AMD",
    jax_platform="rocm",
    spec_platform_name="ROCM",
    arch_field="rocm_compute_capability",
    plugin_label="ROCm plugin",
    report_key="rocm",
    runtime_header="rocm_runtime",
    plugin_distributions=(PLUGIN, "jax-rocm10-plugin"),
    pjrt_distributions=(PJRT, "jax-rocm10-pjrt"),
    plugin_modules=("jax_plugins.xla_rocm7", "jax_plugins.xla_rocm10"),
    deviceless_env={STRICT_VARIABLE: "1"},
    engines=(
        Engine("__cublas$lt$matmul$f8", BLAS_FP8_FAMILY, "hipBLASLt FP8", fp8=True, blas=True),
        Engine("__cublas", BLAS_FAMILY, "hipBLASLt", blas=True),
    ),
    install_hint=PLUGIN,
    # hipBLASLt's MX block-scaled gemm (gfx950, JAX 0.10.0): a, b and their E8M0 block scales in one library call
    block_scaled_targets={"__cublas$lt$matmul$mx": "blaslt"},
    fp8_gemm_types=HIPBLASLT_FP8,
    profiles=PROFILES,
    canary_profile=CANARY_PROFILE,
    default_release=PLUGIN_RELEASES[-1],
    extra_literals=("jax-rocm", "jax_rocm", "xla_rocm", ARCH_NAME, "hipblaslt", "hipBLASLt"),
    profile_names={CANARY_PROFILE: "hipblaslt"},  # the gemm rewriter's profile: hipBLASLt behind the same custom-calls
)
