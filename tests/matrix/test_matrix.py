"""`fp8-check matrix`: version lists, per-version uv environments, the merged matrix and its grid.

The integration tests build ONE extra JAX environment (the slim jax[cuda12-local]==0.8.0), cached in
a fixed temp directory so that reruns and the bisect tests reuse it; the newest
version runs in the harness's own environment.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import jax
import pytest
import yaml

from fp8_check.core._files import atomic_write
from fp8_check.matrix import _document as matrix_document, _view as matrix_view
from fp8_check.matrix._document import Matrix, MatrixError, Status, VersionEntry, load_matrix
from fp8_check.run import _results as results
from fp8_check.signature._extract import Gemm, Signature
from fp8_check.verdict import _golden as golden, _outcome as outcome, answer
from fp8_check.verdict._classify import Verdict
from fp8_check.verdict._comparator import FieldDiff
from fp8_check.verdict._outcome import Outcome
from fp8_check.versions import _envs as envs, releases as versions

OLD = "0.8.0"  # the one extra environment the suite may build
NEW = jax.__version__
TEST_CACHE = Path(tempfile.gettempdir()) / "fp8-check-test-cache"
POOL = ["0.4.38", "0.5.3", "0.6.0", "0.6.1", "0.6.2", "0.7.0", "0.7.1", "0.7.2", "0.8.0", "0.8.1", "0.9.0", "0.9.0.1",
        "0.10.0", "0.10.1", "0.11.0", "0.12.0", "0.12.0.1", "0.13.0rc1"]


# ------------------------------------------------------------------ versions


def test_range_syntax_and_selection():
    assert versions.select_range("0.6.1..0.7.2", versions=POOL) == ["0.6.1", "0.6.2", "0.7.0", "0.7.1", "0.7.2"]
    assert versions.select_range("0.12..", versions=POOL) == ["0.12.0", "0.12.0.1"]  # no pre-release
    assert versions.select_range("..0.5.3", versions=POOL) == ["0.4.38", "0.5.3"]
    assert versions.select_range(">=0.9,<0.10.1", versions=POOL) == ["0.9.0", "0.9.0.1", "0.10.0"]
    assert versions.select_range("0.6.1..0.12.0.1", "minor", versions=POOL) == [
        "0.6.1", "0.6.2", "0.7.2", "0.8.1", "0.9.0.1", "0.10.1", "0.11.0", "0.12.0.1"]
    assert versions.between("0.7.2", "0.6.1", POOL) == ["0.6.2", "0.7.0", "0.7.1"]
    for bad in ("0.7..0.6", "..", "banana"):
        with pytest.raises(versions.VersionError):
            versions.select_range(bad, versions=POOL)
    with pytest.raises(versions.VersionError, match="no released"):
        versions.select_range("0.99..", versions=POOL)


def test_pip_index_answer_is_parsed():
    text = "jax (0.12.0.1)\nAvailable versions: 0.12.0.1, 0.12.0, 0.4.38\n  INSTALLED: 0.12.0.1\n"
    assert versions.parse_pip_index_output(text) == ["0.12.0.1", "0.12.0", "0.4.38"]
    with pytest.raises(versions.VersionError):
        versions.parse_pip_index_output("ERROR: No matching distribution found for jax")


def test_list_versions_uses_the_range_code(run_cli, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_JAX_VERSIONS", ",".join(POOL))
    code, out, _ = run_cli("matrix", "--list-versions", "--jax-range", "0.9..0.10.1", "--format", "json")
    assert code == 0 and json.loads(out) == ["0.9.0", "0.9.0.1", "0.10.0", "0.10.1"]
    code, out, _ = run_cli("matrix", "--list-versions", "--jax-range", "0.9..0.10.1", "--format", "github")
    assert out.strip() == 'versions=["0.9.0", "0.9.0.1", "0.10.0", "0.10.1"]'
    code, _, err = run_cli("matrix", "--list-versions", "--jax-range", "nonsense")
    assert code == 2 and "not a version range" in err


# ------------------------------------------------------------------ environments (no install)


def test_interrupted_build_leaves_nothing_and_a_stale_one_is_rebuilt(tmp_path, monkeypatch):
    m = envs.Manager(tmp_path / "envs", reuse_self=False)
    calls = []

    def interrupted(version, tmp, log):
        (tmp / "bin").mkdir(parents=True)
        (tmp / "bin" / "python").write_text("half")
        calls.append(tmp)
        raise KeyboardInterrupt

    monkeypatch.setattr(m, "_build", interrupted)
    with pytest.raises(KeyboardInterrupt):
        m.ensure("0.7.0")
    assert calls and not calls[0].exists()
    assert not m.path_for("0.7.0").exists() and m.cached("0.7.0") is None
    # A killed build (no Ctrl-C handler ran) leaves a .building-* directory, and a directory without
    # the completion marker never counts as an environment: both are removed by the next build.
    stale = tmp_path / "envs" / f".building-{m.name('0.7.0')}-99999"
    (stale / "bin").mkdir(parents=True)
    markerless = m.path_for("0.7.0")
    (markerless / "bin").mkdir(parents=True)
    (markerless / "bin" / "python").write_text("")
    assert m.cached("0.7.0") is None

    def good(version, tmp, log):  # a whole environment as uv leaves it: what the cache verifies before reuse
        (tmp / "bin").mkdir(parents=True)
        (tmp / "bin" / "python").write_text("")
        site = tmp / "lib" / "python3.12" / "site-packages"
        (site / f"jax-{version}.dist-info").mkdir(parents=True)
        (site / "jax").mkdir()
        (site / "jax" / "__init__.py").write_text("")
        return {"jax": version}

    monkeypatch.setattr(m, "_build", good)
    env = m.ensure("0.7.0")
    assert env.built and env.path == markerless and (env.path / envs.MARKER).exists()
    assert not stale.exists() and not list((tmp_path / "envs").glob(".building-*"))
    again = m.ensure("0.7.0")
    assert not again.built and again.info["jax"] == "0.7.0"


def test_own_version_uses_the_harness_environment(tmp_path):
    env = envs.Manager(tmp_path / "envs").ensure(NEW)
    assert env.info.get("own_environment") and not env.built and not (tmp_path / "envs").exists()


# ------------------------------------------------------------------ the matrix document and grid (synthetic)


def _sig(kernels, target="__triton_gemm"):
    return Signature(kernels, [], [Gemm(target, ["f8e4m3fn", "f8e4m3fn"])], [])


def _entry(v, status="ran", results=(), error=""):
    return VersionEntry(v, Status(status), error, outcomes=[
        Outcome(c, "h100", "triton", "deviceless", v, outcome.code(o), signature=s) for c, o, s in results])


def synth():
    return [
        _entry("0.5.3", "unsupported", [("a", "UNSUPPORTED", None), ("b", "UNSUPPORTED", None)]),
        _entry("0.6.1", results=[("a", "FAIL", _sig(1)), ("b", "PASS", _sig(2))]),
        _entry("0.6.99", "install-failed", error="uv could not install jax[cuda12]==0.6.99: no version"),
        _entry("0.7.1", results=[("a", "PASS", _sig(1, "__triton_nested_gemm_fusion")), ("b", "PASS", _sig(2))]),
        _entry("0.10.1", results=[("a", "PASS", _sig(1, "__triton_nested_gemm_fusion")), ("b", "FAIL", _sig(1))]),
    ]


def test_changes_regressions_and_exit_codes():
    m = Matrix(synth()[::-1], "deviceless")  # any order in: oldest first out
    assert [e.jax for e in m.versions] == ["0.5.3", "0.6.1", "0.6.99", "0.7.1", "0.10.1"]
    changes = m.changes()
    assert [(c.case, c.before, c.after) for c in changes] == [("a", "0.6.1", "0.7.1"), ("b", "0.7.1", "0.10.1")]
    assert changes[0].diffs == [FieldDiff("gemms[0].target", "__triton_gemm", "__triton_nested_gemm_fusion")]
    assert [(r.case, r.code, r.previous) for r in m.regressions()] == [("b", outcome.FAIL, ("0.7.1", outcome.PASS))]
    assert m.exit_code("any") == 1 and m.exit_code("newest") == 1 and m.exit_code("never") == 0
    fixed = Matrix(synth()[:4])
    # the newest is clean, but 0.6.99 did not run: never a pass (issue 52: "nothing ran on 0.6.99")
    assert fixed.exit_code("newest") == 3 and fixed.exit_code("any") == 1
    assert Matrix([synth()[0], synth()[1], synth()[3]]).exit_code("newest") == 0
    clean = Matrix([synth()[0], synth()[2], _entry("0.7.1", results=[("a", "PASS", _sig(1))])])
    assert clean.exit_code("any") == 3  # nothing bad, but a version could not be installed
    assert Matrix([synth()[2]]).exit_code("newest") == 3  # no version ran


def test_changes_carry_their_class_and_fail_on_regression():
    m = Matrix(synth(), "deviceless")
    assert [c.cls for c in m.changes()] == ["neutral", "improvement"]  # Triton kind renamed; one kernel fewer
    assert m.exit_code("regression") == 1  # a FAIL without a verdict: nothing to tell it by, so it counts
    judged = synth()
    for e in judged:
        for o in e.outcomes:
            if o.code is outcome.FAIL:
                o.verdict = Verdict("improvement")
    assert Matrix(judged).exit_code("regression") == 3  # no regression; but 0.6.99 could not be installed
    judged[-1].outcomes[1].verdict = Verdict("mixed")
    assert Matrix(judged).exit_code("regression") == 1


def test_document_round_trip_and_schema_1(tmp_path):
    m = Matrix(synth(), "deviceless", ["h100"], ["triton"], wall_seconds=1.5)
    m.versions[1].results_file = str(tmp_path / "d" / "results-jax-0.6.1.json")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results-jax-0.6.1.json").write_text("{}")
    matrix_document.write(tmp_path / "m.json", m)
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["schema"] == "fp8-check/matrix/2"
    assert doc["versions"][1]["results_file"] == "d/results-jax-0.6.1.json"  # relative to the matrix file
    assert doc["changes"][0]["diffs"] == [{"path": "gemms[0].target", "expected": "__triton_gemm",
                                           "found": "__triton_nested_gemm_fusion"}]
    assert doc["regressions"] == [{"case": "b", "target": "h100", "profile": "triton", "jax": "0.10.1", "outcome": "FAIL",
                                   "reason": "", "previous": {"jax": "0.7.1", "outcome": "PASS"}}]
    assert "_index" not in json.dumps(doc)
    back = load_matrix(tmp_path / "m.json")
    assert [(e.jax, e.status, e.error) for e in back.versions] == [(e.jax, e.status, e.error) for e in m.versions]
    assert back.versions[1].results_file == str(tmp_path / "d" / "results-jax-0.6.1.json")
    assert [(o.case, o.code, o.signature) for o in back.versions[4].outcomes] == [
        (o.case, o.code, o.signature) for o in m.versions[4].outcomes]
    assert back.changes() == m.changes() and back.regressions() == m.regressions()
    assert back.versions[0].summary()["UNSUPPORTED"] == 2

    # schema 1 (before/after diffs, no typed entries) still loads; its changes are recomputed
    doc["schema"] = "fp8-check/matrix/1"
    doc["changes"] = [{"case": "a", "diffs": [{"path": "x", "before": 1, "after": 2}]}]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    assert load_matrix(tmp_path / "old.json").changes() == m.changes()
    (tmp_path / "new.json").write_text(json.dumps({**doc, "schema": "fp8-check/matrix/9"}))
    with pytest.raises(MatrixError) as exc:
        load_matrix(tmp_path / "new.json")
    assert "\n" not in str(exc.value) and "fp8-check/matrix/9" in str(exc.value) and "new.json" in str(exc.value)


def grid_cells(text: str, case: str) -> list[str]:
    """The cells of `case`'s row in a printed grid (the columns after case and target/profile)."""
    row = next(line for line in text.splitlines() if line.strip("│┃ ").startswith(case + " "))
    return [c.strip() for c in row.split("│")[3:-1]]


