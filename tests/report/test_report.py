"""The HTML report and the upstream issue bodies (harness/fp8_check/report/).

Fixtures: tests/fixtures/results/jax-*.json, real `fp8-check run` output for
three JAX versions with a few documented edits (see generate.py there): one
FAIL that broke on the newest version, an XPASS, two UNRESOLVED, a case id made
of markup. The browser tests open the generated page in a real headless
Chromium (/usr/bin/chromium, Debian's package) through Playwright; they fail,
not skip, when it is missing.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from fp8_check.report import _hlo_text as hlo_text, _issue as issue, _model as model, _page as report
from fp8_check.report._markup import plain
from fp8_check.run import _results as results_mod
from fp8_check.verdict._outcome import CODES

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures" / "results"
FILES = sorted(FIX.glob("jax-*.json"))
HLO_FIX = REPO / "tests" / "fixtures" / "hlo"
EVIL = "<script>alert(1)</script>"
FAIL_CASE = "seed_scaled_clamp_bf16"  # PASS on 0.6.1 and 0.8.0, FAIL on 0.12.0.1 (h100/cublas)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def loaded(paths=FILES) -> list[results_mod.Results]:
    """The fixture results files as typed Results, read the way `fp8-check report` reads them."""
    return model.load(paths).results


def fixture_results() -> list[dict]:
    return [r for f in FILES for r in json.loads(f.read_text())["results"]]


def data_island(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert m, "no data island"
    assert "<" not in m.group(1)
    return json.loads(m.group(1))


def text_of(data: dict, ids) -> str | None:
    return None if ids is None else "\n\n".join(data["strings"][i] for i in ids)


def record(data: dict, case: str, jax: str, profile: str = "cublas") -> dict:
    """A result of the data island, with its short texts resolved."""
    [r] = [r for r in data["results"] if r["case"] == case and r["jax"] == jax and r["profile"] == profile]
    S = data["strings"]
    r = {**r, **{k: S[r[k]] for k in ("reason", "description", "file", "results_file", "diff_note")}}
    r["sig_rows"] = [[S[a], S[b], S[c], d] for a, b, c, d in r["sig_rows"]]
    return r


def _cells(html: str) -> list[tuple[str, str]]:
    """The grid's cells of a page: (outcome class, jax version), sorted."""
    return sorted(re.findall(r'<td class="cell o-(\w+)" data-i="\d+" data-outcome="\w+" data-jax="([^"]+)"', html))


# ------------------------------------------------------------------ fixtures are what the tests think they are

def test_fixtures_hold_every_outcome_the_report_must_show():
    rs = fixture_results()
    counts = Counter(r["outcome"] for r in rs)
    assert {"PASS", "FAIL", "XPASS", "UNRESOLVED"} <= set(counts)
    assert {r["jax"] for r in rs} == {"0.6.1", "0.8.0", "0.12.0.1"}
    assert any(r["case"] == EVIL for r in rs)
    by_version = {r["jax"]: r["outcome"] for r in rs if r["case"] == FAIL_CASE and r["profile"] == "cublas"}
    assert by_version == {"0.6.1": "PASS", "0.8.0": "PASS", "0.12.0.1": "FAIL"}


# ------------------------------------------------------------------ normalize_hlo

def test_normalize_strips_preamble_metadata_fingerprints_and_scheduling_names():
    raw = (HLO_FIX / "jax-0.12.0.1" / "scaled.h100.cublas.txt").read_text()
    assert "metadata={" in raw and "FileNames" in raw and "fingerprint" in raw and "scheduling_name" in raw
    norm = hlo_text.normalize_hlo(raw)
    for gone in ("metadata=", "FileNames", "FunctionNames", "FileLocations", "StackFrames", "fingerprint",
                 "scheduling_name", "stack_frame_id", "\n\n\n"):
        assert gone not in norm, gone
    assert 'custom_call_target="__cublas$lt$matmul$f8"' in norm
    assert norm.startswith("HloModule ") and "ENTRY %main.0 (" in norm
    assert hlo_text.normalize_hlo(norm) == norm  # idempotent


