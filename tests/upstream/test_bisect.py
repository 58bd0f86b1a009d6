"""`fp8-check bisect`: the search (with skips) on fake versions, and real runs on the suite's one extra environment."""

from __future__ import annotations

import pytest

from fp8_check.core._files import atomic_write
from fp8_check.signature._extract import Gemm, Signature
from fp8_check.upstream import _bisect as bisect
from fp8_check.upstream._bisect import Judgment, Verdict
from fp8_check.verdict import _comparator as comparator, _golden as golden

from ..matrix.test_matrix import NEW, OLD, POOL, TEST_CACHE

VERSIONS = ["0.6.1", "0.6.2", "0.7.0", "0.7.1", "0.7.2", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.9.0"]


class FakeTester:
    """Signature per version: 'old' up to `first_bad` (exclusive), 'new' from it; `skip` versions are untestable."""

    criterion = "signature"

    def __init__(self, first_bad, skip=()):
        self.first_bad, self.skip, self.asked = first_bad, set(skip), []

    def _sig(self, v):
        old = VERSIONS.index(v) < VERSIONS.index(self.first_bad)
        return Signature(1, [], [Gemm("__triton_gemm" if old else "__triton_nested_gemm_fusion", ["f8e4m3fn"] * 2)], [])

    def set_reference(self, v):
        self.ref = self._sig(v)
        return Judgment(v, Verdict.GOOD, "reference", self.ref)

    def judge(self, v):
        self.asked.append(v)
        if v in self.skip:
            return Judgment(v, Verdict.SKIP, "cannot install")
        sig = self._sig(v)
        diffs = comparator.compare(self.ref.to_dict(), sig.to_dict())
        return Judgment(v, Verdict.BAD if diffs else Verdict.GOOD, "", sig, diffs)


def test_verdicts_are_git_bisect_exit_codes():
    assert [(str(v), v.exit_code) for v in Verdict] == [("good", 0), ("bad", 1), ("skip", 125), ("abort", 128)]


def test_search_finds_the_first_bad_version_in_few_steps():
    t = FakeTester("0.7.1")
    res = bisect.search(t, "0.6.1", "0.9.0", VERSIONS, log=lambda s: None)
    assert res.verdict is Verdict.BAD and (res.last_good, res.first_bad) == ("0.7.0", "0.7.1") and not res.skipped
    assert [(d.path, d.expected, d.found) for d in res.diffs] == [("gemms[0].target", "__triton_gemm", "__triton_nested_gemm_fusion")]
    assert len(t.asked) <= 1 + 3  # the bad end, then log2(8 candidates)


def test_untestable_versions_are_skipped_and_named():
    t = FakeTester("0.8.2", skip={"0.8.1", "0.8.2"})
    res = bisect.search(t, "0.6.1", "0.9.0", VERSIONS, log=lambda s: None)
    assert res.verdict is Verdict.BAD and res.last_good == "0.8.0" and res.first_bad == "0.8.3" and res.skipped == ["0.8.1", "0.8.2"]


def test_nothing_changed_and_untestable_ends():
    assert bisect.search(FakeTester("0.9.0"), "0.6.1", "0.8.3", VERSIONS, log=lambda s: None).verdict is Verdict.GOOD
    skipped = bisect.search(FakeTester("0.7.1", skip={"0.9.0"}), "0.6.1", "0.9.0", VERSIONS, log=lambda s: None)
    assert skipped.verdict is Verdict.SKIP and "0.9.0 is untestable" in skipped.message
    assert bisect.search(FakeTester("0.7.1"), "0.9.0", "0.6.1", VERSIONS, log=lambda s: None).verdict is Verdict.ABORT


@pytest.fixture
def cache_env(monkeypatch):
    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    # Only OLD and the harness's own version in between: the search needs no other environment.
    monkeypatch.setenv("FP8_CHECK_JAX_VERSIONS", ",".join([v for v in POOL if v in ("0.5.3", OLD)] + [NEW]))


@pytest.mark.slow
@pytest.mark.network
def test_bisect_real_search_and_test_mode(workspace, run_cli, cache_env):
    code, out, err = run_cli("bisect", "seed_scaled_clamp_f32", "--profile", "triton", "--good", OLD, "--bad", NEW,
                             cwd=workspace)
    assert code == 1, out + err
    # Triton fusing the requantization: an improvement (docs/verdicts.md), so no "first bad version"
    assert f"first changed version: jax {NEW} (last unchanged: jax {OLD}) — improvement, not a regression" in out
    assert "first bad version" not in out
    assert f"signature diff (expected: jax {OLD}, found: jax {NEW}) [improvement]:" in out
    assert "kernels: expected 2, found 1" in out and "gemms[0].output: expected f32, found f8e4m3fn" in out
    # git-bisect-run test command: one version against the reference
    code, out, _ = run_cli("bisect", "seed_scaled_clamp_f32", "--profile", "triton", "--good", OLD, "--test", "current",
                           cwd=workspace)
    assert code == 1 and f"jax current: bad: signature differs from jax {OLD}" in out
    code, out, _ = run_cli("bisect", "seed_plain_f32", "--profile", "cublas", "--good", OLD, "--test", "current",
                           cwd=workspace)
    assert code == 0 and f"jax current: good: signature equal to jax {OLD}" in out
    code, out, _ = run_cli("bisect", "seed_plain_f32", "--profile", "cublas", "--good", OLD, "--test", "0.5.3",
                           cwd=workspace)
    assert code == 125 and "deviceless compilation needs" in out
    # golden criterion: 0.8.0 matches the version-ranged golden covering it (Triton's requantization unfused
    # before 0.10.1) ...
    args = ("bisect", "seed_scaled_clamp_f32", "--profile", "triton", "--criterion", "golden", "--test", OLD)
    code, out, _ = run_cli(*args, cwd=workspace)
    assert code == 0 and "the golden (>=0.7.1,<0.10.1)" in out
    # ... and not a golden that holds the newest behaviour only
    gpath = golden.path_for(workspace / "goldens", "seed_scaled_clamp_f32", "h100", "triton", "deviceless")
    g = golden.load(gpath)
    newest = g.expected_for(NEW)
    atomic_write(gpath, golden.Golden(g.case, g.target, g.profile, g.mode,
                                             [golden.Expectation(newest.signature, "", newest.blessed_with)]).to_yaml())
    code, out, _ = run_cli(*args, cwd=workspace)
    assert code == 1 and "the golden (every version)" in out
    code, _, err = run_cli("bisect", "no_such_case", "--good", OLD, "--bad", NEW, cwd=workspace)
    assert code == 128 and "no case with id" in err


# ------------------------------------------------------------------ --criterion regression


def _recorded(version, case, profile):
    from pathlib import Path

    from fp8_check.signature import _extract as signature

    path = Path(__file__).parents[1] / "fixtures" / "hlo" / f"jax-{version}" / f"{case}.h100.{profile}.txt"
    return signature.extract(path.read_text()).to_dict()


def _tester_with(criterion, sig_of):
    """The real Tester (its judge), with signatures filled in per version instead of compiled."""
    from fp8_check.signature._extract import Signature
    from fp8_check.verdict._outcome import NEW, Outcome

    t = bisect.Tester(None, None, None, "deviceless", "goldens", criterion)
    for v in VERSIONS:
        t.cache[v] = (Outcome("plain", "h100", "triton", "deviceless", v, NEW, signature=Signature.from_dict(sig_of(v))), v)
    return t


def test_regression_criterion_steps_over_a_rename_to_the_first_regression():
    """Recorded Triton signatures: the gemm kind renamed at 0.7.1 (neutral), then a kernel more from 0.8.2."""
    import copy

    old, renamed = _recorded("0.8.0", "plain", "triton"), _recorded("0.12.0.1", "plain", "triton")
    assert old["gemms"][0]["target"] != renamed["gemms"][0]["target"]
    worse = copy.deepcopy(renamed)
    worse["kernels"] += 1
    worse["launches"] = sorted(worse["launches"] + ["fusion kLoop [convert]"])

    def sig_of(v):
        i = VERSIONS.index(v)
        return old if i < VERSIONS.index("0.7.1") else renamed if i < VERSIONS.index("0.8.2") else worse

    res = bisect.search(_tester_with("regression", sig_of), "0.6.1", "0.9.0", VERSIONS, log=lambda s: None)
    assert (res.verdict, res.last_good, res.first_bad) == (bisect.Verdict.BAD, "0.8.1", "0.8.2")
    res = bisect.search(_tester_with("signature", sig_of), "0.6.1", "0.9.0", VERSIONS, log=lambda s: None)
    assert (res.verdict, res.last_good, res.first_bad) == (bisect.Verdict.BAD, "0.7.0", "0.7.1")


def test_regression_criterion_calls_an_improvement_good():
    """Triton fusing the requantization (0.8.0 -> 0.12.0.1) is an improvement: nothing regressed."""
    before, after = _recorded("0.8.0", "scaled", "triton"), _recorded("0.12.0.1", "scaled", "triton")
    t = _tester_with("regression", lambda v: before if v == "0.6.1" else after)
    assert bisect.search(t, "0.6.1", "0.9.0", VERSIONS, log=lambda s: None).verdict is bisect.Verdict.GOOD
    t.set_reference("0.6.1")
    j = t.judge("0.9.0")
    assert j.verdict is bisect.Verdict.GOOD and "improvement" in j.reason


@pytest.mark.slow
@pytest.mark.network
def test_bisect_regression_criterion_real(workspace, run_cli, cache_env):
    """Real compiles: Triton fusing the requantization since 0.10.1 is an improvement, so against
    0.8.0 the current version is good under --criterion regression (and bad under signature)."""
    args = ("bisect", "seed_scaled_clamp_f32", "--profile", "triton", "--good", OLD, "--test", "current")
    code, out, _ = run_cli(*args, "--criterion", "regression", cwd=workspace)
    assert code == 0 and "improvement" in out, out
    code, out, _ = run_cli(*args, cwd=workspace)
    assert code == 1
