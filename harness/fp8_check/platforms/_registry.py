"""The platform registry: read when asked, never frozen (`register`, `registered`, `by_name`, `of_spec`), the
entry-point group `fp8_check.platforms` loaded once on the first lookup, and the lookups every stage asks a platform
through (the platforms face, fp8_check/platforms/__init__.py, says what a platform owns).

Imported by the compile worker inside per-version JAX environments: standard library only.
"""

from __future__ import annotations

import threading

from fp8_check.platforms._amd import AMD
from fp8_check.platforms._base import Engine, Platform, Profile
from fp8_check.platforms._nvidia import NVIDIA
from fp8_check.platforms.tpu import TPU

ENTRY_POINTS = "fp8_check.platforms"  # the entry-point group of platforms outside this tree
_REGISTRY: dict[str, Platform] = {}
_LOADED: list[bool] = []  # [True] once the entry points were loaded
_LOADING = threading.RLock()  # the first look-ups of several threads load them once (an entry's own look-up re-enters)


class UnknownSpec(ValueError):
    """A target spec no registered platform claims."""


def register(platform: Platform) -> Platform:
    """Add `platform` to the registry (its name, JAX platform name and profile names must be new)."""
    for other in _REGISTRY.values():
        if platform.name in (other.name, other.jax_platform) or platform.jax_platform in (other.name, other.jax_platform):
            raise ValueError(f"platform {platform.name!r} is registered already")
    _REGISTRY[platform.name] = platform
    return platform


def _load_entry_points() -> None:
    """Register the platforms of the `fp8_check.platforms` entry points, once. One that cannot be loaded, is no
    Platform or clashes with a registered one is skipped with one warning line on stderr (as JAX does with a
    broken plugin): the other platforms still work."""
    if _LOADED:
        return
    with _LOADING:
        if not _LOADED:
            _LOADED.append(True)
            _register_entry_points()


def _register_entry_points() -> None:
    import sys
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=ENTRY_POINTS), key=lambda e: e.name):
        try:
            found = entry.load()
            platform = found() if callable(found) and not isinstance(found, Platform) else found
            if not isinstance(platform, Platform):
                raise TypeError(f"{type(platform).__name__}, not a Platform")
            if _REGISTRY.get(platform.name) is not platform:
                register(platform)
        except Exception as exc:  # a broken plugin costs its own platform only
            print(f"fp8-check: warning: platform entry point {entry.name!r} ({entry.value}) skipped: {exc}",
                  file=sys.stderr)


def registered() -> tuple[Platform, ...]:
    """Every registered platform, in the order it was registered, as the registry is now."""
    _load_entry_points()
    return tuple(_REGISTRY.values())


for _platform in (NVIDIA, AMD, TPU):
    register(_platform)

DEFAULT = NVIDIA  # the platform a command compiles for when it names no target (its `default_target`)


def default_target() -> str:
    """The target a command compiles for when it names none: the default platform's own."""
    return DEFAULT.default_target


def default_profile() -> str:
    """The profile a command that compiles one profile only uses when it names none: the default platform's own."""
    return DEFAULT.default_profile


def by_name(name: str) -> Platform:
    for p in registered():
        if name in (p.name, p.jax_platform):
            return p
    raise KeyError(f"unknown platform {name!r} (one of {', '.join(p.name for p in registered())})")


def of_spec(config_text: str) -> Platform:
    """The platform a target spec is for: the one that claims it (a GpuTargetConfig's architecture block, a TPU
    topology line); UnknownSpec when none does."""
    for p in registered():
        if p.claims_spec(config_text or ""):
            return p
    known = "; ".join(f"{p.name}: {p.arch_field}" for p in registered())
    raise UnknownSpec(f"the spec names no platform fp8-check knows (it needs one of {known})")


def of_target(target) -> Platform:
    """The platform of a `targets.Target` (by its spec text)."""
    return of_spec(getattr(target, "config_text", "") or "")


def profiles() -> dict[str, Profile]:
    """Every platform's profiles by name (a profile shared by platforms once)."""
    out: dict[str, Profile] = {}
    for p in registered():
        for profile in p.profiles:
            if out.setdefault(profile.name, profile) is not profile:
                raise ValueError(f"two platforms define a profile named {profile.name!r}")
    return out


def target_specs() -> dict[str, tuple[Platform, str]]:
    """name -> (platform, spec text) of every target a platform names itself (besides the shipped GPU specs)."""
    return {name: (p, text) for p in registered() for name, text in p.target_specs().items()}


def matmul_ops() -> frozenset[str]:
    """HLO opcodes that are a platform's matmul inside a fusion (besides `dot`)."""
    return frozenset(op for p in registered() for op in p.matmul_ops)


def deviceless_environment() -> dict[str, str]:
    """The environment variables every platform's deviceless compile needs, set together (one worker
    process may compile for several platforms)."""
    out: dict[str, str] = {}
    for p in registered():
        out.update(p.deviceless_env)
    return out


def of_targets(targets) -> Platform:
    """The platform a compile for `targets` is about: the first other than the default, else the default (an
    h100 + v6e run's workers are the TPU's environment's)."""
    return next((p for p in map(of_target, targets) if p is not DEFAULT), DEFAULT)


def prepare_deviceless() -> None:
    """In a compile worker, deviceless, before any JAX backend starts: let every installed plugin start
    without its GPU."""
    for p in registered():
        if p.installed():
            p.allow_deviceless()


def plugin_versions(version_of) -> dict[str, str | None]:
    """`{cuda_plugin: ..., cuda_pjrt: ...}` as environment reports carry them: the default platform's always,
    another platform's when its plugin is installed. `version_of(distribution)` gives a version or None."""
    out: dict[str, str | None] = {}
    for p in registered():
        plugin = next((v for d in p.plugin_distributions if (v := version_of(d))), None)
        pjrt = next((v for d in p.pjrt_distributions if (v := version_of(d))), None)
        if p is DEFAULT or plugin or pjrt:
            out[f"{p.report_key}_plugin"], out[f"{p.report_key}_pjrt"] = plugin, pjrt
    return out


def engine_of(custom_call_target: str) -> Engine | None:
    """The gemm engine a custom-call target names (the same names on every platform whose XLA shares
    the GPU compiler: ROCm's XLA emits the cuBLAS custom-calls, backed by hipBLASLt)."""
    for p in registered():
        found = p.engine_of(custom_call_target)
        if found is not None:
            return found
    return None


def literals() -> tuple[str, ...]:
    """Strings that name a platform: none of them may appear in code outside this package."""
    out: list[str] = []
    for p in registered():
        out += [x for x in p.literals() if x not in out]
    return tuple(out)


