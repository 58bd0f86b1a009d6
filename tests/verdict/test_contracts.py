"""Model contracts on real recorded HLO: what moves freely between releases passes, a layer losing FP8 fails by name.

The fixtures under tests/fixtures/hlo/models/ are the optimized HLO of the decoder cases of
cases/models.yaml, compiled deviceless for h100/cublas by `fp8-check matrix cases/models.yaml
--with flax --with optax --with qwix` on the JAX release in their name (gzip'd, as XLA printed
them). Expected classes come from the contract rules (docs/contracts.md), not from the output under test.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from fp8_check.core._files import atomic_write
from fp8_check.cost import _model as cost
from fp8_check.run import _results as results, _runner as runner
from fp8_check.signature import _extract as signature, _identity as identity
from fp8_check.verdict import (
    _comparator as comparator,
    _contract as contract,
    _contract_judge as contract_judge,
    _golden as golden,
)
from fp8_check.verdict._outcome import FAIL, PASS, UNRESOLVED, XFAIL, Outcome

MODELS = Path(__file__).parents[1] / "fixtures" / "hlo" / "models"


def hlo(case: str, jax: str) -> str:
    return gzip.decompress((MODELS / f"{case}.jax-{jax}.h100.cublas.txt.gz").read_bytes()).decode()


def bless_contract(root: Path, case: str, jax: str, options: dict | None = None) -> dict:
    """Bless the contract of `case` on `jax` the way `fp8-check bless` does (contract_judge.facts_of)."""
    out = Outcome(case, "h100", "cublas", "deviceless", jax, UNRESOLVED, hlo=hlo(case, jax))
    out.signature = signature.extract(out.hlo or "")
    facts = contract_judge.facts_of(out, options)
    golden.bless(root, case, "h100", "cublas", "deviceless", jax, out.signature.to_dict(), facts)
    if options:
        path = golden.path_for(root, case, "h100", "cublas", "deviceless")
        g = golden.load(path)
        assert g is not None
        g.contract_options = options
        atomic_write(path, g.to_yaml())
    return facts


def judge(root: Path, case: str, jax: str, issue=None) -> Outcome:
    out = Outcome(case, "h100", "cublas", "deviceless", jax, UNRESOLVED, hlo=hlo(case, jax))
    return runner.judge_signature(out, signature.extract(out.hlo or ""), root, issue)


# ------------------------------------------------------------------ neutral: reordering, one more kernel


def test_a_reordering_only_change_of_a_train_step_passes(tmp_path):
    """decoder_direct_train on 0.12.0.1 with its 27 gemms in the reverse order. (Between the 21 releases the
    stored signatures showed no pure reordering once gemms carry their layer; the reordering the issue
    measured was gemms[13] vs gemms[13] of an older attribution. The gemms here are the real ones.)"""
    import dataclasses

    bless_contract(tmp_path, "decoder_direct_train", "0.11.2")
    text = hlo("decoder_direct_train", "0.12.0.1")
    sig = signature.extract(text)
    shuffled = dataclasses.replace(sig, gemms=list(reversed(sig.gemms)))
    assert [g.layer for g in shuffled.gemms] != [g.layer for g in sig.gemms]
    assert comparator.compare(sig.to_dict(), shuffled.to_dict()) == []
    out = runner.judge_signature(Outcome("decoder_direct_train", "h100", "cublas", "deviceless", "0.12.0.1",
                                         UNRESOLVED, hlo=text), shuffled, tmp_path)
    assert out.code is PASS, (out.reason, [str(d) for d in out.diffs])
    assert not runner.fails(out, "regression") and not runner.fails(out, "any")


def test_one_more_elementwise_kernel_passes_and_is_reported_once(tmp_path):
    """decoder_qdq_train, 0.11.2 -> 0.12.0.1: one more kernel, the same FP8 facts."""
    a, b = signature.extract(hlo("decoder_qdq_train", "0.11.2")), signature.extract(hlo("decoder_qdq_train", "0.12.0.1"))
    assert b.kernels == a.kernels + 1
    assert [g.fp8 for g in a.gemms].count(True) == [g.fp8 for g in b.gemms].count(True)
    bless_contract(tmp_path, "decoder_qdq_train", "0.11.2")
    out = judge(tmp_path, "decoder_qdq_train", "0.12.0.1")
    assert out.code is PASS and out.diffs == [] and out.verdict is None, out.reason
    assert not runner.fails(out, "regression")
    assert out.reason.count("estimated cost") == 1  # the tolerated cost change, once
    import io

    from fp8_check.report import _terminal as terminal

    stream = io.StringIO()
    terminal.print_outcome(out, stream)
    assert sum("within the contract:" in line for line in stream.getvalue().splitlines()) == 1


def test_the_kernel_count_is_judged_only_when_a_case_asks_for_it(tmp_path):
    bless_contract(tmp_path, "decoder_qdq_train", "0.11.2", {"kernels": True})
    out = judge(tmp_path, "decoder_qdq_train", "0.12.0.1")
    assert out.code is FAIL and [d.path for d in out.diffs] == ["kernels"]
    assert out.verdict is not None and out.verdict.cls == "regression"


# ------------------------------------------------------------------ a layer losing FP8


def test_a_layer_losing_fp8_is_a_regression_that_names_layer_and_pass(tmp_path):
    """decoder_e5m2_fwd on 0.11.0 (the declared known issue, left out here): the merged q/k/v and gate/up
    projections run as f16 loop fusions instead of FP8 gemms."""
    bless_contract(tmp_path, "decoder_e5m2_fwd", "0.11.1")
    out = judge(tmp_path, "decoder_e5m2_fwd", "0.11.0")
    assert out.code is FAIL and out.verdict is not None and out.verdict.cls == "regression"
    whys = [x.why for x in out.verdict.regressions]
    assert any(w.startswith("DecoderBlock/attn/q_proj/") and " forward: FP8 -> " in w and "loop fusion" in w for w in whys)
    assert any(w.startswith("DecoderBlock/mlp/gate/") for w in whys)
    assert runner.fails(out, "regression") and runner.fails(out, "cost:50%")  # whatever the cost says
    import io

    from fp8_check.report import _terminal as terminal

    stream = io.StringIO()
    terminal.print_outcome(out, stream)
    shown = stream.getvalue()
    assert "[regression]" in shown and "DecoderBlock/attn/q_proj/CurrentScalingFp8_0 forward: FP8 -> f16" in shown, shown
    assert "gemms[" not in shown


def test_under_its_known_issue_the_loss_is_xfail_with_the_same_words(tmp_path):
    from fp8_check.cases._model import KnownIssue

    bless_contract(tmp_path, "decoder_e5m2_fwd", "0.11.1")
    issue = KnownIssue("", ">=0.11.0,<0.11.1", "merged projections run as f16 loop fusions")
    out = judge(tmp_path, "decoder_e5m2_fwd", "0.11.0", issue)
    assert out.code is XFAIL and not runner.fails(out, "regression")
    assert out.verdict is not None and any("q_proj" in x.why for x in out.verdict.regressions)


def _results(tmp_path: Path, outs: list[Outcome]) -> list[Path]:
    paths = []
    for o in outs:
        o.estimate = contract_judge.estimate(o)
        res = results.Results({"jax": o.jax, "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"]}, [o])
        path = tmp_path / f"results-jax-{o.jax}.json"
        results.write(path, res)
        paths.append(path)
    return paths


def test_the_cli_exit_code_summary_and_issue_title_name_the_layer(tmp_path, run_cli):
    root = tmp_path / "goldens"
    bless_contract(root, "decoder_e5m2_fwd", "0.11.1")
    outs = [judge(root, "decoder_e5m2_fwd", "0.11.0")]  # the newest version of this matrix is bad
    files = _results(tmp_path, outs)
    code, out, _ = run_cli("matrix", "--merge", *files, "--fail-on", "regression", "--out", tmp_path / "m.json",
                           "--no-html", cwd=tmp_path)
    assert code == 1
    assert "q_proj" in out, out
    summary = tmp_path / "summary.md"
    code, out, _ = run_cli("ci", "summary", tmp_path / "m.json", "--summary-file", summary,
                           "--issues-dir", tmp_path / "issues", cwd=tmp_path)
    text = summary.read_text()
    assert "lost FP8: DecoderBlock/attn/q_proj/CurrentScalingFp8_0: FP8 -&gt; f16 (fwd" in text, text  # the layer and passes
    assert "::error" in out and "q_proj" in out  # the CI annotation
    titles = [p.read_text().splitlines()[0] for p in (tmp_path / "issues").glob("*.md")]
    assert titles and all("DecoderBlock/" in t and "gemms[" not in t for t in titles), titles


def test_neutral_changes_exit_0_under_fail_on_regression(tmp_path, run_cli):
    root = tmp_path / "goldens"
    bless_contract(root, "decoder_qdq_train", "0.11.2")
    bless_contract(root, "decoder_direct_train", "0.11.2")
    outs = [judge(root, c, v) for c in ("decoder_qdq_train", "decoder_direct_train") for v in ("0.11.2", "0.12.0.1")]
    assert [o.code for o in outs] == [PASS] * 4
    by_version: dict[str, list[Outcome]] = {}
    for o in outs:
        by_version.setdefault(o.jax, []).append(o)
    files = []
    for v, os_ in by_version.items():
        for o in os_:
            o.estimate = contract_judge.estimate(o)
        res = results.Results({"jax": v, "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"]}, os_)
        results.write(tmp_path / f"results-jax-{v}.json", res)
        files.append(tmp_path / f"results-jax-{v}.json")
    code, out, _ = run_cli("matrix", "--merge", *files, "--fail-on", "regression", "--out", tmp_path / "m.json",
                           "--no-html", cwd=tmp_path)
    assert code == 0, out
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc


# ------------------------------------------------------------------ contracts: shape and options


def test_a_contract_of_a_train_step_is_short_and_states_no_launches(tmp_path):
    facts = bless_contract(tmp_path, "decoder_qdq_train", "0.12.0.1")
    text = golden.path_for(tmp_path, "decoder_qdq_train", "h100", "cublas", "deviceless").read_text()
    assert len(text.splitlines()) <= 300 and "launches" not in text and "kernels" not in facts
    assert facts["fp8_flops"] > 90 and facts["cost_us"] > 0
    assert golden.load(golden.path_for(tmp_path, "decoder_qdq_train", "h100", "cublas", "deviceless")).is_contract


def test_layer_globs_keep_a_contract_valid_when_a_model_is_renamed(tmp_path):
    sig = signature.extract(hlo("decoder_e5m2_fwd", "0.11.1"))
    facts = contract.facts(sig, None)
    for row in facts["matmuls"]:
        row["layer"] = row["layer"].replace("DecoderBlock/", "*/")
    renamed = signature.extract(hlo("decoder_e5m2_fwd", "0.11.1").replace("DecoderBlock", "Block_0"))
    assert {g.layer.split("/")[0] for g in renamed.gemms if g.layer} == {"Block_0"}
    assert contract.check(facts, renamed, None).changes == []


def test_a_cost_beyond_the_tolerance_fails_and_fail_on_cost_overrides_it(tmp_path):
    facts = bless_contract(tmp_path, "decoder_qdq_train", "0.11.2", {"cost_tolerance": "0.001%"})
    out = judge(tmp_path, "decoder_qdq_train", "0.12.0.1")
    est = contract_judge.estimate(out)
    assert est is not None
    if abs(est.total_us - facts["cost_us"]) < 0.05:
        pytest.skip("the two releases price the same to 0.1 µs: nothing beyond a tolerance")
    assert out.code is FAIL and [d.path for d in out.diffs] == ["cost_us"]
    assert (out.verdict.cls == "regression") == (est.total_us > facts["cost_us"])


def test_bad_contract_options_name_the_field(tmp_path):
    bless_contract(tmp_path, "decoder_e5m2_fwd", "0.11.1")
    path = golden.path_for(tmp_path, "decoder_e5m2_fwd", "h100", "cublas", "deviceless")
    path.write_text(path.read_text().replace("expect:", "contract_options: {cost_tolerance: lots}\nexpect:", 1))
    with pytest.raises(golden.GoldenError, match="contract_options.cost_tolerance"):
        golden.load(path)


def test_identity_pairs_the_merged_projection_with_itself():
    """0.11.0 vs 0.11.1: the merged q/k/v gemm is attributed to one layer on both; identity pairs it."""
    a = signature.extract(hlo("decoder_e5m2_fwd", "0.11.1")).to_dict()["gemms"]
    b = signature.extract(hlo("decoder_e5m2_fwd", "0.11.0")).to_dict()["gemms"]
    pairs = identity.pairs("gemms", a, b)
    for _label, i, j in pairs:
        if i is not None and j is not None:
            assert (a[i].get("layer"), a[i].get("pass")) == (b[j].get("layer"), b[j].get("pass"))
    assert cost  # the cost API is what contracts read


# ------------------------------------------------------------------ blessing from a matrix


def _matrix(tmp_path: Path, run_cli, outs: list[Outcome]) -> Path:
    by_version: dict[str, list[Outcome]] = {}
    for o in outs:
        o.estimate = contract_judge.estimate(o)
        by_version.setdefault(o.jax, []).append(o)
    files = []
    for v, os_ in by_version.items():
        res = results.Results({"jax": v, "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"]}, os_)
        results.write(tmp_path / f"r-{v}.json", res)
        files.append(tmp_path / f"r-{v}.json")
    run_cli("matrix", "--merge", *files, "--out", tmp_path / "m.json", "--no-html", cwd=tmp_path)
    return tmp_path / "m.json"


def _compiled(case: str, jax: str, known_issue: dict | None = None) -> Outcome:
    out = Outcome(case, "h100", "cublas", "deviceless", jax, PASS, hlo=hlo(case, jax), known_issue=known_issue)
    out.signature = signature.extract(out.hlo or "")
    return out


def test_bless_from_a_matrix_writes_one_contract_over_the_range(tmp_path, run_cli):
    # 0.12.0 lies between the two recorded releases: given 0.11.2's program (a stand-in measurement for the
    # grouping only) the three are one run, one contract from 0.11.2 on
    middle = _compiled("decoder_qdq_train", "0.11.2")
    middle.jax = "0.12.0"
    m = _matrix(tmp_path, run_cli, [_compiled("decoder_qdq_train", "0.11.2"), middle,
                                    _compiled("decoder_qdq_train", "0.12.0.1")])
    code, out, _ = run_cli("bless", "--from-matrix", m, "--goldens", tmp_path / "g", cwd=tmp_path)
    assert code == 0, out
    g = golden.load(golden.path_for(tmp_path / "g", "decoder_qdq_train", "h100", "cublas", "deviceless"))
    assert g is not None and len(g.expect) == 1 and g.expect[0].jax == ">=0.11.2" and g.expect[0].contract is not None
    assert "0.11.2..0.12.0.1" in g.expect[0].blessed_with


def test_bless_from_a_matrix_never_reaches_a_contract_over_an_unmeasured_release(tmp_path, run_cli):
    """0.12.0 was not measured: the two measured releases get a contract each (same facts), 0.12.0 none (NEW)."""
    m = _matrix(tmp_path, run_cli, [_compiled("decoder_qdq_train", v) for v in ("0.11.2", "0.12.0.1")])
    code, out, _ = run_cli("bless", "--from-matrix", m, "--goldens", tmp_path / "g", cwd=tmp_path)
    assert code == 0, out
    g = golden.load(golden.path_for(tmp_path / "g", "decoder_qdq_train", "h100", "cublas", "deviceless"))
    assert [e.jax for e in g.expect] == [">=0.12.0.1", ">=0.11.2,<0.12.0"] and g.expected_for("0.12.0") is None


def test_bless_from_a_matrix_splits_the_range_only_where_an_fp8_fact_changed(tmp_path, run_cli):
    m = _matrix(tmp_path, run_cli, [_compiled("decoder_e5m2_fwd", v) for v in ("0.11.0", "0.11.1")])
    run_cli("bless", "--from-matrix", m, "--goldens", tmp_path / "g", cwd=tmp_path)
    g = golden.load(golden.path_for(tmp_path / "g", "decoder_e5m2_fwd", "h100", "cublas", "deviceless"))
    # 0.11.1 is not the newest known release: its range ends before the next one (0.11.2, not measured)
    assert g is not None and [e.jax for e in g.expect] == [">=0.11.1,<0.11.2", ">=0.11.0,<0.11.1"]


def test_bless_from_a_matrix_leaves_known_issue_versions_out_of_the_contract(tmp_path, run_cli):
    ki = {"url": "", "jax": ">=0.11.0,<0.11.1", "summary": "merged projections as f16 loop fusions"}
    m = _matrix(tmp_path, run_cli, [_compiled("decoder_e5m2_fwd", "0.11.0", ki), _compiled("decoder_e5m2_fwd", "0.11.1")])
    code, out, _ = run_cli("bless", "--from-matrix", m, "--goldens", tmp_path / "g", cwd=tmp_path)
    assert "not blessed from jax 0.11.0" in out
    g = golden.load(golden.path_for(tmp_path / "g", "decoder_e5m2_fwd", "h100", "cublas", "deviceless"))
    # one contract from 0.11.0 (the known issue's version: the contract states it) to 0.11.1 (0.11.2 not measured)
    assert g is not None and len(g.expect) == 1 and g.expect[0].jax == ">=0.11.0,<0.11.2"
    assert judge(tmp_path / "g", "decoder_e5m2_fwd", "0.11.0").code is FAIL  # the contract states the fused facts


def test_blessing_one_version_while_a_matrix_shows_others_prints_the_one_command(tmp_path, run_cli):
    from fp8_check.matrix import _goldens as ranged

    m = _matrix(tmp_path, run_cli, [_compiled("decoder_qdq_train", v) for v in ("0.11.2", "0.12.0.1")])
    hint = ranged.one_version_hint(_compiled("decoder_qdq_train", "0.12.0.1"), m)
    assert hint is not None and f"fp8-check bless --from-matrix {m} -k decoder_qdq_train" in hint
    assert ranged.one_version_hint(_compiled("decoder_e5m2_fwd", "0.11.1"), m) is None


def test_matrix_changes_and_bisect_steps_name_layers_not_indices(tmp_path, run_cli):
    from fp8_check.matrix._document import load_matrix

    root = tmp_path / "goldens"
    bless_contract(root, "decoder_e5m2_fwd", "0.11.1")
    m = _matrix(tmp_path, run_cli, [judge(root, "decoder_e5m2_fwd", v) for v in ("0.11.0", "0.11.1")])
    changes = load_matrix(m).changes()
    assert changes and all(not d.path.startswith("gemms[") for c in changes for d in c.diffs)
    assert any("q_proj" in d.path for c in changes for d in c.diffs)
    diffs, v = contract_judge.signature_change(signature.extract(hlo("decoder_e5m2_fwd", "0.11.1")),
                                               signature.extract(hlo("decoder_e5m2_fwd", "0.11.0")))
    assert v.cls == "regression" and any("q_proj" in d.path and d.path.endswith(" forward") for d in diffs)


def test_amax_and_epilogue_are_stated_where_they_matter_and_their_loss_is_a_regression():
    import dataclasses

    text = (Path(__file__).parents[1] / "fixtures" / "hlo" / "jax-0.12.0.1" / "relu_amax.h100.cublas.txt").read_text()
    sig = signature.extract(text)
    facts = contract.facts(sig, None)
    assert facts["matmuls"][0].get("amax") is True and facts["matmuls"][0].get("epilogue") == "RELU"
    assert contract.facts(signature.extract(hlo("decoder_e5m2_fwd", "0.11.1")), None)["matmuls"][0].keys() == \
        {"layer", "pass", "engine", "operands"}  # a decoder's gemms compute no amax and have no epilogue
    lost = dataclasses.replace(sig, gemms=[dataclasses.replace(g, amax=False, damax_output=False, epilogue="DEFAULT")
                                           for g in sig.gemms])
    j = contract.check(facts, lost, None)
    assert sorted(c.cls for c in j.changes) == ["regression", "regression"]
    assert any("abs-max no longer computed" in c.why for c in j.changes)
