"""What a platform is: the facts fp8-check needs about one accelerator family's JAX plugin and XLA backend.

Standard library only (the compile worker imports it inside per-version JAX environments).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Engine:
    """A gemm library call XLA emits: custom-call targets starting with `prefix`."""

    prefix: str
    family: str  # the verdict's gemm family: `cublas-fp8`, `cublas`, `cudnn`
    label: str  # coverage's name for it: `cuBLASLt FP8`, `cuBLAS`, `cuDNN`
    fp8: bool = False  # every call of it is an FP8 gemm
    fp8_label: str = ""  # its name when its operands are narrow (`cuDNN block-scaled`); '' = not FP8-capable
    blas: bool = False  # a BLAS library's gemm call (cuBLAS(Lt); hipBLASLt behind the same custom-calls), not a DNN one's


@dataclass(frozen=True)
class GemmTypeTable:
    """The FP8 type combinations a gemm library has kernels for: what a deviceless compile cannot see.

    A compile for a target without its GPU never asks the library, so XLA may emit an FP8 library call with a
    combination the library rejects on the device (E4M3 x E4M3 -> E5M2 on cuBLASLt: "Unexpected operand types").
    Types are HLO element types (`f8e4m3fn`, `bf16`); `combinations` are (a, b, c, d) rows, `bias` the
    (c, bias) pairs the library accepts. Plain data: the verdict's device-validity rule reads it.
    """

    library: str  # how people name it: `cuBLASLt`, `hipBLASLt`
    call_prefix: str  # the custom-call target of the FP8 gemms it runs
    combinations: tuple[tuple[str, str, str, str], ...]  # (a, b, c, d)
    bias: tuple[tuple[str, str], ...] = ()  # (c, bias); () when the source states none
    source: str = ""  # where the table comes from (docs/device_validity.md quotes it)

    def outputs(self, a: str, b: str) -> tuple[str, ...]:
        """The output (d) types the library has a kernel for with operands `a` x `b`; () when none."""
        return tuple(dict.fromkeys(d for ra, rb, _c, d in self.combinations if (ra, rb) == (a, b)))

    def biases(self, a: str, b: str, d: str) -> tuple[str, ...]:
        """The bias types accepted with `a` x `b` -> `d` (through the c types of those rows); () when unknown."""
        cs = {c for ra, rb, c, rd in self.combinations if (ra, rb, rd) == (a, b, d)}
        return tuple(dict.fromkeys(bias for c, bias in self.bias if c in cs))


@dataclass(frozen=True)
class Profile:
    """A set of XLA options a case is compiled under, owned by one platform (`cublas`, `triton` on GPUs; `tpu`)."""

    name: str
    compiler_options: dict[str, object] = field(default_factory=dict)
    deviceless: bool = True
    description: str = ""
    platforms: tuple[str, ...] = ()  # the platforms (by name) that compile under it; () = every one
    shows: str = ""  # what its rows show, where that is not what the name suggests (run's header, the docs)


@dataclass(frozen=True)
class Probe:
    """A canary a platform's targets must pass (fp8_check.verdict._canary compiles it with the FP8 canary): a tiny
    block-scaled matmul that, on a target with `feature` and a DNN library at or above XLA's threshold for the JAX
    release, must become one `reaches` call; when it does not, the version the target states did not take effect."""

    id: str
    feature: str  # the target feature it applies to (Platform.features)
    reaches: str  # the custom-call target it must become
    library: str  # the DNN library whose version it proves (`cuDNN`)
    lacks: str  # why a target without `feature` expects none: formatted with `arch` and `cc` (`9.0`)
    # the block-scaled matmul: (API, recipe, block size), its operand and scale dtypes (ml_dtypes names), m, n, k
    block: tuple[str, str, int]
    a_dtype: str
    b_dtype: str
    scale_dtype: str
    shape: tuple[int, int, int]
    transpose_b: bool = False
    # (first JAX release, the DNN version from which its XLA rewrites the op), oldest first
    thresholds: tuple[tuple[str, tuple[int, ...]], ...] = ()
    description: str = ""

    def min_dnn(self, jax_version: str) -> tuple[int, ...]:
        """The DNN library version from which `jax_version`'s XLA rewrites the probe into `reaches`."""
        found: tuple[int, ...] = ()
        for first, dnn in self.thresholds:
            if version_tuple(jax_version) >= version_tuple(first):
                found = dnn
        return found


def version_tuple(text: str) -> tuple[int, int, int]:
    parts = []
    for piece in str(text).split("."):
        m = re.match(r"\d+", piece)
        parts.append(int(m.group(0)) if m else 0)
    return tuple((parts + [0, 0, 0])[:3])  # type: ignore[return-value]


