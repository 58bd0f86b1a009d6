"""The HTML report: `fp8-check report RESULTS.json... -o reports/NAME.html`.

One or more results files (or matrix files, read through their per-version results
files) become a single self-contained HTML page: the outcome counts, the case x JAX
version (x target/profile) grid, and per result its description, YAML, repro script,
expected vs actual signature, a diff of the normalized optimized HLO against the last
good JAX version (report/_diffs.py), the StableHLO and the environment; plus, for every
result whose code is filed upstream, a ready markdown issue body (report/_issue.py).
`fp8-check report --markdown CASE RESULTS.json...` prints that body.

The page needs no server and no network: CSS and JS are inline, every result's
data sits in a JSON data island (`<` `>` `&` escaped as \\u003c \\u003e \\u0026)
that the script renders with textContent only, and a Content-Security-Policy
allows nothing but the page's own script (by hash) and inline styles.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import jinja2

from fp8_check.core import atomic_write, package_path
from fp8_check.matrix import NO_REGRESSIONS, Matrix, closing_line, entry_from_results
from fp8_check.report._changes import CellChange, cell_changes, timeline_svg
from fp8_check.report._diffs import hlo_diff, show, signature_rows
from fp8_check.report._hlo_text import normalize_hlo
from fp8_check.report._issue import first_bad_items, issue_markdown, issue_title
from fp8_check.report._model import Item, Model, build_model
from fp8_check.report._terminal import cost_lines, lost_text, saving_from_loss
from fp8_check.run import Results
from fp8_check.signature import layers_text
from fp8_check.verdict import CODES, PASS, answer, is_contract, list_diff

SIZE_BUDGET = 4_500_000  # bytes; the report must stay under 5 MB
REPORT_LIMIT = 5_000_000  # over this, `report` says so on the terminal (the page says so where it can tell)
LEVELS = (0, 1, 2, 3, 4)  # how much text is left out to stay under SIZE_BUDGET; see _payload
MAX_TEXT = 256_000  # characters of one HLO/StableHLO/source kept in the page
MAX_TEXT_TIGHT = 48_000
JAX_REPO = "https://github.com/jax-ml/jax"
_TEMPLATES = package_path("templates")


def _jinja() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def json_island(data: Any) -> str:
    """JSON safe to put inside <script type="application/json">: no `<`, `>`, `&` or line separators."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


class _Strings:
    """Interns texts paragraph by paragraph: repro scripts and HLO share most of their paragraphs."""

    def __init__(self):
        self.table: list[str] = []
        self.index: dict[str, int] = {}

    def add(self, text: str | None) -> list[int] | None:
        if text is None:
            return None
        out = []
        for para in text.split("\n\n"):
            if para not in self.index:
                self.index[para] = len(self.table)
                self.table.append(para)
            out.append(self.index[para])
        return out

    def one(self, text: str) -> int:
        """A short text as one index."""
        if text not in self.index:
            self.index[text] = len(self.table)
            self.table.append(text)
        return self.index[text]


def _truncate(text: str | None, limit: int) -> tuple[str | None, bool]:
    if text is None or len(text) <= limit:
        return text, False
    return text[:limit] + f"\n… (truncated: {len(text) - limit} more characters)\n", True


def _commit_url(env: dict) -> str | None:
    h = env.get("jaxlib_git_hash")
    if isinstance(h, str) and re.fullmatch(r"[0-9a-f]{7,40}", h):
        return f"{JAX_REPO}/commit/{h}"
    v = env.get("jaxlib") or env.get("jax")
    if isinstance(v, str) and re.fullmatch(r"[0-9][0-9a-z.]*", v):
        return f"{JAX_REPO}/releases/tag/jax-v{v}"
    return None


def _precompute(model: Model) -> dict[Any, Any]:  # result index -> its texts, and "_changes"
    """Per result, what does not depend on how much text the page can hold: diffs and issue bodies."""
    out = {}
    for it in model.items:
        o = it.outcome
        if it.code is not PASS:
            diff, note = hlo_diff(it)
        else:
            diff, note = "", ("Matches the golden signature." if o.expected is not None else "No golden for this result.")
        out[it.idx] = {
            "diff": diff, "diff_note": note,
            "markdown": issue_markdown(it, model) if it.code.file_upstream and _upstream_change(it) else None,
            "sig_rows": signature_rows(o.expected, o.signature, o.diffs),
        }
    return out


