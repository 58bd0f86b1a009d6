"""FP8 first (issue 45): every result leads with its FP8 answer, names the layer that lost FP8, and never passes a
program that quantizes to FP8 with no FP8 gemm in silence.

The model is docs/examples/fp8first (a flax train step with FP8 inside it: two blocks and a small adapter through
flax's Fp8DotGeneralOp, a plain bf16 head), compiled deviceless through the real plugins: blessed, then one
layer made plain as a user would (its `PLAIN` list), judged with no hand-written layer rule.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from fp8_check.matrix._document import merge
from fp8_check.report._github import job_summary
from fp8_check.report._issue import first_bad_items, issue_title
from fp8_check.report._model import build_model
from fp8_check.run import _results as results
from fp8_check.signature._extract import Gemm, Signature
from fp8_check.targets import load_target
from fp8_check.verdict import _contract as contract
from fp8_check.verdict._fp8_answer import FIX, Fp8Answer, program_fp8_types, reason
from fp8_check.verdict.rules.layers import check_layers, from_dicts
from tests.conftest import REPO
from tests.report.test_report import Watched, browser  # noqa: F401  (the browser fixture: the real headless Chromium)

EXAMPLE = REPO / "docs" / "examples" / "fp8first"


def test_fp8_types_are_read_from_stablehlo_and_hlo_spellings():
    text = "tensor<128x512xf8E4M3FN> tensor<2xf8E5M2FNUZ> f8e4m3fn[3]{0} %f8d258a6e27f tensor<4xf8E8M0FNU>"
    assert program_fp8_types(text) == ("f8e4m3fn", "f8e5m2fnuz")  # E8M0 is a scale type, a hash is no type
    assert program_fp8_types("tensor<32xf4E2M1FN>") == ("f4e2m1fn",)
    assert program_fp8_types("tensor<4xbf16>", None) == ()


def test_the_headline_is_fp8_gemms_over_matmuls_with_the_flop_share():
    assert Fp8Answer(21, 18, 0.889).headline == "FP8 18/21 gemms, 89 % of FLOPs"
    assert Fp8Answer(15, 0, 0.0).headline == "FP8 0/15 gemms"
    assert Fp8Answer(20, 17, 0.996).headline == "FP8 17/20 gemms, 99.6 % of FLOPs"  # not a rounded 100 % with 3 wide matmuls
    assert Fp8Answer(20, 1, 0.002).headline == "FP8 1/20 gemms, 0.2 % of FLOPs"
    assert Fp8Answer(0, 0, None).headline == ""


def test_a_golden_without_fp8_makes_it_by_design_not_a_warning():
    a = Fp8Answer(1, 0, 0.0, ("f4e2m1fn", "f8e4m3fn"), "XLA rewrote no matmul", by_design=True)
    assert not a.warns and a.line() == ("no FP8 here, by design: the golden states no FP8 gemm for this target "
                                        "(the program computes in f4e2m1fn, f8e4m3fn)")
    assert Fp8Answer(1, 0, 0.0, ("f8e4m3fn",), "XLA rewrote no matmul").warns


def _wide(layer: str) -> Gemm:
    return Gemm(target="__cublas$gemm", operand_dtypes=["bf16", "bf16"], output="bf16", layer=layer, pass_="forward")


@pytest.mark.parametrize("target, says", [
    ("a100", "a100 (sm_80) has no FP8 tensor cores"),
    ("mi300x", "f8e4m3fn, f8e5m2 (OCP FP8), which mi300x (gfx942) does not run in FP8 gemms"),
    ("mi350x", "XLA rewrote no matmul into an FP8 gemm"),
    ("h100", "XLA rewrote no matmul into an FP8 gemm"),
])
def test_the_reason_for_no_fp8_is_read_from_the_program_and_the_target(target, says):
    sig = Signature(3, [], [_wide("m/dense")], [])
    text = reason(sig, ("f8e4m3fn", "f8e5m2"), load_target(target))
    assert says in text, text
    if target == "mi300x":
        assert FIX["fnuz"] in text and "NANOOFp8DotGeneralOp" in text
    assert reason(sig, (), load_target(target)) == ""  # no FP8 type in the program: nothing was asked for


def test_a_layer_that_lost_its_fp8_op_is_paired_with_its_plain_matmul():
    stated = {"matmuls": [{"layer": "Model/block1/down/Fp8DotGeneralOp_0", "pass": "forward",
                           "engine": "cuBLASLt FP8", "operands": "f8e4m3fn x f8e4m3fn"}]}
    assert contract.fp8_op_stripped("Model/block1/down/Fp8DotGeneralOp_0") == "Model/block1/down"
    assert contract.fp8_op_stripped("Model/block1/down") == "Model/block1/down"
    j = contract.check(stated, Signature(1, [], [_wide("Model/block1/down")], []), None)
    [change] = j.changes
    assert change.path == "Model/block1/down forward" and change.cls == contract.REGRESSION
    assert change.why == "Model/block1/down forward: FP8 -> bf16 (cuBLAS bf16)"
    other = contract.check(stated, Signature(1, [], [_wide("Model/block0/down")], []), None)
    assert not other.changes and any("Model/block1/down/Fp8DotGeneralOp_0 forward: no matmul" in n for n in other.notes)
    assert any("Model/block0/down forward: a matmul the contract does not state" in n for n in other.notes)


def test_bless_writes_a_rule_per_layer_seen_in_fp8_covering_the_layer_without_its_fp8_op():
    fp8 = Gemm(target="__cublas$lt$matmul$f8", operand_dtypes=["f8e4m3fn", "f8e4m3fn"], output="bf16",
               layer="Model/block1/down/Fp8DotGeneralOp_0", pass_="forward")
    sig = Signature(2, [], [fp8, _wide("Model/head")], [])
    assert contract.fp8_layer_rules(sig) == [{"layer": "Model/block1/down/*", "fp8": True}]
    plain = Signature(2, [], [_wide("Model/block1/down"), _wide("Model/head")], [])
    [diff] = check_layers(from_dicts(contract.fp8_layer_rules(sig)), plain)  # the rule still sees the plain layer
    assert "Model/block1/down" in str(diff.found)


def test_bless_never_writes_a_rule_its_own_signature_breaks():
    """MaxText's NNX bridge names the FP8 op `eval_jaxpr/Fp8DirectDotGeneralOp` beside attention's bf16 einsums
    `eval_jaxpr/<subscripts>`: the stripped glob `eval_jaxpr/*` covered them and failed the compile it was
    blessed from. Such a layer gets an exact rule; a lone FP8 op still gets the glob."""
    fp8 = Gemm(target="__cublas$lt$matmul$f8", operand_dtypes=["f8e4m3fn", "f8e4m3fn"], output="bf16",
               layer="eval_jaxpr/Fp8DirectDotGeneralOp", pass_="forward")
    sig = Signature(2, [], [fp8, _wide("eval_jaxpr/bkgts,bskd->btkgd")], [])
    rules = contract.fp8_layer_rules(sig)
    assert rules == [{"layer": "eval_jaxpr/Fp8DirectDotGeneralOp", "fp8": True}]
    assert check_layers(from_dicts(rules), sig) == []  # the rule holds where it was blessed
    plain = Signature(2, [], [_wide("eval_jaxpr"), _wide("eval_jaxpr/bkgts,bskd->btkgd")], [])
    assert check_layers(from_dicts(rules), plain)  # and the FP8 op made plain still fails it


def _example(tmp_path, monkeypatch):
    work = tmp_path / "fp8first"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.syspath_prepend(str(work))
    return work


@pytest.mark.slow
def test_a_layer_made_plain_is_named_in_the_terminal_job_summary_and_issue_title(tmp_path, run_cli, monkeypatch):
    work = _example(tmp_path, monkeypatch)
    code, out, err = run_cli("bless", "cases", "--goldens", "goldens", "--profile", "cublas", cwd=work)
    assert code == 0, out + err
    assert "layer rules written for h100/cublas fp8first_train" in out and "  Model/block1/down/*: FP8" in out, out
    assert "Model/head" not in out.split("layer rules written", 1)[1].split("\n---", 1)[0]  # plain by design: no rule
    model = work / "model.py"
    model.write_text(model.read_text().replace('PLAIN: tuple[str, ...] = ()', 'PLAIN: tuple[str, ...] = ("block1/down",)'))
    monkeypatch.delitem(sys.modules, "model", raising=False)
    code, out, err = run_cli("run", "cases", "--goldens", "goldens", "--profile", "cublas", "--json", "r.json", cwd=work)
    assert code == 1, out + err
    [head] = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert re.search(r"fp8first_train  FP8 14/20 gemms, \d+ % of FLOPs", head), head
    assert "estimated -" not in head and "estimated faster" in out and "price_at" in out  # no saving headlined
    for pass_ in ("forward", "backward-input", "backward-weight"):
        assert f"Model/block1/down {pass_}: FP8 -> bf16 (cuBLAS bf16)" in out, out
    res = results.load(work / "r.json")
    [o] = res.outcomes
    assert "Model/block1/down" in o.verdict.regressions[0].why
    summary = job_summary(merge([str(work / "r.json")]))
    assert "FP8 14/20" in summary and "Model/block1/down" in summary, summary
    report = build_model([res])
    [item] = first_bad_items(report)
    title = issue_title(item, report)
    assert "Model/block1/down" in title and "FP8 14/20" in title and "[XLA:GPU]" not in title, title


@pytest.mark.slow
def test_no_fp8_on_a100_and_the_family_and_fix_on_mi300x(tmp_path, monkeypatch):
    """`check --target h100,a100,mi300x` of the model: the FP8 answer per target, side by side, with the reason."""
    work = _example(tmp_path, monkeypatch)
    proc = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "check", "model:train_step", "--args",
                           "model:train_args", "--target", "h100,a100,mi300x", "--json", "c.json"],
                          cwd=work, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(work)})
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    lines = out.splitlines()
    # no golden, no --expect: nothing was judged, and the first word says so (issue 55), not PASS
    assert lines[0].startswith("COMPILED    h100/cublas") and "FP8 17/20" in lines[0], lines[0]
    assert "nothing to judge against" in out
    assert any(line.strip().startswith("layer ") for line in lines[:40])  # the layer table within the first 40 lines
    a100 = next(i for i, line in enumerate(lines) if line.startswith("COMPILED    a100/cublas"))
    assert "FP8 0/20" in lines[a100] and "warning: no FP8:" in lines[a100 + 1] and "no FP8 tensor cores" in lines[a100 + 1]
    mi = next(i for i, line in enumerate(lines) if " mi300x/hipblaslt" in line and line.startswith("COMPILED"))
    assert "OCP FP8" in lines[mi + 1] and "NANOOFp8DotGeneralOp" in lines[mi + 1], lines[mi + 1]
    across = lines[lines.index("FP8 across targets:"):]
    assert len([line for line in across if "no FP8:" in line]) == 2, across
    json.loads((work / "c.json").read_text())


@pytest.mark.browser
@pytest.mark.slow
def test_the_report_of_a_passing_model_shows_its_layers_and_no_absent_wall(tmp_path, run_cli, monkeypatch,
                                                                           browser):  # noqa: F811 (the fixture)
    """The HTML report of the blessed model (PASS), opened in the real headless Chromium: the expected-vs-found
    table is the contract's layer x pass rows (nothing `(absent)`), the grid cell carries the FP8 answer, and the
    file is named after the results JSON."""
    work = _example(tmp_path, monkeypatch)
    code, out, err = run_cli("bless", "cases", "--goldens", "goldens", "--profile", "cublas", cwd=work)
    assert code == 0, out + err
    code, out, err = run_cli("run", "cases", "--goldens", "goldens", "--profile", "cublas", "--json", "model.json", "-v",
                             cwd=work)  # -v: the plain PASS line with its FP8 answer
    assert code == 0 and "PASS" in out and "FP8 17/20" in out, out + err
    page = work / "model.html"
    assert page.is_file() and not (work / "report.html").exists()
    assert "(absent)" not in page.read_text() and "Open a new openxla/xla issue" not in out
    w = Watched(browser, page.as_uri())
    try:
        cell = w.page.locator("#grid td.cell a").first
        assert "FP8 17/20" in cell.inner_text()  # the cell carries the FP8 answer, not the kernel count
        cell.click()
        w.page.wait_for_selector("#sig-table")
        heading = w.page.locator("#detail h2").bounding_box()
        bar = w.page.locator("#filters").bounding_box()
        assert heading is not None and bar is not None and heading["y"] >= bar["y"] + bar["height"] - 1  # not under the bar
        table = w.page.locator("#sig-table").inner_text()
        assert "(absent)" not in table
        assert "Model/block1/down/Fp8DotGeneralOp_0 forward" in table and "cuBLASLt FP8 f8e4m3fn x f8e4m3fn" in table
        assert "FP8 share of matmul FLOPs" in table
        w.clean()
    finally:
        w.close()


@pytest.mark.slow
def test_a_report_cell_marks_no_fp8_by_design_without_a_warning(run_cli, tmp_path):
    """A block-scaled case on h100: the golden states no FP8 gemm, so the cell keeps the note in its title but
    shows no ⚠ (the terminal says "by design", not "warning")."""
    code, out, err = run_cli("run", REPO / "cases", "-k", "bs_sm_nvfp4_global", "--target", "h100", "--profile",
                             "cublas", "--json", tmp_path / "r.json", cwd=REPO)
    assert code == 0, out + err
    assert "1 PASS on h100/cublas; 1 of them no FP8 by design" in out and "warning:" not in out, out  # a plain PASS: counted
    html = (tmp_path / "r.html").read_text()
    assert 'class="nofp8"' not in html
    assert "no FP8 here, by design" in html
