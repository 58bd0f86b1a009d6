"""The upstream parts of a report's issue body, as markdown (used by harness.report's issue body).

For a result whose signature changed between two neighbouring JAX versions in the
report, `parts_for` gives:
- always: the XLA commit range between them, from the shipped table (offline);
- when `fp8-check bisect ... --explain` saved an explanation for that pair
  (`reports/upstream/`, or $FP8_CHECK_UPSTREAM_DIR): the first diverging XLA
  pass, the minimal reproducer (checked standalone) and the XLA-style FileCheck
  test with its verification (harness.upstream.explain).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.upstream import explain, xla_commits
from harness.versions.releases import VersionError, parse_version


@dataclass
class UpstreamParts:
    repro: str  # the minimal reproducer section ("": none saved; keep the long repro)
    analysis: str  # XLA range, first diverging pass, XLA test ("" if nothing is known)


def neighbours(jax: str, good_versions: list[str]) -> tuple[str, str] | None:
    """(good, bad) around the change: the newest good version older than `jax`, else `jax` and the oldest newer good one."""
    try:
        key = parse_version(jax)
        older = [v for v in good_versions if parse_version(v) < key]
        newer = [v for v in good_versions if parse_version(v) > key]
    except VersionError:
        return None
    if older:
        return max(older, key=parse_version), jax
    if newer:
        return jax, min(newer, key=parse_version)
    return None


def parts_for(case: str, target: str, profile: str, jax: str, good_versions: list[str]) -> UpstreamParts:
    pair = neighbours(jax, good_versions)
    if pair is None:
        return UpstreamParts("", "")
    exp = explain.find(case, target, profile, pair)
    if exp is not None:
        return UpstreamParts(exp.repro_markdown(), exp.analysis_markdown())
    rng = xla_commits.xla_range(*pair)
    return UpstreamParts("", "\n".join([
        "### XLA commit range", "",
        f"- jax {pair[0]} → {pair[1]}: {rng.markdown()}.",
        f"- `fp8-check bisect {case} --good {pair[0]} --bad {pair[1]} --target {target} --profile {profile} --explain` "
        "adds the first diverging XLA pass, a minimal reproducer and an XLA-style FileCheck test to this body.", ""]))
