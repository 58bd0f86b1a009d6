"""A fourth platform, defined outside fp8_check.platforms: a stand-in accelerator that compiles on the host CPU.

Nothing in harness/ names it. tests/platforms/test_fourth_platform.py registers it through the `fp8_check.platforms`
entry-point group of a tiny installed distribution (a `.dist-info` folder on the path) and runs a case on it
end to end: `run` (NEW), `bless`, `run` (PASS). Its spec is a stand-in (`standin_device_info { generation: N }`),
its devices the worker's own CPU (`compile_devices`): XLA's CPU compiler is the real compiler of its programs.
Standard library only, as every platform (the compile worker imports it before JAX).
"""

from __future__ import annotations

import re

from fp8_check.platforms import Platform, Profile

FIELD = "standin_device_info"
PROFILE = Profile("standin", {}, description="the stand-in's one profile: XLA's CPU defaults", platforms=("standin",))
SPEC = f"# fp8-check target spec: a stand-in accelerator (tests/fourth_platform.py)\n{FIELD} {{\n  generation: 1\n}}\n"


class _StandIn(Platform):
    def arch_of_spec(self, config_text: str) -> tuple[str, tuple[int, int]]:
        m = re.search(rf"{FIELD}\s*\{{[^}}]*generation:\s*(\d+)", config_text)
        if not m:
            raise ValueError(f"no generation in its {FIELD}")
        return f"standin{m.group(1)}", (int(m.group(1)), 0)

    def native_fp8(self, arch: str, compute_capability: tuple[int, int]) -> tuple[str, ...]:
        return ()  # the host's matmuls are wide: an FP8 program upcasts, by design

    def requirements(self, jax_version: str, kind: str) -> list[str] | None:
        return [f"jax=={jax_version}"]

    def parse_versions(self, text: str, where: str):
        return (), (), "a stand-in states no runtime", ()

    def target_specs(self) -> dict[str, str]:
        return {"standin1": SPEC}

    def compile_devices(self, target_config: str, jax_version: str):
        import jax

        return jax.devices("cpu")[0]


STANDIN = _StandIn(
    name="standin",
    vendor="Stand-in",
    jax_platform="standin",
    spec_platform_name="STANDIN",
    arch_field=FIELD,
    plugin_label="stand-in plugin",
    report_key="standin",
    runtime_header="standin_runtime",
    plugin_modules=("jax",),  # installed wherever JAX is: it compiles in the main environment
    profiles=(PROFILE,),
    canary_profile=PROFILE.name,
    unpriced="a stand-in has no rate table",
)
