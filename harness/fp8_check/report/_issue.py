"""The upstream issue body for a FAIL/XPASS/UNRESOLVED result: title, summary, reproducer, HLO, versions, environment.

`issue_markdown` joins sections; each section is a small function of (item, model)
returning markdown lines, so that new sections (or a different title) slot in.
`fp8-check report --markdown CASE RESULTS.json...` prints the bodies (`markdown_for`).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import yaml

from fp8_check.report._diffs import show_expected, show_found, sig_dict, to_yaml
from fp8_check.report._hlo_text import entry_excerpt
from fp8_check.report._markup import code_span, md_inline
from fp8_check.report._model import Item, Model, ReportError, build_model, version_story, vkey
from fp8_check.report._terminal import gemm_summary
from fp8_check.run import Results
from fp8_check.signature import attributed, layers_text
from fp8_check.targets import platform_of
from fp8_check.upstream import UpstreamParts, parts_for, what_changed
from fp8_check.verdict import (
    CODES,
    FAIL,
    UNRESOLVED,
    XFAIL,
    XPASS,
    answer,
    is_collective_path,
    is_contract,
    is_device_field,
    list_diff,
)

MARKDOWN_LIMIT = 60_000  # characters of an issue body

_PATTERN_WORDS = [
    ("dequant", lambda v: f"{v} dequant"),
    ("input_scales", lambda v: None if v in (None, False, "none") else ("scaled inputs" if v in ("both", True) else f"scaled {v}")),
    ("output_scale", lambda v: None if v in (None, False, "none") else f"output scale ({v})"),
    ("clamp", lambda v: "clamp" if v else None),
    ("epilogue", lambda v: None if v in (None, "none") else str(v)),
    ("bias", lambda v: "bias" if v else None),
    ("amax", lambda v: None if v in (None, False, "none") else "amax"),
    ("out_dtype", lambda v: f"{short_dtype(v)} output" if v else None),
]


def short_dtype(v: str) -> str:
    return {"float8_e4m3fn": "E4M3", "float8_e5m2": "E5M2", "bfloat16": "bf16", "float32": "f32",
            "float16": "f16"}.get(str(v), str(v))


@functools.lru_cache(maxsize=4096)
def _load_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError:
        return {}


def pattern_of(it: Item) -> str:
    """A short name for the case's pattern, from its YAML (falls back to the description)."""
    doc = _load_yaml(it.outcome.yaml)
    words = []
    if isinstance(doc, dict):
        for key, fn in _PATTERN_WORDS:
            if key in doc:
                try:
                    w = fn(doc[key])
                except Exception:
                    w = None
                if w and w not in words:
                    words.append(w)
    if words:
        return "matmul (" + ", ".join(words) + ")"
    desc = (it.description or it.case or "matmul").split(" -> ")[0]
    return desc if len(desc) <= 90 else desc[:87] + "..."


def gemm_target(it: Item) -> str:
    """The gemm the case should fuse into: the golden's, else the baseline's."""
    exp = it.outcome.expected
    if exp:
        gemms = exp.get("gemms")
        return str(gemms[0].get("target", "a gemm")) if gemms else "a gemm"
    sig = it.baseline.outcome.signature if it.baseline else None
    return sig.gemms[0].target if sig and sig.gemms else "a gemm"


def fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def md_cell(text: str) -> str:
    text = text if len(text) < 200 else text[:197] + "..."
    return md_inline(text)  # links, images, HTML, mentions made inert (report/_markup.py)


def env_lines(env: dict, it: Item) -> list[str]:
    def g(k):
        v = env.get(k)
        return "unknown" if v in (None, "") else str(v)

    jaxlib = g("jaxlib")
    if env.get("jaxlib_git_hash"):
        jaxlib += f" (git {env['jaxlib_git_hash']})"
    return [
        f"jax:             {it.jax}",
        f"jaxlib:          {jaxlib}",
        f"cuda plugin:     {g('cuda_plugin')}",
        f"cuda pjrt:       {g('cuda_pjrt')}",
        f"python:          {g('python')}",
        f"platform:        {g('platform')}",
        f"XLA_FLAGS:       {_xla_flags(env)}",
        f"target:          {it.target}",
        f"profile:         {it.profile} (compiler options {json.dumps((env.get('compiler_options') or {}).get(it.profile, {}))})",
        f"mode:            {it.mode}",
    ]