def test_normalize_renames_by_order_of_appearance_so_only_structure_differs():
    a = """HloModule m, frontend_attributes={fingerprint_before_lhs="aaa"}

FileNames
1 "x.py"

StackFrames
1 {file_location_id=1 parent_frame_id=1}

%fused_divide.7 (param_0.3: f32[]) -> f32[] {
  %param_0.3 = f32[] parameter(0), metadata={op_name="s" scheduling_name="param_0.3"}
  ROOT %divide.9 = f32[] divide(%param_0.3, %param_0.3), metadata={op_name="a{b}\\"c" source_file="f.py"}
}

ENTRY %main.5 (x.1: f32[]) -> f32[] {
  %x.1 = f32[] parameter(0), metadata={op_name="x"}
  ROOT %loop_divide_fusion.2 = f32[] fusion(%x.1), kind=kLoop, calls=%fused_divide.7, metadata={op_name="y"}
}
"""
    b = (a.replace("fused_divide.7", "fused_divide").replace("param_0.3", "param_0.11").replace("divide.9", "divide.1")
         .replace("main.5", "main.42").replace("x.1", "x.3").replace('"aaa"', '"bbb"').replace('op_name="y"', 'op_name="z"')
         .replace("loop_divide_fusion.2", "loop_divide_fusion"))
    na, nb = hlo_text.normalize_hlo(a), hlo_text.normalize_hlo(b)
    assert na == nb
    assert "%fused_divide.0 (param_0.0: f32[])" in na
    assert "ENTRY %main.0 (x.0: f32[]) -> f32[] {" in na
    assert "calls=%fused_divide.0" in na and "fusion(%x.0)" in na
    assert "frontend_attributes" not in na  # only a fingerprint was in it
    # a structural change survives normalization
    c = b.replace("divide(%param_0.11, %param_0.11)", "multiply(%param_0.11, %param_0.11)")
    assert hlo_text.normalize_hlo(c) != nb
    # names are kept when asked
    assert "%fused_divide.7 (param_0.3: f32[])" in hlo_text.normalize_hlo(a, rename=False)


def test_normalized_diff_between_versions_is_much_smaller_than_the_raw_one():
    import difflib

    old = (HLO_FIX / "jax-0.8.0" / "scaled.h100.cublas.txt").read_text()
    new = (HLO_FIX / "jax-0.12.0.1" / "scaled.h100.cublas.txt").read_text()
    raw = list(difflib.unified_diff(old.splitlines(), new.splitlines(), n=0))
    norm = list(difflib.unified_diff(hlo_text.normalize_hlo(old).splitlines(), hlo_text.normalize_hlo(new).splitlines(), n=0))
    assert len(norm) < len(raw) / 2


def test_entry_excerpt_has_the_entry_instructions_only():
    hlo = (HLO_FIX / "jax-0.12.0.1" / "scaled.h100.cublas.txt").read_text()
    ex = hlo_text.entry_excerpt(hlo)
    assert ex.startswith("ENTRY ") and ex.endswith("}")
    assert "__cublas$lt$matmul$f8" in ex and " parameter(" not in ex and "metadata=" not in ex
    assert not any(line.startswith("%") for line in ex.splitlines())  # no other computation's header or body
    assert ex.count("{\n") == 1


# ------------------------------------------------------------------ page structure and escaping (no browser)

@pytest.fixture(scope="module")
def html() -> str:
    return report.render_html(loaded())


def test_json_island_escapes_markup():
    s = report.json_island({"a": "</script><b>&\u2028"})
    assert "<" not in s and ">" not in s and "&" not in s and "\u2028" not in s
    assert json.loads(s) == {"a": "</script><b>&\u2028"}


def test_page_is_self_contained_and_escapes_case_text(html):
    assert len(re.findall(r"<script\b", html)) == 2  # the data island and the page's own script
    assert EVIL not in html and "<img" not in html and "</textarea></script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)  # nothing loaded from elsewhere
    csp = re.search(r"script-src 'sha256-([^']+)'", html).group(1)
    script = re.search(r"<script>(.*?)</script>", html, re.S).group(1)
    assert base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() == csp
    data = data_island(html)
    assert record(data, EVIL, "0.12.0.1")["case"] == EVIL


