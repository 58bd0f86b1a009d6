"""Google TPUs through PyPI's `libtpu`, compile-only: XLA's TPU compiler builds a program for a TPU generation and
topology on a machine without a TPU (`jax.experimental.topologies.get_topology_desc(platform="tpu",
topology_name="v6e:1x1")`), and fp8-check reads its optimized HLO.

A TPU matmul is a `convolution` (or `dot`) inside an output fusion; no gemm library call. Targets are named after
the generation (`v5e`, `v5p`, `v6e`, `tpu7x`: one chip) or `<generation>-<topology>` (`v5e-2x2`, `tpu7x-2x2x1`);
their spec is this platform's own data (`generations.py`), not a GpuTargetConfig. libtpu comes from the `jax[tpu]`
pin of each JAX release, installed into that release's cached TPU environment on first use (never into the main
environment). What compile-only can and cannot say about TPUs: docs/tpu.md.

Standard library only (the compile worker imports it inside per-version JAX environments).
"""

from __future__ import annotations

import re

from fp8_check.platforms._base import Platform, Profile, version_tuple
from fp8_check.platforms.tpu import generations
from fp8_check.platforms.tpu.generations import GENERATIONS, LIBTPU_PINS, Generation

SPEC_FIELD = "tpu_topology"  # a TPU target spec's one field: `tpu_topology: "v6e:1x1"`
_SPEC = re.compile(r'^\s*tpu_topology\s*:\s*"([a-z0-9]+):(\d+(?:x\d+)+)"\s*$', re.M)
_NAME = re.compile(r"^([a-z0-9]+?)-(\d+(?:x\d+)+)$")
TOPOLOGY_LINE = "# fp8-check topology:"  # as fp8_check.worker._aot.TOPOLOGY_LINE (the worker's device count)
PROFILE = Profile("tpu", {}, description="XLA's TPU compiler with its defaults (compile-only)", platforms=("tpu",))
DEVICE_NODE_GLOB = "/dev/accel*"  # TPU VMs expose their chips here


# How to hand XLA's TPU compiler FP8 operands (it keeps them: an f8 convolution; docs/tpu.md).
FP8_OPERANDS_FIX = ("give the matmul FP8 operands: flax `fp8_ops.Fp8DirectDotGeneralOp` instead of `Fp8DotGeneralOp`; "
                    "qwix post-training quantization (`qwix.PtqProvider` with an FP8 `QtRule`); in JAX, "
                    "`lax.dot_general` on the f8 arrays with `preferred_element_type` and the scales applied to its "
                    "result")


class _Tpu(Platform):
    def claims_spec(self, config_text: str) -> bool:
        return _SPEC.search(config_text or "") is not None

    def generation_of_spec(self, config_text: str) -> tuple[Generation, str]:
        m = _SPEC.search(config_text or "")
        if not m:
            raise ValueError(f'no {SPEC_FIELD}: "<generation>:<topology>" in the spec')
        if m.group(1) not in GENERATIONS:
            raise ValueError(f"unknown TPU generation {m.group(1)!r} (one of {', '.join(GENERATIONS)})")
        generation = GENERATIONS[m.group(1)]
        if len(m.group(2).split("x")) != len(generation.single_chip.split("x")):
            raise ValueError(f"topology {m.group(2)!r}: {generation.name} topologies have "
                             f"{len(generation.single_chip.split('x'))} dimensions (e.g. {generation.single_chip})")
        return generation, m.group(2)

    def arch_of_spec(self, config_text: str) -> tuple[str, tuple[int, int]]:
        generation, _ = self.generation_of_spec(config_text)
        return generation.name, (0, 0)

    def native_fp8(self, arch: str, compute_capability: tuple[int, int]) -> tuple[str, ...]:
        """The FP8 types the generation's matrix units run natively, as Google publishes it (tpu7x); the
        compiler keeps FP8 operands in the HLO on every generation (docs/tpu.md)."""
        generation = GENERATIONS.get(arch)
        return generation.native_fp8 if generation else ()

    def requirements(self, jax_version: str, kind: str, extras: list[str] | None = None) -> list[str] | None:
        if jax_version not in LIBTPU_PINS:
            return None
        # flatbuffers: `check` and the API compile functions serialized with jax.export (as for ROCm)
        return [f"jax[tpu]=={jax_version}", "flatbuffers", *(extras or [])]

    def install(self, jax_version: str) -> str:
        return f"jax[tpu]=={jax_version}"

    def unsupported_reason(self, jax_version: str, arch: str = "") -> str:
        if jax_version not in LIBTPU_PINS:
            return (f"no libtpu pin of jax[tpu]=={jax_version} known to fp8-check (measured for "
                    f"{', '.join(LIBTPU_PINS)}; docs/tpu.md)")
        generation = GENERATIONS.get(arch)
        if generation is not None and version_tuple(jax_version) < version_tuple(generation.since):
            return (f"JAX {jax_version}'s libtpu {LIBTPU_PINS[jax_version]} has no {generation.name} topology: "
                    f"{generation.name} exists from JAX {generation.since} (libtpu {LIBTPU_PINS[generation.since]})")
        return ""

    def topology_arguments(self, target_config: str, topology: str, jax_version: str) -> dict:
        generation, layout = self.generation_of_spec(target_config)
        out: dict = {"topology_name": f"{generation.name}:{layout}"}
        # before 0.12.0 libtpu assumes 2x2x1 chips per host and refuses a layout not divisible by it (one chip, and
        # multi-chip too: `Topology layout "tpu7x:2x1x1" is not divisible by ... chips_per_host_bounds "2x2x1"`):
        # such a layout gets the largest bounds that divide it (1x1x1 for one chip, 2x1x1 for tpu7x:2x1x1)
        if version_tuple(jax_version) < (0, 12, 0) and (bounds := host_bounds(layout)) is not None:
            out["chips_per_host_bounds"] = bounds
        return out

    def target_specs(self) -> dict[str, str]:
        out = {g.name: spec_text(g, g.single_chip) for g in GENERATIONS.values()}
        for name in generations.MULTI_CHIP:
            text = self.spec_for(name)
            if text is not None:
                out[name] = text
        return out

    def spec_for(self, name: str) -> str | None:
        """`v6e` (one chip) or `<generation>-<topology>` (`v5e-2x2`, `tpu7x-2x2x1`, up to 256 chips)."""
        if name in GENERATIONS:
            return spec_text(GENERATIONS[name], GENERATIONS[name].single_chip)
        m = _NAME.fullmatch(name)
        if not m or m.group(1) not in GENERATIONS:
            return None
        generation, layout = GENERATIONS[m.group(1)], m.group(2)
        dims = [int(x) for x in layout.split("x")]
        if len(dims) != len(generation.single_chip.split("x")) or not all(1 <= d <= 64 for d in dims):
            return None
        if not 2 <= generations.chips(layout) <= 256 or name != f"{generation.name}-{'x'.join(map(str, dims))}":
            return None
        return spec_text(generation, layout)

    def generation(self, arch: str) -> Generation | None:
        """The generation's data (its published peaks with their pages): what the cost model's TPU roofline reads."""
        return GENERATIONS.get(arch)

    def fp8_capability(self, arch: str) -> str:
        """Per generation, from its published peaks (generations.py, with their source)."""
        g = GENERATIONS.get(arch)
        if g is None:
            return ""
        if g.fp8_flops:
            return (f"{g.name} ({g.product}) publishes an FP8 rate: {g.fp8_flops / 1e12:.0f} TFLOP/s FP8, "
                    f"{g.bf16_flops / 1e12:.0f} TFLOP/s bf16 ({g.source})")
        return (f"{g.name} ({g.product}) publishes no FP8 rate above bf16, only {g.bf16_flops / 1e12:.0f} TFLOP/s bf16 "
                f"and {g.int8_ops / 1e12:.0f} TOPS int8 ({g.source}; {g.fp8_source}): FP8 operands the compiler keeps "
                "may be widened inside the MXU")

    def unfolded_dequantize(self, types: str) -> str:
        return (f"fed by a dequantize pattern ({types} converted to a wider type and scaled before the matmul): XLA's "
                f"TPU compiler does not fold dequantize -> dot into an FP8 matmul as the GPU rewriters do, so it runs "
                f"in the wider type. Fix: {FP8_OPERANDS_FIX}")

    def parse_versions(self, text: str, where: str):
        return (), (), "a TPU target states no runtime or library versions (libtpu is the JAX release's pin)", ()