def _xla_flags(env: dict) -> str:
    """As recorded: '(not set)' when the run recorded an empty XLA_FLAGS; 'unknown' only when it recorded nothing."""
    if "xla_flags" not in env or env["xla_flags"] is None:
        return "unknown"
    return env["xla_flags"] or "(not set)"


def _not_a_bug(it: Item) -> bool:
    """A FAIL whose change against the golden is an improvement or a rename: update the golden, file nothing."""
    v = it.outcome.verdict
    return it.code is FAIL and v is not None and not v.is_regression


def regressed_since(it: Item, model: Model) -> str:
    """The oldest JAX version from which the row has failed with this same signature (it.jax at the latest); for a
    model's contract, with the same FP8 facts lost (its kernels move at every release). `on every version tested`
    when that is the oldest version the row ran on and it ran on more than one."""
    since = it.jax
    items = [o for o in model.row_items(it.row) if vkey(o.jax) <= vkey(it.jax)]
    for o in reversed(items[:-1]):
        if o.code is not FAIL or _same_failure(o.outcome) != _same_failure(it.outcome):
            break
        since = o.jax
    ran = [o for o in model.row_items(it.row) if o.outcome.signature is not None]
    if len(ran) > 1 and all(o.code is FAIL and _same_failure(o.outcome) == _same_failure(it.outcome) for o in ran):
        return "on every version tested"
    return since


def _since_text(since: str) -> str:
    return since if since.startswith("on ") else f"since jax {since}"


def _same_failure(o) -> object:
    """What two versions must share to be one regression: the signature, or a contract's lost facts."""
    if is_contract(o) and o.verdict is not None:
        return sorted((x.path, x.why) for x in o.verdict.regressions)
    return o.signature


def issue_title(it: Item, model: Model) -> str:
    """One line, whatever the case's description or a results file holds (line breaks, tabs: one space); a result
    with matmuls ends with its FP8 answer (`, now FP8 14/20 gemms, 73 % of FLOPs`)."""
    fp8 = answer(it.outcome).headline if attributed(it.outcome.signature) else ""  # a model's, not a pattern's
    return " ".join(_title(it, model).split()) + (f" (now {fp8})" if fp8 else "")


def _title(it: Item, model: Model) -> str:
    pattern, gemm = pattern_of(it), gemm_target(it)
    v = it.outcome.verdict
    if _not_a_bug(it) and v is not None:
        return (f"[fp8-check] {it.case} on {it.target}/{it.profile}: the golden is out of date on jax {it.jax} "
                f"({v.cls}: {v.summary(limit=1)}) — not an upstream bug")
    if it.code is FAIL and v is not None and is_contract(it.outcome) and it.baseline is None:
        lost = v.regressions[0].why if v.regressions else v.summary(limit=1)  # the model against its own golden
        return f"[fp8-check] {it.case} on {it.target}/{it.profile} regressed against its golden on jax {it.jax}: {lost}"
    if it.code is FAIL and v is not None:
        lost = v.regressions[0].why if v.regressions else v.summary(limit=1)
        return f"[XLA:GPU] FP8 {pattern} regressed {_since_text(regressed_since(it, model))}: {lost}"
    good, _, _ = version_story(it, model)
    older = [v for v in good if vkey(v) < vkey(it.jax)]
    newer = [v for v in good if vkey(v) > vkey(it.jax)]
    if it.code is XPASS:
        ki = it.outcome.known_issue or {}
        return f"[XLA:GPU] FP8 {pattern} fuses into {gemm} again on jax {it.jax}: {ki.get('url', 'known issue')} no longer reproduces"
    if it.code is UNRESOLVED:
        when = f" (compiled on {older[-1]})" if older else (f" (compiles on {newer[0]})" if newer else "")
        return f"[XLA:GPU] FP8 {pattern} fails to compile for {it.target} on jax {it.jax}{when}"
    if older:
        what = what_changed(it.outcome.diffs, gemm)  # issue 12: class-aware
        if what:
            return f"[XLA:GPU] FP8 {pattern}: {what} on jax {it.jax} (worked on {older[-1]})"
        return f"[XLA:GPU] FP8 {pattern} no longer fuses into {gemm} on jax {it.jax} (worked on {older[-1]})"
    if newer:
        return f"[XLA:GPU] FP8 {pattern} does not fuse into {gemm} on jax {it.jax} (fuses on {newer[0]})"
    return f"[XLA:GPU] FP8 {pattern} does not fuse into {gemm} on jax {it.jax}"