NO_UPSTREAM = ("No upstream filing: this model's result differs from its golden on one JAX version, and a model's "
               "FAIL there is as likely a change in the model's own code as in XLA. Run it across releases "
               "(`fp8-check matrix`): a change between two JAX versions gets a ready issue body.")


def _upstream_change(it: Item) -> bool:
    """Whether an upstream filing is offered: a model's contract result only for a change between JAX versions (a
    FAIL on one version is a change in the model's own code as likely as in XLA); a library pattern always."""
    return not is_contract(it.outcome) or it.baseline is not None


def _texts(it: Item) -> dict[str, str | None]:
    """The long texts of a result; the repro script is rendered from the results."""
    o = it.outcome
    return {"source": it.repro, "yaml": o.yaml, "hlo": o.hlo, "stablehlo": o.stablehlo}


def _payload(model: Model, pre: dict[Any, Any], level: int) -> tuple[dict, list[str]]:
    """The data island. Level 0: every text; 1: no HLO/StableHLO for OK results; 2: + tighter truncation and
    no repro script for OK results; 3: + no StableHLO and metadata-free HLO for the others; 4: + no HLO for
    results whose HLO diff is shown."""
    strings = _Strings()
    notes: list[str] = []
    envs: list[dict] = []
    env_index: dict[str, int] = {}
    truncated = omitted = stripped = 0
    limit = MAX_TEXT if level < 2 else MAX_TEXT_TIGHT
    records = []
    for it in model.items:
        o, p = it.outcome, pre[it.idx]
        ok = not it.code.is_failure
        texts: dict[str, Any] = {}
        for key, value in _texts(it).items():
            drop = ok and ((level >= 1 and key in ("hlo", "stablehlo")) or (level >= 2 and key == "source"))
            drop = drop or (not ok and ((level >= 3 and key == "stablehlo") or (level >= 4 and key == "hlo" and p["diff"])))
            if value is not None and drop:
                omitted += 1
                texts[key] = None
                texts[key + "_omitted"] = True
                continue
            if value is not None and key == "hlo" and not ok and level >= 3:
                value = normalize_hlo(str(value), rename=False)  # metadata and the source-location preamble removed
                stripped += 1
            value, cut = _truncate(value if value is None else str(value), limit)
            truncated += cut
            texts[key] = strings.add(value)
        ekey = json.dumps(it.env, sort_keys=True, default=str)
        if ekey not in env_index:
            env_index[ekey] = len(envs)
            envs.append({**it.env, "commit_url": _commit_url(it.env)})
        diff, cut = _truncate(p["diff"], limit)
        truncated += cut
        md = p["markdown"]
        ki = o.known_issue if isinstance(o.known_issue, dict) else None
        ch = (pre.get("_changes") or {}).get(it.idx)
        records.append({
            "i": it.idx, "case": it.case, "target": it.target, "profile": it.profile, "mode": it.mode,
            "jax": it.jax, "outcome": it.code.name, "reason": strings.one(o.reason),
            "description": strings.one(o.description), "file": strings.one(o.file),
            "compile_seconds": o.compile_seconds, "results_file": strings.one(it.source_file),
            # [field, expected, found, differs], each text an index into the strings table
            "sig_rows": [[strings.one(a), strings.one(b), strings.one(c), 1 if d else 0] for a, b, c, d in p["sig_rows"]],
            "has_expected": o.expected is not None, "has_signature": o.signature is not None,
            "known_issue": ki, "env": env_index[ekey],
            "baseline": {"i": it.baseline.idx, "jax": it.baseline.jax, "outcome": it.baseline.code.name} if it.baseline else None,
            "diff": strings.add(diff) if diff else None, "diff_note": strings.one(p["diff_note"]),
            "layers": strings.add(layers_text(o.signature)) if layers_text(o.signature) else None,
            "markdown": strings.add(md), "title": issue_title(it, model) if md else None,  # plain text: the page escapes it once
            # the change against the previous version with a signature, and a FAIL's verdict against the golden:
            # lines are [path, before, after, class, why], texts as string indices
            "change": {"from": ch.change_from, "class": ch.cls, "lines": _lines(strings, ch.lines),
                       "cost": ch.cost.text() if ch.cost else "",
                       "caveat": COST_CAVEAT if _loss_as_saving(ch) else ""} if ch and ch.cls else None,
            "verdict": {"class": o.verdict.cls, "lines": _lines(strings, [x.to_dict() for x in o.verdict.lines]),
                        "cost": o.verdict.cost.text() if o.verdict.cost else "",
                        "cost_lines": cost_lines(o), "lost": lost_text(o)}
            if o.verdict is not None else None,
            "fp8": answer(o).headline,
            "no_upstream": NO_UPSTREAM if it.code.file_upstream and not md and not _upstream_change(it) else "",
            **texts,
        })
    if omitted:
        notes.append(f"To keep this report under 5 MB, the HLO and StableHLO of passing (PASS/XFAIL/UNSUPPORTED) results "
                     f"are left out ({omitted} texts{'; also their repro scripts' if level >= 2 else ''}"
                     f"{'; and the StableHLO of the other results' if level >= 3 else ''}"
                     f"{', and their optimized HLO where the HLO diff shows the change' if level >= 4 else ''}); "
                     "`fp8-check show CASE` prints them.")
    if stripped:
        notes.append(f"The optimized HLO of {stripped} results is shown without metadata and the source-location "
                     "preamble, to keep this report under 5 MB.")
    if truncated:
        notes.append(f"{truncated} long texts (HLO, StableHLO, diffs) are truncated to {limit // 1000} K characters each.")
    if model.duplicates:
        notes.append(f"{model.duplicates} results appeared in more than one input for the same case, target, profile, "
                     "mode and JAX version; the later input's result is shown.")
    notes += model.version_notes
    return {"strings": strings.table, "envs": envs, "results": records}, notes


