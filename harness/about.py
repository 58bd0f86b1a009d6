"""What `fp8-check --version` prints: fp8-check's own version and the JAX it runs with.

Read from the installed distributions' metadata, without importing JAX (importing it on a
machine without a GPU would start the CUDA plugin).
"""

from __future__ import annotations

import platform
from importlib import metadata

DISTRIBUTION = "fp8-check"
# The JAX distributions, as `name (label)`: the CUDA plugin's distribution name carries the CUDA major version.
JAX_DISTRIBUTIONS = (("jax", "jax"), ("jaxlib", "jaxlib"), ("jax-cuda12-plugin", "CUDA plugin"),
                     ("jax-cuda13-plugin", "CUDA 13 plugin"))


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def version() -> str:
    """fp8-check's version ('unknown' when run from a checkout that was never installed)."""
    return installed(DISTRIBUTION) or "unknown"


def version_line() -> str:
    """`fp8-check 0.1.0 (jax 0.12.0.1, jaxlib 0.12.0.1, CUDA plugin 0.12.0.1; Python 3.12.1)`."""
    parts = [f"{label} {v}" for name, label in JAX_DISTRIBUTIONS if (v := installed(name))]
    jax = ", ".join(parts) if parts else "jax not installed"
    return f"fp8-check {version()} ({jax}; Python {platform.python_version()})"