def summary(it: Item, model: Model) -> str:
    """The opening paragraph: what happens, where, and since when."""
    o, gemm = it.outcome, gemm_target(it)
    good, _, _ = version_story(it, model)
    where = (f"for {md_inline(it.target.upper())} ({'deviceless, from the target spec; no GPU needed' if it.mode == 'deviceless' else 'on a local GPU'}), "
             f"profile {code_span(it.profile)}")
    if it.code is XPASS:
        ki = o.known_issue or {}
        return (f"The known issue {md_inline(ki.get('url', ''))} ({md_inline(ki.get('summary') or 'no summary')}; expected on jax "
                f"{md_inline(ki.get('jax', '?'))}) no longer reproduces on jax {it.jax}: compiling the FP8 pattern below {where}, "
                f"XLA fuses it into {code_span(gemm)} again, as the fp8-check golden expects. This is a comment for that "
                "issue (it can probably be closed), not a new one.")
    if it.code is UNRESOLVED:
        first = (o.reason.strip().splitlines() or ["unknown error"])[0]
        return (f"Compiling the FP8 pattern below {where} fails on jax {it.jax} with {code_span(first[:300])}"
                + (f"; it compiled on jax {', '.join(good)}." if good else "."))
    if _not_a_bug(it) and o.verdict is not None:
        return (f"Not an upstream bug: on jax {it.jax} the fusion of this case changed against its golden {where}, and "
                f"the change is {o.verdict.cls} ({o.verdict.summary()}). Nothing got slower, so there is nothing to file: "
                f"review the change and update the golden with `fp8-check bless -k {it.case} --target {it.target} "
                f"--profile {it.profile}` (or `fp8-check bless --from-matrix` for a version range).")
    found = gemm_summary(o.signature) or "no gemm"
    changed = "; ".join(f"{code_span(d.path)}: " + " → ".join(md_inline(s) for s in _sides(d))
                        for d in o.diffs[:4])
    if len(o.diffs) > 4:
        changed += f"; and {len(o.diffs) - 4} more"
    older = [v for v in good if vkey(v) < vkey(it.jax)]
    lead = ""
    if o.verdict is not None and o.verdict.is_regression:
        worse = "; ".join(dict.fromkeys(x.why for x in o.verdict.regressions)) or o.verdict.summary()
        lead = (f"Regression ({o.verdict.cls}) {_since_text(regressed_since(it, model))}: {worse}"
                + (f" (better at the same time: {'; '.join(dict.fromkeys(x.why for x in o.verdict.improvements))})"
                   if o.verdict.improvements else "") + ". ")
        if o.verdict.cost is not None:  # harness/fp8_check/cost/_model.py: a roofline estimate, not a measurement
            lead += f"Cost: {o.verdict.cost.text()} (roofline estimate from the compiled HLO, not a measurement" \
                + (f"; {o.verdict.cost.note}" if o.verdict.cost.note else "") + "). "
    if o.diffs and all(is_device_field(d.path) for d in o.diffs):
        return lead + (f"On jax {it.jax}, compiling the FP8 matmul below {where}, XLA rewrites it into {code_span(gemm)} with a "
                       f"type combination the gemm library has no kernel for: {changed}. It compiles without the GPU "
                       "and fails on the device. XLA should not rewrite what the library cannot run (keep the "
                       "requantization outside the library call, or emit a combination the library's FP8 table has).")
    if o.diffs and all(is_collective_path(d.path) for d in o.diffs):
        return lead + (f"On jax {it.jax}, compiling the FP8 matmul below {where}, the gemms are what the golden "
                       f"expects ({code_span(gemm)}); what changed is the collectives around them: {changed}. The optimized "
                       f"HLO now has {found}.")
    what = what_changed(o.diffs, gemm) if older else None  # issue 12: class-aware
    if what:
        return lead + (f"On jax {it.jax}, compiling the FP8 matmul below {where}, XLA still emits {code_span(gemm)}, but compared "
                       f"with jax {older[-1]}: {what}. The optimized HLO now has {found}. Fusion signature changes: {changed}.")
    return lead + (f"On jax {it.jax}, XLA {'no longer rewrites' if older else 'does not rewrite'} the FP8 matmul below "
            f"into a single {code_span(gemm)} with its scales and epilogue fused, when compiling {where}"
            + (f"; jax {older[-1]} did." if older else
               f"; it does on jax {', '.join(good)} (a newer version may already have fixed it)." if good else ".")
            + f" The optimized HLO now has {found}. Fusion signature changes: {changed or 'none recorded'}.")


