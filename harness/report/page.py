"""Stage 7: the HTML report and the upstream issue bodies.

`fp8-check report RESULTS.json... -o reports/NAME.html` turns one or more
results files (schema fp8-check/results/1; or one merged file whose results
hold several `jax` values) into a single self-contained HTML page: the outcome
counts, the case x JAX version (x target/profile) grid, and per result its
description, YAML, repro script, expected vs actual signature, a diff of the
normalized optimized HLO against the last good JAX version, the StableHLO and
the environment; plus, for every FAIL/XPASS/UNRESOLVED, a ready markdown issue
body. `fp8-check report --markdown CASE RESULTS.json...` prints that body.

The page needs no server and no network: CSS and JS are inline, every result's
data sits in a JSON data island (`<` `>` `&` escaped as \\u003c \\u003e \\u0026)
that the script renders with textContent only, and a Content-Security-Policy
allows nothing but the page's own script (by hash) and inline styles.
"""

from __future__ import annotations

import base64
import difflib
import functools
import hashlib
import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import jinja2
import yaml
from packaging.version import InvalidVersion, Version

from harness.pipeline.golden import atomic_write
from harness.pipeline import results as results_mod
from harness.pipeline.signature import Signature
from harness.report.terminal import gemm_summary as _gemm_summary


def gemm_summary(sig: dict | None) -> str:
    return _gemm_summary(Signature.from_dict(sig)) if sig else ""


def _doc(res: results_mod.Results) -> dict:
    """Bridge: a typed Results as the dict this module reads, with each result's repro rendered."""
    d = results_mod.to_json(res)
    d["_path"] = res.path or ""
    for r, o in zip(d["results"], res.outcomes):
        r["source"] = results_mod.repro_for(res, o)
    return d

CODES = ("PASS", "XFAIL", "UNSUPPORTED", "FAIL", "XPASS", "UNRESOLVED", "NEW")
FILE_CODES = ("FAIL", "XPASS", "UNRESOLVED")  # results that get a "File upstream" block
GOOD_CODES = ("PASS", "XPASS")  # the signature matches the golden
OK_CODES = ("PASS", "XFAIL", "UNSUPPORTED")
TEXT_FIELDS = ("source", "yaml", "hlo", "stablehlo")

SIZE_BUDGET = 4_500_000  # bytes; the report must stay under 5 MB
LEVELS = (0, 1, 2, 3, 4)  # how much text is left out to stay under SIZE_BUDGET; see _payload
MAX_TEXT = 256_000  # characters of one HLO/StableHLO/source kept in the page
MAX_TEXT_TIGHT = 48_000
MARKDOWN_LIMIT = 60_000  # characters of an issue body
JAX_REPO = "https://github.com/jax-ml/jax"
NEW_ISSUE = "https://github.com/openxla/xla/issues/new"


# ---------------------------------------------------------------- HLO normalization