@dataclass(frozen=True)
class Platform:
    name: str  # fp8-check's name for it: `nvidia`, `amd`, `tpu`
    vendor: str  # how people write it: `NVIDIA`, `AMD`, `Google TPU`
    jax_platform: str  # JAX's platform name (topologies, jax.export)
    spec_platform_name: str  # a GpuTargetConfig's `platform_name`
    arch_field: str  # gpu_device_info's architecture message
    plugin_label: str  # `CUDA plugin`, `ROCm plugin`
    report_key: str  # environment reports name its plugin `<report_key>_plugin` / `<report_key>_pjrt`
    runtime_header: str  # a shipped spec's header line stating the runtime version: `# <runtime_header>: X.Y.Z`
    # The header line of its deep-learning library's version (`cudnn`); '' when its specs state none.
    dnn_header: str = ""
    # The target a command compiles for when it names none and this is the default platform, and the one profile
    # a single-profile command (`calibrate`, `reduce`, `bisect`) uses when it names none.
    default_target: str = ""
    default_profile: str = ""
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
    # Environment variables its compiler reads its flags from, set by the user (TPU: `LIBTPU_INIT_ARGS`): when
    # one is set and a worker does not start, it is the probable cause (`start_hint`).
    flags_variables: tuple[str, ...] = ()
    extra_literals: tuple[str, ...] = ()  # other strings that name this platform (for the seam test)
    # The JAX release `run`/`check`/the API compile with when the main environment lacks this platform's
    # plugin (None: the main environment always has it).
    default_release: str | None = None
    # The FP8 type table of the library behind its FP8 gemm call (None: not stated).
    fp8_gemm_types: GemmTypeTable | None = None
    # The profiles cases compile under on this platform (names unique across platforms), and the one the FP8
    # canary compiles under.
    profiles: tuple[Profile, ...] = ()
    canary_profile: str = ""
    # HLO opcodes that are this platform's matmuls when they sit in a fusion (TPU: `convolution`); a `dot` is
    # one on every platform.
    matmul_ops: tuple[str, ...] = ()
    fused_matmul_label: str = ""  # coverage's name for such a matmul (`TPU matmul`): `TPU matmul FP8`, `... bf16`
    # Its environments hold its own plugin alone (True), or join it to the default platform's (the ROCm plugin
    # joins the CUDA one).
    alone: bool = False
    # Why the cost model does not price this platform's programs ('' = it does, from the rate tables of
    # harness/fp8_check/targets/rates/).
    unpriced: str = ""
    # The rate tables key its parts by compute capability (NVIDIA's `compute_capability: [9, 0]`); else [0, 0].
    rates_by_capability: bool = False
    # Its XLA replays a device's autotune results in a deviceless compile (`--xla_gpu_load_autotune_results_from`,
    # logged per lookup): deviceless `default` then compiles as the device does where a results file has the
    # decision, and says which decisions XLA's deviceless defaults took (fp8_check.compile._autotune_replay).
    replays_autotune: bool = False
    # A profile's name as this platform's rows show it, where the shared name reads as another vendor's engine
    # (AMD: `cublas` -> `hipblaslt`); `--profile` takes it as an alias. Goldens and results keep the shared name.
    profile_names: dict[str, str] = field(default_factory=dict)

    def install(self, jax_version: str) -> str:
        """`pip install` arguments that give JAX `jax_version` with this platform's plugin."""
        return f"{self.install_hint}=={jax_version}"

    def flags_hint(self, environ: Mapping[str, str] | None = None) -> str:
        """'' or, when one of `flags_variables` is set, a line naming it as the probable cause (not its value)."""
        environ = os.environ if environ is None else environ
        named = [v for v in self.flags_variables if environ.get(v, "").strip()]
        return f"{named[0]} is set: its flags are the probable cause; fix or unset it" if named else ""

    def start_hint(self, environ: Mapping[str, str] | None = None) -> str:
        """What to look at when a compile worker for this platform does not start: a flags variable the user
        set (`flags_hint`), else this platform's install."""
        return self.flags_hint(environ) or f"is {self.install_hint} installed?"

    # ---- target specs
    def claims_spec(self, config_text: str) -> bool:
        return re.search(rf"\b{re.escape(self.arch_field)}\s*\{{", config_text) is not None

    def arch_of_spec(self, config_text: str) -> tuple[str, tuple[int, int]]:
        """(architecture name, (major, minor)) a spec states; ValueError when it states none."""
        raise NotImplementedError

    def native_fp8(self, arch: str, compute_capability: tuple[int, int]) -> tuple[str, ...]:
        """The FP8 dtypes (ml_dtypes names) the architecture's gemm library runs natively; () when none."""
        raise NotImplementedError

    def features(self, arch: str, compute_capability: tuple[int, int]) -> frozenset[str]:
        """The words that say what the architecture has, as lit's `available_features`: `fp8` (FP8 gemms),
        `fp8-ocp` / `fp8-fnuz` (which FP8 family), and what the platform adds (`cudnn-block-scaled`)."""
        native = self.native_fp8(arch, compute_capability)
        words = {"fp8"} if native else set()
        words |= {"fp8-fnuz" if t.endswith("fnuz") else "fp8-ocp" for t in native}
        return frozenset(words)

    # ---- the version header of a shipped spec: `# <key>: X.Y.Z  source: ...`
    def version_keys(self) -> tuple[str, ...]:
        """The header keys this platform's specs state their versions under (runtime, then DNN library)."""
        return tuple(k for k in (self.runtime_header, self.dnn_header) if k)

    def parse_version_line(self, line: str) -> tuple[str, tuple[int, int, int], str] | None:
        """(`runtime` or `dnn`, version, source) of one header line of this platform's; None when it is not one."""
        m = re.match(r"^#\s*([a-z_]+):\s*(\d+)\.(\d+)\.(\d+)\b(.*)$", line)
        if not m or m.group(1) not in self.version_keys():
            return None
        kind = "runtime" if m.group(1) == self.runtime_header else "dnn"
        return kind, (int(m.group(2)), int(m.group(3)), int(m.group(4))), m.group(5).strip()

    def version_header(self, kind: str, version: tuple[int, ...], source: str) -> str:
        """The header line stating `kind`'s (`runtime`, `dnn`) version: what parse_version_line reads back."""
        key = self.runtime_header if kind == "runtime" else self.dnn_header
        return f"# {key}: {'.'.join(map(str, version))}  source: {source}"

    # ---- environments
    def requirements(self, jax_version: str, kind: str) -> list[str] | None:
        """What uv installs for `jax_version`'s environment of `kind`; None when the platform has no
        plugin for that version (`unsupported_reason` says why)."""
        raise NotImplementedError

    def unsupported_reason(self, jax_version: str, arch: str = "") -> str:
        """Why nothing compiles for this platform (for architecture `arch`, when given) on `jax_version`; '' if it does."""
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
    # ---- targets it ships without a spec file (TPU generations and topologies)
    def target_specs(self) -> dict[str, str]:
        """name -> spec text of the targets this platform names itself (GPU targets are shipped *.txtpb files)."""
        return {}

    def spec_for(self, name: str) -> str | None:
        """The spec text of a target name this platform accepts beyond `target_specs` (a TPU topology); None."""
        return self.target_specs().get(name)

    def parse_versions(self, text: str, where: str):
        """The runtime and library versions a spec of this platform states: ((runtime), (dnn), source, notes), or
        None when the generic GPU rules (fp8_check.targets._specs.parse_versions) apply."""
        return None

    # ---- compiling
    def topology_arguments(self, target_config: str, topology: str, jax_version: str) -> dict:
        """Keyword arguments of `jax.experimental.topologies.get_topology_desc` that make this target's
        compile-only devices with `jax_version` (besides `platform`)."""
        return {"target_config": target_config, "topology": topology}

    def compile_devices(self, target_config: str, jax_version: str):
        """In a deviceless compile worker: the device(s) to compile this target for, where the platform makes them
        itself (a stand-in that compiles on the host); None: JAX's compile-only devices (`topology_arguments`)."""
        return None

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

    def device_line(self, device: dict) -> str:
        """The driver and library versions of a `device_info` (an environment's `device`), in words."""
        return f"driver {device.get('driver_version')}"

    def allow_deviceless(self) -> None:
        """Called in the compile worker after JAX is importable and before any backend starts: whatever
        lets the plugin initialise without the vendor's GPU (deviceless mode only)."""

    def generation(self, arch: str):
        """A platform that names its generations' published peaks itself (TPU): that generation's data, which the
        cost model's roofline reads; None: the cost model's rate tables price it."""
        return None

    # ---- what fp8-check says when a program that quantizes to FP8 runs a matmul in a wider type
    def fp8_capability(self, arch: str) -> str:
        """What the architecture's vendor publishes about FP8 matmuls, with its source ('' : nothing to add)."""
        return ""

    def unfolded_dequantize(self, types: str) -> str:
        """Why a matmul fed by a dequantize pattern (FP8 values converted, scaled, then a wide matmul) is not FP8
        here, and how to keep FP8 operands ('' : the platform's compiler folds the pattern; the generic reason)."""
        return ""

    def engine_of(self, target: str) -> Engine | None:
        for e in self.engines:
            if target.startswith(e.prefix):
                return e
        return None

    def probes(self) -> tuple[Probe, ...]:
        """The platform's own canaries, beyond the FP8 one every platform runs (NVIDIA: the cuDNN block-scaled probe)."""
        return ()

    def low_precision_labels(self) -> tuple[str, ...]:
        fused = (f"{self.fused_matmul_label} FP8",) if self.fused_matmul_label else ()
        return tuple(x for e in self.engines for x in ((e.label,) if e.fp8 else (e.fp8_label,) if e.fp8_label else ())) + fused

    def literals(self) -> tuple[str, ...]:
        out = [self.jax_platform, *self.plugin_distributions, *self.pjrt_distributions, *self.plugin_modules,
               *self.deviceless_env, self.arch_field, *self.block_scaled_targets, *self.extra_literals]
        out += [e.prefix for e in self.engines]
        return tuple(dict.fromkeys(x for x in out if x))
