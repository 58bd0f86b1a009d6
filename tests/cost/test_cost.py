"""The cost model (harness/fp8_check/cost/_model.py) on real compiled programs.

The LLM-shaped fixtures under tests/fixtures/hlo/llm/ were compiled deviceless for H100 by the real
CUDA plugin of each JAX version (tests/fixtures/hlo/record.py; see llm/cases.yaml).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path

import pytest

from fp8_check.cost import _model as cost, _table as cost_table
from fp8_check.cost._model import CostDelta, Estimate
from fp8_check.platforms import NVIDIA
from fp8_check.run import _results as results
from fp8_check.signature import _extract as signature
from fp8_check.targets import load_target, target_names
from fp8_check.verdict._classify import NEUTRAL, REGRESSION, Verdict, classify

from ..conftest import REPO, write_cases

LLM = Path(__file__).parents[1] / "fixtures" / "hlo" / "llm"
H100 = cost.hardware("h100")


def hlo(version: str, case: str, profile: str) -> str:
    return (LLM / f"jax-{version}" / f"{case}.h100.{profile}.txt").read_text()


def priced(version: str, case: str, profile: str) -> tuple[signature.Signature, Estimate]:
    text = hlo(version, case, profile)
    return signature.extract(text), cost.estimate(text, H100)


# ------------------------------------------------------------------ the done-when lines


def test_the_17887_class_split_at_an_llm_shape_costs_two_launches():
    # jax 0.6.2 -> 0.7.0, bf16 dequant with bf16 scales, m=4096, k=4096, n=14336: the three scalar scale
    # conversions, one multi-output kernel on 0.6.2, become three kernels on 0.7.0 (docs/verdicts.md)
    sig_b, before = priced("0.6.2", "bf16_dequant_llm", "cublas")
    sig_a, after = priced("0.7.0", "bf16_dequant_llm", "cublas")
    assert (sig_b.kernels, sig_a.kernels) == (3, 5)
    verdict = classify(sig_b, sig_a)
    assert verdict.cls == REGRESSION
    delta = cost.between(before, after)
    assert delta.delta_us > 0 and delta.pct > 0
    # two more launches of scalar kernels: the launch overhead twice (their bytes are 6 each)
    assert delta.delta_us == pytest.approx(2 * cost_table.LAUNCH_US, abs=1e-3)
    # the gemm itself (481 GFLOP at the FP8 peak) dominates: a small share of the whole
    assert 0.5 < delta.pct < 3
    assert delta.text() == f"estimated +4.0 µs (+{delta.pct:.1f} %) per call on H100 SXM at these shapes"


def test_the_golden_baseline_agrees_with_the_compiled_one_for_the_split():
    # judged against a golden stating 0.6.2's signature, the 0.7.0 program costs what the two compiled programs say
    sig_b, before = priced("0.6.2", "bf16_dequant_llm", "cublas")
    sig_a, after = priced("0.7.0", "bf16_dequant_llm", "cublas")
    from_golden = cost.against_expected(sig_b.to_dict(), sig_a, after, H100)
    assert from_golden.basis == "golden"
    assert from_golden.delta_us == pytest.approx(cost.between(before, after).delta_us, abs=1e-3)


def test_a_neutral_rename_costs_nothing():
    # jax 0.7.0 -> 0.7.1 under triton: __triton_gemm -> __triton_nested_gemm_fusion, same kernels
    sig_b, before = priced("0.7.0", "bf16_dequant_llm", "triton")
    sig_a, after = priced("0.7.1", "bf16_dequant_llm", "triton")
    assert [g.target for g in sig_b.gemms] == ["__triton_gemm"]
    assert [g.target for g in sig_a.gemms] == ["__triton_nested_gemm_fusion"]
    assert classify(sig_b, sig_a).cls == NEUTRAL
    assert cost.between(before, after).delta_us == 0.0
    assert cost.against_expected(sig_b.to_dict(), sig_a, after, H100).delta_us == 0.0


def test_a_plain_fp8_gemm_at_8192_cubed_is_within_1_5x_of_the_published_peak():
    # the arithmetic: 2 * 8192^3 FLOPs / H100 SXM dense FP8 peak (3,958 TFLOPS with sparsity / 2 = 1,979 TFLOPS)
    flops = 2 * 8192**3
    assert flops == 1_099_511_627_776
    arithmetic_us = flops / 1979e12 * 1e6
    assert arithmetic_us == pytest.approx(555.6, abs=0.1)
    sig, est = priced("0.12.0.1", "plain_8192", "cublas")
    assert sig.kernels == 1 and sig.gemms[0].target == "__cublas$lt$matmul$f8"
    [gemm] = est.kernels
    assert gemm.flops == flops and gemm.gemm == (1, 8192, 8192, 8192) and gemm.bound == "compute"
    assert arithmetic_us / 1.5 <= est.total_us <= arithmetic_us * 1.5
    assert est.total_us == pytest.approx(arithmetic_us + cost_table.LAUNCH_US, rel=1e-9)


# ------------------------------------------------------------------ the model's parts


@pytest.mark.parametrize("name", [n for n in target_names() if load_target(n).platform is NVIDIA])
def test_every_shipped_target_is_priced_from_its_spec_and_the_datasheet_table(name):
    hw = cost.hardware(name)
    assert hw.notes == ()  # a shipped target has its published peaks
    part = hw.part
    # the spec's HBM bandwidth is the datasheet's, within 1 %
    assert hw.hbm == pytest.approx(part.hbm, rel=0.01)
    # the spec's CUDA-core FP32 rate (cores x fpus x 2 x clock) is the datasheet's FP32 figure, within 2 %
    datasheet_fp32 = {"H100 SXM": 67e12, "H200 SXM": 67e12, "B200": 75e12, "A100 SXM 80GB": 19.5e12}[part.name]
    assert hw.fp32 == pytest.approx(datasheet_fp32, rel=0.02)
    assert part.source and part.peak["bf16"] > 0


@pytest.mark.parametrize("name,fp8_peak", [("mi300x", 2614.9e12), ("mi350x", 4.6e15)])
def test_an_amd_target_is_priced_with_its_own_datasheet(name, fp8_peak):
    # AMD parts have tables of their own (harness/fp8_check/targets/rates/mi3*.yaml): no stand-in, no guess by
    # compute capability (gfx942's "9.4" is no sm_90); HBM from the target spec as for NVIDIA
    hw = cost.hardware(name)
    assert (hw.name, hw.notes) == (name.upper(), ())
    assert hw.peak_for("fp8") == fp8_peak
    assert hw.hbm == float(re.search(r"memory_bandwidth: (\d+)", load_target(name).config_text).group(1))


def test_a_class_the_part_lacks_is_priced_at_the_next_wider_one():
    a100, b200 = cost.hardware("a100"), cost.hardware("b200")
    assert a100.peak_for("fp8") == a100.peak["bf16"] == 312e12  # no FP8 tensor cores on A100
    assert H100.peak_for("fp4") == H100.peak["fp8"]
    assert b200.peak_for("fp4") == 9e15
    assert H100.peak_for("fp32") == H100.fp32


def test_an_unknown_part_is_priced_by_compute_capability_and_says_so(tmp_path):
    spec = (REPO / "harness" / "fp8_check" / "targets" / "h100.txtpb").read_text().replace("NVIDIA H100 80GB HBM3", "Some sm_90 GPU")
    spec = spec.replace("fp8-check target spec: NVIDIA H100 SXM 80GB", "fp8-check target spec: custom")
    path = tmp_path / "custom.txtpb"
    path.write_text(spec)
    hw = cost.hardware(load_target(str(path)))
    assert hw.name == "H100 SXM" and "no published peaks for 'Some sm_90 GPU'" in hw.notes[0]


def test_gemm_dims_follow_the_dimension_numbers():
    # batched: lhs [b, m, k], rhs [b, n, k] contracted on the last dims
    dims = {"lhs_contracting": [2], "rhs_contracting": [2], "lhs_batch": [0], "rhs_batch": [0]}
    assert cost.gemm_dims(("bf16[4,64,32]{2,1,0}", "bf16[4,16,32]{2,1,0}"), dims) == (4, 64, 16, 32)
    assert cost.gemm_dims(("f8e4m3fn[64,32]", "f8e4m3fn[32,16]"), {}) == (1, 64, 16, 32)


def test_a_wider_gemm_costs_more_and_the_golden_baseline_reprices_it():
    # the same 8192^3 gemm on bf16 operands runs at half the FP8 rate
    label = "gemm __cublas$lt$matmul$f8"
    fp8 = cost.price_gemm(1, 8192, 8192, 8192, "f8e4m3fn", "f8e4m3fn", "f32", H100, label=label)
    bf16 = cost.price_gemm(1, 8192, 8192, 8192, "bf16", "bf16", "f32", H100, label=label)
    assert bf16.us - H100.launch_us == pytest.approx(2 * (fp8.us - H100.launch_us))
    # a golden that expects FP8 operands where the program upcast them to bf16: the change costs the difference
    sig, est = priced("0.12.0.1", "plain_8192", "cublas")
    upcast = signature.Signature.from_dict(sig.to_dict())
    upcast.gemms[0].operand_dtypes = ["bf16", "bf16"]
    est_upcast = Estimate(est.hardware, (bf16,))
    delta = cost.against_expected(sig.to_dict(), upcast, est_upcast, H100)
    assert delta.before_us == pytest.approx(fp8.us) and delta.delta_us == pytest.approx(bf16.us - fp8.us)


def test_collectives_move_ring_bytes_over_the_link():
    size, n = 1 << 30, 8
    assert cost.collective_bytes("all-reduce", size, n) == 2 * 7 / 8 * size
    assert cost.collective_bytes("all-gather-start", size, n) == 7 / 8 * size
    assert cost.collective_bytes("reduce-scatter", size, n) == 7 / 8 * size
    assert cost.collective_bytes("collective-permute", size, 2) == size
    assert cost.collective_bytes("all-reduce", size, 1) == 0
    # 1 GiB all-reduced over 8 H100s: 1.75 GiB per GPU at 450 GB/s one way
    assert cost.collective_us("all-reduce", size, n, H100.link) == pytest.approx(1.75 * 2**30 / 450e9 * 1e6)
    assert cost.group_size("replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%add") == 4
    assert cost.group_size("replica_groups=[2,4]<=[8], to_apply=%add") == 4


def test_the_cost_survives_the_results_json_and_old_files_still_load(tmp_path):
    sig_b, before = priced("0.6.2", "bf16_dequant_llm", "cublas")
    sig_a, after = priced("0.7.0", "bf16_dequant_llm", "cublas")
    v = classify(sig_b.to_dict(), sig_a)
    v = Verdict(v.cls, v.lines, cost.against_expected(sig_b.to_dict(), sig_a, after, H100))
    back = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
    assert back.cost == CostDelta.from_dict(v.cost.to_dict()) and back.cost.delta_us == pytest.approx(4.0, abs=1e-3)
    assert Estimate.from_dict(json.loads(json.dumps(after.to_dict()))).total_us == pytest.approx(after.total_us, abs=0.01)
    old = results.load(sorted((REPO / "tests" / "fixtures" / "results").glob("jax-*.json"))[0])
    assert all(o.estimate is None and (o.verdict is None or o.verdict.cost is None) for o in old.outcomes)


def test_price_at_is_validated_with_one_line_naming_file_case_and_field(tmp_path):
    from fp8_check.cases._load import CaseError, load

    ok = write_cases(tmp_path / "ok.yaml", "cases:\n  - id: c\n    price_at: {m: 4096, n: 14336, k: 4096}\n")
    assert load([ok])[0].spec.price_at.n == 14336
    for body, field in (("price_at: {m: 0, n: 1, k: 1}", "price_at.m"), ("price_at: {m: 1, n: 1}", "price_at.k"),
                        ("price_at: {m: 1, n: 1, k: 1, q: 2}", "price_at.q"), ("price_at: 4096", "price_at")):
        bad = write_cases(tmp_path / "bad.yaml", f"cases:\n  - id: c\n    {body}\n")
        with pytest.raises(CaseError) as e:
            load([bad])
        text = str(e.value)
        assert "\n" not in text and "bad.yaml:" in text and "case 'c'" in text and f"field '{field}'" in text
    py = write_cases(tmp_path / "py.yaml", "cases:\n  - id: p\n    kind: python\n    callable: m:f\n"
                     "    args: [{name: a, shape: [2], dtype: float32}]\n    price_at: {m: 1, n: 1, k: 1}\n")
    with pytest.raises(CaseError, match="price_at"):
        load([py])


def test_launch_overhead_and_every_peak_have_a_source():
    assert "blog" in cost_table.LAUNCH_SOURCE.lower() or "NVIDIA" in cost_table.LAUNCH_SOURCE
    for part in cost_table.PARTS:
        assert "datasheet" in part.source
        assert all(c in cost_table.CLASS_ORDER for c in part.peak)
    assert math.isclose(cost_table.PARTS[0].peak["fp8"], 3958e12 / 2)


# ------------------------------------------------------------------ through the CLI


@pytest.mark.slow
def test_a_fail_classed_regression_shows_its_cost_on_the_terminal_and_in_the_results_json(workspace, run_cli):
    # seed_relu_f32 without its clamp (docs/verdicts.md): the FP8 gemm writes f32 and a separate kernel
    # requantizes; judged against the seed golden, priced at an LLM shape (price_at)
    m, n, k = 4096, 14336, 4096
    (workspace / "cases" / "seed.yaml").write_text(f"""cases:
  - id: seed_relu_f32
    description: the seed case without its clamp
    dequant: float32
    input_scales: both
    output_scale: divide
    out_dtype: float8_e4m3fn
    epilogue: relu
    price_at: {{m: {m}, n: {n}, k: {k}}}
