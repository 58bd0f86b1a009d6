"""Reports a person reads in one glance (issue 55): the lost layer on the report's first screen, changes as diffs,
the main run's terminal short, numbers that say what they count.

The browser tests open the pages in the real headless Chromium (tests/report/test_report.py's fixtures) at 1400x900 and
read what lies on the first screen. The model is docs/examples/fp8first compiled deviceless through the real
plugins (blessed, then `block1/down` made a plain nn.Dense, as tests/verdict/test_fp8_answer.py does); the change between
two releases is decoder_qdq_train's recorded HLO on jax 0.11.2 and 0.12.0.1 (tests/fixtures/hlo/models/).
`FP8_CHECK_SCREENSHOTS=DIR` also keeps the screenshots in DIR (docs/ holds the committed ones).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from fp8_check.report import _page as page, _terminal as terminal
from fp8_check.run import _results as results
from fp8_check.signature import _extract as signature
from fp8_check.verdict import _contract as contract
from fp8_check.verdict._comparator import MISSING, FieldDiff, list_diff
from fp8_check.verdict._fp8_answer import Fp8Answer
from fp8_check.verdict._outcome import PASS, Outcome
from tests.conftest import REPO
from tests.report.test_report import CHROMIUM_ARGS, FILES, Watched, browser, loaded  # noqa: F401  (the real Chromium)

MODELS = REPO / "tests" / "fixtures" / "hlo" / "models"
FIRST_SCREEN = {"width": 1400, "height": 900}
# Text nodes wholly inside the viewport, in document order (what a person sees before scrolling).
VISIBLE_TEXT = """() => {
  const out = [], w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    if (!n.textContent.trim()) continue;
    const e = n.parentElement;
    if (!e || e.closest('[hidden]') || getComputedStyle(e).visibility === 'hidden') continue;
    const r = document.createRange(); r.selectNodeContents(n);
    const b = r.getBoundingClientRect();
    if (b.width > 0 && b.height > 0 && b.top >= 0 && b.bottom <= innerHeight && b.left >= 0 && b.right <= innerWidth)
      out.push(n.textContent.trim());
  }
  return out;
}"""
NEGATIVE_US = re.compile(r"(?<![\w>-])[-\u2212]\d+(?:\.\d+)?(?= ?µs|\b)")


def _shot(page_, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    page_.screenshot(path=str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    keep = os.environ.get("FP8_CHECK_SCREENSHOTS")
    if keep:
        shutil.copy(path, Path(keep) / name)
    return path


def _first_screen(browser, html: Path) -> Watched:  # noqa: F811
    w = Watched.__new__(Watched)
    w.ctx = browser.new_context(viewport=FIRST_SCREEN)
    w.errors, w.requests, w.dialogs = [], [], []
    w.ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file://")
                else (w.requests.append(route.request.url), route.abort()))
    w.page = w.ctx.new_page()
    w.page.on("console", lambda m: w.errors.append(m.text) if m.type in ("error", "warning") else None)
    w.page.on("pageerror", lambda e: w.errors.append(str(e)))
    w.page.goto(html.as_uri())
    w.page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    return w


# ------------------------------------------------------------------ numbers that say what they count


def test_the_fp8_label_names_gemms_and_the_flop_share():
    assert Fp8Answer(27, 18, 0.80).headline == "FP8 18/27 gemms, 80 % of FLOPs"  # 18/27 is 67 % by count
    assert Fp8Answer(15, 0, 0.0).headline == "FP8 0/15 gemms"
    assert Fp8Answer(20, 17, 0.996).headline == "FP8 17/20 gemms, 99.6 % of FLOPs"


def test_lost_layers_are_one_text_per_layer_with_its_passes():
    whys = ["Model/block1/down forward: FP8 -> bf16 (cuBLAS bf16)", "fp8_flops share 99.6 % -> 73.3 %",
            "Model/block1/down backward-input: FP8 -> bf16 (cuBLAS bf16)",
            "Model/block1/down backward-weight: FP8 -> bf16 (cuBLAS bf16)",
            "DecoderBlock/attn/q_proj/CurrentScalingFp8_0 forward: FP8 -> f16 (the gemm left the library)"]
    assert contract.lost_layers(whys) == ["Model/block1/down: FP8 -> bf16 (fwd, bwd-in, bwd-wt)",
                                          "DecoderBlock/attn/q_proj/CurrentScalingFp8_0: FP8 -> f16 (fwd)"]
    assert contract.lost_layers(["kernels: 3 more kernel launch(es)"]) == []


def test_a_long_list_changes_as_added_removed_and_moved_items():
    before = [f"fusion kLoop [op{i}]" for i in range(10)]
    after = [before[1], before[0], *before[2:9], "fusion kLoop [convert]", "fusion kLoop [convert]"]
    d = list_diff(before, after)
    assert d is not None and d.counts() == "10 -> 11 items: 2 added, 1 removed, 1 moved"
    assert d.items() == ["+2 fusion kLoop [convert]", "\u22121 fusion kLoop [op9]", "1 moved"]
    assert str(FieldDiff("launches", before, after)).startswith("launches: 10 -> 11 items: 2 added")
    # short lists and pairs of dtypes read better whole
    assert list_diff(["divide", "transpose"], ["convert", "divide", "transpose"]) is None
    assert str(FieldDiff("unfused", ["divide"], ["convert", "divide"])) == "unfused: expected [divide], found [convert, divide]"
    assert list_diff(MISSING, before) is not None and list_diff([{"a": 1}] * 8, []) is None


# ------------------------------------------------------------------ the main run's terminal


def test_plain_passes_are_counted_per_target_profile_and_the_rest_printed():
    """The fixture's real results (tests/fixtures/results): every result not a plain expected PASS is printed,
    the plain ones are one line per target/profile, with the no-FP8-by-design count and what triton rows show."""
    import io

    outcomes = [o for res in loaded(FILES[-1:]) for o in res.outcomes]
    plain = [o for o in outcomes if terminal.plain(o)]
    assert plain and len(plain) < len(outcomes)
    assert all(o.code is PASS for o in plain)
    lines = terminal.groups_lines(outcomes)
    assert len(lines) == len({(o.target, o.profile) for o in plain})
    assert sum(int(line.split(" PASS", 1)[0]) for line in lines) == len(plain)
    stream = io.StringIO()
    terminal.print_summary(outcomes, stream, verbose=False)
    assert "not shown (plain expected PASS; -v prints every result):" in stream.getvalue()
    stream = io.StringIO()
    terminal.print_summary(outcomes, stream)
    assert "not shown" not in stream.getvalue()


# ------------------------------------------------------------------ a model's FAIL: the first screen


def _plain_layer_run(tmp_path: Path, run_cli, monkeypatch) -> Path:
    work = tmp_path / "fp8first"
    shutil.copytree(REPO / "docs" / "examples" / "fp8first", work, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.syspath_prepend(str(work))
    code, out, err = run_cli("bless", "cases", "--goldens", "goldens", "--profile", "cublas", cwd=work)
    assert code == 0, out + err
    model = work / "model.py"
    model.write_text(model.read_text().replace('PLAIN: tuple[str, ...] = ()', 'PLAIN: tuple[str, ...] = ("block1/down",)'))
    monkeypatch.delitem(sys.modules, "model", raising=False)
    code, out, err = run_cli("run", "cases", "--goldens", "goldens", "--profile", "cublas", "--json", "r.json",
                             "--html", "r.html", cwd=work)
    assert code == 1, out + err
    assert "      lost FP8: Model/block1/down: FP8 -> bf16 (fwd, bwd-in, bwd-wt)" in out, out
    return work


@pytest.mark.browser
@pytest.mark.slow
def test_a_layer_made_plain_is_named_on_the_report_s_first_screen(tmp_path, run_cli, monkeypatch, browser):  # noqa: F811
    work = _plain_layer_run(tmp_path, run_cli, monkeypatch)
    [o] = results.load(work / "r.json").outcomes
    assert o.verdict is not None and o.verdict.cost is not None
    w = _first_screen(browser, work / "r.html")
    seen = w.page.evaluate(VISIBLE_TEXT)
    text = "\n".join(seen)
    lost = "Model/block1/down: FP8 -> bf16 (fwd, bwd-in, bwd-wt)"
    assert lost in seen, text  # in the FAIL cell and in "Needs attention"
    assert sum(x == lost for x in seen) >= 2, text
    assert "[regression]" in text and re.search(r"FP8 14/20 gemms, \d+ % of FLOPs", text), text
    cell = w.page.locator("#grid td.cell.o-FAIL")
    assert lost in cell.inner_text() and "regression" in cell.inner_text()
    # the µs column: a lost FP8 priced as a saving is never a bare negative number
    for td in w.page.locator("#grid td.cost").all():
        value = td.get_attribute("data-cost")
        if value and float(value) < 0:
            assert "FP8 pays back at production sizes" in td.inner_text() and "FP8 lost" in td.inner_text()
    for i, line in enumerate(seen):
        if NEGATIVE_US.search(line):
            assert "production sizes" in line or "production sizes" in " ".join(seen[i:i + 2]), line
    _shot(w.page, "report-model-fail.png", tmp_path)
    # the detail leads with the FP8 change, then the cost with the terminal's caveat, word for word
    cell.locator("a").click()
    w.page.wait_for_selector("#detail:not([hidden]) #lost-head")
    detail = w.page.locator("#detail")
    blocks = [t.strip() for t in detail.locator(":scope > *").all_inner_texts()]
    lead = next(i for i, t in enumerate(blocks) if t.startswith("Lost FP8"))
    assert lost in blocks[lead + 1]
    assert blocks[lead + 2] == terminal.price_hint(o), blocks[lead:lead + 3]
    assert not any(NEGATIVE_US.search(t) and "production sizes" not in t for t in blocks[:lead + 3]), blocks
    # a model's FAIL on one version has no upstream filing, and says why
    assert w.page.locator("#upstream").count() == 0
    assert w.page.locator("#no-upstream").inner_text() == page.NO_UPSTREAM
    assert w.errors == [] and w.requests == []
    w.ctx.close()


# ------------------------------------------------------------------ a model's change between two releases


def _model_between_releases() -> list[results.Results]:
    out = []
    for jax in ("0.11.2", "0.12.0.1"):
        text = gzip.decompress((MODELS / f"decoder_qdq_train.jax-{jax}.h100.cublas.txt.gz").read_bytes()).decode()
        o = Outcome("decoder_qdq_train", "h100", "cublas", "deviceless", jax, PASS, hlo=text)
        o.signature = signature.extract(text)
        out.append(results.Results({"jax": jax, "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"]}, [o]))
    return out


@pytest.mark.browser
def test_a_model_s_launches_change_is_a_diff_of_a_few_lines_with_readable_columns(tmp_path, browser):  # noqa: F811
    html = page.write_report(_model_between_releases(), tmp_path / "change.html")
    w = _first_screen(browser, html)
    w.page.locator('#grid td.cell[data-jax="0.12.0.1"] a').click()
    table = w.page.locator("#change-table")
    table.wait_for()
    rows = table.locator("tbody tr")
    launches = [rows.nth(i) for i in range(rows.count()) if rows.nth(i).locator("td.c-field").inner_text() == "launches"]
    assert launches
    for row in launches:
        diff = row.locator("td.c-after pre.ldiff").inner_text().splitlines()
        assert diff[0] == "193 -> 194 items: 2 added, 1 removed, 0 moved", diff
        assert 2 <= len(diff) <= 8 and all(x[0] in "+\u2212" for x in diff[1:]), diff
        full = row.locator("td.c-after details.all")
        assert full.get_attribute("open") is None and "show all" in full.locator("summary").inner_text()
        assert row.locator("td.c-after").bounding_box()["height"] < 200  # not two walls of 190 strings
    # class and why keep a readable width: at least 8 characters of their own font
    for col in ("c-class", "c-why"):
        for i in range(rows.count()):
            td = rows.nth(i).locator(f"td.{col}")
            ch = td.evaluate("e => { const s = document.createElement('span'); s.style.display = 'inline-block'; "
                             "s.style.width = '8ch'; e.append(s); const w = s.getBoundingClientRect().width; s.remove(); "
                             "return w; }")
            assert td.bounding_box()["width"] >= ch > 0, (col, i)
        cls = rows.nth(0).locator("td.c-class")
        assert cls.bounding_box()["height"] < 2.5 * float(cls.evaluate("e => parseFloat(getComputedStyle(e).lineHeight) || 16"))
    table.scroll_into_view_if_needed()
    _shot(w.page, "report-change-table.png", tmp_path)
    assert w.errors == [] and w.requests == []
    w.ctx.close()


@pytest.mark.browser
def test_a_main_run_report_s_first_screen(tmp_path, browser):  # noqa: F811
    """The fixture's real run on three releases: the first screen has the verdict, the counts, what needs
    attention with its class, and no bare negative µs."""
    html = page.write_report(loaded(), tmp_path / "main.html")
    w = _first_screen(browser, html)
    seen = w.page.evaluate(VISIBLE_TEXT)
    text = "\n".join(seen)
    assert any(x.startswith("verdict: ") for x in seen) and "Needs attention" in text, text
    assert w.page.locator("#attention").bounding_box()["y"] < FIRST_SCREEN["height"]
    for td in w.page.locator("#grid td.cost").all():
        value = td.get_attribute("data-cost")
        if value and float(value) < 0:
            assert "FP8 lost" not in td.inner_text() or "production sizes" in td.inner_text()
    _shot(w.page, "report-main-run.png", tmp_path)
    assert w.errors == [] and w.requests == []
    w.ctx.close()


@pytest.mark.slow
def test_check_with_nothing_to_judge_against_says_so_in_its_first_word(tmp_path):
    """A flax model checked with no golden and no --expect: its first line is not PASS (nothing was asserted); the
    same check with an --expect-layer is judged and says PASS."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(REPO / "docs" / "examples")}
    base = [sys.executable, "-m", "fp8_check.cli.main", "check", "flax_mlp:grad", "--args", "flax_mlp:grad_args"]
    proc = subprocess.run(base, cwd=tmp_path, capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.split()[0] == "COMPILED" and not first.startswith("PASS"), first
    assert "nothing to judge against" in proc.stdout
    proc = subprocess.run([*base, "--expect-layer", "*/Dense_0/*=fp8"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=1200, env=env)
    assert proc.returncode == 0 and proc.stdout.split()[0] == "PASS", proc.stdout + proc.stderr


@pytest.mark.slow
def test_the_main_run_on_the_shipped_library_is_short_and_v_prints_every_result(run_cli, tmp_path):
    """`fp8-check run` as README's first command: at most 60 lines, the same closing verdict as `-v`, which prints
    one line per result. (The second run is served by the compile cache.)"""
    code, out, err = run_cli("run", "--json", tmp_path / "r.json", cwd=REPO)
    code_v, out_v, err_v = run_cli("run", "-v", "--json", tmp_path / "v.json", cwd=REPO)
    assert code == code_v == 0, out + err
    lines, lines_v = out.splitlines(), out_v.splitlines()
    assert len(lines) <= 60, out
    assert lines[-1] == lines_v[-1] and lines[-1].startswith("verdict: no regressions against goldens"), lines[-1]
    rows = results.load(tmp_path / "v.json").outcomes
    heads = [x for x in lines_v if re.match(r"(PASS|XFAIL|FAIL|XPASS|NEW|UNRESOLVED|UNSUPPORTED) +\S+/\S+ ", x)]
    assert len(heads) == len(rows), (len(heads), len(rows))
    shown = [x for x in lines if re.match(r"(PASS|XFAIL|FAIL|XPASS|NEW|UNRESOLVED|UNSUPPORTED) +\S+/\S+ ", x)]
    assert len(shown) == sum(not terminal.plain(o) for o in rows)
    counted = sum(int(m.group(1)) for x in lines if (m := re.match(r"  (\d+) PASS on \S+", x)))
    assert counted == sum(terminal.plain(o) for o in rows)
    assert "triton rows show the kernels" in lines[1]  # the header says what the Triton profile shows
    assert not any(x.startswith("fp8-check: requirements") for x in lines)  # qwix is installed here: no announcement


def test_the_header_lists_only_the_profiles_the_selected_cases_use_and_amd_reads_hipblaslt(monkeypatch):
    from fp8_check.cli import commands
    from fp8_check.run import _selection as selection
    from fp8_check.targets import profile_alias, profile_label

    monkeypatch.syspath_prepend(str(REPO / "docs" / "examples" / "flax_train"))
    cases = selection.load_cases([REPO / "docs" / "examples" / "flax_train" / "cases"])  # profiles: [cublas]
    sel = selection.Selection(cases, selection.targets_from("h100"), selection.profiles_from(None, "deviceless"), "deviceless")
    assert sel.profiles[:2] == ["cublas", "triton"] and commands._used_profiles(sel) == ["cublas"]
    header = commands._header({"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "cuda_plugin": "0.12.0.1"}, sel)
    assert "profiles cublas, 1 cases" in header and "triton" not in header, header
    assert profile_label("mi300x", "cublas") == "hipblaslt" and profile_label("h100", "cublas") == "cublas"
    assert profile_alias("hipblaslt") == "cublas" and selection.profiles_from("hipblaslt", "deviceless") == ["cublas"]