_PREAMBLE_HEADERS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_REF_RE = re.compile(r"%(" + _NAME + r")")
_PARAM_RE = re.compile(r"([(,]\s*)(" + _NAME + r")(?=: )")
_SUFFIX_RE = re.compile(r"(?:\.(?:\d+|clone))+$")
_FINGERPRINT_RE = re.compile(r",?\s*\bfingerprint\w*=\"[^\"]*\"")
_SCHED_RE = re.compile(r",?\s*\bscheduling_name=\"[^\"]*\"")
# metadata={...}: key=value pairs whose values are quoted strings (which may hold braces) or plain tokens.
_METADATA_RE = re.compile(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')


def _brace_end(text: str, start: int) -> int:
    """Index just past the `}` matching the `{` at text[start], skipping quoted strings."""
    depth, i, quote = 0, start, False
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(text)


def _split_top(text: str) -> list[str]:
    """Split `a="x,y",b={1,2}` on commas outside quotes and braces."""
    parts, depth, quote, cur, i = [], 0, False, [], 0
    while i < len(text):
        ch = text[i]
        cur.append(ch)
        if quote:
            if ch == "\\" and i + 1 < len(text):
                i += 1
                cur.append(text[i])
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == "," and depth == 0:
            cur.pop()
            parts.append("".join(cur).strip())
            cur = []
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def _edit_attr(line: str, name: str, keep_entry=None) -> str:
    """Remove attribute `name={...}` from an HLO line, or keep only entries where keep_entry(entry)."""
    pat = re.compile(r"(,\s*|\s)" + re.escape(name) + r"=\{")
    pos = 0
    while True:
        m = pat.search(line, pos)
        if not m:
            return line
        brace = m.end() - 1
        end = _brace_end(line, brace)
        kept = [] if keep_entry is None else [e for e in _split_top(line[brace + 1:end - 1]) if keep_entry(e)]
        replacement = f"{m.group(1)}{name}={{{','.join(kept)}}}" if kept else ("" if m.group(1).startswith(",") else " ")
        line = line[:m.start()] + replacement + line[end:]
        pos = m.start() + len(replacement)


def normalize_hlo(text: str | None, rename: bool = True) -> str:
    return _normalize_cached(text, rename) if text else ""


@functools.lru_cache(maxsize=1024)
def _normalize_cached(text: str, rename: bool) -> str:
    return _normalize(text, rename)


def _normalize(text: str | None, rename: bool = True) -> str:
    """Optimized HLO with what differs run to run or version to version, but not in structure, removed.

    Drops the FileNames/FunctionNames/FileLocations/StackFrames preamble,
    `metadata={...}`, fingerprints, `scheduling_name`; with `rename`, renames every
    `%name` (and computation parameter) canonically, in order of appearance:
    `%stem.N`, where stem is the name without `.clone`/`.<digits>` suffixes and N
    counts the stem's names from 0.
    """
    if not text:
        return ""
    out: list[str] = []
    in_preamble = False
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped in _PREAMBLE_HEADERS:
            in_preamble = True
            continue
        if in_preamble:
            if re.match(r"^\d+\s", stripped):
                continue
            in_preamble = False
            if not stripped:
                continue
        line = raw
        if "metadata={" in line:
            line = _METADATA_RE.sub("", line)
            if "metadata={" in line:  # nested braces: the slow, exact way
                line = _edit_attr(line, "metadata")
        if "frontend_attributes={" in line:
            line = _edit_attr(line, "frontend_attributes", keep_entry=lambda e: not e.startswith("fingerprint"))
        if "fingerprint" in line:
            line = _FINGERPRINT_RE.sub("", line)
        if "scheduling_name" in line:
            line = _SCHED_RE.sub("", line)
        line = line.rstrip().removesuffix(",").rstrip()
        if not line and out and not out[-1]:
            continue
        out.append(line)
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    if rename:
        out = _rename(out)
    return "\n".join(out) + ("\n" if out else "")


def _rename(lines: list[str]) -> list[str]:
    names: dict[str, str] = {}
    per_stem: Counter = Counter()

    def canon(name: str) -> str:
        if name not in names:
            stem = _SUFFIX_RE.sub("", name) or name
            names[name] = f"{stem}.{per_stem[stem]}"
            per_stem[stem] += 1
        return names[name]

    out = []
    for line in lines:
        header = line.rstrip().endswith("{") and (line.startswith("%") or line.startswith("ENTRY"))
        if header:
            # `%comp (p.1: f32[], q: ...) -> ... {`: the parameters have no `%`.
            head, _, rest = line.partition("(")
            head = _REF_RE.sub(lambda m: "%" + canon(m.group(1)), head)
            rest = _PARAM_RE.sub(lambda m: m.group(1) + canon(m.group(2)), "(" + rest)
            out.append(head + rest)
        else:
            out.append(_REF_RE.sub(lambda m: "%" + canon(m.group(1)), line))
    return out


def entry_excerpt(hlo: str | None, max_line: int = 1500) -> str:
    """The ENTRY computation's instructions (no parameters) of an HLO module, metadata stripped, names kept."""
    text = normalize_hlo(hlo, rename=False)
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("ENTRY"):
            inside = True
            lines.append(line)
            continue
        if inside:
            if line.startswith("}"):
                lines.append(line)
                break
            if " parameter(" in line:
                continue
            lines.append(line if len(line) <= max_line else line[:max_line] + " …")
    return "\n".join(lines)


# ---------------------------------------------------------------- loading

class ReportError(ValueError):
    pass


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not JSON: {exc}") from None


def load_docs(paths: Iterable[Path]) -> list[dict]:
    """Results documents from results files (fp8-check/results/1) and matrix files (fp8-check/matrix/1)."""
    docs = []
    for path in paths:
        doc = _read_json(path)
        schema = str(doc.get("schema", "")) if isinstance(doc, dict) else ""
        if schema.startswith("fp8-check/matrix/"):
            docs += matrix_docs(doc, Path(path))
            continue
        if not schema.startswith("fp8-check/results/"):
            raise ReportError(f"{path}: not an fp8-check results file (no 'schema': 'fp8-check/results/1')")
        if not isinstance(doc.get("results"), list):
            raise ReportError(f"{path}: field 'results': expected a list")
        try:
            docs.append(_doc(results_mod.from_json(doc, str(path))))
        except results_mod.ResultsError as exc:
            raise ReportError(str(exc)) from None
    return docs


def matrix_docs(doc: dict, path: Path) -> list[dict]:
    """A matrix document's versions as results documents: each version's own results file when it can be read
    (it has the HLO and repro texts), else the matrix's light results."""
    out = []
    for entry in doc.get("versions") or []:
        if not isinstance(entry, dict):
            continue
        rf = entry.get("results_file")
        full = None
        for cand in ([Path(rf), path.parent / rf, path.parent / Path(rf).name] if rf else []):
            if cand.is_file():
                try:
                    full = load_docs([cand])[0]
                    break
                except ReportError:
                    pass
        if full is None:
            full = {"schema": "fp8-check/results/1", "environment": entry.get("environment") or {"jax": entry.get("jax")},
                    "results": [r for r in entry.get("results") or [] if isinstance(r, dict)], "_path": str(path)}
        if entry.get("status") not in (None, "ran", "unsupported") or entry.get("error"):
            full["_version_note"] = f"jax {entry.get('jax')}: {entry.get('status')}" + (
                f": {str(entry['error']).strip().splitlines()[0]}" if entry.get("error") else "")
        out.append(full)
    return out


def _vkey(v: str):
    try:
        return (0, Version(v), v)
    except InvalidVersion:
        return (1, Version("0"), v)


def _env_for(doc: dict, result: dict) -> dict:
    """The environment a result was produced in; merged files may carry one per JAX version."""
    if isinstance(result.get("environment"), dict):
        return result["environment"]
    jax = result.get("jax")
    envs = doc.get("environments")
    if isinstance(envs, dict) and isinstance(envs.get(jax), dict):
        return envs[jax]
    if isinstance(envs, list):
        for e in envs:
            if isinstance(e, dict) and e.get("jax") == jax:
                return e
    env = doc.get("environment") or {}
    if not env.get("jax") or env.get("jax") == jax:
        return env
    # A merged file whose top-level environment is another version's: keep only what is run-wide.
    return {k: env[k] for k in ("mode", "targets", "profiles", "compiler_options") if k in env} | {"jax": jax}


@dataclass
class Item:
    idx: int
    r: dict
    env: dict
    source_file: str
    baseline: "Item | None" = None
    extra: dict = field(default_factory=dict)

    def __getattr__(self, name):  # r["case"] as item.case etc.
        if name in ("case", "target", "profile", "mode", "jax"):
            return str(self.r.get(name, ""))
        raise AttributeError(name)

    @property
    def outcome(self) -> str:
        return str(self.r.get("outcome", "UNRESOLVED"))

    @property
    def row(self) -> tuple:
        return (self.case, self.target, self.profile, self.mode)


@dataclass
class Model:
    items: list[Item]
    versions: list[str]
    rows: list[tuple]  # (case, target, profile, mode)
    cells: dict  # (row, jax) -> Item
    inputs: list[str]
    duplicates: int = 0
    version_notes: list[str] = field(default_factory=list)

    def row_items(self, row: tuple) -> list[Item]:
        return [self.cells[(row, v)] for v in self.versions if (row, v) in self.cells]


def build_model(docs: list[dict]) -> Model:
    cells: dict = {}
    order: list[tuple] = []
    duplicates = 0
    items: list[Item] = []
    for doc in docs:
        for r in doc["results"]:
            if not isinstance(r, dict) or "case" not in r:
                continue
            it = Item(0, r, _env_for(doc, r), doc.get("_path", ""))
            key = (it.row, it.jax)
            if key in cells:
                duplicates += 1  # a later file wins
                items.remove(cells[key])
            else:
                order.append(it.row)
            cells[key] = it
            items.append(it)
    rows = list(dict.fromkeys(order))
    case_order = {c: i for i, c in enumerate(dict.fromkeys(r[0] for r in rows))}
    rows.sort(key=lambda r: (case_order[r[0]], r[1], r[2], r[3]))
    versions = sorted({it.jax for it in items}, key=_vkey)
    row_pos = {r: i for i, r in enumerate(rows)}
    items.sort(key=lambda it: (row_pos[it.row], _vkey(it.jax)))
    for i, it in enumerate(items):
        it.idx = i
    model = Model(items, versions, rows, cells, list(dict.fromkeys(d.get("_path", "") for d in docs)), duplicates,
                  [d["_version_note"] for d in docs if d.get("_version_note")])
    for it in items:
        it.baseline = _baseline(it, model)
    return model


def _baseline(it: Item, model: Model) -> Item | None:
    """The result to diff `it` against: the last good JAX version before it, else the first good one after.

    For an XPASS (a known issue no longer reproduces), the last version where it still failed.
    """
    others = [o for o in model.row_items(it.row) if o is not it and o.r.get("hlo")]
    if it.outcome == "XPASS":
        bad = [o for o in others if o.outcome in ("XFAIL", "FAIL") and _vkey(o.jax) < _vkey(it.jax)]
        if bad:
            return bad[-1]
    good = [o for o in others if o.outcome in GOOD_CODES]
    older = [o for o in good if _vkey(o.jax) < _vkey(it.jax)]
    if older:
        return older[-1]
    newer = [o for o in good if _vkey(o.jax) > _vkey(it.jax)]
    return newer[0] if newer else None


# ---------------------------------------------------------------- signatures and diffs

def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (str, int, float)):
        return str(value)
    return json.dumps(value, separators=(", ", ": "))