def _lines(strings: "_Strings", lines: list[dict]) -> list[list]:
    """[path, before, after, class, why, diff]: `diff` the list change's counts and items, one a line (-1: none)."""
    out = []
    for x in lines:
        ld = list_diff(x["before"], x["after"])
        out.append([strings.one(x["path"]), strings.one(show(x["before"])), strings.one(show(x["after"])),
                    x["class"], strings.one(x["why"]),
                    strings.one("\n".join([ld.counts(), *ld.items()])) if ld is not None else -1])
    return out


def _row_changes(model: Model) -> dict[tuple, list[CellChange]]:
    """Per row, the change of each of its items against the previous version (report/_changes.py)."""
    return {row: cell_changes([it.outcome for it in model.row_items(row)]) for row in model.rows}


def _grid(model: Model, row_changes: dict | None = None) -> list[dict]:
    """One row per case x target x profile x mode, one cell per JAX version."""
    from markupsafe import Markup

    row_changes = row_changes if row_changes is not None else _row_changes(model)
    descriptions: dict[str, str] = {}
    for it in model.items:
        descriptions.setdefault(it.case, it.description)
    grid = []
    for case in dict.fromkeys(r[0] for r in model.rows):
        rows = [r for r in model.rows if r[0] == case]
        for k, row in enumerate(rows):
            cells = [model.cells.get((row, v)) for v in model.versions]
            by_jax = {c.jax: c for c in row_changes.get(row, [])}
            out_cells: list[dict | None] = []
            for c in cells:
                if c is None:
                    out_cells.append(None)
                    continue
                ch = by_jax.get(c.jax)
                v = c.outcome.verdict
                # a change whose result still matches the golden is blessed history; one that differs is news
                expects = bool(ch and ch.cls) and not c.code.is_failure
                out_cells.append({"i": c.idx, "outcome": c.code.name, "jax": c.jax, "known": bool(c.outcome.known_issue),
                                  "kernels": ch.kernels if ch else None, "change": ch.cls if ch and ch.cls else "",
                                  "expected_change": expects,
                                  "change_title": (f"{ch.cls} since jax {ch.change_from}, "
                                                   + ("as the golden expects" if expects else "differs from the golden"))
                                  if ch and ch.cls else "",
                                  "verdict": v.cls if v is not None else "",
                                  "lost": lost_text(c.outcome),
                                  # one answer per cell; the ⚠ only where no FP8 is news (not "by design", as the terminal says)
                                  **_fp8_cell(answer(c.outcome))})
            changed = any(c and c["change"] for c in out_cells)
            regressed = any(c and (c["change"] in ("regression", "mixed") or c["verdict"] in ("regression", "mixed"))
                            for c in out_cells)
            # (µs, whether it is a lost FP8 priced as a saving: then it is never shown as a bare negative number)
            costs = [(ch.cost.delta_us, _loss_as_saving(ch)) for ch in row_changes.get(row, []) if ch.cost is not None]
            costs += [(c.outcome.verdict.cost.shown_us, saving_from_loss(c.outcome)) for c in cells
                      if c and c.outcome.verdict and c.outcome.verdict.cost]
            worst = max(costs) if costs else None
            svg = timeline_svg(f"{case} {row[1]}/{row[2]}", row_changes.get(row, [])) \
                if len(model.versions) > 1 and any(x.kernels is not None for x in row_changes.get(row, [])) else ""
            grid.append({"case": case, "first": k == 0, "span": len(rows), "target": row[1], "profile": row[2],
                         "mode": row[3], "description": descriptions.get(case, ""),
                         "search": f"{case} {descriptions.get(case, '')} {row[1]} {row[2]} {row[3]}".lower(),
                         "changed": changed, "regressed": regressed, "timeline": Markup(svg),  # escaped by timeline_svg
                         "cost": round(worst[0], 3) if worst else None,  # the row's costliest change (µs per call)
                         "cost_caveat": COST_CAVEAT if worst and worst[1] else "",
                         "cells": out_cells})
    return grid


