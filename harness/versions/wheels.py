"""Which wheels a per-version JAX environment gets: the slim deviceless set, or the full device set.

A deviceless compile (the default mode of `run`, `matrix`, `bisect`) needs JAX, jaxlib,
the CUDA plugin with its PJRT library (JAX's `cuda12-local` extra) and a PTX compiler
(ptxas, from nvidia-cuda-nvcc-cu12), and none of the other NVIDIA runtime wheels that
`jax[cuda12]` pulls in (cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE, NCCL, NVSHMEM…,
about 4.6 GB). Device mode (a real GPU: autotuning, executing) keeps the full `jax[cuda12]`.

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

# JAX versions (specifier) -> extra wheels the slim set needs there. Every supported version needs
# a PTX compiler: without one the plugin stops with "No PTX compilation provider is available.
# Neither ptxas/nvlink nor nvjitlink is available" (a machine with a CUDA toolkit in /usr/local/cuda
# hides this: XLA finds its ptxas). nvidia-cuda-nvcc-cu12 (ptxas) works for all of 0.6.1 .. 0.12.0.1;
# nvidia-nvjitlink-cu12 only for the newer ones (0.6.1 rejects it), at the same size.
SLIM_EXTRAS: dict[str, tuple[str, ...]] = {">=0.6.1": ("nvidia-cuda-nvcc-cu12",)}


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