def _flatten(value: Any, path: str = "", out: dict | None = None) -> dict:
    """Signature -> {dotted path: leaf}, the paths golden.compare reports."""
    out = {} if out is None else out
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for i, v in enumerate(value):
            _flatten(v, f"{path}[{i}]", out)
    else:
        out[path] = value
    return out


def signature_rows(expected: dict | None, found: dict | None, diffs: list[dict]) -> list[list]:
    """[field, expected, found, differs] for the side-by-side table."""
    e, f = _flatten(expected or {}), _flatten(found or {})
    diff_paths = {d.get("path") for d in diffs or []}
    rows = []
    for path in list(e) + [p for p in f if p not in e]:
        es = _show(e[path]) if path in e else "(absent)"
        fs = _show(f[path]) if path in f else "(absent)"
        differs = path in diff_paths or (expected is not None and found is not None and es != fs)
        rows.append([path, es if expected is not None else "", fs if found is not None else "", bool(differs)])
    # a diff whose path is a prefix that was not flattened (e.g. a whole list of records vs absent)
    known = set(e) | set(f)
    for d in diffs or []:
        if d.get("path") not in known:
            rows.append([d.get("path", ""), _show(d.get("expected")), _show(d.get("found")), True])
    return rows


def _yaml(value: Any) -> str:
    if value is None:
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=None, width=10_000)


