"""Platforms: everything that differs between GPU vendors, in one module each (`nvidia`, `amd`).

A `Platform` owns its JAX platform name, its plugin and wheel names per JAX version, how a target
spec names the architecture, the environment a deviceless compile needs, the gemm custom-calls its
XLA emits (family, engine label, FP8-ness), which FP8 types an architecture runs natively, and the
canary it must pass. The rest of fp8-check asks a platform (`of_spec`, `of_target`, `by_name`) and
names none itself: tests/test_platforms.py fails on a platform literal anywhere else in harness/.

This package is imported by the compile worker inside per-version JAX environments: standard
library only.
"""

from __future__ import annotations

from fp8_check.platforms.base import Engine, Platform
from fp8_check.platforms.amd import AMD
from fp8_check.platforms.nvidia import NVIDIA

PLATFORMS: tuple[Platform, ...] = (NVIDIA, AMD)
DEFAULT = NVIDIA

__all__ = ["AMD", "DEFAULT", "Engine", "NVIDIA", "PLATFORMS", "Platform", "by_name", "engine_of", "of_spec",
           "of_target", "deviceless_environment", "literals", "plugin_versions", "prepare_deviceless"]


def by_name(name: str) -> Platform:
    for p in PLATFORMS:
        if name in (p.name, p.jax_platform):
            return p
    raise KeyError(f"unknown platform {name!r} (one of {', '.join(p.name for p in PLATFORMS)})")


def of_spec(config_text: str) -> Platform:
    """The platform a GpuTargetConfig text is for: the one whose architecture block it holds (NVIDIA if none)."""
    for p in PLATFORMS:
        if p.claims_spec(config_text or ""):
            return p
    return DEFAULT


def of_target(target) -> Platform:
    """The platform of a `targets.Target` (by its spec text)."""
    return of_spec(getattr(target, "config_text", "") or "")


def deviceless_environment() -> dict[str, str]:
    """The environment variables every platform's deviceless compile needs, set together (one worker
    process may compile for several platforms)."""
    out: dict[str, str] = {}
    for p in PLATFORMS:
        out.update(p.deviceless_env)
    return out


def prepare_deviceless() -> None:
    """In a compile worker, deviceless, before any JAX backend starts: let every installed plugin start
    without its GPU."""
    for p in PLATFORMS:
        if p.installed():
            p.allow_deviceless()


def plugin_versions(version_of) -> dict[str, str | None]:
    """`{cuda_plugin: ..., cuda_pjrt: ...}` as environment reports carry them: the default platform's always,
    another platform's when its plugin is installed. `version_of(distribution)` gives a version or None."""
    out: dict[str, str | None] = {}
    for p in PLATFORMS:
        plugin = next((v for d in p.plugin_distributions if (v := version_of(d))), None)
        pjrt = next((v for d in p.pjrt_distributions if (v := version_of(d))), None)
        if p is DEFAULT or plugin or pjrt:
            out[f"{p.report_key}_plugin"], out[f"{p.report_key}_pjrt"] = plugin, pjrt
    return out


def engine_of(custom_call_target: str) -> Engine | None:
    """The gemm engine a custom-call target names (the same names on every platform whose XLA shares
    the GPU compiler: ROCm's XLA emits the cuBLAS custom-calls, backed by hipBLASLt)."""
    for p in PLATFORMS:
        found = p.engine_of(custom_call_target)
        if found is not None:
            return found
    return None


def literals() -> tuple[str, ...]:
    """Strings that name a platform: none of them may appear in code outside this package."""
    out: list[str] = []
    for p in PLATFORMS:
        out += [x for x in p.literals() if x not in out]
    return tuple(out)
