"""Load and validate YAML case files into `Case` objects.

A case file is a mapping with an optional `defaults:` mapping (merged into every
case) and a `cases:` list. Validation is strict: an unknown key, a bad value, a
wrong type or a contradictory combination raises `CaseError`, whose message is
one line naming the file, the line, the case id and the field. The fields every case
has are validated here; each kind's own fields by its module in harness/fp8_check/cases/kinds/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from fp8_check import core
from fp8_check.cases import kinds
from fp8_check.cases._model import (
    ENV_NAME_RE,
    ID_RE,
    PROFILES,
    Case,
    CaseError,
    KnownIssue,
    _choice,
    _list_of_choices,
    _near,
    _plain,
    _str,
)
from fp8_check.cases.kinds.pattern import (  # noqa: F401
    AMAX,
    DEQUANT_DTYPES,
    EPILOGUES,
    INPUT_SCALES,
    OUT_DTYPES,
    OUTPUT_SCALES,
    PATTERN_KEYS,
    REQUANTIZE,
    PatternSpec,
)
from fp8_check.targets import MULTI_DEVICE_TARGETS, canonical_target, platform_target_names, target_names

KINDS = tuple(kinds.KINDS)


def _targets(path, line, cid, fld, value) -> tuple[str, ...]:
    """A case's `targets:`: GPU and TPU spec names and any GPUxN / GPUxHOSTSxN, each in its normal form (targets.py)."""
    allowed = ", ".join([*target_names(), *platform_target_names(),
                         "GPUxN or GPUxHOSTSxN (e.g. " + ", ".join(MULTI_DEVICE_TARGETS) + ")"])
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise CaseError(path, line, cid, fld, f"expected a non-empty list, got {value!r}; allowed items: {allowed}")
    names = []
    for item in items:
        name = canonical_target(item)
        if name is None:
            raise CaseError(path, line, cid, fld, f"got {item!r}; allowed: {allowed}")
        names.append(name)
    if len(set(names)) != len(names):
        raise CaseError(path, line, cid, fld, f"names one target twice: {items!r}")
    return tuple(names)


def _known_issues(path, line, cid, value) -> tuple[KnownIssue, ...]:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not isinstance(value, list):
        raise CaseError(path, line, cid, "known_issues", f"expected a list of mappings, got {value!r}")
    out = []
    allowed = ("url", "jax", "summary", "targets", "profiles")
    for i, item in enumerate(value):
        fld = f"known_issues[{i}]"
        if not isinstance(item, dict):
            raise CaseError(path, line, cid, fld, f"expected a mapping with {', '.join(allowed)}, got {item!r}")
        line_i = getattr(item, "line", line)
        unknown = sorted(set(item) - set(allowed))
        if unknown:
            raise CaseError(path, line_i, cid, f"{fld}.{unknown[0]}", f"unknown key; allowed: {', '.join(allowed)}")
        if "jax" not in item:
            raise CaseError(path, line_i, cid, f"{fld}.jax", "missing; a known issue needs jax (a version range)")
        if "url" not in item and not item.get("summary"):
            raise CaseError(path, line_i, cid, f"{fld}.url", "missing; a known issue needs an upstream url, or a summary where none exists")
        url = _str(path, line_i, cid, f"{fld}.url", item.get("url", ""))
        if url and not re.match(r"^https?://\S+$", url):
            raise CaseError(path, line_i, cid, f"{fld}.url", f"expected an http(s) URL, got {url!r}")
        spec = _str(path, line_i, cid, f"{fld}.jax", item["jax"])
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise CaseError(path, line_i, cid, f"{fld}.jax", f"not a version range like '>=0.4.32,<0.4.34': {spec!r}") from None
        targets: tuple[str, ...] = ()
        if "targets" in item:
            targets = _targets(path, line_i, cid, f"{fld}.targets", item["targets"])
        profiles = ()
        if "profiles" in item:
            profiles = _list_of_choices(path, line_i, cid, f"{fld}.profiles", item["profiles"], PROFILES)
        summary = _str(path, line_i, cid, f"{fld}.summary", item.get("summary", ""))
        out.append(KnownIssue(url=url, jax=spec, summary=summary, targets=targets, profiles=profiles))
    return tuple(out)