def hlo_diff(it: Item) -> tuple[str, str]:
    """(unified diff text, note) for `it`: normalized HLO vs its baseline, else its signature vs the golden."""
    base = it.baseline
    if base is not None and it.r.get("hlo"):
        a, b = normalize_hlo(base.r["hlo"]), normalize_hlo(it.r["hlo"])
        diff = "".join(difflib.unified_diff(
            a.splitlines(True), b.splitlines(True),
            f"jax {base.jax} ({base.outcome}): normalized optimized HLO",
            f"jax {it.jax} ({it.outcome}): normalized optimized HLO", n=3))
        note = (f"Normalized optimized HLO of jax {base.jax} ({base.outcome}, the "
                f"{'last' if _vkey(base.jax) < _vkey(it.jax) else 'first'} "
                f"{'failing' if base.outcome in ('FAIL', 'XFAIL') else 'good'} version in these results) vs jax {it.jax}; "
                "metadata, fingerprints and scheduling names removed, names renamed in order of appearance.")
        if not diff:
            note += " The two are identical."
        return diff, note
    exp, found = it.r.get("expected"), it.r.get("signature")
    if exp is None and found is None:
        return "", "No signature to compare (the case did not compile or was not judged)."
    diff = "".join(difflib.unified_diff(
        _yaml(exp).splitlines(True), _yaml(found).splitlines(True), "golden signature (expected)",
        f"jax {it.jax} signature (found)", n=3))
    why = ("no other JAX version in these results is good for this case" if it.outcome != "PASS"
           else "this result matches it")
    return diff, ("The golden stores only the fusion signature, not HLO, and " + why +
                  ": showing the diff of the signatures (golden vs found) instead of an HLO diff.")