def test_hlo_diff_is_against_the_last_good_version(html):
    data = data_island(html)
    r = record(data, FAIL_CASE, "0.12.0.1")
    assert r["baseline"]["jax"] == "0.8.0" and r["baseline"]["outcome"] == "PASS"
    diff = text_of(data, r["diff"])
    assert diff.startswith("--- jax 0.8.0 (PASS): normalized optimized HLO\n+++ jax 0.12.0.1 (FAIL)")
    assert '-  %cublas-gemm.0 = ' in diff and 'custom_call_target="__cublas$lt$matmul"' in diff
    assert "metadata=" not in diff
    differs = {row[0] for row in r["sig_rows"] if row[3]}
    assert {"kernels", "gemms[0].target", "gemms[0].output"} <= differs and "gemms[0].epilogue" not in differs


def test_without_another_version_the_diff_is_of_signatures_and_says_so():
    html = report.render_html(loaded([FIX / "jax-0.12.0.1.json"]))
    data = data_island(html)
    r = record(data, FAIL_CASE, "0.12.0.1")
    assert r["baseline"] is None
    assert "golden stores only the fusion signature, not HLO" in r["diff_note"]
    diff = text_of(data, r["diff"])
    assert "--- golden signature (expected)" in diff and "-- target: __cublas$lt$matmul$f8\n" in diff and "+kernels: 4\n" in diff


def test_one_merged_file_gives_the_same_grid_as_separate_files(tmp_path, html):
    docs = [json.loads(f.read_text()) for f in FILES]
    merged = copy.deepcopy(docs[0])
    merged["results"] = [r for d in docs for r in d["results"]]
    (tmp_path / "merged.json").write_text(json.dumps(merged))
    html2 = report.render_html(loaded([tmp_path / "merged.json"]))
    assert _cells(html2) == _cells(html) and len(_cells(html)) == len(fixture_results())
    # results of the other versions do not borrow the newest version's environment
    data = data_island(html2)
    env = data["envs"][record(data, FAIL_CASE, "0.8.0")["env"]]
    assert env["jax"] == "0.8.0" and "jaxlib_git_hash" not in env


def test_matrix_document_is_read_through_its_results_files(tmp_path):
    matrix = {"schema": "fp8-check/matrix/1", "versions": [
        {"jax": "0.8.0", "status": "ran", "error": "", "results_file": str(FIX / "jax-0.8.0.json"), "results": []},
        {"jax": "0.12.0.1", "status": "ran", "error": "", "results_file": str(FIX / "jax-0.12.0.1.json"), "results": []},
        {"jax": "0.7.0", "status": "install-failed", "error": "no such version\nmore", "results_file": None, "results": []},
    ]}
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    inputs = model.load([tmp_path / "matrix.json"])
    html = report.render_html(inputs.results, notes=inputs.notes)
    data = data_island(html)
    assert {r["jax"] for r in data["results"]} == {"0.8.0", "0.12.0.1"}
    assert text_of(data, record(data, FAIL_CASE, "0.12.0.1")["hlo"])  # the full texts came from the results file
    assert "jax 0.7.0: install-failed: no such version" in html


def test_a_written_matrix_gives_the_grid_of_its_results_files(tmp_path, html):
    """A matrix as `fp8-check matrix` writes it (schema 2, results_file relative to the matrix) next to copies of
    the results files: the report reads each version's full results through it."""
    from fp8_check.matrix import _document as matrix_document

    entries = []
    for f in FILES:
        (tmp_path / "runs").mkdir(exist_ok=True)
        (tmp_path / "runs" / f.name).write_text(f.read_text())
        entries.append(matrix_document.entry_from_results(results_mod.load(tmp_path / "runs" / f.name)))
    matrix_document.write(tmp_path / "matrix.json", matrix_document.Matrix(entries, "deviceless", ["h100"], ["cublas", "triton"]))
    assert json.loads((tmp_path / "matrix.json").read_text())["versions"][0]["results_file"].startswith("runs/")
    inputs = model.load([tmp_path / "matrix.json"])
    html2 = report.render_html(inputs.results, notes=inputs.notes)
    assert _cells(html2) == _cells(html) and inputs.notes == []
    data = data_island(html2)
    assert text_of(data, record(data, FAIL_CASE, "0.12.0.1")["hlo"])  # the full texts came from the results file


