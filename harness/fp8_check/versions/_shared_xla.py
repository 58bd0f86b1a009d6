"""JAX versions that ship the same XLA commit are compiled once in a matrix, and reported for each.

JAX 0.8.2 and 0.8.3, 0.9.0 and 0.9.0.1 were built from the same XLA commit (the shipped
table, `fp8_check.versions.xla_commits`): their compiler is the same, so the matrix compiles
the library once, with the newest of them (`twins`), and judges those compilations again
for the others against the goldens covering each (`Replay`). Each twin's matrix entry says
so (`env["same_xla_as"]`, and `environment["compiled_by_jax"]`). Whether the optimized HLO
of such versions is the same was checked for the whole library by scripts/slim_check.py
(docs/slim_envs.md).
"""

from __future__ import annotations

from typing import Iterable, Iterator

from fp8_check.compile import Compilation, CompileRequest
from fp8_check.versions.releases import sort_versions
from fp8_check.versions.xla_commits import entry, load


def twins(versions: list[str], table: dict | None = None) -> dict[str, str]:
    """{version: the version compiled for it} for the versions that share their XLA commit with a
    newer one in `versions` (those are left out; a version with no recorded XLA commit never is)."""
    table = load() if table is None else table
    by_commit: dict[str, list[str]] = {}
    for v in sort_versions(versions):
        e = entry(v, table)
        if e and e.xla_commit:
            by_commit.setdefault(e.xla_commit, []).append(v)
    return {v: group[-1] for group in by_commit.values() if len(group) > 1 for v in group[:-1]}


def _identity(r: CompileRequest) -> tuple:
    return (r.rendered.source, r.target.name, r.profile.name, tuple(sorted((r.optional_options or {}).items())))


class Recorder:
    """Wraps a version's compiler; keeps every compilation it hands out, by request."""

    def __init__(self, compiler):
        self.compiler = compiler
        self.compilations: dict[tuple, Compilation] = {}
        self._env: dict | None = None

    def __getattr__(self, name):
        return getattr(self.compiler, name)

    def environment(self) -> dict:
        if self._env is None:
            self._env = self.compiler.environment()
        return self._env

    def imap(self, requests: Iterable[CompileRequest]) -> Iterator[Compilation]:
        requests = list(requests)
        for r, comp in zip(requests, self.compiler.imap(requests)):
            self.compilations[_identity(r)] = comp
            yield comp


class Replay:
    """A compiler for a twin version: answers with the compilations `recorder` kept for its version."""

    def __init__(self, recorder: Recorder, version: str, compiled_by: str):
        self.recorder, self.version, self.compiled_by = recorder, version, compiled_by
        self.mode = recorder.mode

    def environment(self) -> dict:
        return {**self.recorder.environment(), "jax": self.version, "compiled_by_jax": self.compiled_by,
                "same_xla_as": self.compiled_by}

    def imap(self, requests: Iterable[CompileRequest]) -> Iterator[Compilation]:
        for r in requests:
            yield self.recorder.compilations[_identity(r)]

    def close(self) -> None:
        pass