# ---------------------------------------------------------------- the upstream issue body

_PATTERN_WORDS = [
    ("dequant", lambda v: f"{v} dequant"),
    ("input_scales", lambda v: None if v in (None, False, "none") else ("scaled inputs" if v in ("both", True) else f"scaled {v}")),
    ("output_scale", lambda v: None if v in (None, False, "none") else f"output scale ({v})"),
    ("clamp", lambda v: "clamp" if v else None),
    ("epilogue", lambda v: None if v in (None, "none") else str(v)),
    ("bias", lambda v: "bias" if v else None),
    ("amax", lambda v: None if v in (None, False, "none") else "amax"),
    ("out_dtype", lambda v: f"{_short_dtype(v)} output" if v else None),
]


def _short_dtype(v: str) -> str:
    return {"float8_e4m3fn": "E4M3", "float8_e5m2": "E5M2", "bfloat16": "bf16", "float32": "f32",
            "float16": "f16"}.get(str(v), str(v))


@functools.lru_cache(maxsize=4096)
def _load_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError:
        return {}


def pattern_of(r: dict) -> str:
    """A short name for the case's pattern, from its YAML (falls back to the description)."""
    doc = _load_yaml(str(r.get("yaml") or ""))
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
    desc = str(r.get("description") or r.get("case") or "matmul").split(" -> ")[0]
    return desc if len(desc) <= 90 else desc[:87] + "..."


def _gemm_target(sig: dict | None) -> str:
    if sig and sig.get("gemms"):
        return str(sig["gemms"][0].get("target", "a gemm"))
    return "a gemm"


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


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
        f"XLA_FLAGS:       {g('xla_flags')}",
        f"target:          {it.target}",
        f"profile:         {it.profile} (compiler options {json.dumps((env.get('compiler_options') or {}).get(it.profile, {}))})",
        f"mode:            {it.mode}",
    ]


def version_story(it: Item, model: Model) -> tuple[list[str], list[str], list[str]]:
    good, bad, other = [], [], []
    for o in model.row_items(it.row):
        (good if o.outcome in GOOD_CODES else bad if o.outcome in ("FAIL", "XFAIL") else other).append(o)
    return [o.jax for o in good], [o.jax for o in bad], [f"{o.jax} ({o.outcome})" for o in other]


def issue_title(it: Item, model: Model) -> str:
    r = it.r
    pattern = pattern_of(r)
    gemm = _gemm_target(r.get("expected") or (it.baseline.r.get("signature") if it.baseline else None))
    good, _, _ = version_story(it, model)
    older = [v for v in good if _vkey(v) < _vkey(it.jax)]
    newer = [v for v in good if _vkey(v) > _vkey(it.jax)]
    if it.outcome == "XPASS":
        ki = r.get("known_issue") or {}
        return f"[XLA:GPU] FP8 {pattern} fuses into {gemm} again on jax {it.jax}: {ki.get('url', 'known issue')} no longer reproduces"
    if it.outcome == "UNRESOLVED":
        when = f" (compiled on {older[-1]})" if older else (f" (compiles on {newer[0]})" if newer else "")
        return f"[XLA:GPU] FP8 {pattern} fails to compile for {it.target} on jax {it.jax}{when}"
    if older:
        return f"[XLA:GPU] FP8 {pattern} no longer fuses into {gemm} on jax {it.jax} (worked on {older[-1]})"
    if newer:
        return f"[XLA:GPU] FP8 {pattern} does not fuse into {gemm} on jax {it.jax} (fuses on {newer[0]})"
    return f"[XLA:GPU] FP8 {pattern} does not fuse into {gemm} on jax {it.jax}"


