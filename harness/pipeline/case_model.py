"""The case model: `Case` and its parts, `CaseError`, and the field validators every case kind uses.

A case file's common fields (id, description, profiles, targets, known issues, FileCheck
patterns) are validated by harness/pipeline/cases.py; each kind's own fields by its module
in harness/pipeline/kinds/. Every problem is one `CaseError` line naming file, line, case
and field.
"""

from __future__ import annotations

from fp8_check.errors import BadInput

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

PROFILES = ("cublas", "triton", "default")
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")  # used with fullmatch: no trailing newline


class CaseError(BadInput, ValueError):
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
class Block:
    """How a block-scaled case scales: the API it goes through, the format, block size, global scale."""

    api: str
    format: str
    size: int  # elements of k per scale
    global_scale: bool = False
    input_dtype: str = ""  # scaled_dot_general: the high-precision inputs JAX quantizes


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
    block: Block | None = None  # kind: block_scaled (harness/pipeline/kinds/block_scaled.py)
    scaled_dot_triton: bool | None = None  # sets xla_gpu_experimental_scaled_dot_with_triton where XLA has it
    # kind: python
    callable: str | None = None
    args: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    args_factory: str | None = None  # `args: module:factory`: a pytree of ShapeDtypeStructs (kinds/python.py)
    requires: tuple[str, ...] = ()  # optional dependencies (top-level modules): missing -> UNSUPPORTED
    # `requirements: maxtext` (a named set) or a requirements file: the case compiles in a cached environment with
    # them for the run's JAX version (harness/requirement_envs.py); requirements_jax: the JAX range they state
    requirements: tuple[str, ...] = ()
    requirements_name: str = ""
    requirements_jax: str = ""
    price_at: Shape | None = None  # production shapes the cost estimate is priced at (compiled a second time)
    price_args: tuple[tuple[str, tuple[int, ...]], ...] = ()  # kind: python: `price_at: {args: {name: shape}}`
    price_factory: str | None = None  # kind: python: `price_at: {factory: FUNCTION}` in the callable's module
    price_args_factory: str | None = None  # kind: python: `price_at: {args: module:factory}` (a pytree, as `args:`)
    flat_factory: str | None = None  # set on the production copy: the rendered ARGS come from that function
    mesh: tuple[tuple[str, int], ...] = ()  # sharded (kind: python; see pipeline/sharded_cases.py): mesh, specs, XLA flags
    shardings: tuple[tuple, ...] = ()
    out_shardings: tuple[tuple, ...] | None = None
    xla_options: tuple[tuple[str, object], ...] = ()
    yaml_text: str = ""

    @property
    def priced_elsewhere(self) -> bool:
        """The cost estimate is priced at production shapes (`price_at`): compiled a second time there."""
        return self.price_at is not None or bool(self.price_args) or self.price_factory is not None \
            or self.price_args_factory is not None

    def at_production(self) -> "Case":
        """The case at its `price_at` shapes (a pattern's m, n, k; a python case's argument shapes)."""
        at = dict(self.price_args)
        return replace(self, shape=self.price_at or self.shape, args=tuple((n, at.get(n, s), d) for n, s, d in self.args),
                       flat_factory=self.price_factory, args_factory=self.price_args_factory or self.args_factory)

    def production_text(self) -> str:
        """Where it is priced: `m=4096, n=14336, k=4096` or `x=[8, 2048, 1024], target=[8, 2048, 1024]`."""
        if self.price_at is not None:
            s = self.price_at
            return f"m={s.m}, n={s.n}, k={s.k}" + (f", batch={s.batch}" if s.batch else "")
        if self.price_factory:
            return f"the arguments {(self.callable or ':').split(':')[0]}.{self.price_factory}() returns"
        if self.price_args_factory:
            return f"the arguments {self.price_args_factory.replace(':', '.')}() returns"
        return ", ".join(f"{n}=[{', '.join(map(str, shape))}]" for n, shape in self.price_args)

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


def _is_name(text: str) -> bool:
    """A Python identifier that is not a keyword (one part of a dotted module path)."""
    import keyword

    return text.isidentifier() and not keyword.iskeyword(text)


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


# The validators, by the names the kind modules use.
choice, boolean, string, pos_int, list_of_choices, shape = _choice, _bool, _str, _pos_int, _list_of_choices, _shape
is_name, near, plain = _is_name, _near, _plain
