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

from fp8_check import platforms

DEVICELESS = platforms.DEVICELESS  # slim: jax, jaxlib, the CUDA plugin and its PJRT library, ptxas
DEVICE = platforms.DEVICE  # full: JAX's CUDA extra with the NVIDIA runtime wheels
KINDS = (DEVICELESS, DEVICE)

# JAX versions (specifier) -> extra wheels the slim set needs there (fp8_check.platforms._nvidia says why).
SLIM_EXTRAS = platforms.SLIM_EXTRAS


def kind_for_mode(mode: str) -> str:
    """The wheel set a compile mode needs: device mode the full one, anything else the slim one."""
    return DEVICE if mode == DEVICE else DEVICELESS


def slim_extras(version: str, table: dict[str, tuple[str, ...]] | None = None) -> list[str]:
    return platforms.slim_extras(version, table)


def requirements(version: str, kind: str = DEVICELESS, extras: list[str] | None = None) -> list[str]:
    """The requirements uv installs for `version`'s environment of `kind`.

    `extras` replaces `SLIM_EXTRAS`' answer (the check script tries candidates with it)."""
    return platforms.NVIDIA.requirements(version, kind, extras)
