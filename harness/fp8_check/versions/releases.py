"""Released JAX versions: asked from the package index through the package tools, never a hard-coded host.

`available()` lists every released (non-pre-release) JAX version the configured
index offers, by running pip's `index versions` (with the current interpreter,
the base interpreter, or `uv tool run --from pip`, whichever works first), so it
honours the machine's pip configuration (index URL, mirrors, find-links). The
answer is cached for an hour under the fp8-check cache directory.
`FP8_CHECK_JAX_VERSIONS=0.6.1,0.7.0,...` replaces the index (offline use, tests).

`select_range("0.6.1..0.12.0.1")` is the one place that turns a `--jax-range`
into a version list: the CLI (`fp8-check matrix --jax-range`, `--list-versions`)
and the nightly workflow's version job both call it.

Standalone (needs only `packaging`), as the nightly workflow's first job runs it:
    python -m fp8_check.versions.releases --jax-range 0.6.1.. [--select minor] [--format json|lines|github]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from fp8_check.compile import cache_dir
from fp8_check.versions._uvbin import find_uv

PACKAGE = "jax"
CACHE_SECONDS = 3600
SELECTIONS = ("all", "minor")


class VersionError(ValueError):
    """A bad version, range, or an index that could not be asked."""


def parse_version(text: str) -> Version:
    try:
        return Version(text.strip())
    except InvalidVersion:
        raise VersionError(f"not a version: {text!r}") from None


def sort_versions(versions) -> list[str]:
    return [str(v) for v in sorted({parse_version(str(v)) for v in versions})]


def _pip_commands() -> list[list[str]]:
    cmds = []
    for py in dict.fromkeys([sys.executable, getattr(sys, "_base_executable", sys.executable)]):
        cmds.append([py, "-m", "pip", "index", "versions", PACKAGE])

    uv = find_uv()
    if uv:
        cmds.append([uv, "tool", "run", "--quiet", "--from", "pip", "pip", "index", "versions", PACKAGE])
    return cmds


def parse_pip_index_output(text: str) -> list[str]:
    """The versions in pip's `index versions` answer ("Available versions: 0.12.0.1, 0.12.0, ...")."""
    m = re.search(r"^Available versions:\s*(.+)$", text, re.M)
    if not m:
        raise VersionError("pip's answer has no 'Available versions:' line")
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def query_index(timeout: float = 120.0) -> list[str]:
    """Every released version of JAX on the configured index, oldest first (uncached)."""
    errors = []
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    for cmd in _pip_commands():
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        except (OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{' '.join(cmd[:3])}: {exc}")
            continue
        if proc.returncode == 0:
            try:
                found = parse_pip_index_output(proc.stdout)
            except VersionError as exc:
                errors.append(f"{' '.join(cmd[:3])}: {exc}")
                continue
            return [v for v in sort_versions(found) if not Version(v).is_prerelease]
        errors.append(f"{' '.join(cmd[:3])}: {(proc.stderr or proc.stdout).strip().splitlines()[-1:] or ['failed']}")
    raise VersionError("could not list JAX versions from the package index: " + "; ".join(errors))


INDEX_ENV = "FP8_CHECK_JAX_INDEX"


def jax_index(given: str | None = None) -> str | None:
    """The extra package index for JAX builds (nightlies): `given`, else $FP8_CHECK_JAX_INDEX, else none."""
    return (given or os.environ.get(INDEX_ENV) or "").strip() or None


def index_versions(index_url: str, package: str = PACKAGE, timeout: float = 60.0) -> list[str]:
    """Every version of `package` on a PEP 503 simple index (pre-releases included), oldest first.

    Reads `<index_url>/<package>/` (a `file://` index reads `<path>/<package>/index.html`) and
    takes the versions from the wheel and sdist file names it links to.
    """
    import urllib.parse
    import urllib.request

    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

    base = index_url.rstrip("/") + "/" + package + "/"
    try:
        if base.startswith("file://"):
            page = (Path(urllib.parse.unquote(urllib.parse.urlparse(base).path)) / "index.html").read_text()
        else:
            with urllib.request.urlopen(base, timeout=timeout) as resp:  # noqa: S310 - a configured index URL
                page = resp.read().decode("utf-8", "replace")
    except (OSError, ValueError) as exc:
        raise VersionError(f"--jax-index {index_url}: cannot read {base}: {exc}") from None
    found = set()
    for href in re.findall(r"""href\s*=\s*["']([^"']+)["']""", page, re.I):
        name = urllib.parse.unquote(href.split("#", 1)[0].rstrip("/").rsplit("/", 1)[-1])
        try:
            if name.endswith(".whl"):
                found.add(str(parse_wheel_filename(name)[1]))
            elif name.endswith((".tar.gz", ".zip")):
                found.add(str(parse_sdist_filename(name)[1]))
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
    if not found:
        raise VersionError(f"--jax-index {index_url}: no {package} wheels listed at {base}")
    return sort_versions(found)


def newest_on_index(index_url: str) -> str:
    """The newest JAX build on `index_url`, pre-releases (nightlies, `0.8.1.dev20251010`) included."""
    return index_versions(index_url)[-1]


def available(refresh: bool = False) -> list[str]:
    """Released JAX versions, oldest first: $FP8_CHECK_JAX_VERSIONS, a fresh cached answer, or the index."""
    override = os.environ.get("FP8_CHECK_JAX_VERSIONS")
    if override:
        return sort_versions(v for v in override.split(",") if v.strip())
    path = cache_dir() / "jax-versions.json"
    if not refresh:
        try:
            doc = json.loads(path.read_text())
            if time.time() - doc["time"] < CACHE_SECONDS and doc["versions"]:
                return list(doc["versions"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    versions = query_index()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"time": time.time(), "versions": versions}))
        os.replace(tmp, path)
    except OSError:
        pass
    return versions