def test_grid_shows_symbols_kernels_and_highlights_changes():
    m = Matrix(synth(), "deviceless")
    buf = io.StringIO()
    matrix_view.print_report(m, buf)
    text = buf.getvalue()
    header = next(line for line in text.splitlines() if "0.5.3" in line and "0.10.1" in line)
    assert "case" in header
    # the change's class (harness/fp8_check/verdict/_classify.py): a renamed Triton kind with the same structure is neutral (~),
    # one kernel fewer an improvement (▲)
    # each cell leads with the FP8 answer (one FP8 gemm of one matmul) and the change mark; the kernel count last
    assert grid_cells(text, "a") == ["-", "✗ FP8 1/1 1", "E", "✓ FP8 1/1~ 1", "✓ FP8 1/1 1"]
    assert grid_cells(text, "b") == ["-", "✓ FP8 1/1 2", "E", "✓ FP8 1/1 2", "✗ FP8 1/1▲ 1"]
    # b's change ends in a FAIL (news, listed); a's ends in a PASS: blessed history, collapsed to one line
    assert "h100/triton b: 0.7.1 -> 0.10.1  [improvement]" in text
    assert "h100/triton a: 0.6.1 -> 0.7.1" not in text
    assert "1 signature change(s) between versions match the goldens (blessed history; `--history` lists them)" in text
    assert "0.6.99: install-failed: uv could not install" in text
    buf = io.StringIO()
    matrix_view.print_report(m, buf, history=True)
    listed = buf.getvalue()
    assert "Blessed history: signature changes the goldens expect (1):" in listed
    assert "h100/triton a: 0.6.1 -> 0.7.1  [neutral]" in listed
    assert "gemms[0].target: expected __triton_gemm, found __triton_nested_gemm_fusion" in listed
    assert "jax 0.6.1     1 PASS, 1 FAIL" in text
    assert "FAIL       h100/triton b (was PASS on 0.7.1)" in text
    assert "\x1b[" not in text  # not a terminal: no escape codes


