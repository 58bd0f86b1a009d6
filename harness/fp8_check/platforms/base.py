"""What a platform is: the facts fp8-check needs about one GPU vendor's JAX plugin and XLA backend.

Standard library only (the compile worker imports it inside per-version JAX environments).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Engine:
    """A gemm library call XLA emits: custom-call targets starting with `prefix`."""

    prefix: str
    family: str  # the verdict's gemm family: `cublas-fp8`, `cublas`, `cudnn`
    label: str  # coverage's name for it: `cuBLASLt FP8`, `cuBLAS`, `cuDNN`
    fp8: bool = False  # every call of it is an FP8 gemm
    fp8_label: str = ""  # its name when its operands are narrow (`cuDNN block-scaled`); '' = not FP8-capable


def version_tuple(text: str) -> tuple[int, int, int]:
    parts = []
    for piece in str(text).split("."):
        m = re.match(r"\d+", piece)
        parts.append(int(m.group(0)) if m else 0)
    return tuple((parts + [0, 0, 0])[:3])  # type: ignore[return-value]


@dataclass(frozen=True)
class Platform:
    name: str  # fp8-check's name for it: `nvidia`, `amd`
    vendor: str  # how people write it: `NVIDIA`, `AMD`
    jax_platform: str  # JAX's platform name (topologies, jax.export)
    spec_platform_name: str  # a GpuTargetConfig's `platform_name`
    arch_field: str  # gpu_device_info's architecture message
    plugin_label: str  # `CUDA plugin`, `ROCm plugin`
    report_key: str  # environment reports name its plugin `<report_key>_plugin` / `<report_key>_pjrt`
    runtime_header: str  # a shipped spec's header line stating the runtime version: `# <runtime_header>: X.Y.Z`
    # The plugin's distributions, newest naming first: the plugin proper and its PJRT library.
    plugin_distributions: tuple[str, ...] = ()
    pjrt_distributions: tuple[str, ...] = ()
    # Python modules whose shared libraries hold the XLA that compiles for this platform.
    plugin_modules: tuple[str, ...] = ()
    # Environment variables a deviceless compile needs (set before JAX is imported).
    deviceless_env: dict[str, str] = field(default_factory=dict)
    engines: tuple[Engine, ...] = ()
    block_scaled_targets: dict[str, str] = field(default_factory=dict)  # custom-call target -> signature form
    install_hint: str = ""  # the distribution a user installs to compile for it (`jax[cuda12]`)
    extra_literals: tuple[str, ...] = ()  # other strings that name this platform (for the seam test)
    # The JAX release `run`/`check`/the API compile with when the main environment lacks this platform's
    # plugin (None: the main environment always has it).
    default_release: str | None = None

    def install(self, jax_version: str) -> str:
        """`pip install` arguments that give JAX `jax_version` with this platform's plugin."""
        return f"{self.install_hint}=={jax_version}"

    # ---- target specs
    def claims_spec(self, config_text: str) -> bool:
        return re.search(rf"\b{re.escape(self.arch_field)}\s*\{{", config_text) is not None

    def arch_of_spec(self, config_text: str) -> tuple[str, tuple[int, int]]:
        """(architecture name, (major, minor)) a spec states; ValueError when it states none."""
        raise NotImplementedError

    def native_fp8(self, arch: str, compute_capability: tuple[int, int]) -> tuple[str, ...]:
        """The FP8 dtypes (ml_dtypes names) the architecture's gemm library runs natively; () when none."""
        raise NotImplementedError

    # ---- environments
    def requirements(self, jax_version: str, kind: str) -> list[str] | None:
        """What uv installs for `jax_version`'s environment of `kind`; None when the platform has no
        plugin for that version (`unsupported_reason` says why)."""
        raise NotImplementedError

    def unsupported_reason(self, jax_version: str) -> str:
        return ""

    def finish_environment(self, site_packages) -> dict:
        """After uv installed an environment for this platform: whatever else it needs; a record of it."""
        return {}

    def finished(self, record: dict) -> bool:
        """Whether an environment finished with `record` (finish_environment's) is still complete."""
        return True

    def damaged(self, site_packages) -> list[str]:
        """What finish_environment made in `site_packages` that is no longer whole ([] when nothing is)."""
        return []

    # ---- compiling
    def installed(self) -> bool:
        """This interpreter can import the platform's plugin (without importing it)."""
        import importlib.util

        for module in self.plugin_modules:
            try:
                if importlib.util.find_spec(module) is not None:
                    return True
            except (ImportError, ValueError):
                continue
        return False

    def device_info(self) -> dict:
        """Versions of the local GPU's driver and libraries (device mode); {} when unknown."""
        return {}

    def allow_deviceless(self) -> None:
        """Called in the compile worker after JAX is importable and before any backend starts: whatever
        lets the plugin initialise without the vendor's GPU (deviceless mode only)."""

    def engine_of(self, target: str) -> Engine | None:
        for e in self.engines:
            if target.startswith(e.prefix):
                return e
        return None

    def low_precision_labels(self) -> tuple[str, ...]:
        return tuple(x for e in self.engines for x in ((e.label,) if e.fp8 else (e.fp8_label,) if e.fp8_label else ()))

    def literals(self) -> tuple[str, ...]:
        out = [self.jax_platform, *self.plugin_distributions, *self.pjrt_distributions, *self.plugin_modules,
               *self.deviceless_env, self.arch_field, *self.block_scaled_targets, *self.extra_literals]
        out += [e.prefix for e in self.engines]
        return tuple(dict.fromkeys(x for x in out if x))