def _env_names(path, line, cid, value) -> tuple[str, ...]:
    """`env:` is a list of environment variable names (their values are read when the case compiles, never here)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise CaseError(path, line, cid, "env", f"expected a list of environment variable names, got {value!r}")
    for i, name in enumerate(value):
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            raise CaseError(path, line, cid, f"env[{i}]", f"got {name!r}; a name is letters, digits and '_', not starting "
                            "with a digit (only the name: its value is read when the case compiles)")
    return tuple(dict.fromkeys(value))


def _case(path: Path, raw: Any, defaults: dict, index: int) -> Case:
    if not isinstance(raw, dict):
        raise CaseError(path, None, None, f"cases[{index}]", f"expected a mapping, got {raw!r}")
    line = getattr(raw, "line", 0)
    if "id" not in raw:
        raise CaseError(path, line, None, "id", f"missing in cases[{index}]; every case needs an id")
    cid = raw["id"]
    if not isinstance(cid, str) or not ID_RE.fullmatch(cid):
        raise CaseError(path, line, None, "id", f"got {cid!r}; an id is letters, digits, '_', '.', '-'")
    merged = {**defaults, **raw}
    kind_name = _choice(path, line, cid, "kind", merged.get("kind", kinds.DEFAULT), KINDS)
    kind = kinds.get(kind_name)
    allowed = kind.KEYS
    for key in raw:
        if key not in allowed:
            hint = f"; allowed: {', '.join(allowed)}"
            close = [k for k in allowed if _near(key, k)]
            if close:
                hint = f"; did you mean '{close[0]}'?" + hint
            raise CaseError(path, line, cid, str(key), "unknown key" + hint)
    merged = {k: v for k, v in merged.items() if k in allowed}

    kw: dict[str, Any] = {"id": cid, "file": str(path), "line": line}
    kw["yaml_text"] = yaml.safe_dump({k: _plain(v) for k, v in raw.items()}, sort_keys=False).strip()
    if "description" in merged:
        kw["description"] = _str(path, line, cid, "description", merged["description"])
    if "profiles" in merged:
        kw["profiles"] = _list_of_choices(path, line, cid, "profiles", merged["profiles"], PROFILES)
    if "targets" in merged:
        kw["targets"] = _targets(path, line, cid, "targets", merged["targets"])
    if "known_issues" in merged:
        kw["known_issues"] = _known_issues(path, line, cid, merged["known_issues"])
    if "env" in merged:
        kw["env"] = _env_names(path, line, cid, merged["env"])
    if "filecheck" in merged:
        fc = merged["filecheck"]
        if isinstance(fc, str):
            fc = {p: fc for p in kw.get("profiles", Case.profiles)}
        if not isinstance(fc, dict) or not all(isinstance(v, str) for v in fc.values()):
            raise CaseError(path, line, cid, "filecheck", "expected FileCheck text, or a mapping profile -> FileCheck text")
        for p in fc:
            _choice(path, line, cid, "filecheck", p, PROFILES)
        kw["filecheck"] = dict(fc)

    return kind.validate(path, line, cid, merged, raw, kw)


def load_file(path: Path) -> list[Case]:
    path = Path(path)
    try:
        text = core.read_text(path)
    except core.ReadError as exc:
        raise CaseError(path, None, None, None, str(exc)) from None
    try:
        doc = core.load(text, core.LineLoader)  # bounded; duplicate keys refused; mappings know their line
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
        problem = (problem.strip().splitlines() or ["unreadable"])[0]  # never the quoted snippet of the file
        raise CaseError(path, mark.line + 1 if mark else None, None, None, f"invalid YAML: {problem}") from None
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise CaseError(path, None, None, None, "expected a mapping with a 'cases' list (and optional 'defaults')")
    unknown = sorted(set(doc) - {"cases", "defaults"})
    if unknown:
        raise CaseError(path, getattr(doc, "line", None), None, str(unknown[0]), "unknown top-level key; allowed: cases, defaults")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise CaseError(path, None, None, "defaults", "expected a mapping of case fields")
    if "id" in defaults:
        raise CaseError(path, getattr(defaults, "line", None), None, "defaults.id", "ids cannot have a default")
    every_key = kinds.all_keys()
    for key in defaults:
        if key not in every_key:
            raise CaseError(path, getattr(defaults, "line", None), None, f"defaults.{key}", f"unknown key; allowed: {', '.join(PATTERN_KEYS[1:])}")
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise CaseError(path, None, None, "cases", f"expected a list of cases, got {cases!r}")
    return [_case(path, raw, defaults, i) for i, raw in enumerate(cases)]


def from_mapping(doc: dict, source: str = "<mapping>") -> Case:
    """One case from a mapping (as a case file's `cases:` entry holds it), validated like one; CaseError if not."""
    return _case(Path(source), doc, {}, 0)


def discover(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files.extend(sorted(q for q in p.rglob("*.yaml") if q.is_file()))
        elif p.exists():
            files.append(p)
        else:
            raise CaseError(p, None, None, None, "no such file or directory")
    return files


def load(paths: list[Path]) -> list[Case]:
    """Load every case under `paths` (files or directories), rejecting duplicate ids."""
    seen: dict[str, Case] = {}
    out: list[Case] = []
    for f in discover(paths):
        for case in load_file(f):
            if case.id in seen:
                first = seen[case.id]
                raise CaseError(f, case.line, case.id, "id", f"duplicate id, first defined at {first.file}:{first.line}")
            seen[case.id] = case
            out.append(case)
    return out


def matching(cases: list[Case], pattern: str | None) -> list[Case]:
    """Keep the cases whose id contains `pattern` (several alternatives separated by ',')."""
    if not pattern:
        return cases
    alternatives = [p.strip() for p in pattern.split(",") if p.strip()]
    return [c for c in cases if any(p in c.id for p in alternatives)]
