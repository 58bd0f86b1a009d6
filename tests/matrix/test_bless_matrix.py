"""`fp8-check bless --from-matrix`: version-ranged goldens, one expectation per run of identical signatures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from packaging.version import Version

from fp8_check.core._files import atomic_write
from fp8_check.matrix import _goldens as ranged
from fp8_check.signature import _extract as signature
from fp8_check.verdict import _comparator as comparator, _golden as golden
from fp8_check.versions import xla_commits

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"


def recorded(version: str, case: str, target: str = "h100", profile: str = "triton") -> dict:
    return signature.extract((FIXTURES / f"jax-{version}" / f"{case}.{target}.{profile}.txt").read_text()).to_dict()


def result(case, version, sig, outcome="FAIL", known_issue=None, profile="triton"):
    return {"case": case, "target": "h100", "profile": profile, "mode": "deviceless", "jax": version, "outcome": outcome,
            "signature": sig, "known_issue": known_issue, "reason": ""}


def write_matrix(path: Path, per_version: dict[str, list[dict]], unsupported=("0.5.3",)) -> Path:
    versions = [{"jax": v, "status": "unsupported", "results": []} for v in unsupported]
    versions += [{"jax": v, "status": "ran", "results": rs} for v, rs in per_version.items()]
    path.write_text(json.dumps({"schema": "fp8-check/matrix/1", "mode": "deviceless", "versions": versions}))
    return path


@pytest.fixture
def matrix_file(tmp_path):
    """Recorded Triton signatures: `plain` equal on 0.6.1 and 0.8.0, renamed kind on 0.12.0.1;
    `scaled` with a known issue active on one version; `relu_amax` UNRESOLVED on 0.8.0."""
    p, s, r = "plain", "scaled", "relu_amax"
    return write_matrix(tmp_path / "m.json", {
        "0.6.1": [result(p, "0.6.1", recorded("0.6.1", p)), result(s, "0.6.1", recorded("0.6.1", s)),
                  result(r, "0.6.1", recorded("0.6.1", r))],
        "0.8.0": [result(p, "0.8.0", recorded("0.8.0", p)),
                  result(s, "0.8.0", recorded("0.8.0", s), "XFAIL", {"url": "https://example.org/1", "jax": ">=0.8"}),
                  result(r, "0.8.0", None, "UNRESOLVED")],
        "0.12.0.1": [result(p, "0.12.0.1", recorded("0.12.0.1", p), "PASS"), result(s, "0.12.0.1", recorded("0.12.0.1", s)),
                     result(r, "0.12.0.1", recorded("0.12.0.1", r))],
    })


def test_one_expectation_per_run_with_ranges_newest_open(matrix_file, tmp_path, capsys):
    root = tmp_path / "goldens"
    changed, skipped = ranged.bless_from_matrix([matrix_file], root, out=print)
    out = capsys.readouterr().out
    g = golden.load(golden.path_for(root, "plain", "h100", "triton", "deviceless"))
    # 0.6.1 and 0.8.0 agree, but the matrix skipped the shipped releases between them (0.6.2 .. 0.7.2): each is a
    # run of its own, ending before the next known release; 0.12.0.1 (the newest known release) renamed the
    # Triton kind and its run is open
    assert [e.jax for e in g.expect] == [">=0.12.0.1", ">=0.8.0,<0.8.1", ">=0.6.1,<0.6.2"]
    for v in ("0.6.1", "0.8.0", "0.12.0.1"):
        assert not comparator.compare(g.expected_for(v).signature, recorded(v, "plain")), v
    assert g.expected_for("0.13.0").jax == ">=0.12.0.1"  # a newer release is judged by the newest run
    for v in ("0.6.2", "0.7.0", "0.8.1", "0.9.2", "0.12.0"):  # an unmeasured release: NEW, never a neighbour's FAIL
        assert g.expected_for(v) is None, v
    assert g.expected_for("0.5.3") is None
    # the known issue's row is not blessed: its golden is written by hand
    assert not golden.path_for(root, "scaled", "h100", "triton", "deviceless").exists()
    assert "skipped h100/triton scaled: known issue 'https://example.org/1'" in out
    # an UNRESOLVED version is left out of the runs; the others are blessed
    r = golden.load(golden.path_for(root, "relu_amax", "h100", "triton", "deviceless"))
    assert len(r.expect) == 2 and r.expected_for("0.6.1").signature == recorded("0.6.1", "relu_amax")
    assert (changed, skipped) == (2, 1)
    assert "+++ b/" in out and "blessed h100/triton plain: 3 expectation(s)" in out
    # again: nothing changes
    assert ranged.bless_from_matrix([matrix_file], root, out=lambda s: None) == (0, 1)


def test_expectations_outside_the_matrix_are_kept(matrix_file, tmp_path):
    root = tmp_path / "goldens"
    path = golden.path_for(root, "plain", "h100", "triton", "deviceless")
    atomic_write(path, golden.Golden("plain", "h100", "triton", "deviceless", [
        golden.Expectation({"kernels": 9}, "<0.6", "hand-written for device mode"),
        golden.Expectation({"kernels": 1}, "", "jax 0.12.0.1"),
    ]).to_yaml())
    ranged.bless_from_matrix([matrix_file], root, "plain", out=lambda s: None)
    g = golden.load(path)
    # the no-range expectation covered the tested versions: superseded; "<0.6" covers none of them: kept
    assert [e.jax for e in g.expect] == [">=0.12.0.1", ">=0.8.0,<0.8.1", ">=0.6.1,<0.6.2", "<0.6"]


def test_a_matrix_over_the_newest_versions_only_keeps_the_older_ranges(tmp_path):
    """When a release comes out: a matrix over the previous newest and the new one. The older expectations stay;
    the one that reached into the tested versions is kept behind the new ones for the versions below them."""
    root = tmp_path / "goldens"
    path = golden.path_for(root, "plain", "h100", "triton", "deviceless")
    old, renamed = recorded("0.8.0", "plain"), recorded("0.12.0.1", "plain")
    atomic_write(path, golden.Golden("plain", "h100", "triton", "deviceless", [
        golden.Expectation(renamed, ">=0.10.1", "jax 0.10.1..0.12.0.1"),
        golden.Expectation(old, ">=0.6.1,<0.10.1", "jax 0.6.1..0.10.0"),
    ]).to_yaml())
    m = write_matrix(tmp_path / "new.json", {"0.12.0.1": [result("plain", "0.12.0.1", renamed, "PASS")],
                                             "0.13.0": [result("plain", "0.13.0", renamed, "NEW")]}, unsupported=())
    ranged.bless_from_matrix([m], root, out=lambda s: None)
    g = golden.load(path)
    # the kept one is clipped below the tested versions: no release is covered twice
    assert [e.jax for e in g.expect] == [">=0.12.0.1", ">=0.10.1,<0.12.0.1", ">=0.6.1,<0.10.1"]
    for v, sig in (("0.7.0", old), ("0.11.2", renamed), ("0.12.0.1", renamed), ("0.14.0", renamed)):
        assert not comparator.compare(g.expected_for(v).signature, sig), v


def every_release(sig_of) -> dict[str, list[dict]]:
    """A matrix over every shipped release; `sig_of(version)`: the row's signature there (None: not measured)."""
    return {v: [result("plain", v, sig, "PASS")] for v in xla_commits.load() if (sig := sig_of(v)) is not None}


