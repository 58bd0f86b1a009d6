"""Real matrices, as users meet them: a healthy one is quiet (no regression lines, blessed history collapsed, one
closing verdict; the HTML says so and shows its legend, checked in Chromium), and one with a regression gives the
first-bad-version issue body with the compiler options the matrix compiled with.

Environments: jax 0.6.2 and 0.7.0 (built from uv's cache into the suite's test cache), 0.8.0 (shared with
test_matrix.py) and this interpreter's JAX."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from fp8_check.matrix._document import load_matrix
from fp8_check.matrix._news import closing_line
from fp8_check.report import _page as page
from fp8_check.run import _results as results
from fp8_check.targets import PROFILES
from fp8_check.verdict import _golden as golden

from ..conftest import REPO
from ..report.test_report import Watched, browser  # noqa: F401  (the fixture)
from .test_matrix import NEW, OLD, cache_env  # noqa: F401  (the fixture)


@pytest.mark.slow
@pytest.mark.network
@pytest.mark.browser
def test_a_healthy_matrix_is_quiet_and_its_report_has_a_visible_legend(workspace, run_cli, cache_env, browser, tmp_path):  # noqa: F811  (the imported fixtures)
    out, html = workspace / "reports" / "m.json", workspace / "reports" / "m.html"
    # seed_scaled_clamp_f32/triton changes between 0.8.0 and the newest (the requantization fuses at 0.10.1);
    # the committed goldens are version-ranged, so both versions PASS: the change is blessed history
    args = ("matrix", "--jax", f"{OLD},{NEW}", "-k", "seed_scaled_clamp_f32,seed_plain_f32", "--out", out, "--html", html)
    code, stdout, err = run_cli(*args, cwd=workspace)
    assert code == 0, stdout + err
    m = load_matrix(out)
    assert {o.code.name for e in m.versions for o in e.outcomes} == {"PASS"} and m.changes()
    lines = stdout.splitlines()
    assert not [line for line in lines if "regression" in line and "verdict" not in line and "▼ regression" not in line]
    assert "differs from the golden (" not in stdout
    n = len(m.changes())
    assert f"{n} signature change(s) between versions match the goldens (blessed history; `--history` lists them)" in stdout
    assert lines[-1] == closing_line(m)
    assert lines[-1] == "verdict: no regressions against goldens (8 PASS on 2 JAX versions)"
    # on request, the history is listed
    code, stdout, _ = run_cli(*args, "--history", cwd=workspace)
    assert code == 0 and f"Blessed history: signature changes the goldens expect ({n}):" in stdout
    assert f"h100/triton seed_scaled_clamp_f32: {OLD} -> {NEW}  [improvement]" in stdout
    # the matrix's per-version results record the compiler options they compiled with
    old = results.load(next(e.results_file for e in m.versions if e.jax == OLD))
    assert old.environment["compiler_options"] == {p: PROFILES[p].compiler_options for p in ("cublas", "triton")}

    w = Watched(browser, html.as_uri())
    verdict = w.page.locator("#verdict")
    assert verdict.is_visible() and verdict.inner_text().startswith("verdict: no regressions against goldens")
    legend = w.page.locator("#legend")
    legend.scroll_into_view_if_needed()
    assert legend.is_visible()
    box = legend.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 80
    text = legend.inner_text()
    assert "as the golden expects" in text and "differs from the golden" in text
    shot = tmp_path / "legend.png"
    legend.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 2000
    # the one changed cell is marked as expected by the golden, not as news
    marks = w.page.locator("#grid .mark")
    assert marks.count() == n and all("expected" in marks.nth(i).get_attribute("class").split() for i in range(n))
    assert w.errors == [] and w.requests == []
    w.ctx.close()


@pytest.mark.slow
@pytest.mark.network
def test_a_regression_gets_the_first_bad_version_body(workspace, run_cli, cache_env, capsys):  # noqa: F811  (the imported fixture)
    # xla_17887_bf16_dequant/cublas: 3 kernels up to 0.6.2, 5 from 0.7.0 on (docs/verdicts.md: the known changes). A golden
    # holding only the 0.6.2 behaviour, for every version: 0.7.0 and the newest FAIL with the same signature.
    shutil.copy(REPO / "cases" / "known_issues.yaml", workspace / "cases" / "known_issues.yaml")
    gpath = golden.path_for(workspace / "goldens", "xla_17887_bf16_dequant", "h100", "cublas", "deviceless")
    doc = yaml.safe_load(gpath.read_text())
    old = next(e for e in doc["expect"] if e.get("jax") == ">=0.6.1,<0.7.0")
    doc["expect"] = [{"blessed_with": old["blessed_with"], "signature": old["signature"]}]
    gpath.write_text(yaml.safe_dump(doc, sort_keys=False))
    out = workspace / "reports" / "m.json"
    code, stdout, err = run_cli("matrix", "--jax", f"0.6.2,0.7.0,{NEW}", "-k", "xla_17887_bf16_dequant", "--profile",
                                "cublas", "--out", out, "--no-html", "--fail-on", "newest", cwd=workspace)
    assert code == 1, stdout + err
    m = load_matrix(out)
    codes = {e.jax: e.outcomes[0].code.name for e in m.versions}
    assert codes == {"0.6.2": "PASS", "0.7.0": "FAIL", NEW: "FAIL"}, codes
    assert stdout.splitlines()[-1].startswith("verdict: 1 regression against goldens (case/target/profile rows: regression 1; 2 of 3")
    files = [e.results_file for e in m.versions]
    code, body, err = run_cli("report", "--markdown", "xla_17887_bf16_dequant", *files, cwd=workspace)
    assert code == 0, err
    assert "jax:             0.7.0\n" in body  # the first bad version, not the newest
    assert "regressed since jax 0.7.0" in body.splitlines()[0]
    assert f"profile:         cublas (compiler options {json.dumps(PROFILES['cublas'].compiler_options)})" in body
    assert "XLA_FLAGS:       " in body and "XLA_FLAGS:       unknown" not in body
    # the HTML's "Needs attention" links the same result
    html = page.render_html([results.load(f) for f in files])
    attention = html.split('id="attention"')[1].split("</section>")[0]
    assert attention.count('class="att-item"') == 1 and "jax 0.7.0" in attention