def test_the_matrix_command_s_html_is_this_report(tmp_path, html):
    from fp8_check.cli.matrix import write_html  # the command's half

    assert write_html([str(f) for f in FILES], tmp_path / "m.html")
    page = (tmp_path / "m.html").read_text()
    assert _cells(page) == _cells(html)


def test_matrix_version_without_its_results_file_shows_the_light_results(tmp_path):
    full = json.loads((FIX / "jax-0.8.0.json").read_text())
    light = [{k: v for k, v in r.items() if k not in ("source", "yaml", "hlo", "stablehlo")} for r in full["results"]]
    matrix = {"schema": "fp8-check/matrix/1", "versions": [
        {"jax": "0.8.0", "status": "ran", "error": "", "results_file": str(tmp_path / "gone.json"),
         "environment": full["environment"], "results": light}]}
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    inputs = model.load([tmp_path / "matrix.json"])
    assert inputs.notes == []
    data = data_island(report.render_html(inputs.results, notes=inputs.notes))
    assert Counter(r["outcome"] for r in data["results"]) == Counter(r["outcome"] for r in full["results"])
    r = record(data, "seed_plain_bf16", "0.8.0")
    assert r["outcome"] == "UNRESOLVED" and r["hlo"] is None and r["source"] is None
    assert r["results_file"] == str(tmp_path / "matrix.json")


def test_results_store_the_case_function_and_the_run_s_target_spec_once():
    """The repro script is rendered on demand: no result carries aot.py or the target spec."""
    doc = json.loads((FIX / "jax-0.12.0.1.json").read_text())
    assert doc["schema"] == "fp8-check/results/2" and "gpu_device_info" in doc["target_specs"]["h100"]
    for r in doc["results"]:
        assert "def compile_for(" not in r["source"] and "gpu_device_info" not in r["source"], r["case"]


def test_normalize_edits_nested_attributes_with_the_shared_bracket_scanner():
    line = ('  %x = f32[] add(%a, %b), frontend_attributes={_xla_stream="1",fingerprint_after="z{"}, '
            'metadata={op_name="m" nested={k={v=1}} source_file="f(.py"}, backend_config={"k":[1]}')
    norm = hlo_text.normalize_hlo("ENTRY %e {\n" + line + "\n}\n", rename=False)
    assert norm.splitlines()[1] == ('  %x = f32[] add(%a, %b), frontend_attributes={_xla_stream="1"}, '
                                    'backend_config={"k":[1]}')


def _library(copies: int) -> list[results_mod.Results]:
    """The fixture results with every case repeated `copies` times under new ids."""
    big = []
    for res in loaded():
        base = [o for o in res.outcomes if o.case != EVIL]
        # every paragraph of every text unique, as in a library of different cases (the page interns paragraphs)
        outcomes = [dataclasses.replace(o, case=f"{o.case}_{k:03d}", **{
                        t: getattr(o, t).replace("\n\n", f"\n\n# {k}\n") for t in ("hlo", "stablehlo", "source") if getattr(o, t)})
                    for k in range(copies) for o in base]
        big.append(dataclasses.replace(res, outcomes=outcomes))
    return big


def test_a_report_over_budget_leaves_out_passing_texts_and_says_so(monkeypatch):
    big = _library(4)
    full = report.render_html(big)
    assert "results are left out" not in full
    budget = len(full.encode()) * 4 // 5
    monkeypatch.setattr(report, "SIZE_BUDGET", budget)
    html = report.render_html(big)
    assert len(html.encode()) <= budget
    assert "the HLO and StableHLO of passing (PASS/XFAIL/UNSUPPORTED) results are left out" in html
    data = data_island(html)
    fail = record(data, f"{FAIL_CASE}_003", "0.12.0.1")
    assert fail["hlo"] and fail["diff"] and fail["markdown"]  # a non-passing result keeps its texts
    ok = record(data, "seed_plain_f32_003", "0.12.0.1")
    assert ok["hlo"] is None and ok["hlo_omitted"] and ok["source"]


# ------------------------------------------------------------------ the issue body