def test_boundaries_sit_where_the_signature_changed_when_every_release_was_measured(tmp_path):
    """Issue 44: with every release measured, a boundary is the first release with the new signature (0.8.1 here),
    never the next release some other matrix happened to measure; each release is covered exactly once."""
    old, renamed = recorded("0.8.0", "plain"), recorded("0.12.0.1", "plain")
    m = write_matrix(tmp_path / "m.json", every_release(lambda v: old if Version(v) < Version("0.8.1") else renamed),
                     unsupported=())
    root = tmp_path / "goldens"
    ranged.bless_from_matrix([m], root, out=lambda s: None)
    g = golden.load(golden.path_for(root, "plain", "h100", "triton", "deviceless"))
    assert [e.jax for e in g.expect] == [">=0.8.1", ">=0.6.1,<0.8.1"]
    for v in xla_commits.load():
        assert sum(e.covers(v) for e in g.expect) == 1, v


def test_a_release_the_matrix_skipped_is_new_not_a_false_fail(tmp_path):
    """The bug of issue 44: a matrix that skipped 0.8.1 .. 0.8.2 used to extend the 0.8.0 run over them (and put the
    boundary at 0.8.3); XLA changed at 0.8.1, so 0.8.1 and 0.8.2 failed against the old signature. Now they are
    covered by no expectation: NEW, judged by the real runner."""
    from fp8_check.run._runner import judge_signature
    from fp8_check.verdict._outcome import NEW, PASS, Outcome

    old, renamed = recorded("0.8.0", "plain"), recorded("0.12.0.1", "plain")
    skipped = ("0.8.1", "0.8.2")
    m = write_matrix(tmp_path / "m.json", every_release(
        lambda v: None if v in skipped else old if Version(v) < Version("0.8.1") else renamed), unsupported=())
    root = tmp_path / "goldens"
    ranged.bless_from_matrix([m], root, out=lambda s: None)
    g = golden.load(golden.path_for(root, "plain", "h100", "triton", "deviceless"))
    assert [e.jax for e in g.expect] == [">=0.8.3", ">=0.6.1,<0.8.1"]
    fixture = FIXTURES / "jax-0.12.0.1" / "plain.h100.triton.txt"
    for v, want in (("0.8.0", None), ("0.8.1", NEW), ("0.8.2", NEW), ("0.8.3", PASS)):
        out = judge_signature(Outcome("plain", "h100", "triton", "deviceless", v, NEW),
                              signature.extract(fixture.read_text()), root)
        if want is None:  # 0.8.0 expects the old signature: the renamed one is a FAIL there (a real change)
            assert out.code is not PASS and out.code is not NEW, v
        else:
            assert out.code is want, (v, out.code, out.reason)
    # measuring the skipped releases later closes the gap without touching the rest
    m2 = write_matrix(tmp_path / "m2.json", {v: [result("plain", v, renamed, "NEW")] for v in skipped}, unsupported=())
    ranged.bless_from_matrix([m2], root, out=lambda s: None)
    g = golden.load(golden.path_for(root, "plain", "h100", "triton", "deviceless"))
    assert sorted(e.jax for e in g.expect) == sorted([">=0.8.1,<0.8.3", ">=0.8.3", ">=0.6.1,<0.8.1"])
    for v in xla_commits.load():
        assert sum(e.covers(v) for e in g.expect) == 1, v


