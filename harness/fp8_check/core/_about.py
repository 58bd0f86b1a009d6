"""What `fp8-check --version` prints: fp8-check's own version and the JAX it runs with.

Read from the installed distributions' metadata, without importing JAX (importing it on a
machine without a GPU would start the CUDA plugin).
"""

from __future__ import annotations

import platform
from importlib import metadata

from fp8_check import platforms

DISTRIBUTION = "fp8-check"
# The JAX distributions, as `name (label)`: each platform's plugins (the distribution name carries the
# runtime's major version; the first one found is the platform's plugin).
JAX_DISTRIBUTIONS = (("jax", "jax"), ("jaxlib", "jaxlib"),
                     *((d, p.plugin_label) for p in platforms.registered() for d in p.plugin_distributions))


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
    parts, seen = [], set()
    for name, label in JAX_DISTRIBUTIONS:
        if label not in seen and (v := installed(name)):
            parts.append(f"{label} {v}")
            seen.add(label)
    jax = ", ".join(parts) if parts else "jax not installed"
    return f"fp8-check {version()} ({jax}; Python {platform.python_version()})"
