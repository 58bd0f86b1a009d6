"""What `fp8-check --version` prints: fp8-check's own version and the JAX it runs with.

Read from the installed distributions' metadata, without importing JAX (importing it on a
machine without a GPU would start the CUDA plugin).
"""

from __future__ import annotations

import platform
from importlib import metadata

from fp8_check.core import files
from fp8_check import platforms

DISTRIBUTION = "fp8-check"
# The JAX distributions, as `name (label)`: each platform's plugins (the distribution name carries the
# runtime's major version; the first one found is the platform's plugin).
JAX_DISTRIBUTIONS = (("jax", "jax"), ("jaxlib", "jaxlib"),
                     *((d, p.plugin_label) for p in platforms.PLATFORMS for d in p.plugin_distributions))


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


def install_requirement(extra: str = "flax") -> str:
    """What installs *this* fp8-check elsewhere today (for `fp8-check init`'s CI): the git URL and commit it was
    installed from (PEP 610 `direct_url.json`), a wheel's URL, or this checkout's `origin` remote at its HEAD
    commit; '' when none is known (then the workflow asks for one)."""
    import json
    import subprocess

    name = f"{DISTRIBUTION}[{extra}]" if extra else DISTRIBUTION
    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        text = None
    info = json.loads(text) if text else {}
    url = info.get("url", "")
    vcs = info.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and url:
        return f"{name} @ git+{url}@{vcs.get('commit_id') or vcs.get('requested_revision') or 'main'}"
    if url.startswith(("https://", "http://")) and url.endswith(".whl"):
        return f"{name} @ {url}"
    checkout = files.checkout()
    if checkout is not None:
        def git(*a):
            try:
                p = subprocess.run(["git", "-C", str(checkout), *a], capture_output=True, text=True, timeout=30,
                                   stdin=subprocess.DEVNULL)
            except (OSError, subprocess.SubprocessError):  # no git, or a git that hangs
                return ""
            return p.stdout.strip() if p.returncode == 0 else ""
        remote, commit = git("remote", "get-url", "origin"), git("rev-parse", "HEAD")
        if remote and commit and not remote.startswith(("/", "file:")):
            return f"{name} @ git+{remote}@{commit}"
    return ""