def _upstream(it: Item, model: Model) -> UpstreamParts:
    """Issue 12: the XLA range, and what `bisect --explain` saved (minimal repro, first diverging pass, XLA test)."""
    good, _, _ = version_story(it, model)
    return parts_for(it.case, it.target, it.profile, it.jax, good)


def upstream_section(it: Item, model: Model) -> list[str]:
    analysis = _upstream(it, model).analysis
    return [analysis] if analysis else []


def reproducer_section(it: Item, model: Model) -> list[str]:
    minimal = _upstream(it, model).repro
    if minimal:
        return [minimal]
    return ["### Reproducer", "",
            f"Script (its header lists what it needs, `python repro.py --requirements` prints them; on a GPU: `pip install "
            f"\"{platform_of(it.target).install(it.jax)}\"`): `python repro.py` compiles "
            f"for {md_inline(it.target)} without a GPU and prints the optimized HLO; `python repro.py --device` compiles on a "
            "local GPU.", "", fence(it.repro or "# (no repro script recorded)", "python"), ""]


def error_section(it: Item, model: Model) -> list[str]:
    if it.code is not UNRESOLVED:
        return []
    return ["### Error", "", fence("\n".join(it.outcome.reason.strip().splitlines()[-40:])), ""]


def hlo_section(it: Item, model: Model) -> list[str]:
    """The ENTRY computations of the baseline and this result, else expected vs actual signature."""
    o, base = it.outcome, it.baseline
    if base is not None and base.outcome.hlo and o.hlo:
        return ["### Optimized HLO, ENTRY computation (metadata removed)", "",
                f"{'Expected' if base.code.matches_golden else 'Before'}, jax {base.jax} ({base.code}):", "",
                fence(entry_excerpt(base.outcome.hlo)), "", f"Actual, jax {it.jax} ({it.code}):", "",
                fence(entry_excerpt(o.hlo)), ""]
    if o.expected is None and o.signature is None:
        return []
    parts = ["### Expected vs actual fusion signature", "",
             "Expected (the fp8-check golden; it stores the signature, not HLO):", "", fence(to_yaml(o.expected) or "(none)", "yaml"),
             "", f"Actual, jax {it.jax}:", "", fence(to_yaml(sig_dict(o.signature)) or "(none)", "yaml"), ""]
    if o.hlo:
        parts += [f"Optimized HLO on jax {it.jax}, ENTRY computation (metadata removed):", "", fence(entry_excerpt(o.hlo)), ""]
    return parts


def layers_section(it: Item, model: Model) -> list[str]:
    """Which layers run in FP8 (layer path and pass from the HLO metadata), and the coverage."""
    text = layers_text(it.outcome.signature)
    return ["### FP8 by layer", "", fence(text), ""] if text else []


def _sides(d) -> tuple[str, str]:
    """A differing field's two sides as the body states them: a long list (a model's launches) as its item count and
    what was added, removed and moved (verdict/_comparator.py's `list_diff`), not two walls of values."""
    ld = list_diff(d.expected, d.found)
    if ld is not None:
        return f"{ld.before} items", ld.text(limit=8).split(": ", 1)[1]
    return show_expected(d), show_found(d)


def diff_table(it: Item, model: Model) -> list[str]:
    diffs = it.outcome.diffs
    if not diffs:
        return []
    return (["| field | expected | found |", "|---|---|---|"]
            + [f"| {code_span(d.path).replace('|', '\\|')} | {md_cell(_sides(d)[0])} | {md_cell(_sides(d)[1])} |"
               for d in diffs[:30]] + [""])


def versions_section(it: Item, model: Model) -> list[str]:
    good, bad, other = version_story(it, model)
    parts = ["### Versions", "",
             f"- Fuses as expected: {', '.join('jax ' + v for v in good) or 'no version in these results'}",
             f"- Broken: {', '.join('jax ' + v for v in bad) or ('jax ' + it.jax if it.code is UNRESOLVED else 'none')}"]
    if other:
        parts.append(f"- Other outcomes: {', '.join('jax ' + v for v in other)}")
    return parts + [""]


