"""The results file: the one JSON boundary of a run (harness/fp8_check/run/_results.py)."""

from __future__ import annotations

import json

import pytest

from fp8_check.run import _results as results
from fp8_check.signature._extract import Signature
from fp8_check.verdict._comparator import FieldDiff, compare
from fp8_check.verdict._outcome import FAIL, PASS, UNRESOLVED, Outcome

from ..conftest import REPO

FIXTURES = sorted((REPO / "tests" / "fixtures" / "results").glob("jax-*.json"))
SCHEMA1 = REPO / "tests" / "fixtures" / "schema1" / "results-jax-0.8.0.json"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_round_trip_of_recorded_results(path):
    res = results.load(path)
    assert res.outcomes and all(isinstance(o, Outcome) for o in res.outcomes)
    assert any(isinstance(o.signature, Signature) for o in res.outcomes)
    again = results.from_json(json.loads(json.dumps(results.to_json(res))))
    assert results.to_json(again) == results.to_json(res)
    assert again.outcomes == res.outcomes


def test_field_diffs_keep_an_absent_side():
    diffs = compare({"kernels": 1, "gemms": [{"target": "x"}]}, {"kernels": 2, "gemms": []})
    assert [str(d) for d in diffs] == ["kernels: expected 1, found 2", "gemms[0]: expected {target: x}, found (absent)"]
    back = [FieldDiff.from_json(json.loads(json.dumps(d.to_json()))) for d in diffs]
    assert [str(d) for d in back] == [str(d) for d in diffs]
    assert back[1].absent_found and not back[1].absent_expected


def test_schema_1_files_still_load_and_keep_only_the_case_function():
    raw = json.loads(SCHEMA1.read_text())
    assert raw["schema"] == "fp8-check/results/1" and "def prepare_environment" in raw["results"][0]["source"]
    res = results.load(SCHEMA1)
    codes = {o.code for o in res.outcomes}
    assert {PASS, FAIL, UNRESOLVED} <= codes
    for o, r in zip(res.outcomes, raw["results"]):
        assert o.code.name == r["outcome"] and o.case == r["case"]
        if r["source"]:
            # the stored repro was the whole script; only the case function (FN, ARGS) is kept
            assert "FN = " in o.source and "prepare_environment" not in o.source
            assert o.source.strip() in r["source"]


def test_a_schema_2_file_is_leaner_than_schema_1_for_the_same_results():
    res = results.load(SCHEMA1)
    old = SCHEMA1.stat().st_size
    new = len(json.dumps(results.to_json(res), indent=1))
    assert new < 0.75 * old


def test_the_repro_is_rendered_on_demand(tmp_path):
    res = results.load(FIXTURES[-1])
    o = next(o for o in res.outcomes if o.source)
    script = results.repro_for(res, o)
    # The stored spec travels with the script: its hardware part verbatim, its CUDA runtime and cuDNN
    # versions as TARGET_VERSIONS, written where the JAX that runs the script reads them.
    from fp8_check.targets import parse_target

    target = parse_target(o.target, res.target_specs[o.target])
    assert o.source.strip() in script and target.config_text.strip() in script
    assert f"TARGET_VERSIONS = {target.versions_dict()}" in script and "core_count: 132" in script
    assert "def compile_for" in script  # the compile helper travels with the script, once per render


@pytest.mark.parametrize("text, needle", [
    ("{", "cannot read results JSON"),
    ('{"schema": "something/else"}', "not an fp8-check results file"),
    ('[1, 2]', "not an fp8-check results file"),
    ('{"schema": "fp8-check/results/2", "results": [{"case": "a"}]}', "malformed result"),
    ('{"schema": "fp8-check/results/2", "results": [{"case": "a", "target": "h100", "profile": "cublas", "outcome": "MAYBE"}]}',
     "unknown outcome 'MAYBE'"),
])
def test_a_bad_results_file_is_one_clear_line(tmp_path, text, needle):
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(results.ResultsError) as exc:
        results.load(path)
    message = str(exc.value)
    assert needle in message and str(path) in message and "\n" not in message


def test_a_missing_results_file_is_one_clear_line(tmp_path):
    with pytest.raises(results.ResultsError, match="no such results file"):
        results.load(tmp_path / "nope.json")


def test_a_compile_error_is_xfail_only_under_an_active_known_issue(tmp_path):
    """lit's rule: a known issue expects the case to fail, also by not compiling; elsewhere it is UNRESOLVED."""
    from fp8_check.cases._load import Case, KnownIssue, PatternSpec
    from fp8_check.compile._service import Compilation
    from fp8_check.run import _runner as runner
    from fp8_check.verdict._outcome import XFAIL

    error = "XlaRuntimeError: CANCELLED: Too small divisible part of the contracting dimension."
    issue = KnownIssue(url="", jax=">=0.7.1,<0.8.3", summary="Triton refuses k=100", targets=("b200",), profiles=("triton",))
    case = Case(id="ragged", file="x.yaml", line=1, spec=PatternSpec(), known_issues=(issue,))
    comp = Compilation("ragged", "b200", "triton", "deviceless", error=error)
    out = runner.judge(case, comp, "0.8.0", tmp_path)
    assert out.code is XFAIL and "Triton refuses k=100" in out.reason and "Too small divisible part" in out.reason
    for jax_version, target in (("0.8.3", "b200"), ("0.8.0", "h100")):  # outside the issue's versions or targets
        comp = Compilation("ragged", target, "triton", "deviceless", error=error)
        out = runner.judge(case, comp, jax_version, tmp_path)
        assert out.code is UNRESOLVED and "Too small divisible part" in out.reason