def test_fail_markdown_names_versions_and_carries_repro_and_hlo_excerpts():
    [md] = issue.markdown_for(loaded(), FAIL_CASE, profile="cublas")
    title = md.splitlines()[0]
    assert title.startswith("# \\[XLA:GPU\\] FP8 ")  # the heading is inert Markdown (report/_markup.py)
    assert title.endswith("no longer fuses into __cublas$lt$matmul$f8 on jax 0.12.0.1 (worked on 0.8.0)")
    # the repro is the standalone script rendered from what the results file stores once (case function per
    # result, target spec and compiler options per run)
    src = json.loads((FIX / "jax-0.12.0.1.json").read_text())
    [r] = [r for r in src["results"] if r["case"] == FAIL_CASE and r["profile"] == "cublas"]
    assert "def matmul_fn" in r["source"] and "compile_for" not in r["source"]
    repro = md.split("```python\n", 1)[1].split("\n```", 1)[0]
    assert repro.startswith("#!/usr/bin/env python3") and 'pip install "jax[cuda12]==0.12.0.1"' in repro
    assert r["source"].rstrip() in repro and "def compile_for(" in repro
    assert src["target_specs"]["h100"].strip().splitlines()[-1] in repro
    assert "COMPILER_OPTIONS = {'xla_gpu_enable_triton_gemm': False}" in repro  # the cublas profile of the run
    [res] = loaded([FIX / "jax-0.12.0.1.json"])
    [o] = [o for o in res.outcomes if o.case == FAIL_CASE and o.profile == "cublas"]
    assert repro == results_mod.repro_for(res, o).rstrip()
    assert "Expected, jax 0.8.0 (PASS):" in md and "Actual, jax 0.12.0.1 (FAIL):" in md
    assert 'custom_call_target="__cublas$lt$matmul$f8"' in md and 'custom_call_target="__cublas$lt$matmul",' in md
    assert "- Fuses as expected: jax 0.6.1, jax 0.8.0" in md and "- Broken: jax 0.12.0.1" in md
    assert "git dc4af684446e65ee98eee8090e1ff6f8211473fb" in md and "metadata=" not in md
    assert len(md.encode()) < 60_000


def test_xpass_and_unresolved_markdown():
    docs = loaded()
    [xp] = issue.markdown_for(docs, "seed_relu_amax_f32", profile="cublas")
    # the heading is inert Markdown (no autolink): read back as plain text, it names the known issue
    assert "https://github.com/openxla/xla/issues/99999 no longer reproduces" in plain(xp.splitlines()[0])
    [un] = issue.markdown_for(docs, "seed_plain_bf16", profile="cublas")
    assert "fails to compile for h100 on jax 0.8.0" in un.splitlines()[0]
    assert "### Error" in un and "No such compile option" in un
    with pytest.raises(model.ReportError, match="no FAIL/XPASS/UNRESOLVED"):
        issue.markdown_for(docs, "seed_plain_f32", profile="cublas")
    with pytest.raises(model.ReportError, match="no result for case"):
        issue.markdown_for(docs, "nope")


def test_cli_report_and_markdown(run_cli, tmp_path):
    out = tmp_path / "r" / "x.html"
    code, stdout, _ = run_cli("report", *FILES, "-o", out)
    assert code == 0 and out.exists() and "report:" in stdout
    code, stdout, _ = run_cli("report", "--markdown", FAIL_CASE, "--profile", "cublas", *FILES)
    assert code == 0 and stdout == issue.markdown_for(loaded(), FAIL_CASE, profile="cublas")[0]
    code, stdout, _ = run_cli("report", "--markdown", FAIL_CASE, *FILES)  # every target/profile, newest failure first
    bodies = stdout.split("\n\n---\n\n")
    assert code == 0 and len(bodies) == 2 and "on jax 0.12.0.1" in bodies[0].splitlines()[0]
    (tmp_path / "bad.json").write_text('{"schema": "something/else"}')
    code, _, err = run_cli("report", tmp_path / "bad.json", "-o", out)
    assert code == 2 and "not an fp8-check results file" in err