""")
    code, out, err = run_cli("run", "--mode", "deviceless", "--profile", "cublas", "--json", workspace / "r.json",
                             "--fail-on", "regression", cwd=workspace)
    assert code == 1, out + err
    # the arithmetic: the new requantization kernel reads the f32 output (4 B) and writes E4M3 (1 B) per element,
    # memory-bound at the spec's 3.35232 TB/s, plus a launch; the golden's scalar divide kernel (its shapes unknown)
    # counts as a bare launch, so the baseline is a lower bound and the change is stated "at most"; the gemm is
    # compute-bound either way (f8 or f32 output)
    hbm, launch = 3352320e6, cost_table.LAUNCH_US
    requant = (5 * m * n + 4) / hbm * 1e6 + launch
    delta = requant - launch
    baseline = (2 * m * n * k / 1979e12 * 1e6 + launch) + (2 * k * n / hbm * 1e6 + launch) + launch
    pct = delta / baseline * 100
    line = next(x for x in out.splitlines() if x.startswith("FAIL"))
    assert line.endswith(f"[regression]  estimated at most +{delta:.1f} µs (+{pct:.1f} %)"), line
    assert f"cost: estimated at most +{delta:.1f} µs (+{pct:.1f} %) per call on H100 SXM at m={m}, n={n}, k={k}" in out
    doc = json.loads((workspace / "r.json").read_text())
    [r] = [r for r in doc["results"] if r["case"] == "seed_relu_f32"]
    c = r["verdict"]["cost"]
    assert r["verdict"]["class"] == REGRESSION and c["basis"] == "golden" and c["hardware"] == "H100 SXM"
    assert c["delta_us"] == pytest.approx(delta, abs=0.01) and c["delta_pct"] == pytest.approx(pct, abs=0.01)
    assert c["bound"] == "at most" and c["unknown_kernels"] == 1
    assert c["before_us"] == pytest.approx(baseline, abs=0.01)
    assert r["estimate"]["us"] == pytest.approx(c["after_us"], abs=0.01) and r["estimate"]["shape"] == f"m={m}, n={n}, k={k}"
    # the HTML report (sortable est. column) and the issue body carry it too
    page = (workspace / "r.html").read_text()
    assert f'data-cost="{round(delta, 3)}">+{delta:.1f}<' in page and 'id="sort-cost"' in page
    code, md, _ = run_cli("report", workspace / "r.json", "--markdown", "seed_relu_f32", cwd=workspace)
    assert code == 0 and f"Cost: estimated at most +{delta:.1f} µs (+{pct:.1f} %) per call on H100 SXM at m={m}, n={n}, k={k}" in md
    # the policy: a cost threshold above this regression's share passes, one below it fails
    for threshold, expected in ((f"cost:{pct + 1:.0f}%", 0), (f"cost:{pct - 1:.0f}%", 1), (f"cost:{delta - 1:.0f}us", 1),
                                (f"cost:{delta + 1:.0f}us", 0)):
        code, out, err = run_cli("run", "--mode", "deviceless", "--profile", "cublas", "--json", workspace / "r2.json",
                                 "--fail-on", threshold, cwd=workspace)
        assert code == expected, (threshold, out + err)


# ------------------------------------------------------------------ matrix and policy


def _entry(version: str, profile: str, code: str = "PASS", verdict: Verdict | None = None):
    from fp8_check.matrix._document import VersionEntry
    from fp8_check.verdict._outcome import Outcome, code as outcome_code

    sig, est = priced(version, "bf16_dequant_llm", profile)
    o = Outcome("bf16_dequant_llm", "h100", profile, "deviceless", version, outcome_code(code), signature=sig,
                estimate=est, verdict=verdict)
    return VersionEntry(version, outcomes=[o])


def test_matrix_changes_carry_their_cost_and_the_grid_sorts_by_it(tmp_path):
    import io

    from fp8_check.matrix import _document as md
    from fp8_check.matrix._view import print_report

    # triton runs first, so the grid's cost order (cublas first) is not the run order
    m = md.Matrix([_entry("0.6.2", "triton"), _entry("0.7.0", "triton"), _entry("0.7.1", "triton"),
                   _entry("0.6.2", "cublas"), _entry("0.7.0", "cublas")])
    m.versions = [md.VersionEntry(v, outcomes=[o for e in m.versions if e.jax == v for o in e.outcomes])
                  for v in ("0.6.2", "0.7.0", "0.7.1")]
    by = {(c.profile, c.after): c for c in m.changes()}
    assert by[("cublas", "0.7.0")].verdict.cost.delta_us == pytest.approx(4.0, abs=1e-3)
    assert by[("triton", "0.7.1")].cls == NEUTRAL and by[("triton", "0.7.1")].verdict.cost.delta_us == 0.0
    doc = md.to_json(m)
    assert {(c["profile"], c["to"]): c["cost"]["delta_us"] for c in doc["changes"]} == {
        ("cublas", "0.7.0"): pytest.approx(4.0, abs=1e-3), ("triton", "0.7.1"): 0.0}
    back = md.from_json(json.loads(json.dumps(doc)))
    assert [c.verdict.cost.delta_us for c in back.changes()] == [c.verdict.cost.delta_us for c in m.changes()]
    out = io.StringIO()
    # every result here PASSes: the changes are blessed history, listed (with their cost) on request
    print_report(m, out, sort="cost", history=True)
    grid = [x for x in out.getvalue().splitlines() if "│bf16_dequant_llm" in x]
    assert "h100/cublas" in grid[0] and grid[0].rstrip("│ ").endswith("+4.0 µs")  # the costliest row first
    assert "h100/triton" in grid[1] and grid[1].rstrip("│ ").endswith("+0.0 µs")
    assert "estimated +4.0 µs" in out.getvalue()


def test_fail_on_cost_fails_only_regressions_at_or_over_the_threshold():
    from fp8_check.run import _runner as runner
    from fp8_check.verdict._outcome import Outcome, code as outcome_code

    def fail(delta_us: float, before: float = 100.0, cls: str = REGRESSION, priced: bool = True):
        v = Verdict(cls, (), CostDelta(before, before + delta_us, "H100 SXM", "golden") if priced else None)
        return Outcome("c", "h100", "cublas", "deviceless", "0.12.0.1", outcome_code("FAIL"), verdict=v)

    assert runner.fails(fail(1.0), "cost:1%") and not runner.fails(fail(0.99), "cost:1%")
    assert runner.fails(fail(40), "cost:40us") and not runner.fails(fail(39.9), "cost:40us")
    assert runner.fails(fail(0, priced=False), "cost:1%")  # a regression that could not be priced still fails
    assert not runner.fails(fail(50, cls="improvement"), "cost:1%")
    assert runner.fails(Outcome("c", "h100", "cublas", "deviceless", "0.12.0.1", outcome_code("UNRESOLVED")), "cost:5%")
    assert not runner.fails(Outcome("c", "h100", "cublas", "deviceless", "0.12.0.1", outcome_code("NEW")), "cost:1%")
    parse = runner.fail_on_type(("any", "regression"))
    assert parse("cost:1%") == "cost:1%" and parse("cost:2.5 us") == "cost:2.5 us" and parse("regression") == "regression"
    for bad in ("cost:1", "cost:%", "costs:1%", "never"):
        with pytest.raises(Exception, match="allowed|expected a percentage"):
            parse(bad)


def test_run_rejects_a_malformed_cost_threshold_with_one_line(run_cli, workspace, capsys):
    with pytest.raises(SystemExit) as e:
        run_cli("run", "--fail-on", "cost:lots", cwd=workspace)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --fail-on: cost threshold 'lots'" in err.splitlines()[-1]


# ------------------------------------------------------------------ calibration


@pytest.mark.slow
def test_calibrate_refuses_without_a_gpu_and_times_the_cpu_backend(run_cli, capsys):
    from fp8_check.targets import gpu_present

    if not gpu_present():
        code, out, err = run_cli("calibrate", "-k", "seed_plain_f32")
        assert code == 3 and "needs an NVIDIA GPU" in err
    # the machinery on JAX's CPU backend (the numbers calibrate nothing: the estimate is for H100)
    code, out, err = run_cli("calibrate", "-k", "seed_plain_f32", "--backend", "cpu", "--repeats", "3")
    assert code == 0, out + err
    row = next(x for x in out.splitlines() if x.startswith("seed_plain_f32"))
    _, profile, kernels, est, measured, ratio = row.split()
    assert profile == "cublas" and int(kernels) >= 1 and float(est) > 0 and float(measured) > 0
    assert float(ratio) == pytest.approx(float(measured) / float(est), rel=0.01)


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("fp8_check.targets", fromlist=["x"]).gpu_present(),
                    reason="calibration times compiled cases on an NVIDIA GPU; this machine has none")
def test_the_8192_gemm_estimate_is_near_the_measured_time_on_a_gpu(run_cli):
    code, out, err = run_cli("calibrate", "-k", "layout_llm_8192", "--profile", "cublas", "--repeats", "20")
    assert code == 0, out + err
    row = next(x for x in out.splitlines() if x.startswith("layout_llm_8192"))
    assert 0.5 <= float(row.split()[-1]) <= 2.0, row  # measured / estimated within 2x: else fix the model


# ------------------------------------------------------------------ the HTML grid, in a real browser


@pytest.mark.browser
@pytest.mark.slow
def test_the_html_grid_sorts_by_estimated_cost(tmp_path):
    from fp8_check.report import _page as report
    from fp8_check.run._results import Results

    from ..report.test_report import CHROMIUM, CHROMIUM_ARGS, Watched

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} not found: apt-get install -y chromium (scripts/test.sh installs it)", pytrace=False)
    from playwright.sync_api import sync_playwright

    runs = []
    for version in ("0.6.2", "0.7.0", "0.7.1"):
        outs = [o for profile in ("triton", "cublas") if (LLM / f"jax-{version}" / f"bf16_dequant_llm.h100.{profile}.txt").exists()
                for o in _entry(version, profile).outcomes]
        unpriced = dataclasses.replace(outs[0], case="unpriced_case", estimate=None)
        runs.append(Results({"jax": version, "mode": "deviceless"}, [unpriced] + outs))
    path = tmp_path / "report.html"
    report.write_report(runs, path)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        w = Watched(b, path.as_uri())
        page = w.page

        def order():
            return page.eval_on_selector_all(
                "#grid tbody tr", "rs => rs.map(r => r.dataset.case + ' ' + r.dataset.profile + ' ' + "
                                  "r.querySelector('td.cost').textContent.trim())")

        as_run = order()
        assert as_run[0].startswith("unpriced_case") and "bf16_dequant_llm triton +0.0" in as_run
        page.click("#sort-cost")
        assert order()[:2] == ["bf16_dequant_llm cublas +4.0", "bf16_dequant_llm triton +0.0"]
        assert order()[-1].startswith("unpriced_case")  # unpriced rows last
        page.click("#sort-cost")
        assert order()[:2] == ["bf16_dequant_llm triton +0.0", "bf16_dequant_llm cublas +4.0"]
        page.click("#sort-cost")
        assert order() == as_run
        w.clean()
        w.close()
        b.close()


def test_a_real_all_reduce_over_8_h100s_is_priced_over_nvlink():
    # tensor-parallel bf16 matmul, k sharded over a 1x8x1 topology (deviceless; collective/record.py)
    text = (LLM / "collective" / "tp8_allreduce.h100.txt").read_text()
    est = cost.estimate(text, H100)
    [ar] = [k for k in est.kernels if k.label == "all-reduce"]
    # the arithmetic: each device holds a 4096 x 4096 f32 partial sum (64 MiB); a ring all-reduce sends
    # 2 * 7/8 of it per device, at 450 GB/s (one direction of H100's 900 GB/s NVLink)
    size = 4096 * 4096 * 4
    assert ar.bound == "link" and ar.us == pytest.approx(2 * 7 / 8 * size / 450e9 * 1e6 + cost_table.LAUNCH_US)
    # and the local gemm: 2 * 4096 * 4096 * 1024 FLOPs at the bf16 peak
    [gemm] = [k for k in est.kernels if k.gemm]
    assert gemm.gemm == (1, 4096, 4096, 1024) and gemm.dtypes[:2] == ("bf16", "bf16")
    assert cost.group_size("replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_1'}, to_apply=%add") == 4


def test_a_cudnn_block_scaled_dot_is_priced_as_its_batched_fp4_gemm():
    # jax 0.12.0.1, b200: scaled_matmul NVFP4 -> __cudnn$blockScaledDot on [1, 128, 256] x [1, 256, 256] (B, M/N, K)
    text = (Path(__file__).parents[1] / "fixtures" / "hlo" / "jax-0.12.0.1" / "block_sm_nvfp4_global.b200.cublas.txt").read_text()
    [dot] = [k for k in cost.estimate(text, cost.hardware("b200")).kernels if k.gemm]
    assert dot.gemm == (1, 128, 256, 256) and dot.dtypes[:2] == ("f4e2m1fn", "f4e2m1fn")
    assert dot.flops == 2 * 128 * 256 * 256


def test_lean_records_keep_the_total_and_still_price_a_change():
    # the matrix stores its per-version outcomes without texts: the estimate keeps only its total there
    from fp8_check.verdict._outcome import Outcome, code as outcome_code

    _, before = priced("0.6.2", "bf16_dequant_llm", "cublas")
    _, after = priced("0.7.0", "bf16_dequant_llm", "cublas")
    lean = [results.outcome_from_json(json.loads(json.dumps(results.outcome_to_json(
        Outcome("c", "h100", "cublas", "deviceless", v, outcome_code("PASS"), estimate=e), with_text=False))))
        for v, e in (("0.6.2", before), ("0.7.0", after))]
    assert [o.estimate.kernels for o in lean] == [(), ()]
    assert cost.between(lean[0].estimate, lean[1].estimate).delta_us == pytest.approx(4.0, abs=1e-3)
    assert Estimate.from_dict({"hardware": "H100 SXM"}) is None and Estimate.from_dict({"us": 1, "kernels": 3}) is None