def issue_markdown(it: Item, model: Model) -> str:
    """A ready-to-paste upstream issue body (title first) for a FAIL/XPASS/UNRESOLVED result."""
    r, env = it.r, it.env
    title = issue_title(it, model)
    good, bad, other = version_story(it, model)
    exp_sig, sig = r.get("expected"), r.get("signature")
    gemm = _gemm_target(exp_sig or (it.baseline.r.get("signature") if it.baseline else None))
    where = (f"for {it.target.upper()} ({'deviceless, from the target spec; no GPU needed' if it.mode == 'deviceless' else 'on a local GPU'}), "
             f"profile `{it.profile}`")
    diffs = r.get("diffs") or []
    if it.outcome == "XPASS":
        ki = r.get("known_issue") or {}
        summary = (f"The known issue {ki.get('url', '')} ({ki.get('summary') or 'no summary'}; expected on jax "
                   f"{ki.get('jax', '?')}) no longer reproduces on jax {it.jax}: compiling the FP8 pattern below {where}, "
                   f"XLA fuses it into `{gemm}` again, as the fp8-check golden expects. This is a comment for that "
                   "issue (it can probably be closed), not a new one.")
    elif it.outcome == "UNRESOLVED":
        first = (str(r.get("reason") or "").strip().splitlines() or ["unknown error"])[0]
        summary = (f"Compiling the FP8 pattern below {where} fails on jax {it.jax} with `{first[:300]}`"
                   + (f"; it compiled on jax {', '.join(good)}." if good else "."))
    else:
        found = gemm_summary(sig) or "no gemm"
        changed = "; ".join(f"`{d.get('path')}`: {_show(d.get('expected'))} → {_show(d.get('found'))}" for d in diffs[:4])
        if len(diffs) > 4:
            changed += f"; and {len(diffs) - 4} more"
        older = [v for v in good if _vkey(v) < _vkey(it.jax)]
        summary = (f"On jax {it.jax}, XLA {'no longer rewrites' if older else 'does not rewrite'} the FP8 matmul below "
                   f"into a single `{gemm}` with its scales and epilogue fused, when compiling {where}"
                   + (f"; jax {older[-1]} did." if older else
                      f"; it does on jax {', '.join(good)} (a newer version may already have fixed it)." if good else ".")
                   + f" The optimized HLO now has {found}. Fusion signature changes: {changed or 'none recorded'}.")
    parts = [f"# {title}", "", summary, ""]
    parts += ["### Reproducer", "",
              f"Standalone script (needs only `pip install \"jax[cuda12]=={it.jax}\"`): `python repro.py` compiles "
              f"for {it.target} without a GPU and prints the optimized HLO; `python repro.py --device` compiles on a "
              "local GPU.", "", _fence(str(r.get("source") or "# (no repro script recorded)"), "python"), ""]
    if it.outcome == "UNRESOLVED":
        err = "\n".join(str(r.get("reason") or "").strip().splitlines()[-40:])
        parts += ["### Error", "", _fence(err), ""]
    base = it.baseline
    if base is not None and base.r.get("hlo") and r.get("hlo"):
        parts += [f"### Optimized HLO, ENTRY computation (metadata removed)", "",
                  f"{'Expected' if base.outcome in GOOD_CODES else 'Before'}, jax {base.jax} ({base.outcome}):", "",
                  _fence(entry_excerpt(base.r["hlo"])), "", f"Actual, jax {it.jax} ({it.outcome}):", "",
                  _fence(entry_excerpt(r["hlo"])), ""]
    elif exp_sig is not None or sig is not None:
        parts += ["### Expected vs actual fusion signature", "",
                  "Expected (the fp8-check golden; it stores the signature, not HLO):", "", _fence(_yaml(exp_sig) or "(none)", "yaml"),
                  "", f"Actual, jax {it.jax}:", "", _fence(_yaml(sig) or "(none)", "yaml"), ""]
        if r.get("hlo"):
            parts += [f"Optimized HLO on jax {it.jax}, ENTRY computation (metadata removed):", "", _fence(entry_excerpt(r["hlo"])), ""]
    if diffs:
        parts += ["| field | expected | found |", "|---|---|---|"]
        parts += [f"| `{d.get('path')}` | {_md_cell(_show(d.get('expected')))} | {_md_cell(_show(d.get('found')))} |" for d in diffs[:30]]
        parts.append("")
    parts += ["### Versions", "",
              f"- Fuses as expected: {', '.join('jax ' + v for v in good) or 'no version in these results'}",
              f"- Broken: {', '.join('jax ' + v for v in bad) or ('jax ' + it.jax if it.outcome == 'UNRESOLVED' else 'none')}"]
    if other:
        parts.append(f"- Other outcomes: {', '.join('jax ' + v for v in other)}")
    parts += ["", "### Environment", "", _fence("\n".join(env_lines(env, it))), "",
              "Collected by fp8-check (case `" + it.case.replace("`", "'") + "`); "
              "`python -c \"import jax; jax.print_environment_info()\"` prints the same for a local install.", ""]
    body = "\n".join(parts)
    if len(body) > MARKDOWN_LIMIT:
        body = body[:MARKDOWN_LIMIT - 200] + "\n\n…(truncated to keep the issue body under 60 KB; see the report)\n"
    return body