@pytest.mark.slow  # compiles a case for real through the CLI
def test_run_writes_the_html_report_next_to_the_json(workspace, run_cli):
    code, out, _ = run_cli("run", "--mode", "deviceless", "-k", "seed_plain_f32", "--profile", "cublas",
                           "--json", workspace / "out" / "r.json", cwd=workspace)
    assert code == 0, out
    page = (workspace / "out" / "r.html").read_text()
    assert "seed_plain_f32" in page and data_island(page)["results"][0]["outcome"] == "PASS"
    code, out, _ = run_cli("run", "--mode", "deviceless", "-k", "seed_plain_f32", "--profile", "cublas",
                           "--json", workspace / "r.json", "--html", workspace / "custom.html", cwd=workspace)
    assert code == 0 and (workspace / "custom.html").exists() and "report: " in out


# ------------------------------------------------------------------ in a real browser

@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} not found: the report's browser tests need Debian's chromium package "
                    "(apt-get install -y chromium; scripts/test.sh installs it)", pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def page_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("report") / "report.html"
    report.write_report(loaded(), path)
    return path


class Watched:
    """A page with every console error, page error, dialog and non-file request recorded."""

    def __init__(self, browser, url: str, clipboard: bool = False):
        self.ctx = browser.new_context(viewport={"width": 1300, "height": 900})
        if clipboard:
            self.ctx.grant_permissions(["clipboard-read", "clipboard-write"])
        self.errors, self.requests, self.dialogs = [], [], []
        self.ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                       else (self.requests.append(route.request.url), route.abort()))
        self.page = self.ctx.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: None if r.url.startswith("file://") else self.requests.append(r.url))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']", timeout=10_000)

    def clean(self):
        assert self.errors == [] and self.requests == [] and self.dialogs == []

    def close(self):
        self.ctx.close()


@pytest.fixture
def watched(browser, page_file):
    w = Watched(browser, page_file.as_uri(), clipboard=True)
    yield w
    w.close()


@pytest.mark.browser
@pytest.mark.slow
def test_page_loads_without_errors_or_network(watched):
    page = watched.page
    assert page.title() == "fp8-check report"
    assert page.locator("#grid tbody tr").count() == len({(r["case"], r["target"], r["profile"]) for r in fixture_results()})
    watched.clean()


@pytest.mark.browser
@pytest.mark.slow
def test_grid_counts_match_the_fixture(watched):
    page = watched.page
    expected = Counter(r["outcome"] for r in fixture_results())
    for code in (c.name for c in CODES):
        assert page.locator(f"#grid td.cell[data-outcome='{code}']").count() == expected.get(code, 0), code
        chip = page.locator(f".chip[data-outcome='{code}']")
        assert chip.locator(".n").inner_text() == str(expected.get(code, 0)), code
    headers = page.locator("#grid thead th.ver").all_inner_texts()
    assert headers == ["jax 0.6.1", "jax 0.8.0", "jax 0.12.0.1"]
    # the FAIL sits in the right row and column
    row = page.locator(f"#grid tr[data-case='{FAIL_CASE}'][data-profile='cublas']")
    assert [c.get_attribute("data-outcome") for c in row.locator("td.cell").all()] == ["PASS", "PASS", "FAIL"]
    watched.clean()


@pytest.mark.browser
@pytest.mark.slow
def test_clicking_a_failing_cell_shows_its_detail(watched):
    page = watched.page
    assert page.locator("#detail").is_hidden()
    page.click(f"#grid tr[data-case='{FAIL_CASE}'][data-profile='cublas'] td.cell[data-jax='0.12.0.1'] a")
    detail = page.locator("#detail")
    detail.wait_for(state="visible")
    assert detail.locator("h2 code.case-id").inner_text() == FAIL_CASE
    assert "h100/cublas · deviceless · jax 0.12.0.1" in detail.locator("h2").inner_text()
    differs = detail.locator("#sig-table tr.differs td:first-child").all_inner_texts()
    assert "gemms[0].target" in differs and "kernels" in differs
    diff = detail.locator("pre.diff")
    assert "jax 0.8.0 (PASS)" in diff.inner_text() and diff.locator("span.del").count() > 0
    assert diff.locator("span.add").count() > 0
    assert "dc4af684446e65ee98eee8090e1ff6f8211473fb" in detail.locator("dl.env a").get_attribute("href")
    assert "def matmul_fn_with_scale" in detail.locator("pre.repro").inner_text()
    expected_md = issue.markdown_for(loaded(), FAIL_CASE, profile="cublas")[0]
    assert detail.locator("#issue-md").input_value() == expected_md
    assert page.url.endswith("#r" + detail.get_attribute("data-i"))
    watched.clean()


