"""Optimized HLO as the report shows it: normalized for diffing across versions, and the ENTRY excerpt.

Bracket matching and top-level comma splitting reuse the quote-aware scanner of
harness/fp8_check/signature/_hlo.py.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

from fp8_check.signature import match_bracket, split_top_level

_PREAMBLE_HEADERS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_REF_RE = re.compile(r"%(" + _NAME + r")")
_PARAM_RE = re.compile(r"([(,]\s*)(" + _NAME + r")(?=: )")
_SUFFIX_RE = re.compile(r"(?:\.(?:\d+|clone))+$")
_FINGERPRINT_RE = re.compile(r",?\s*\bfingerprint\w*=\"[^\"]*\"")
_SCHED_RE = re.compile(r",?\s*\bscheduling_name=\"[^\"]*\"")
# metadata={...}: key=value pairs whose values are quoted strings (which may hold braces) or plain tokens.
_METADATA_RE = re.compile(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}')


def _edit_attr(line: str, name: str, keep_entry=None) -> str:
    """Remove attribute `name={...}` from an HLO line, or keep only entries where keep_entry(entry)."""
    pat = re.compile(r"(,\s*|\s)" + re.escape(name) + r"=\{")
    pos = 0
    while True:
        m = pat.search(line, pos)
        if not m:
            return line
        brace = m.end() - 1
        end = match_bracket(line, brace) + 1
        kept = [] if keep_entry is None else [e for e in split_top_level(line[brace + 1:end - 1]) if keep_entry(e)]
        replacement = f"{m.group(1)}{name}={{{','.join(kept)}}}" if kept else ("" if m.group(1).startswith(",") else " ")
        line = line[:m.start()] + replacement + line[end:]
        pos = m.start() + len(replacement)


def normalize_hlo(text: str | None, rename: bool = True) -> str:
    """Optimized HLO with what differs run to run or version to version, but not in structure, removed.

    Drops the FileNames/FunctionNames/FileLocations/StackFrames preamble,
    `metadata={...}`, fingerprints, `scheduling_name`; with `rename`, renames every
    `%name` (and computation parameter) canonically, in order of appearance:
    `%stem.N`, where stem is the name without `.clone`/`.<digits>` suffixes and N
    counts the stem's names from 0.
    """
    return _normalize(text, rename) if text else ""


@functools.lru_cache(maxsize=1024)
def _normalize(text: str, rename: bool) -> str:
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
        line = _strip_attrs(raw).rstrip().removesuffix(",").rstrip()
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


def _strip_attrs(line: str) -> str:
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
    return line


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