def _md_cell(text: str) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) < 200 else text[:197] + "..."


# ---------------------------------------------------------------- the page

_TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


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


def _precompute(model: Model) -> dict[int, dict]:
    """Per result, what does not depend on how much text the page can hold: diffs and issue bodies."""
    out = {}
    for it in model.items:
        r = it.r
        if it.outcome != "PASS":
            diff, note = hlo_diff(it)
        else:
            diff, note = "", ("Matches the golden signature." if r.get("expected") is not None else "No golden for this result.")
        out[it.idx] = {
            "diff": diff, "diff_note": note,
            "markdown": issue_markdown(it, model) if it.outcome in FILE_CODES else None,
            "sig_rows": signature_rows(r.get("expected"), r.get("signature"), r.get("diffs") or []),
        }
    return out


def _payload(model: Model, pre: dict[int, dict], level: int) -> tuple[dict, list[str]]:
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
        r, p = it.r, pre[it.idx]
        ok = it.outcome in OK_CODES
        texts = {}
        for key in TEXT_FIELDS:
            value = r.get(key)
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
        ki = r.get("known_issue") if isinstance(r.get("known_issue"), dict) else None
        records.append({
            "i": it.idx, "case": it.case, "target": it.target, "profile": it.profile, "mode": it.mode,
            "jax": it.jax, "outcome": it.outcome, "reason": strings.one(str(r.get("reason") or "")),
            "description": strings.one(str(r.get("description") or "")), "file": strings.one(str(r.get("file") or "")),
            "compile_seconds": r.get("compile_seconds"), "results_file": strings.one(it.source_file),
            # [field, expected, found, differs], each text an index into the strings table
            "sig_rows": [[strings.one(a), strings.one(b), strings.one(c), 1 if d else 0] for a, b, c, d in p["sig_rows"]],
            "has_expected": r.get("expected") is not None, "has_signature": r.get("signature") is not None,
            "known_issue": ki, "env": env_index[ekey],
            "baseline": {"i": it.baseline.idx, "jax": it.baseline.jax, "outcome": it.baseline.outcome} if it.baseline else None,
            "diff": strings.add(diff) if diff else None, "diff_note": strings.one(p["diff_note"]),
            "markdown": strings.add(md), "title": md.splitlines()[0][2:] if md else None,
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


def render_html(docs: list[dict], title: str | None = None) -> str:
    model = build_model(docs)
    env = _jinja()
    script = (_TEMPLATES / "report_script.j2").read_text()
    style = (_TEMPLATES / "report_style.j2").read_text()
    if "</" in script or "</" in style:
        raise AssertionError("report_script.j2 / report_style.j2 must not contain '</'")
    script_hash = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    counts = Counter(it.outcome for it in model.items)
    codes = list(CODES) + sorted(c for c in counts if c not in CODES)
    targets = sorted({r[1] for r in model.rows})
    profiles = sorted({r[2] for r in model.rows})
    modes = sorted({r[3] for r in model.rows})
    descriptions: dict[str, str] = {}
    for it in model.items:
        descriptions.setdefault(it.case, str(it.r.get("description") or ""))
    grid = []
    for case in dict.fromkeys(r[0] for r in model.rows):
        rows = [r for r in model.rows if r[0] == case]
        for k, row in enumerate(rows):
            cells = [model.cells.get((row, v)) for v in model.versions]
            grid.append({"case": case, "first": k == 0, "span": len(rows), "target": row[1], "profile": row[2],
                         "mode": row[3], "description": descriptions.get(case, ""),
                         "search": f"{case} {descriptions.get(case, '')} {row[1]} {row[2]} {row[3]}".lower(),
                         "cells": [None if c is None else {"i": c.idx, "outcome": c.outcome, "jax": c.jax,
                                                           "known": bool(c.r.get("known_issue"))} for c in cells]})
    attention = sorted((it for it in model.items if it.outcome not in OK_CODES), key=lambda it: _vkey(it.jax), reverse=True)
    pre = _precompute(model)
    for level in LEVELS:
        payload, notes = _payload(model, pre, level)
        if level == LEVELS[-1] and len(json_island(payload)) > SIZE_BUDGET:
            notes.append("This report is larger than 5 MB even with texts left out: select fewer cases or versions.")
        html = env.get_template("report.html.j2").render(
            title=title or "fp8-check report", created=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            inputs=model.inputs, versions=model.versions, counts=counts, codes=codes, total=len(model.items),
            targets=targets, profiles=profiles, modes=modes, grid=grid, attention=attention, notes=notes,
            show_mode=len(modes) > 1, data=json_island(payload), script=script, style=style,
            script_hash=script_hash, n_rows=len(model.rows),
        )
        if len(html.encode()) <= SIZE_BUDGET:
            break
    return html


def write_report(sources: Iterable[Path | dict], out: Path, title: str | None = None) -> Path:
    """Write the HTML report for results files (paths) or results documents (dicts); returns `out`."""
    docs, paths = [], []
    for s in sources:
        if isinstance(s, results_mod.Results):
            docs.append(_doc(s))
        else:
            (docs if isinstance(s, dict) else paths).append(s)
    docs = docs + load_docs(paths)
    atomic_write(Path(out), render_html(docs, title))
    return Path(out)


def write_html(docs: list[dict], path: Path) -> None:
    """The API `fp8-check matrix` calls: results documents (one per JAX version) -> the HTML report at `path`."""
    write_report(list(docs), Path(path))


def markdown_for(docs: list[dict], case: str, target: str | None = None, profile: str | None = None,
                 jax: str | None = None) -> list[str]:
    model = build_model(docs)
    mine = [it for it in model.items if it.case == case and (not target or it.target == target)
            and (not profile or it.profile == profile) and (not jax or it.jax == jax)]
    if not mine:
        known = sorted({it.case for it in model.items})
        raise ReportError(f"no result for case '{case}'" + (" with the given --target/--profile/--jax" if (target or profile or jax) else "")
                          + f"; cases in these results: {', '.join(known[:20])}{' ...' if len(known) > 20 else ''}")
    bad = [it for it in mine if it.outcome in FILE_CODES]
    if not bad:
        seen = ", ".join(f"{it.target}/{it.profile} jax {it.jax}: {it.outcome}" for it in mine)
        raise ReportError(f"case '{case}' has no FAIL/XPASS/UNRESOLVED result ({seen})")
    # newest JAX version first; one body per target/profile
    bad.sort(key=lambda it: _vkey(it.jax), reverse=True)
    chosen: dict[tuple, Item] = {}
    for it in bad:
        chosen.setdefault(it.row, it)
    return [issue_markdown(it, model) for it in chosen.values()]


# ---------------------------------------------------------------- CLI

def cmd_report(args) -> int:
    try:
        docs = load_docs(args.results)
        if args.markdown:
            bodies = markdown_for(docs, args.markdown, args.target, args.profile, args.jax)
            sys.stdout.write("\n\n---\n\n".join(bodies))
            return 0
        out = write_report(docs, args.output, args.title)
    except ReportError as exc:
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return 2
    size = out.stat().st_size
    print(f"report: {out} ({size / 1e6:.2f} MB)")
    return 0


def register(subparsers) -> dict:
    p = subparsers.add_parser(
        "report", help="write the self-contained HTML report (or an upstream issue body) from results files",
        description="Write one self-contained HTML report from one or more results files (several JAX versions "
                    "make the case x version grid), or print the upstream issue body for a case with --markdown.")
    p.add_argument("results", nargs="+", type=Path, help="results JSON files (from `fp8-check run` or a merged matrix)")
    p.add_argument("-o", "--output", type=Path, default=Path("reports/report.html"),
                   help="HTML file to write (default: reports/report.html)")
    p.add_argument("--markdown", metavar="CASE", help="print the markdown issue body for CASE's FAIL/XPASS/UNRESOLVED result(s) instead")
    p.add_argument("--target", help="with --markdown: only this target")
    p.add_argument("--profile", help="with --markdown: only this profile")
    p.add_argument("--jax", help="with --markdown: only this JAX version (default: the newest failing one)")
    p.add_argument("--title", help="the page title")
    return {"report": cmd_report}
