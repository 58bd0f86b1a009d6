"""The upstream parts of a report's issue body, as markdown (used by fp8_check.report's issue body).

For a result whose signature changed between two neighbouring JAX versions in the
report, `parts_for` gives:
- always: the XLA commit range between them, from the shipped table (offline);
- when `fp8-check bisect ... --explain` saved an explanation for that pair
  (`reports/upstream/`, or $FP8_CHECK_UPSTREAM_DIR): the first diverging XLA
  pass, the minimal reproducer (checked standalone) and the XLA-style FileCheck
  test with its verification (fp8_check.upstream._explain).
"""

from __future__ import annotations

from dataclasses import dataclass

from fp8_check.upstream._explain import find
from fp8_check.versions import VersionError, parse_version, xla_range


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


def what_changed(diffs, gemm: str) -> str | None:
    """A class-aware title phrase for a signature change, or None when the gemm itself changed (no FP8 gemm, another
    kernel): that stays "no longer fuses into ...".

    - only kernels/launches/unfused ops differ: the gemm is the same, more (or fewer) kernels surround it;
    - gemm fields differ but not its target or operand dtypes: the fused gemm lost (or changed) those fields.
    """
    paths = [d.path for d in diffs]
    if not paths:
        return None
    gemm_fields = sorted({p.split(".", 1)[1].split(".")[0] for p in paths if p.startswith("gemms[") and "." in p})
    if any(p == "gemms" or p.startswith("gemms") and "." not in p for p in paths):
        return None  # a gemm appeared or disappeared
    if any(f in ("target", "operand_dtypes") for f in gemm_fields):
        return None
    if gemm_fields:
        return f"{gemm} changes its {', '.join(gemm_fields)}"
    kernels = next((d for d in diffs if d.path == "kernels"), None)
    if kernels is not None:
        return f"{kernels.found} kernels instead of {kernels.expected} around an unchanged {gemm}"
    return f"the kernels around an unchanged {gemm} change"


def parts_for(case: str, target: str, profile: str, jax: str, good_versions: list[str]) -> UpstreamParts:
    pair = neighbours(jax, good_versions)
    if pair is None:
        return UpstreamParts("", "")
    exp = find(case, target, profile, pair)
    if exp is not None:
        return UpstreamParts(exp.repro_markdown(), exp.analysis_markdown())
    rng = xla_range(*pair)
    return UpstreamParts("", "\n".join([
        "### XLA commit range", "",
        f"- jax {pair[0]} → {pair[1]}: {rng.markdown()}.",
        f"- `fp8-check bisect {case} --good {pair[0]} --bad {pair[1]} --target {target} --profile {profile} --explain` "
        "adds the first diverging XLA pass, a minimal reproducer and an XLA-style FileCheck test to this body.", ""]))
