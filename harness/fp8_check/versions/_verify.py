"""Is a cached environment whole? What `envs.Manager.cached` checks before it reuses one: the jax and jaxlib it
was built with (`damaged`: one line naming what, and the folder to delete), and its extra requirements
(`missing_requirements`: uninstalled since, or their files removed; the environment is rebuilt). Read from
site-packages, no interpreter started."""

from __future__ import annotations

import re
from pathlib import Path


def damaged(path: Path, info: dict) -> list[str]:
    """What is missing from a cached environment its marker `info` describes: its site-packages, or the jax and
    jaxlib it was built with (their metadata and their package). [] when it looks whole (the interpreter is
    checked by `_read_marker`)."""
    found = sorted(path.glob("lib/python*/site-packages"))
    if not found:
        return ["no site-packages"]
    site, out = found[0], []
    for dist in ("jax", "jaxlib"):
        version = info.get(dist)
        if isinstance(version, str) and version and not any(site.glob(f"{dist}-{version}.dist-info")):
            out.append(f"{dist} {version}'s metadata ({dist}-{version}.dist-info) missing")
        if version and not (site / dist / "__init__.py").is_file():
            out.append(f"the {dist} package ({dist}/__init__.py) missing")
    if info.get("jaxlib") and (site / "jaxlib").is_dir() and not any((site / "jaxlib").glob("*.so")):
        out.append("jaxlib's compiled extension (jaxlib/*.so) missing")
    return out


def missing_requirements(path: Path, info: dict) -> list[str]:
    """The extra requirements (`with_installed`: name -> version at build) no longer installed in the environment at
    `path`: no `*.dist-info`/`*.egg-info` of that distribution (any version), or a top-level file or folder its
    RECORD lists gone. Read from site-packages, no interpreter started."""
    wanted = {_canonical(n): n for n, v in (info.get("with_installed") or {}).items() if v}
    found = sorted(path.glob("lib/python*/site-packages"))
    if not wanted or not found:
        return []
    site, meta = found[0], dict[str, Path]()
    for d in site.iterdir():
        if d.suffix in (".dist-info", ".egg-info"):
            meta.setdefault(_canonical(d.name[:-len(d.suffix)].split("-")[0]), d)
    missing = []
    for key, name in wanted.items():
        record = meta.get(key)
        if record is None or any(not (site / top).exists() for top in _top_level(record)):
            missing.append(name)
    return missing


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _top_level(dist_info: Path) -> set[str]:
    """The top-level names a distribution's RECORD installed into site-packages (not its metadata, scripts, caches)."""
    try:
        lines = (dist_info / "RECORD").read_text(errors="replace").splitlines()
    except OSError:
        return set()
    tops = {line.split(",")[0].split("/")[0] for line in lines if line.strip()}
    return {t for t in tops if t and t != ".." and t != "__pycache__" and not t.endswith((".dist-info", ".egg-info"))}
