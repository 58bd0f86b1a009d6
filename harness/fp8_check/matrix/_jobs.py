"""The jobs of a fanned-out matrix: one per JAX version x target group, and the ones whose results never came.

A CI run (the reusable workflow) splits `matrix` into jobs: one per JAX version and per *target group* — the
targets of one platform (NVIDIA, AMD, TPU), which compile in one environment (`versions.envs.other_platform`).
`plan` is that list, written by the resolve step (`matrix --list-jobs`); the merge reads it back
(`matrix --merge … --expect-jobs FILE`) and `missing` names every planned job that uploaded nothing (it died,
timed out or was cancelled): the merged matrix keeps them (`Matrix.missing_jobs`), the terminal, the job summary,
the annotations and the HTML report say which version and targets are absent and why, and the exit code is not 0
under any `--fail-on`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fp8_check.core import ReadError, load_json
from fp8_check.versions import VersionError, parse_version

NO_UPLOAD = "its job uploaded no results (it died, timed out or was cancelled: see that job's log)"


@dataclass(frozen=True)
class Job:
    """One planned job: a JAX version and a target group (its targets, comma-separated as `--target` takes them)."""

    jax: str
    group: str  # the platform's name: nvidia, amd, tpu
    targets: str

    def to_json(self) -> dict:
        return {"jax": self.jax, "group": self.group, "targets": self.targets}

    @property
    def label(self) -> str:
        return f"jax {self.jax}, {self.group} ({self.targets})"


@dataclass(frozen=True)
class MissingJob:
    """A planned job whose results are not in the merge, and why."""

    jax: str
    group: str
    targets: str
    why: str = NO_UPLOAD

    def to_json(self) -> dict:
        return {"jax": self.jax, "group": self.group, "targets": self.targets, "why": self.why}

    @classmethod
    def from_json(cls, d: dict) -> "MissingJob":
        return cls(str(d["jax"]), str(d["group"]), str(d["targets"]), str(d.get("why") or NO_UPLOAD))

    def line(self) -> str:
        return f"missing job: jax {self.jax}, {self.group} targets {self.targets}: {self.why}"


def groups(targets) -> list[tuple[str, list]]:
    """The targets split by platform, in the order given: [(platform name, [Target, ...]), ...]."""
    out: dict[str, list] = {}
    for t in targets:
        out.setdefault(t.platform.name, []).append(t)
    return list(out.items())


def plan(versions: list[str], targets, target_names: list[str] | None = None) -> list[Job]:
    """One job per version x target group. `target_names`: how each target was given (a name or a spec file),
    parallel to `targets` (default: their names)."""
    given = dict(zip([t.name for t in targets], target_names or [t.name for t in targets]))
    return [Job(v, group, ",".join(given[t.name] for t in ts)) for v in versions for group, ts in groups(targets)]


def format_plan(jobs: list[Job], fmt: str) -> str:
    """`lines`: one job a line; `json`: the list; `github`: lines for $GITHUB_OUTPUT — `versions=`, `jobs=` (the strategy
    matrix's `include`) and `groups=` (each target group once, for the pytest job)."""
    listed = [j.to_json() for j in jobs]
    if fmt == "json":
        return json.dumps(listed)
    if fmt == "github":
        seen: dict[str, str] = {}
        for j in jobs:
            seen.setdefault(j.group, j.targets)
        versions = list(dict.fromkeys(j.jax for j in jobs))
        return ("versions=" + json.dumps(versions) + "\n"
                + "jobs=" + json.dumps(listed, separators=(",", ":")) + "\n"
                + "groups=" + json.dumps([{"group": g, "targets": t} for g, t in seen.items()], separators=(",", ":")))
    return "\n".join(f"{j.jax} {j.group} {j.targets}" for j in jobs)


def load_plan(path: Path) -> list[Job]:
    """The plan the resolve step wrote (`--list-jobs --format json`, or its `jobs=` output); ValueError naming the
    file and what is wrong."""
    try:
        doc = load_json(Path(path))
    except ReadError as exc:
        raise ValueError(f"--expect-jobs {path}: {exc}") from None
    if not isinstance(doc, list) or not all(isinstance(d, dict) and {"jax", "group", "targets"} <= set(d) for d in doc):
        raise ValueError(f"--expect-jobs {path}: expected a JSON list of {{jax, group, targets}} (matrix --list-jobs)")
    return [Job(str(d["jax"]), str(d["group"]), str(d["targets"])) for d in doc]


def uploaded(files: list[str]) -> list[tuple[str, set[str]]]:
    """Per version entry of the merged files (matrix or results JSON, as `merge` read them): (JAX version, the
    targets it ran). Read raw: the merge has judged the files already."""
    out: list[tuple[str, set[str]]] = []
    for f in files:
        doc = load_json(Path(f))
        if not isinstance(doc, dict):
            continue
        if str(doc.get("schema", "")).startswith("fp8-check/results/"):
            env = doc.get("environment") or {}
            out.append((_version(env.get("jax")), set(env.get("targets") or [])
                        | {str(r.get("target")) for r in doc.get("results") or [] if isinstance(r, dict)}))
            continue
        for e in doc.get("versions") or []:
            if isinstance(e, dict):
                out.append((_version(e.get("jax")), set(doc.get("targets") or [])
                            | {str(r.get("target")) for r in e.get("results") or [] if isinstance(r, dict)}))
    return out


def _version(v) -> str:
    try:
        return str(parse_version(str(v)))
    except VersionError:  # an unreadable version matches no planned job
        return str(v)


def missing(expected: list[Job], uploaded: list[tuple[str, set[str]]]) -> list[MissingJob]:
    """The planned jobs that no merged file covers. `uploaded`: per merged version entry, (JAX version, its targets)."""
    out = []
    for job in expected:
        names = {Path(t).stem if t.endswith(".txtpb") else t for t in job.targets.split(",")}
        if not any(v == _version(job.jax) and ts & names for v, ts in uploaded):
            out.append(MissingJob(job.jax, job.group, job.targets))
    return out