DEFAULT_HOST_BOUNDS = (2, 2, 1)  # libtpu's chips per host before JAX 0.12.0


def host_bounds(layout: str) -> list[int] | None:
    """The chips-per-host bounds an older libtpu needs for `layout` ("2x1x1"): None where its default
    (DEFAULT_HOST_BOUNDS) divides the layout, else per dimension the largest divisor of both."""
    import math

    dims = [int(x) for x in layout.split("x")] + [1] * (3 - len(layout.split("x")))
    if all(d % b == 0 for d, b in zip(dims, DEFAULT_HOST_BOUNDS)):
        return None
    return [math.gcd(d, b) for d, b in zip(dims, DEFAULT_HOST_BOUNDS)]


def spec_text(generation: Generation, layout: str) -> str:
    """A TPU target's spec: its description, its device count (for the worker) and its topology."""
    chips = generations.chips(layout)
    devices = chips * generation.cores_per_chip if chips > 1 else 1
    where = "one chip" if chips == 1 else f"{chips} chips ({layout}, {devices} devices)"
    lines = [f"# fp8-check target spec: Google TPU {generation.name} ({generation.product}), {where}"]
    if devices > 1:
        lines.append(f"{TOPOLOGY_LINE} 1x1x{devices}")
    lines.append(f'{SPEC_FIELD}: "{generation.name}:{layout}"')
    return "\n".join(lines) + "\n"


TPU = _Tpu(
    name="tpu",
    vendor="Google TPU",
    jax_platform="tpu",
    spec_platform_name="TPU",
    arch_field=SPEC_FIELD,
    plugin_label="libtpu",
    report_key="tpu",
    runtime_header="libtpu",
    plugin_distributions=("libtpu", "libtpu-nightly"),
    plugin_modules=("libtpu",),
    # Measured: without these libtpu 0.0.15 (JAX 0.6.1) compiles in under a second, then its process does not exit
    # within 5 minutes (it asks the GCE metadata server, unreachable here); and libtpu takes a machine-wide lockfile
    # (/tmp/libtpu_lockfile) that a second compile worker cannot get ("Internal error when accessing libtpu
    # multi-process lockfile"). Compile-only, no chip is ever opened.
    deviceless_env={"TPU_SKIP_MDS_QUERY": "1", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"},
    profiles=(PROFILE,),
    canary_profile=PROFILE.name,
    matmul_ops=("convolution",),
    fused_matmul_label="TPU matmul",
    alone=True,
    install_hint="jax[tpu]",
    flags_variables=("LIBTPU_INIT_ARGS",),
    default_release=tuple(LIBTPU_PINS)[-1],
    extra_literals=("jax[tpu", "libtpu", "TPU_WORKER", DEVICE_NODE_GLOB),
)