COST_CAVEAT = ("FP8 lost: the wider gemm is estimated faster only at the case shapes; FP8 pays back at production "
               "sizes (give the case `price_at`, docs/cost.md)")


def _loss_as_saving(ch: CellChange) -> bool:
    """A change between versions that lost FP8 and is priced as a saving (as `saving_from_loss` for a verdict)."""
    return (ch.cost is not None and ch.cost.shown_us < 0 and ch.cls in ("regression", "mixed")
            and any(x.get("class") == "regression" and ("FP8" in str(x.get("why", "")) or "fp8" in str(x.get("path", "")))
                    for x in ch.lines))


def _attention(items: list[Item]) -> dict[int, dict]:
    """What a "Needs attention" entry says besides its case: the FP8 answer, the class, the lost layers, the cost."""
    out = {}
    for it in items:
        o = it.outcome
        lost = lost_text(o)
        out[it.idx] = {"fp8": answer(o).headline, "cls": o.verdict.cls if o.verdict is not None else "",
                       "lost": lost, "cost": (COST_CAVEAT if saving_from_loss(o) else
                                              (o.verdict.cost.short() if o.verdict is not None and o.verdict.cost else ""))}
    return out


MAX_FIELD = 20_000  # characters of any other text (description, reason, YAML, ...) kept in the page
MAX_ITEMS = 2_000  # items of any list (diffs, expected signature lists, ...) kept in the page