def test_progress_is_plain_lines_off_a_terminal():
    buf = io.StringIO()
    p = matrix_view.Progress(buf)
    p.start(["0.6.1"], ["0.6.1"], 2)
    p.env_done("0.6.1", None, "uv could not install jax[cuda12]==0.6.1: boom")
    p.version_done(VersionEntry("0.6.1", Status.INSTALL_FAILED, "boom", run_seconds=0.1))
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("matrix: 1 version(s) x 2 case run(s)")
    assert "environment could not be installed" in lines[1] and lines[2] == "jax 0.6.1: install-failed in 0.1s: boom"


# ------------------------------------------------------------------ integration: real environments


@pytest.fixture
def cache_env(monkeypatch):
    monkeypatch.setenv("FP8_CHECK_CACHE", str(TEST_CACHE))
    monkeypatch.setenv("FP8_CHECK_JAX_VERSIONS", ",".join(POOL + [NEW]))
    return TEST_CACHE


def results_by_version(m: Matrix):
    return {e.jax: {(o.case, o.profile): o for o in e.outcomes} for e in m.versions}


@pytest.mark.slow
@pytest.mark.network
def test_matrix_across_versions_real(workspace, run_cli, cache_env):
    out = workspace / "reports" / "matrix.json"
    # this row's golden holding the newest behaviour only (no version range): 0.8.0 must FAIL on it
    gpath0 = golden.path_for(workspace / "goldens", "seed_scaled_clamp_f32", "h100", "triton", "deviceless")
    g0 = golden.load(gpath0)
    newest = g0.expected_for(NEW)
    atomic_write(gpath0, golden.Golden(g0.case, g0.target, g0.profile, g0.mode,
                                              [golden.Expectation(newest.signature, "", newest.blessed_with)]).to_yaml())
    code, stdout, err = run_cli("matrix", "--jax", f"0.5.3,{OLD},0.6.99,{NEW}", "-k", "plain_f32,scaled_clamp_f32",
                                "--out", out, "--no-html", cwd=workspace)
    m = load_matrix(out)
    status = {e.jax: e.status for e in m.versions}
    assert status == {"0.5.3": "unsupported", "0.6.99": "install-failed", OLD: "ran", NEW: "ran"}, stdout + err
    assert [e.jax for e in m.versions] == ["0.5.3", "0.6.99", OLD, NEW]
    failed = next(e for e in m.versions if e.jax == "0.6.99")
    assert "jax[cuda12-local]==0.6.99" in failed.error  # the installer's error (the slim deviceless set)
    old_env = next(e for e in m.versions if e.jax == OLD)
    assert old_env.environment["jax"] == OLD and Path(old_env.env["path"]).parent == cache_env / "envs"
    # the full per-version results (the HTML report reads its texts from there)
    full = results.load(old_env.results_file)
    assert full.jax == OLD and all(o.hlo for o in full.outcomes if o.signature)
    by = results_by_version(m)
    assert all(o.code is outcome.UNSUPPORTED for o in by["0.5.3"].values())
    # First principles for this XLA change (found by the matrix; `fp8-check bisect` puts it at 0.10.1): on 0.8.0
    # the Triton gemm writes f32 and a separate kernel requantizes; on the newest the requantization is fused.
    old, new = by[OLD][("seed_scaled_clamp_f32", "triton")], by[NEW][("seed_scaled_clamp_f32", "triton")]
    assert old.signature.kernels == 2 and old.signature.gemms[0].output == "f32"
    assert new.signature.kernels == 1 and new.signature.gemms[0].output == "f8e4m3fn"
    assert old.code is outcome.FAIL and new.code is outcome.PASS  # the golden (no range) states the newest behaviour
    assert by[OLD][("seed_plain_f32", "cublas")].code is outcome.PASS
    change = [c for c in m.changes() if (c.case, c.profile) == ("seed_scaled_clamp_f32", "triton")]
    assert change and (change[0].before, change[0].after) == (OLD, NEW)
    assert FieldDiff("kernels", 2, 1) in change[0].diffs
    assert code == 1  # a FAIL on 0.8.0
    # the grid row (columns 0.5.3, 0.6.99, OLD, NEW): unsupported, not installed, FAIL with 2 kernels,
    # PASS with 1 kernel marked as changed
    triton_row = next(line for line in stdout.splitlines() if "seed_scaled_clamp_f32" in line and "h100/triton" in line)
    # 0.8.0 against the golden (the fused requantization): a regression (r); 0.8.0 -> newest: an improvement (▲)
    # each cell's FP8 answer is the result line's (`run`: `FP8 0/1 gemms`, the Triton fusion's operands converted
    # to f32 inside it under deviceless defaults): one story in grid and result line
    assert [c.strip() for c in triton_row.split("│")[3:-1]] == ["-", "E", "✗ FP8 0/1r 2", "✓ FP8 0/1▲ 1"]
    assert answer(old).fp8 == answer(new).fp8 == 0 and answer(old).matmuls == answer(new).matmuls == 1
    assert old.verdict.cls == "regression" and change[0].cls == "improvement"
    assert m.regressions() == []  # the newest version is clean

    # A version-ranged golden: the old behaviour recorded for < 0.10.1 -> each version judged by its own range.
    gpath = golden.path_for(workspace / "goldens", "seed_scaled_clamp_f32", "h100", "triton", "deviceless")
    g = yaml.safe_load(gpath.read_text())
    g["expect"] = [{"jax": "<0.10.1", "blessed_with": f"jax {OLD}", "signature": old.signature.to_dict()},
                   {"jax": ">=0.10.1", **g["expect"][0]}]
    gpath.write_text(yaml.safe_dump(g, sort_keys=False))
    code, stdout, err = run_cli("matrix", "--jax", f"{OLD},{NEW}", "-k", "scaled_clamp_f32", "--profile", "triton",
                                "--out", out, "--no-html", cwd=workspace)
    m = load_matrix(out)
    by = results_by_version(m)
    assert code == 0, stdout + err
    assert by[OLD][("seed_scaled_clamp_f32", "triton")].code is outcome.PASS
    assert by[NEW][("seed_scaled_clamp_f32", "triton")].code is outcome.PASS
    assert all(not e.env.get("built") for e in m.versions)  # warm: reused
    # the per-version workers compile through the compile cache: these were compiled by the first matrix
    assert all(o.cached for e in m.versions for o in e.outcomes)

    # Merging per-version files (what the nightly's report job does) gives the same matrix.
    code, stdout, _ = run_cli("matrix", "--merge", str(out.parent / "matrix.d" / "results-jax-*.json"),
                              "--out", workspace / "merged.json", "--no-html", "--fail-on", "newest", cwd=workspace)
    merged = load_matrix(workspace / "merged.json")
    # (0.5.3's results file is still there from the first run; install failures write none)
    assert code == 0 and [e.jax for e in merged.versions] == ["0.5.3", OLD, NEW]
    assert merged.versions[0].status is Status.UNSUPPORTED
    assert results_by_version(merged)[OLD][("seed_scaled_clamp_f32", "triton")].code is outcome.PASS
    assert Path(merged.versions[1].results_file).name == f"results-jax-{OLD}.json"
