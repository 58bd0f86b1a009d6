"""The HTML matrix shows change, and the issue body follows the verdict (recorded results of JAX 0.6.1, 0.8.0, 0.12.0.1).

Classes are stated from the rules (docs/verdicts.md), not read off the page under test.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from fp8_check.report import _issue as issue, _model as model, _page as report
from fp8_check.verdict import _classify as verdict
from fp8_check.verdict._outcome import FAIL

from .test_report import FILES, browser, data_island, loaded  # noqa: F401 (browser: the fixture)

SCALED_TRITON = ("seed_scaled_clamp_f32", "triton")  # Triton fuses the requantization on 0.12.0.1: 2 kernels -> 1
BF16_CUBLAS = ("seed_scaled_clamp_bf16", "cublas")  # 0.12.0.1 (recorded FAIL): the FP8 gemm lost, a kernel more


def judged():
    """The fixture results with each FAIL's verdict against its golden (as `fp8-check run` records it now)."""
    inputs = loaded()
    for res in inputs:
        for o in res.outcomes:
            if o.code is FAIL and o.expected is not None and o.signature is not None:
                o.verdict = verdict.classify(o.expected, o.signature)
    return inputs


def cell(html: str, case: str, profile: str, jax: str) -> str:
    row = re.search(r'<tr class="grid-row[^"]*" data-case="%s" data-target="h100" data-profile="%s"[^>]*>(.*?)</tr>'
                    % (case, profile), html, re.S)
    assert row, (case, profile)
    m = re.search(r'<td class="cell[^"]*"[^>]*data-jax="%s"[^>]*>.*?</td>' % re.escape(jax), row.group(1), re.S)
    assert m
    return m.group(0)


def test_cells_show_kernels_and_a_class_marker_where_the_signature_changed():
    html = report.render_html(judged())
    c = cell(html, *SCALED_TRITON, "0.12.0.1")
    assert 'data-change="improvement"' in c and '<span class="k">1</span>' in c and "▲" in c
    same_cost = cell(html, *SCALED_TRITON, "0.8.0")  # 0.6.1 -> 0.8.0: nothing that costs time changed
    assert 'data-change="regression"' not in same_cost and 'data-change="improvement"' not in same_cost
    c = cell(html, *BF16_CUBLAS, "0.12.0.1")
    # losing the FP8 gemm is a regression (whatever else changed with it: then mixed)
    assert re.search(r'data-change="(regression|mixed)"', c) and re.search(r'data-verdict="(regression|mixed)"', c)
    row = re.search(r'<tr [^>]*data-case="seed_scaled_clamp_bf16" data-target="h100" data-profile="cublas"[^>]*>', html)
    assert 'data-changed="1"' in row.group(0) and 'data-regressed="1"' in row.group(0)
    assert 'id="f-changed"' in html and 'id="f-regressed"' in html


def test_click_data_has_the_classified_field_diff_against_the_previous_version():
    data = data_island(report.render_html(judged()))
    S = data["strings"]
    [r] = [r for r in data["results"] if (r["case"], r["profile"], r["jax"]) == (*SCALED_TRITON, "0.12.0.1")]
    assert r["change"]["from"] == "0.8.0" and r["change"]["class"] == "improvement"
    lines = {(S[p], cls) for p, _, _, cls, _, _ in r["change"]["lines"]}
    assert ("kernels", "improvement") in lines and ("gemms[0].output", "improvement") in lines
    [bad] = [r for r in data["results"] if (r["case"], r["profile"], r["jax"]) == (*BF16_CUBLAS, "0.12.0.1")]
    assert bad["verdict"]["class"] in ("regression", "mixed")
    assert ("gemms[0].operand_dtypes", "regression") in {(S[p], cls) for p, _, _, cls, _, _ in bad["verdict"]["lines"]}


def test_one_timeline_per_row_well_formed_and_escaped():
    inputs = judged()
    for res in inputs:
        for o in res.outcomes:
            if o.case == SCALED_TRITON[0]:
                o.case = '<img src=x onerror=alert(1)>"&'
    html = report.render_html(inputs)
    svgs = re.findall(r"<svg .*?</svg>", html, re.S)
    rows = re.findall(r'<tr class="grid-row.*?</tr>', html, re.S)
    with_signature = [r for r in rows if '<span class="k">' in r]  # rows where some version compiled
    assert len(svgs) == len(with_signature) and len(with_signature) >= len(rows) - 1
    for s in svgs:
        ET.fromstring(s)
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_issue_title_follows_the_class():
    m = model.build_model(judged())
    it = next(i for i in m.items if (i.case, i.profile, i.jax) == (*BF16_CUBLAS, "0.12.0.1"))
    title = issue.issue_title(it, m)
    assert it.outcome.verdict.is_regression
    assert "regressed since jax 0.12.0.1" in title and "[XLA:GPU]" in title
    assert issue.summary(it, m).startswith(f"Regression ({it.outcome.verdict.cls}) since jax 0.12.0.1")
    # the same FAIL with the golden expecting less fusion than found: an improvement, not an upstream bug
    o = it.outcome
    o.expected = o.signature.to_dict() | {"kernels": o.signature.kernels + 1}  # found launches one kernel fewer
    o.verdict = verdict.classify(o.expected, o.signature)
    assert o.verdict.cls == "improvement"
    title = issue.issue_title(it, m)
    assert "not an upstream bug" in title and "[XLA:GPU]" not in title
    assert issue.summary(it, m).startswith("Not an upstream bug")
    assert FILES  # the recorded results exist


# ------------------------------------------------------------------ in a real browser (Debian's chromium)


@pytest.fixture(scope="module")
def verdict_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("verdict") / "report.html"
    report.write_report(judged(), path)
    return path


@pytest.mark.browser
@pytest.mark.slow
def test_filters_and_click_show_the_change(browser, verdict_page):  # noqa: F811  (the imported fixture)
    from .test_report import Watched

    w = Watched(browser, verdict_page.as_uri())
    page = w.page
    try:
        total = page.locator("#grid tbody tr").count()
        page.check("#f-changed")
        changed = page.locator("#grid tbody tr:not([hidden])").count()
        assert 0 < changed < total
        assert page.locator("#grid tbody tr:not([hidden])[data-changed='0']").count() == 0
        page.check("#f-regressed")
        assert page.locator("#grid tbody tr:not([hidden])").count() >= 1
        assert page.locator("#grid tbody tr:not([hidden])[data-regressed='0']").count() == 0
        page.uncheck("#f-changed")
        page.uncheck("#f-regressed")
        assert page.locator("#grid tbody tr:not([hidden])").count() == total
        # click the cell where Triton fused the requantization: the classified diff against 0.8.0
        row = page.locator(f"#grid tr[data-case='{SCALED_TRITON[0]}'][data-profile='triton']")
        row.locator("td.cell[data-jax='0.12.0.1'] a").click()
        page.wait_for_selector("#change-table")
        heading = page.locator("#detail h3", has_text="Change since jax 0.8.0").inner_text()
        assert "improvement" in heading
        body = page.locator("#change-table").inner_text()
        assert "gemms[0].output" in body and "improvement" in body
        assert page.locator("#grid svg.timeline").count() >= 1
        w.clean()
    finally:
        w.close()