def test_cli_usage_errors_are_one_line(run_cli, tmp_path, matrix_file):
    code, _, err = run_cli("bless", "--from-matrix", tmp_path / "nope.json", "--goldens", tmp_path / "g")
    assert code == 2 and "--from-matrix: no such file" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps({"schema": "fp8-check/results/1", "results": []}))
    code, _, err = run_cli("bless", "--from-matrix", bad, "--goldens", tmp_path / "g")
    assert code == 2 and f"{bad}: not an fp8-check matrix file" in err
    code, out, _ = run_cli("bless", "--from-matrix", matrix_file, "--goldens", tmp_path / "g", "-k", "plain")
    assert code == 0 and "blessed from matrix: 1 golden(s) changed" in out


@pytest.mark.slow
@pytest.mark.network
def test_matrix_blessed_from_itself_is_green_and_one_edit_turns_one_cell_red(workspace, run_cli, monkeypatch):
    """Real environments (0.8.0 and the harness's own): bless the seed cases from a matrix, rerun it: all PASS.
    Then edit one expectation: exactly that cell fails, with the class the rules give."""
    from .test_matrix import NEW, OLD, POOL, TEST_CACHE

    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    monkeypatch.setenv("FP8_CHECK_JAX_VERSIONS", ",".join(POOL + [NEW]))
    import shutil

    shutil.rmtree(workspace / "goldens")  # start from nothing: every row NEW
    out = workspace / "reports" / "matrix.json"
    args = ("matrix", "--jax", f"{OLD},{NEW}", "--out", out, "--no-html")
    code, stdout, err = run_cli(*args, cwd=workspace)
    assert code == 1 and "N" in stdout, stdout + err
    code, stdout, _ = run_cli("bless", "--from-matrix", out, cwd=workspace)
    assert code == 0 and "blessed from matrix:" in stdout
    code, stdout, err = run_cli(*args, cwd=workspace)
    assert code == 0, stdout + err
    doc = json.loads(out.read_text())
    assert {r["outcome"] for e in doc["versions"] for r in e["results"]} == {"PASS"}

    # The 0.8.0 expectation of seed_relu_f32/triton claims the relu is fused into the Triton gemm (it is not
    # on 0.8.0): the found signature lost an op the golden had inside the fusion -> a regression, on 0.8.0 only.
    path = golden.path_for(workspace / "goldens", "seed_relu_f32", "h100", "triton", "deviceless")
    g = golden.load(path)
    old_exp = g.expected_for(OLD)
    assert old_exp is not g.expected_for(NEW) and "maximum" not in old_exp.signature["gemms"][0].get("fused_ops", [])
    old_exp.signature["gemms"][0]["fused_ops"] = sorted(old_exp.signature["gemms"][0]["fused_ops"] + ["maximum"])
    atomic_write(path, g.to_yaml())
    code, stdout, _ = run_cli(*args, "--fail-on", "regression", cwd=workspace)
    doc = json.loads(out.read_text())
    bad = [(e["jax"], r["case"], r["profile"], r["verdict"]["class"])
           for e in doc["versions"] for r in e["results"] if r["outcome"] != "PASS"]
    assert bad == [(OLD, "seed_relu_f32", "triton", "regression")]
    assert code == 1


