"""Bytes of the wheels an install downloads, from package metadata (no download): shared by the benchmarks.

`from_lock(lock, python)`: the wheels of uv.lock that the environment of `python` has installed;
`for_requirements(reqs)`: uv resolves `reqs` (`uv pip compile --format pylock.toml`, which records
each file's size) for this interpreter. Either way, per package the wheel whose tags rank best
for this interpreter (what the installer picks).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

_RANK = {t: i for i, t in enumerate(sys_tags())}


def _best(wheels: list[dict]) -> tuple[int, str] | None:
    best = None
    for w in wheels:
        name = (w.get("url") or w.get("name") or "").rsplit("/", 1)[-1]
        if not name.endswith(".whl"):
            continue
        ranks = [_RANK[t] for t in parse_wheel_filename(name)[3] if t in _RANK]
        if ranks and (best is None or min(ranks) < best[0]):
            best = (min(ranks), int(w.get("size") or 0), name)
    return (best[1], best[2]) if best else None


def installed(python: str) -> dict[str, str]:
    out = subprocess.run([python, "-c", "import importlib.metadata as m, json; print(json.dumps("
                          "{d.metadata['Name']: d.version for d in m.distributions()}))"],
                         capture_output=True, text=True, check=True)
    return {canonicalize_name(k): v for k, v in json.loads(out.stdout).items()}


def from_lock(lock: Path, python: str) -> dict:
    have = installed(python)
    rows = []
    for p in tomllib.loads(Path(lock).read_text())["package"]:
        if have.get(canonicalize_name(p["name"])) == str(p.get("version")):
            b = _best(p.get("wheels", []))
            if b:
                rows.append(b)
    return _summary(rows)


def for_requirements(requirements: list[str], uv: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        req, lock = Path(tmp) / "req.in", Path(tmp) / "pylock.toml"
        req.write_text("\n".join(requirements) + "\n")
        subprocess.run([uv, "pip", "compile", "-q", str(req), "--format", "pylock.toml", "-o", str(lock),
                        "--python", sys.executable], check=True, capture_output=True, text=True)
        rows = [b for p in tomllib.loads(lock.read_text())["packages"] if (b := _best(p.get("wheels", [])))]
    return _summary(rows)


def _summary(rows: list[tuple[int, str]]) -> dict:
    rows.sort(reverse=True)
    return {"wheels": len(rows), "mb": round(sum(s for s, _ in rows) / 1e6, 1),
            "largest": [f"{n} ({s / 1e6:.0f} MB)" for s, n in rows[:4]]}