def cap_fields(inputs: list[Results]) -> tuple[list[Results], int]:
    """Copies of `inputs` whose long texts and lists are cut (each cut text says so), and how many were cut.

    The HLO, StableHLO and case source are left to _payload's levels; everything else a results
    file holds (written by anyone) is capped here, so that no input can push the page past 5 MB.
    """
    import dataclasses

    cut = 0

    def cap(value: Any) -> Any:
        nonlocal cut
        if isinstance(value, str) and len(value) > MAX_FIELD:
            cut += 1
            return value[:MAX_FIELD] + f" … (truncated: {len(value) - MAX_FIELD} more characters)"
        if isinstance(value, (list, tuple)):
            cut += len(value) > MAX_ITEMS
            return type(value)(cap(v) for v in value[:MAX_ITEMS])
        if isinstance(value, dict):
            return {cap(k): cap(v) for k, v in list(value.items())[:MAX_ITEMS]}
        return value

    out = []
    for res in inputs:
        outcomes = []
        for o in res.outcomes:
            changes = {k: cap(getattr(o, k)) for k in ("case", "target", "profile", "mode", "jax", "reason", "description",
                                                       "yaml", "file", "filecheck", "expected", "known_issue")}
            changes["diffs"] = [dataclasses.replace(d, path=cap(d.path), expected=cap(d.expected), found=cap(d.found))
                                for d in o.diffs[:MAX_ITEMS]]
            cut += len(o.diffs) > MAX_ITEMS
            outcomes.append(dataclasses.replace(o, **changes))
        out.append(dataclasses.replace(res, environment=cap(res.environment), outcomes=outcomes))
    return out, cut


def render_html(inputs: list[Results], title: str | None = None, notes: Sequence[str] = ()) -> str:
    """The page for typed results; `notes` (e.g. matrix versions that did not run) are shown in the header."""
    inputs, capped = cap_fields(inputs)
    if capped:
        notes = [*notes, f"{capped} long fields (descriptions, reasons, YAML, lists) are truncated to "
                         f"{MAX_FIELD // 1000} K characters or {MAX_ITEMS} items each, to keep this report under 5 MB."]
    model = build_model(inputs, notes)
    env = _jinja()
    script = (_TEMPLATES / "report_script.j2").read_text()
    style = (_TEMPLATES / "report_style.j2").read_text()
    if "</" in script or "</" in style:
        raise AssertionError("report_script.j2 / report_style.j2 must not contain '</'")
    script_hash = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    counts = Counter(it.code.name for it in model.items)
    modes = sorted({r[3] for r in model.rows})
    attention = first_bad_items(model)
    verdict = closing_line(Matrix([entry_from_results(r) for r in inputs]))
    row_changes = _row_changes(model)
    grid = _grid(model, row_changes)
    pre = _precompute(model)
    pre["_changes"] = {it.idx: ch for row, chs in row_changes.items() for it, ch in zip(model.row_items(row), chs)}
    for level in LEVELS:
        payload, page_notes = _payload(model, pre, level)
        if level == LEVELS[-1] and len(json_island(payload)) > SIZE_BUDGET:
            page_notes.append("This report is larger than 5 MB even with texts left out: select fewer cases or versions.")
        html = env.get_template("report.html.j2").render(
            title=title or "fp8-check report", created=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            inputs=model.inputs, versions=model.versions, counts=counts, codes=[c.name for c in CODES],
            total=len(model.items), targets=sorted({r[1] for r in model.rows}),
            profiles=sorted({r[2] for r in model.rows}), modes=modes, grid=grid, attention=attention,
            notes=page_notes, show_mode=len(modes) > 1, att=_attention(attention), verdict=verdict, verdict_ok=NO_REGRESSIONS in verdict,
            legend_codes=CODES, data=json_island(payload), script=script, style=style,
            script_hash=script_hash, n_rows=len(model.rows), timelines=any(r["timeline"] for r in grid),
        )
        if len(html.encode()) <= SIZE_BUDGET:
            break
    return html


def write_report(inputs: list[Results], out: Path, title: str | None = None, notes: Sequence[str] = ()) -> Path:
    """Write the HTML report for typed results (one per results file or JAX version); returns `out`."""
    atomic_write(Path(out), render_html(inputs, title, notes))
    return Path(out)


# ---------------------------------------------------------------- CLI


def _fp8_cell(fp8) -> dict:
    """A grid cell's FP8 fields: the headline, the no-FP8 line (in the cell's title) and whether it warns (⚠)."""
    return {"fp8": fp8.headline, "fp8_note": fp8.line(), "no_fp8": fp8.line() if fp8.warns else ""}
