"""Stage 1: load and validate YAML case files into `Case` objects.

A case file is a mapping with an optional `defaults:` mapping (merged into every
case) and a `cases:` list. Validation is strict: an unknown key, a bad value, a
wrong type or a contradictory combination raises `CaseError`, whose message is
one line naming the file, the line, the case id and the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.pipeline import safe_yaml
from harness.pipeline.block_cases import BLOCK_KEYS, DATA_DTYPES, FP8_DTYPES, SCALE_DTYPES, Block, validate_block
from harness.pipeline.sharded_cases import validate_sharded

DEQUANT_DTYPES = ("float32", "bfloat16", "float16")
OUT_DTYPES = ("float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "float32")
INPUT_SCALES = ("none", "a", "b", "both")
OUTPUT_SCALES = ("none", "multiply", "divide")
EPILOGUES = (
    "none",
    "relu",
    "gelu_tanh",
    "gelu_exact",
    "bias",
    "bias_relu",
    "bias_gelu_tanh",
    "bias_gelu_exact",
    "matrix_bias",
)
AMAX = ("none", "pre_scale")
REQUANTIZE = ("convert", "bitcast")
PROFILES = ("cublas", "triton", "default")
KINDS = ("pattern", "python", "block_scaled")
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")  # used with fullmatch: no trailing newline

# Largest finite value of each FP8 format (what a clamp saturates to).
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}


class CaseError(ValueError):
    """A problem in a case file, rendered as one line."""

    def __init__(self, path: Path | str, line: int | None, case: str | None, fld: str | None, message: str):
        self.path, self.line, self.case, self.field, self.message = str(path), line, case, fld, message
        where = f"{self.path}:{line}" if line else self.path
        parts = [where]
        if case:
            parts.append(f"case '{case}'")
        if fld:
            parts.append(f"field '{fld}'")
        super().__init__(": ".join(parts + [message]))


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    batch: int | None = None


@dataclass(frozen=True)
class KnownIssue:
    """A known upstream bug: while `jax` matches, a mismatch is XFAIL and a match XPASS."""

    url: str
    jax: str  # PEP 440 specifier set, e.g. ">=0.4.32,<0.4.34"
    summary: str = ""
    targets: tuple[str, ...] = ()  # empty: every target
    profiles: tuple[str, ...] = ()  # empty: every profile

    def applies(self, jax_version: str, target: str, profile: str) -> bool:
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        if self.targets and target not in self.targets:
            return False
        if self.profiles and profile not in self.profiles:
            return False
        return Version(jax_version) in SpecifierSet(self.jax)


@dataclass(frozen=True)
class Case:
    id: str
    file: str
    line: int
    description: str = ""
    kind: str = "pattern"
    a_dtype: str = "float8_e4m3fn"
    b_dtype: str = "float8_e4m3fn"
    shape: Shape = Shape(64, 32, 64)
    transpose_b: bool = False
    dequant: str = "float32"
    input_scales: str = "none"
    scale_dtype: str = "float32"
    output_scale: str = "none"
    clamp: bool = False
    out_dtype: str = "float32"
    epilogue: str = "none"
    bias_dtype: str | None = None
    amax: str = "none"
    requantize: str = "convert"  # how the output reaches out_dtype: astype, or lax.bitcast_convert_type
    profiles: tuple[str, ...] = ("cublas", "triton", "default")
    targets: tuple[str, ...] = ()  # empty: every target
    known_issues: tuple[KnownIssue, ...] = ()
    filecheck: dict[str, str] = field(default_factory=dict)  # profile -> FileCheck pattern
    block: Block | None = None  # kind: block_scaled (harness/pipeline/block_cases.py)
    scaled_dot_triton: bool | None = None  # sets xla_gpu_experimental_scaled_dot_with_triton where XLA has it
    # kind: python
    callable: str | None = None
    args: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    requires: tuple[str, ...] = ()  # optional dependencies (top-level modules): missing -> UNSUPPORTED
    price_at: Shape | None = None  # production shapes the cost estimate is priced at (compiled a second time)
    mesh: tuple[tuple[str, int], ...] = ()  # sharded (kind: python; see pipeline/sharded_cases.py): mesh, specs, XLA flags
    shardings: tuple[tuple, ...] = ()
    out_shardings: tuple[tuple, ...] | None = None
    xla_options: tuple[tuple[str, object], ...] = ()
    yaml_text: str = ""

    @property
    def has_bias(self) -> bool:
        return self.epilogue.startswith("bias") or self.epilogue == "matrix_bias"

    def known_issue(self, jax_version: str, target: str, profile: str) -> KnownIssue | None:
        for issue in self.known_issues:
            if issue.applies(jax_version, target, profile):
                return issue
        return None


def _choice(path, line, cid, fld, value, allowed):
    if not isinstance(value, str) or value not in allowed:
        raise CaseError(path, line, cid, fld, f"got {value!r}; allowed: {', '.join(allowed)}")
    return value


def _bool(path, line, cid, fld, value):
    if not isinstance(value, bool):
        raise CaseError(path, line, cid, fld, f"got {value!r}; allowed: true, false")
    return value


def _str(path, line, cid, fld, value):
    if not isinstance(value, str):
        raise CaseError(path, line, cid, fld, f"expected a string, got {value!r}")
    return value


def _pos_int(path, line, cid, fld, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CaseError(path, line, cid, fld, f"expected a positive integer, got {value!r}")
    return value


def _list_of_choices(path, line, cid, fld, value, allowed):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise CaseError(path, line, cid, fld, f"expected a non-empty list, got {value!r}; allowed items: {', '.join(allowed)}")
    for item in value:
        _choice(path, line, cid, fld, item, allowed)
    if len(set(value)) != len(value):
        raise CaseError(path, line, cid, fld, f"lists an item twice: {value!r}")
    return tuple(value)


def _shape(path, line, cid, value, fld: str = "shape") -> Shape:
    if not isinstance(value, dict):
        raise CaseError(path, line, cid, fld, f"expected a mapping with m, n, k (and optional batch), got {value!r}")
    unknown = sorted(set(value) - {"m", "n", "k", "batch"})
    if unknown:
        raise CaseError(path, line, cid, f"{fld}.{unknown[0]}", "unknown key; allowed: m, n, k, batch")
    for key in ("m", "n", "k"):
        if key not in value:
            raise CaseError(path, line, cid, f"{fld}.{key}", f"missing; {fld} needs m, n and k")
    dims = {key: _pos_int(path, line, cid, f"{fld}.{key}", value[key]) for key in ("m", "n", "k")}
    batch = value.get("batch")
    if batch is not None:
        batch = _pos_int(path, line, cid, f"{fld}.batch", batch)
    return Shape(batch=batch, **dims)


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
        targets = ()
        if "targets" in item:
            from harness.targets import all_target_names

            targets = _list_of_choices(path, line_i, cid, f"{fld}.targets", item["targets"], all_target_names())
        profiles = ()
        if "profiles" in item:
            profiles = _list_of_choices(path, line_i, cid, f"{fld}.profiles", item["profiles"], PROFILES)
        summary = _str(path, line_i, cid, f"{fld}.summary", item.get("summary", ""))
        out.append(KnownIssue(url=url, jax=spec, summary=summary, targets=targets, profiles=profiles))
    return tuple(out)


def _args(path, line, cid, value):
    if not isinstance(value, list) or not value:
        raise CaseError(path, line, cid, "args", "expected a non-empty list of {name, shape, dtype}")
    out = []
    for i, item in enumerate(value):
        fld = f"args[{i}]"
        if not isinstance(item, dict) or not {"name", "shape", "dtype"} <= set(item) <= {"name", "shape", "dtype", "sharding"}:
            raise CaseError(path, line, cid, fld, f"expected a mapping with exactly name, shape, dtype (and optionally sharding); got {item!r}")
        name = _str(path, line, cid, f"{fld}.name", item["name"])
        if not name.isidentifier():
            raise CaseError(path, line, cid, f"{fld}.name", f"not a Python identifier: {name!r}")
        shape = item["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise CaseError(path, line, cid, f"{fld}.shape", f"expected a list of positive integers, got {shape!r}")
        dtype = _choice(path, line, cid, f"{fld}.dtype", item["dtype"], DATA_DTYPES + SCALE_DTYPES + ("int32",))
        out.append((name, tuple(shape), dtype))
    return tuple(out)


PATTERN_KEYS = (
    "id", "description", "kind", "a_dtype", "b_dtype", "shape", "transpose_b", "dequant",
    "input_scales", "scale_dtype", "output_scale", "clamp", "out_dtype", "epilogue",
    "bias_dtype", "amax", "requantize", "profiles", "targets", "known_issues", "filecheck", "price_at",
)
PYTHON_KEYS = ("id", "description", "kind", "callable", "args", "requires", "profiles", "targets", "known_issues", "filecheck", "mesh", "out_shardings", "xla_options")


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
    kind = _choice(path, line, cid, "kind", merged.get("kind", "pattern"), KINDS)
    allowed = {"pattern": PATTERN_KEYS, "python": PYTHON_KEYS, "block_scaled": BLOCK_KEYS}[kind]
    for key in raw:
        if key not in allowed:
            hint = f"; allowed: {', '.join(allowed)}"
            close = [k for k in allowed if _near(key, k)]
            if close:
                hint = f"; did you mean '{close[0]}'?" + hint
            raise CaseError(path, line, cid, str(key), "unknown key" + hint)
    merged = {k: v for k, v in merged.items() if k in allowed}

    kw: dict[str, Any] = {"id": cid, "file": str(path), "line": line, "kind": kind}
    kw["yaml_text"] = yaml.safe_dump({k: _plain(v) for k, v in raw.items()}, sort_keys=False).strip()
    if "description" in merged:
        kw["description"] = _str(path, line, cid, "description", merged["description"])
    if "profiles" in merged:
        kw["profiles"] = _list_of_choices(path, line, cid, "profiles", merged["profiles"], PROFILES)
    if "targets" in merged:
        from harness.targets import all_target_names

        kw["targets"] = _list_of_choices(path, line, cid, "targets", merged["targets"], all_target_names())
    if "known_issues" in merged:
        kw["known_issues"] = _known_issues(path, line, cid, merged["known_issues"])
    if "filecheck" in merged:
        fc = merged["filecheck"]
        if isinstance(fc, str):
            fc = {p: fc for p in kw.get("profiles", Case.profiles)}
        if not isinstance(fc, dict) or not all(isinstance(v, str) for v in fc.values()):
            raise CaseError(path, line, cid, "filecheck", "expected FileCheck text, or a mapping profile -> FileCheck text")
        for p in fc:
            _choice(path, line, cid, "filecheck", p, PROFILES)
        kw["filecheck"] = dict(fc)

    if kind == "python":
        if "callable" not in merged:
            raise CaseError(path, line, cid, "callable", "missing; a python case names 'module:function'")
        target = _str(path, line, cid, "callable", merged["callable"])
        module, _, function = target.partition(":")
        if not all(_is_name(p) for p in module.split(".") + [function]):
            raise CaseError(path, line, cid, "callable", f"expected 'package.module:function', got {target!r}")
        kw["callable"] = target
        if "args" not in merged:
            raise CaseError(path, line, cid, "args", "missing; a python case lists its arguments")
        kw["args"] = _args(path, line, cid, merged["args"])
        if "requires" in merged:
            value = merged["requires"]
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not value or not all(isinstance(v, str) and _is_name(v) for v in value):
                raise CaseError(path, line, cid, "requires",
                                f"expected a list of optional top-level modules such as [flax], got {value!r}")
            kw["requires"] = tuple(dict.fromkeys(value))
        kw.update(validate_sharded(path, line, cid, merged, merged["args"], kw["args"], kw.get("targets", ()), CaseError))
        return Case(**kw)
    if kind == "block_scaled":
        return Case(**validate_block(path, line, cid, merged, raw, kw, (_choice, _bool, _pos_int, _shape, CaseError)))

    for fld, allowed_values in (
        ("a_dtype", DATA_DTYPES), ("b_dtype", DATA_DTYPES), ("dequant", DEQUANT_DTYPES),
        ("input_scales", INPUT_SCALES), ("scale_dtype", SCALE_DTYPES), ("output_scale", OUTPUT_SCALES),
        ("out_dtype", OUT_DTYPES), ("epilogue", EPILOGUES), ("amax", AMAX), ("requantize", REQUANTIZE),
    ):
        if fld in merged:
            kw[fld] = _choice(path, line, cid, fld, merged[fld], allowed_values)
    for fld in ("transpose_b", "clamp"):
        if fld in merged:
            kw[fld] = _bool(path, line, cid, fld, merged[fld])
    if "shape" in merged:
        kw["shape"] = _shape(path, line, cid, merged["shape"])
    if "price_at" in merged:
        kw["price_at"] = _shape(path, line, cid, merged["price_at"], "price_at")
    if "bias_dtype" in merged:
        kw["bias_dtype"] = _choice(path, line, cid, "bias_dtype", merged["bias_dtype"], DEQUANT_DTYPES)

    case = Case(**kw)
    # Contradictory combinations.
    if case.clamp and case.out_dtype not in FP8_DTYPES:
        raise CaseError(path, line, cid, "clamp", f"clamp saturates to an FP8 format's range, but out_dtype is {case.out_dtype}; allowed with out_dtype: {', '.join(FP8_DTYPES)}")
    if case.requantize == "bitcast" and (case.out_dtype not in FP8_DTYPES or case.dequant == case.out_dtype):
        raise CaseError(path, line, cid, "requantize", f"bitcast reinterprets the {case.dequant} result as FP8 bytes; it needs an FP8 out_dtype, got {case.out_dtype}; allowed: {', '.join(REQUANTIZE)}")
    if "bias_dtype" in raw and not case.has_bias:
        raise CaseError(path, line, cid, "bias_dtype", f"set, but epilogue '{case.epilogue}' has no bias; allowed with epilogue: bias, bias_relu, bias_gelu_tanh, bias_gelu_exact, matrix_bias")
    if "scale_dtype" in raw and case.input_scales == "none" and case.output_scale == "none":
        raise CaseError(path, line, cid, "scale_dtype", "set, but the case has no scale (input_scales: none, output_scale: none)")
    if case.has_bias and case.bias_dtype is None:
        case = _replace(case, bias_dtype=case.dequant)
    return case


def _is_name(text: str) -> bool:
    """A Python identifier that is not a keyword (one part of a dotted module path)."""
    import keyword

    return text.isidentifier() and not keyword.iskeyword(text)


def _replace(case: Case, **kw) -> Case:
    from dataclasses import replace

    return replace(case, **kw)


def _near(a: str, b: str) -> bool:
    """True when `a` is one edit away from `b` (a typo)."""
    import difflib

    return difflib.SequenceMatcher(None, str(a), b).ratio() >= 0.8


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def load_file(path: Path) -> list[Case]:
    path = Path(path)
    try:
        text = safe_yaml.read_text(path)
    except safe_yaml.ReadError as exc:
        raise CaseError(path, None, None, None, str(exc)) from None
    try:
        doc = safe_yaml.load(text, safe_yaml.LineLoader)  # bounded; duplicate keys refused; mappings know their line
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
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
    for key in defaults:
        if key not in PATTERN_KEYS and key not in PYTHON_KEYS and key not in BLOCK_KEYS:
            raise CaseError(path, getattr(defaults, "line", None), None, f"defaults.{key}", f"unknown key; allowed: {', '.join(PATTERN_KEYS[1:])}")
    cases = doc.get("cases")
    if not isinstance(cases, list):
        raise CaseError(path, None, None, "cases", f"expected a list of cases, got {cases!r}")
    return [_case(path, raw, defaults, i) for i, raw in enumerate(cases)]


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


def select(cases: list[Case], pattern: str | None) -> list[Case]:
    """Keep the cases whose id contains `pattern` (several alternatives separated by ',')."""
    if not pattern:
        return cases
    alternatives = [p.strip() for p in pattern.split(",") if p.strip()]
    return [c for c in cases if any(p in c.id for p in alternatives)]