def test_a_known_compile_failure_on_one_release_neither_stops_nor_splits_the_row(tmp_path):
    """A known issue expecting a compile error on one release (XFAIL, no signature: the golden is never read there)
    does not make the row hand-written; the run reaches over that release (no gap, no overlap)."""
    sig = recorded("0.12.0.1", "plain")
    per = every_release(lambda v: sig)
    per["0.10.0"] = [result("plain", "0.10.0", None, "XFAIL", {"url": "", "jax": "==0.10.0", "summary": "RET_CHECK"})]
    m = write_matrix(tmp_path / "m.json", per, unsupported=())
    root = tmp_path / "goldens"
    ranged.bless_from_matrix([m], root, out=lambda s: None)
    g = golden.load(golden.path_for(root, "plain", "h100", "triton", "deviceless"))
    assert [e.jax for e in g.expect] == [">=0.6.1"]


def test_a_release_the_targets_platform_has_no_plugin_for_bounds_no_range(tmp_path):
    """AMD: no ROCm plugin for 0.12.0.1, so a run ending at 0.12.0 (the newest AMD release) stays open-ended."""
    from fp8_check.matrix._goldens import claimed_releases

    sig = recorded("0.12.0.1", "plain")
    amd = claimed_releases("mi300x")
    per = {v: [dict(result("plain", v, sig, "NEW"), target="mi300x")] for v in amd}
    m = write_matrix(tmp_path / "m.json", per, unsupported=())
    root = tmp_path / "goldens"
    ranged.bless_from_matrix([m], root, out=lambda s: None)
    g = golden.load(golden.path_for(root, "plain", "mi300x", "triton", "deviceless"))
    assert amd[-1] == "0.12.0" and [e.jax for e in g.expect] == [f">={amd[0]}"]


def test_blessing_one_release_into_a_hole_claims_that_release_only(tmp_path):
    """`fp8-check bless` on a release no expectation covers (a hole a matrix left NEW): `==V`, never a range over
    releases it was not measured on, and no release covered twice."""
    root = tmp_path / "goldens"
    old, renamed = recorded("0.8.0", "plain"), recorded("0.12.0.1", "plain")
    path = golden.path_for(root, "plain", "h100", "triton", "deviceless")
    golden.atomic_write(path, golden.Golden("plain", "h100", "triton", "deviceless", [
        golden.Expectation(renamed, ">=0.8.3", "x"), golden.Expectation(old, ">=0.6.1,<0.8.1", "y")]).to_yaml())
    golden.bless(root, "plain", "h100", "triton", "deviceless", "0.8.1", renamed)
    g = golden.load(path)
    assert [e.jax for e in g.expect] == [">=0.8.3", ">=0.6.1,<0.8.1", "==0.8.1"]
    assert g.expected_for("0.8.2") is None and g.expected_for("0.8.1").signature == renamed
