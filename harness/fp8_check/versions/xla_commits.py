"""Which XLA commit each released jaxlib was built from, and the XLA commit range between two JAX versions.

The shipped table (`xla_commits.json`, next to this module) maps a JAX release to
- `jax_commit`: the JAX commit jaxlib was built from: the wheel's
  `jaxlib.version._git_hash` where the wheel records it (0.8.1 on), else the
  commit of the release tag `jax-vV` (for 0.8.1-0.11.0 the two agree);
- `xla_commit`: `XLA_COMMIT` in JAX's `third_party/xla/revision.bzl` (0.7.0 on)
  or `third_party/xla/workspace.bzl` (before) at that JAX commit.
A commit that could not be looked up is null, never guessed.

Regenerate where GitHub is reachable (the nightly workflow does):

    python -m fp8_check.versions.xla_commits --update [--git-dir CLONE] [--jax-range 0.6.1..]

It lists the release tags of jax-ml/jax (`git ls-remote`, or the tags of a local
clone with `--git-dir`), takes the wheel's git hash from an installed
per-version environment when there is one, and reads `XLA_COMMIT` at each commit
(raw file download, or `git show` in the clone). Entries it cannot resolve keep
their previous value.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from fp8_check.core import package_path
from fp8_check.versions._envs import InstallError, Manager, own_jax
from fp8_check.versions.releases import VersionError, parse_version, select_range

TABLE = package_path("versions", "xla_commits.json")
JAX_REPO = "https://github.com/jax-ml/jax"
XLA_REPO = "https://github.com/openxla/xla"
RAW = "https://raw.githubusercontent.com/jax-ml/jax/{commit}/{path}"
REVISION_FILES = ("third_party/xla/revision.bzl", "third_party/xla/workspace.bzl")
_XLA_COMMIT = re.compile(r'^XLA_COMMIT\s*=\s*"([0-9a-f]{40})"', re.M)
_GIT_HASH = re.compile(r"^_git_hash\s*(?::[^=]*)?=\s*'([0-9a-f]{40})'", re.M)


@dataclass(frozen=True)
class Entry:
    version: str
    jax_commit: str | None
    jax_commit_from: str | None
    xla_commit: str | None
    xla_commit_from: str | None


@dataclass(frozen=True)
class XlaRange:
    """The XLA commits between the last good and the first bad JAX version."""

    good_version: str
    bad_version: str
    good: str | None  # XLA commit of the good version
    bad: str | None
    project = "XLA"  # what the commits are of, and where they live (JaxRange: JAX's own)
    repo = XLA_REPO

    @property
    def known(self) -> bool:
        return bool(self.good and self.bad)

    @property
    def url(self) -> str | None:
        return f"{self.repo}/compare/{self.good}...{self.bad}" if self.known else None

    def text(self) -> str:
        p = self.project
        if not self.known or self.good is None or self.bad is None:
            missing = [v for v, c in ((self.good_version, self.good), (self.bad_version, self.bad)) if not c]
            return f"{p} commit range unknown (no {p} commit recorded for jax {', '.join(missing)})"
        if self.good == self.bad:
            return f"{p} {self.good[:12]} in both (jax {self.good_version} and {self.bad_version} ship the same {p})"
        return f"{p} {self.good[:12]}..{self.bad[:12]} ({self.url})"

    def markdown(self) -> str:
        if not self.known or self.good is None or self.bad is None:
            return self.text()
        if self.good == self.bad:
            return f"{self.project} [`{self.good[:12]}`]({self.repo}/commit/{self.good}) in both versions"
        return f"{self.project} [`{self.good[:12]}..{self.bad[:12]}`]({self.url})"


@dataclass(frozen=True)
class JaxRange(XlaRange):
    """The JAX commits between the last good and the first bad JAX version: where to look when JAX's lowering
    changed (the StableHLO differs), beside the XLA range."""

    project = "JAX"
    repo = JAX_REPO


def load(path: Path = TABLE) -> dict[str, Entry]:
    raw = json.loads(Path(path).read_text())
    return {v: Entry(v, e.get("jax_commit"), e.get("jax_commit_from"), e.get("xla_commit"), e.get("xla_commit_from"))
            for v, e in raw["versions"].items()}


def tabled_releases(path: Path = TABLE) -> list[str]:
    """The JAX releases the table knows (its keys; unsorted)."""
    return list(load(path))


def entry(version: str, table: dict[str, Entry] | None = None) -> Entry | None:
    table = table if table is not None else load()
    if version in table:
        return table[version]
    want = parse_version(version)
    return next((e for v, e in table.items() if parse_version(v) == want), None)


def xla_range(good: str, bad: str, table: dict[str, Entry] | None = None) -> XlaRange:
    table = table if table is not None else load()
    g, b = entry(good, table), entry(bad, table)
    return XlaRange(good, bad, g.xla_commit if g else None, b.xla_commit if b else None)


def jax_range(good: str, bad: str, table: dict[str, Entry] | None = None) -> JaxRange:
    """The JAX commits of two releases: what their installed `jax` distributions record (`jax/version.py`'s
    `_git_hash` in the per-version environments, else jaxlib's), else the shipped table's `jax_commit`. Reads
    files only: no network."""
    table = table if table is not None else load()

    def commit(version: str) -> str | None:
        found = wheel_git_hash(version, "jax") or wheel_git_hash(version)
        e = entry(version, table)
        return found or (e.jax_commit if e else None)

    return JaxRange(good, bad, commit(good), commit(bad))


# ---- regeneration (needs GitHub, or a local clone of jax-ml/jax) ---------------------------------

def _git(args: list[str], git_dir: str | None = None) -> str:
    cmd = ["git"] + (["--git-dir", git_dir] if git_dir else []) + args
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=300).stdout


def release_tags(git_dir: str | None = None) -> dict[str, str]:
    """version -> commit of the tag `jax-vVERSION` (annotated tags dereferenced)."""
    if git_dir:
        lines = _git(["show-ref", "--tags", "-d"], git_dir).splitlines()
    else:
        lines = _git(["ls-remote", "--tags", JAX_REPO, "refs/tags/jax-v*"]).splitlines()
    plain: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in lines:
        sha, ref = line.split()
        m = re.fullmatch(r"refs/tags/jax-v([0-9][0-9.]*)(\^\{\})?", ref)
        if m:
            (peeled if m.group(2) else plain)[m.group(1)] = sha
    return {**plain, **peeled}


def wheel_git_hash(version: str, package: str = "jaxlib") -> str | None:
    """`<package>.version._git_hash` (jaxlib, or jax) of an installed per-version environment
    (fp8_check.versions._envs), if any."""
    try:
        env = Manager(reuse_self=False).cached(version)
    except InstallError:  # a damaged cached environment: nothing recorded to read
        env = None
    roots = [env.path] if env else []
    if own_jax().get("jaxlib") == version:
        roots.append(Path(sys.prefix))
    for f in (f for root in roots for f in root.glob(f"lib/python*/site-packages/{package}/version.py")):
        m = _GIT_HASH.search(f.read_text())
        if m:
            return m.group(1)
    return None


def read_xla_commit(commit: str, git_dir: str | None = None) -> tuple[str | None, str | None]:
    """(XLA_COMMIT, the file it came from) at JAX `commit`; (None, None) if neither file names one."""
    for path in REVISION_FILES:
        try:
            if git_dir:
                text = _git(["show", f"{commit}:{path}"], git_dir)
            else:
                with urllib.request.urlopen(RAW.format(commit=commit, path=path), timeout=60) as r:
                    text = r.read().decode()
        except (subprocess.CalledProcessError, OSError):
            continue
        m = _XLA_COMMIT.search(text)
        if m:
            return m.group(1), path
    return None, None


def update(versions: list[str], git_dir: str | None = None, path: Path = TABLE, log=print) -> dict:
    old = json.loads(path.read_text())["versions"] if path.exists() else {}
    tags = release_tags(git_dir)
    out = {}
    for v in versions:
        prev = old.get(v, {})
        wheel = wheel_git_hash(v)
        if wheel:
            jax_commit, source = wheel, "jaxlib wheel (jaxlib.version._git_hash)"
        elif str(prev.get("jax_commit_from", "")).startswith("jaxlib wheel"):
            jax_commit, source = prev["jax_commit"], prev["jax_commit_from"]  # recorded from the wheel before
        elif v in tags:
            jax_commit, source = tags[v], f"release tag jax-v{v}"
        else:
            jax_commit, source = prev.get("jax_commit"), prev.get("jax_commit_from")
        xla, xla_from = read_xla_commit(jax_commit, git_dir) if jax_commit else (None, None)
        if not xla:
            xla, xla_from = prev.get("xla_commit"), prev.get("xla_commit_from")
        out[v] = {"jax_commit": jax_commit, "jax_commit_from": source, "xla_commit": xla, "xla_commit_from": xla_from}
        log(f"{v:<9} jax {jax_commit or 'null':<40} xla {xla or 'null'}")
    data = {"about": "JAX release -> the JAX commit jaxlib was built from -> XLA_COMMIT at that commit; "
                     "null: not found. Regenerate: python -m fp8_check.versions.xla_commits --update",
            "versions": out}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fp8_check.versions.xla_commits", description=__doc__.split("\n")[0])
    ap.add_argument("--update", action="store_true", help="regenerate the table (needs GitHub or --git-dir)")
    ap.add_argument("--git-dir", help="a local clone of jax-ml/jax (its .git directory) instead of GitHub")
    ap.add_argument("--jax-range", default="0.6.1..", help="released versions to cover (default 0.6.1..)")
    ap.add_argument("--table", type=Path, default=TABLE)
    args = ap.parse_args(argv)
    if not args.update:
        for e in load(args.table).values():
            print(f"{e.version:<9} jax {e.jax_commit or 'null':<40} xla {e.xla_commit or 'null'}")
        return 0
    try:
        versions = select_range(args.jax_range)
    except VersionError as exc:
        print(f"xla_commits: error: {exc}", file=sys.stderr)
        return 2
    try:
        update(versions, args.git_dir, args.table)
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"xla_commits: error: cannot list the JAX release tags: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
