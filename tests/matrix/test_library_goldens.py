"""The shipped goldens describe every release the library claims, for each target, exactly once (no compiling).

`fp8-check bless --from-matrix` writes ranges that end at the last measured release (issue 44); this checks the
result that ships: per golden, the target's claimed releases (the shipped release table, less those its platform
has no plugin for) are covered as one unbroken stretch up to the newest, each by exactly one expectation.
"""

from __future__ import annotations

from pathlib import Path

from fp8_check.matrix import _goldens as ranged
from fp8_check.verdict import _golden as golden

from ..conftest import REPO


def test_the_library_goldens_cover_every_claimed_release_once():
    problems = ranged.coverage_problems(REPO / "goldens")
    assert not problems, f"{len(problems)} golden(s):\n" + "\n".join(problems[:40])


def test_claimed_releases_follow_the_platform():
    nvidia, amd = ranged.claimed_releases("h100"), ranged.claimed_releases("mi300x")
    assert nvidia[0] == "0.6.1" and "0.8.1" in nvidia and nvidia == ranged.claimed_releases("h100x8")
    assert set(amd) < set(nvidia) and "0.9.0" not in amd and "0.9.1" in amd  # no ROCm plugin for 0.9.0


def _write(root: Path, *ranges: str) -> Path:
    g = golden.Golden("c", "h100", "cublas", "deviceless", [golden.Expectation({"kernels": 1}, r, "x") for r in ranges])
    path = golden.path_for(root, "c", "h100", "cublas", "deviceless")
    golden.atomic_write(path, g.to_yaml())
    return path


def test_the_check_finds_gaps_overlaps_and_a_stale_newest(tmp_path):
    """Each fault once, named with the releases concerned; a clean golden passes (so the library test can fail)."""
    newest = ranged.claimed_releases("h100")[-1]
    cases = {
        ("",): [],
        (">=0.9.1",): [],  # a case that needs a newer JAX starts later: not a gap
        (">=0.8.1", ">=0.6.1,<0.8.1"): [],
        (">=0.8.3", ">=0.6.1,<0.8.1"): ["jax 0.8.1, 0.8.2 covered by no expectation"],
        (">=0.8.0", ">=0.6.1,<0.8.1"): ["jax 0.8.0 covered by more than one expectation"],
        (">=0.6.1,<0.12.0",): [f"covered by no expectation (the newest, {newest}, included)"],
        ("<0.6",): ["covers none of h100's releases"],
    }
    for ranges, want in cases.items():
        root = tmp_path / str(abs(hash(ranges)))
        _write(root, *ranges)
        got = ranged.coverage_problems(root)
        assert len(got) == len(want) and all(w in g for w, g in zip(want, got)), (ranges, got)


def test_a_profile_a_target_ships_no_goldens_for_is_skipped_with_one_line(tmp_path):
    """With the default profiles, a target whose goldens have a folder for one profile but none for another skips
    that one (one line each); a target with no goldens at all runs everything (a new project starts NEW)."""
    from fp8_check.run import _selection as selection
    from fp8_check.targets import load_target

    root = tmp_path / "goldens"
    _write(root, ">=0.6.1")  # h100/cublas only
    h100, h200 = load_target("h100"), load_target("h200")
    skip = selection.unshipped_profiles(root, [h100, h200], ["cublas", "triton"])
    assert list(skip) == [("h100", "triton")]
    assert skip[("h100", "triton")] == (f"h100/triton skipped: {root}/h100/ has goldens for cublas only, none for "
                                        "triton (--profile triton runs it)")
    assert selection.unshipped_profiles(root, [h200], ["cublas", "triton"]) == {}
    # the shipped library: every target ships cublas goldens; those without triton goldens skip it
    shipped = selection.unshipped_profiles(REPO / "goldens", [load_target(t) for t in ("h100", "h200", "a100")],
                                        ["cublas", "triton"])
    assert ("h100", "triton") not in shipped and ("h200", "triton") in shipped and ("h200", "cublas") not in shipped