@pytest.mark.browser
@pytest.mark.slow
def test_copy_button_puts_the_markdown_on_the_clipboard(watched):
    page = watched.page
    page.click(f"#grid tr[data-case='{FAIL_CASE}'][data-profile='cublas'] td.cell[data-jax='0.12.0.1'] a")
    page.click("#copy-md")
    # wait for the copy to finish; `page.wait_for_function` with a string would need 'unsafe-eval', which the
    # page's Content-Security-Policy rightly forbids, so the attribute is polled through Playwright's selector engine
    page.wait_for_selector("#copy-md[data-copied]", state="attached", timeout=10_000)
    assert page.get_attribute("#copy-md", "data-copied") == "clipboard"
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied == issue.markdown_for(loaded(), FAIL_CASE, profile="cublas")[0]
    assert page.locator("#copy-md + .copied").inner_text() == "Copied"
    watched.clean()


@pytest.mark.browser
@pytest.mark.slow
def test_markup_in_a_case_renders_as_text(watched):
    page = watched.page
    assert page.locator("#grid th.case", has_text=EVIL).count() == 1
    page.click("#grid td.cell[data-outcome='UNRESOLVED'][data-jax='0.12.0.1'] a")
    page.locator("#detail").wait_for(state="visible")
    assert page.locator("#detail h2 code.case-id").inner_text() == EVIL
    assert page.locator("#detail p.description").inner_text() == '<img src=x onerror="alert(2)"> & </textarea></script><b>bold?</b>'
    assert "</script><script>alert(3)</script>" in page.locator("#detail pre.reason").inner_text()
    assert page.locator("img").count() == 0 and page.locator("#detail b").count() == 0
    assert page.evaluate("document.scripts.length") == 2
    assert page.locator("#issue-md").input_value().startswith("# \\[XLA:GPU\\]")
    watched.clean()  # no alert() dialog ran


@pytest.mark.browser
@pytest.mark.slow
def test_filters_by_outcome_target_profile_and_text(watched):
    page = watched.page
    def visible() -> list[str]:
        return [r.get_attribute("data-case") + "/" + r.get_attribute("data-profile")
                for r in page.locator("#grid tbody tr").all() if r.is_visible()]

    total = len(visible())
    page.locator("#filters input[name='profile'][value='triton']").uncheck()
    assert visible() and all(v.endswith("/cublas") for v in visible())
    page.locator("#filters input[name='profile'][value='triton']").check()
    page.fill("#q", "relu_amax")
    assert sorted(visible()) == ["seed_relu_amax_bf16/cublas", "seed_relu_amax_bf16/triton",
                                 "seed_relu_amax_f32/cublas", "seed_relu_amax_f32/triton"]
    page.fill("#q", "")
    page.click(".chip[data-outcome='XPASS']")  # only XPASS
    assert visible() == ["seed_relu_amax_f32/cublas"]
    assert page.locator("#grid tr[data-case='seed_relu_amax_f32'][data-profile='cublas'] td.cell.dim").count() == 2
    page.click(".chip[data-outcome='XPASS']")  # back to all
    assert len(visible()) == total
    page.locator("#filters input[name='outcome'][value='PASS']").uncheck()
    rows = visible()
    assert "seed_plain_f32/cublas" not in rows and f"{FAIL_CASE}/cublas" in rows
    page.locator("#filters input[name='target'][value='h100']").uncheck()
    assert visible() == []
    watched.clean()


@pytest.mark.browser
@pytest.mark.slow
def test_a_link_to_a_result_opens_its_detail(browser, page_file):
    data = data_island(page_file.read_text())
    i = record(data, "seed_relu_amax_f32", "0.12.0.1")["i"]
    w = Watched(browser, page_file.as_uri() + f"#r{i}")
    try:
        assert w.page.locator("#detail h2 code.case-id").inner_text() == "seed_relu_amax_f32"
        link = w.page.locator("#detail .upstream a", has_text="Comment on the known issue")
        assert link.get_attribute("href") == "https://github.com/openxla/xla/issues/99999"
        w.clean()
    finally:
        w.close()
