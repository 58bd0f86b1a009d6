"""Which wheels a per-version JAX environment gets: the slim deviceless set, or the full device set.

A deviceless compile (the default mode of `run`, `matrix`, `bisect`) needs JAX, jaxlib and
the CUDA plugin with its PJRT library, and none of the NVIDIA runtime wheels that
`jax[cuda12]` pulls in (cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE, NCCL, NVSHMEM…,
about 4.7 GB): JAX's `cuda12-local` extra is exactly that set. Device mode (a real GPU:
autotuning, executing) keeps the full `jax[cuda12]`.

That the slim set compiles exactly as the full one is proved, not assumed:
`scripts/slim_check.py` compiles the whole case library in both environments for
every supported version and compares the optimized HLO (table:
docs/slim_envs.md). A version on which slim differs gets the fewest extra wheels
that make it identical, listed in `SLIM_EXTRAS`.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet
from packaging.version import Version

DEVICELESS = "deviceless"  # slim: jax, jaxlib, jax-cuda12-plugin, jax-cuda12-pjrt
DEVICE = "device"  # full: jax[cuda12] with the NVIDIA runtime wheels
KINDS = (DEVICELESS, DEVICE)

# JAX versions (specifier) -> extra wheels the slim set needs there for identical compilations.
# Empty: scripts/slim_check.py found every supported version identical with the bare slim set.
SLIM_EXTRAS: dict[str, tuple[str, ...]] = {}


def kind_for_mode(mode: str) -> str:
    """The wheel set a compile mode needs: device mode the full one, anything else the slim one."""
    return DEVICE if mode == DEVICE else DEVICELESS


def slim_extras(version: str, table: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    v = Version(version)
    out: list[str] = []
    for spec, wheels in (SLIM_EXTRAS if table is None else table).items():
        if v in SpecifierSet(spec, prereleases=True):
            out += [w for w in wheels if w not in out]
    return out


def requirements(version: str, kind: str = DEVICELESS, extras: list[str] | None = None) -> list[str]:
    """The requirements uv installs for `version`'s environment of `kind`.

    `extras` replaces `SLIM_EXTRAS`' answer (the check script tries candidates with it)."""
    if kind == DEVICE:
        return [f"jax[cuda12]=={version}"]
    if kind != DEVICELESS:
        raise ValueError(f"unknown environment kind {kind!r} (one of {', '.join(KINDS)})")
    return [f"jax[cuda12-local]=={version}", *(slim_extras(version) if extras is None else extras)]