def parse_range(text: str) -> SpecifierSet:
    """`A..B` (both ends included), `A..` (A and newer), `..B`, or a PEP 440 specifier set like `>=0.6.1,<0.9`."""
    text = text.strip()
    if ".." in text and not any(op in text for op in "<>=!~"):
        lo, _, hi = text.partition("..")
        parts = []
        if lo.strip():
            parts.append(f">={parse_version(lo)}")
        if hi.strip():
            parts.append(f"<={parse_version(hi)}")
        if not parts:
            raise VersionError(f"empty version range {text!r}; write e.g. 0.6.1..0.12.0.1")
        if lo.strip() and hi.strip() and parse_version(lo) > parse_version(hi):
            raise VersionError(f"version range {text!r}: {lo} is newer than {hi}")
        return SpecifierSet(",".join(parts))
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        raise VersionError(f"not a version range: {text!r}; write A..B, A.., ..B or a specifier like >=0.6.1,<0.9") from None


def minor_selection(versions: list[str]) -> list[str]:
    """The newest release of each minor series, plus the oldest version (so the range's start is kept)."""
    if not versions:
        return []
    newest: dict[tuple[int, int], str] = {}
    for v in versions:
        pv = Version(v)
        key = (pv.major, pv.minor)
        if key not in newest or pv > Version(newest[key]):
            newest[key] = v
    return sort_versions(set(newest.values()) | {versions[0]})


def select_range(text: str, select: str = "all", versions: list[str] | None = None) -> list[str]:
    """The released versions inside the range `text`, oldest first; `select='minor'` thins them (see minor_selection)."""
    spec = parse_range(text)
    pool = versions if versions is not None else available()
    chosen = [v for v in sort_versions(pool) if spec.contains(Version(v), prereleases=False)]
    if not chosen:
        raise VersionError(f"no released JAX version in {text!r}")
    if select == "minor":
        chosen = minor_selection(chosen)
    elif select != "all":
        raise VersionError(f"unknown selection {select!r}; allowed: {', '.join(SELECTIONS)}")
    return chosen


def between(good: str, bad: str, versions: list[str] | None = None) -> list[str]:
    """Released versions strictly between `good` and `bad` (either order), oldest first."""
    lo, hi = sorted((parse_version(good), parse_version(bad)))
    pool = versions if versions is not None else available()
    return [v for v in sort_versions(pool) if lo < Version(v) < hi and not Version(v).is_prerelease]


def format_list(versions: list[str], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(versions)
    if fmt == "github":  # a line for $GITHUB_OUTPUT, read by fromJSON() in a job matrix
        return "versions=" + json.dumps(versions)
    return "\n".join(versions)


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m fp8_check.versions.releases", description="List released JAX versions in a range.")
    p.add_argument("--jax-range", required=True)
    p.add_argument("--select", choices=SELECTIONS, default="all")
    p.add_argument("--format", choices=("lines", "json", "github"), default="lines")
    args = p.parse_args(argv)
    try:
        print(format_list(select_range(args.jax_range, args.select), args.format))
    except VersionError as exc:
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