def environment_section(it: Item, model: Model) -> list[str]:
    return ["### Environment", "", fence("\n".join(env_lines(it.env, it))), "",
            "Collected by fp8-check (case `" + it.case.replace("`", "'") + "`); "
            "`python -c \"import jax; jax.print_environment_info()\"` prints the same for a local install.", ""]


def collectives_section(it: Item, model: Model) -> list[str]:
    """A sharded compile: each collective with the dtype it moves and its bytes per device, next to the gemms."""
    sig = it.outcome.signature
    if sig is None or not sig.collectives:
        return []
    rows = [f"| {c.op}{' (' + c.loop + ')' if c.loop else ''} | {c.dtype} | {c.shape} | {c.bytes} | {c.groups} | "
            f"{md_cell(c.layer or '-')} |" for c in sig.collectives]
    gemms = "; ".join(f"{code_span(g.target)} {md_inline('x'.join(g.operand_dtypes))}->{md_inline(g.output)}"
                      for g in sig.gemms) or "none"
    return (["### Collectives (sharded compile)", "", f"Gemms: {gemms}", "",
             "| collective | dtype | shape per device | bytes per device | groups | layer |", "|---|---|---|---|---|---|"]
            + rows[:40] + [""])


SECTIONS = (reproducer_section, error_section, hlo_section, collectives_section, diff_table, layers_section,
            versions_section, upstream_section, environment_section)


def issue_markdown(it: Item, model: Model) -> str:
    """A ready-to-paste upstream issue body (title first) for a FAIL/XPASS/UNRESOLVED result."""
    parts = [f"# {md_inline(issue_title(it, model))}", "", summary(it, model), ""]
    for section in SECTIONS:
        parts += section(it, model)
    body = "\n".join(parts)
    if len(body) > MARKDOWN_LIMIT:
        body = body[:MARKDOWN_LIMIT - 200] + "\n\n…(truncated to keep the issue body under 60 KB; see the report)\n"
    return body


def markdown_for(inputs: list[Results], case: str, target: str | None = None, profile: str | None = None,
                 jax: str | None = None) -> list[str]:
    """The issue bodies for `case`'s results that get one: newest JAX version first, one per target/profile."""
    model = build_model(inputs)
    mine = [it for it in model.items if it.case == case and (not target or it.target == target)
            and (not profile or it.profile == profile) and (not jax or it.jax == jax)]
    if not mine:
        known = sorted({it.case for it in model.items})
        raise ReportError(f"no result for case '{case}'" + (" with the given --target/--profile/--jax" if (target or profile or jax) else "")
                          + f"; cases in these results: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}")
    bad = [it for it in mine if it.code.file_upstream]
    declared = [it for it in mine if it.code is XFAIL and it.outcome.verdict is not None]
    if not bad and declared:  # a declared known issue, not filed upstream yet: its body, with what it costs
        return [issue_markdown(it, model) for it in sorted(declared, key=lambda it: (it.row, vkey(it.jax)))]
    if not bad:
        seen = ", ".join(f"{it.target}/{it.profile} jax {it.jax}: {it.code}" for it in mine)
        names = "/".join(c.name for c in CODES if c.file_upstream)
        raise ReportError(f"case '{case}' has no {names} result ({seen})")
    if jax:
        return [issue_markdown(it, model) for it in sorted(bad, key=lambda it: it.row)]
    return [issue_markdown(it, model) for it in first_bad_items(model, bad)]


def first_bad_items(model: Model, among: list[Item] | None = None) -> list[Item]:
    """Per row, the result an issue is filed from: the FIRST bad version of the row's newest run of failures
    with the same outcome and signature (its repro is the smallest step, and `bisect --explain` saved its
    explanation for that pair). Rows in order of their newest failure, newest first."""
    bad = [it for it in (among if among is not None else model.items) if it.code.is_failure]
    newest: dict[tuple, Item] = {}
    for it in sorted(bad, key=lambda it: vkey(it.jax), reverse=True):
        newest.setdefault(it.row, it)
    out = []
    for row, last in newest.items():
        first = last
        for it in reversed([o for o in model.row_items(row) if vkey(o.jax) < vkey(last.jax)]):
            if it.code is not last.code or it.outcome.signature != last.outcome.signature:
                break
            first = it
        out.append(first)
    return out

