"""The case model: `Case` and its parts, `CaseError`, and the field validators every case kind uses.

A case file's common fields (id, description, profiles, targets, known issues, FileCheck
patterns) are `Case`'s own, validated by harness/fp8_check/cases/_load.py; each kind's own fields
are its typed `Case.spec` (a `Spec` subclass defined and validated by its module in
harness/fp8_check/cases/kinds/; `MatmulSpec` holds those pattern and block-scaled cases share).
Every problem is one `CaseError` line naming file, line, case and field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from fp8_check import platforms
from fp8_check.cases._requirement_sets import RequirementSet
from fp8_check.core import BadInput

PROFILES = tuple(platforms.profiles())  # every platform's profile names (a case may list any of them)
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")  # used with fullmatch: no trailing newline
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # an environment variable's name (fullmatch)


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
class Spec:
    """What a case of one kind states beyond the common fields. Each kind module defines its own (PatternSpec in
    kinds/pattern.py, BlockScaledSpec in kinds/block_scaled.py, PythonSpec in kinds/python.py); no module but the
    kind's own (and its numerics) reads a spec's fields (tests/cases/test_kind_specs.py). Callers use these methods."""

    KIND: ClassVar[str] = ""

    @property
    def priced_elsewhere(self) -> bool:
        """The cost estimate is priced at production shapes (`price_at`): compiled a second time there."""
        return False

    def at_production(self) -> "Spec":
        """The spec at its `price_at` shapes (itself when it states none)."""
        return self

    def production_text(self) -> str:
        """Where it is priced, for a reader: `m=4096, n=14336, k=4096`, `x=[8, 2048, 1024]`, ..."""
        return ""

    def timed_at(self, shape: Shape | None) -> "Spec | None":
        """What `fp8-check calibrate` times: the spec at `shape` (None: at its production shapes) with no other
        production shapes; None for a kind calibrate cannot time (its source is not self-contained)."""
        return None

    def shape_text(self) -> str:
        return ""

    def required_modules(self) -> tuple[str, ...]:
        """The modules the case declares it needs (`requires:`; missing -> UNSUPPORTED)."""
        return ()


@dataclass(frozen=True)
class MatmulSpec(Spec):
    """The fields pattern and block-scaled cases share: a matmul of two low-precision operands."""

    a_dtype: str = "float8_e4m3fn"
    b_dtype: str = "float8_e4m3fn"
    shape: Shape = Shape(64, 32, 64)
    transpose_b: bool = False
    dequant: str = "float32"
    scale_dtype: str = "float32"
    out_dtype: str = "float32"

    def timed_at(self, shape: Shape | None) -> "Spec | None":
        return replace(self, shape=shape or self.shape)

    def shape_text(self) -> str:
        s = self.shape
        return f"m={s.m}, n={s.n}, k={s.k}" + (f", batch={s.batch}" if s.batch else "")


@dataclass(frozen=True)
class Case:
    """One case: the fields every kind has, and `spec`, the kind's own typed fields."""

    id: str
    file: str
    line: int
    spec: Spec
    description: str = ""
    # the default platform's profiles unless the case lists others (a TPU case lists `tpu`)
    profiles: tuple[str, ...] = tuple(p.name for p in platforms.DEFAULT.profiles)
    targets: tuple[str, ...] = ()  # empty: every target
    known_issues: tuple[KnownIssue, ...] = ()
    filecheck: dict[str, str] = field(default_factory=dict)  # profile -> FileCheck pattern
    # `requirements: maxtext` (a named set) or a requirements file: the case compiles in a cached environment with
    # them for the run's JAX version (harness/fp8_check/versions/_requirement_envs.py); the set states the JAX range it works with
    requirements: RequirementSet | None = None
    # `env: [MY_LAYER_SWITCH]`: environment variables the compiled code reads; their values when it compiles are
    # part of the compile cache's key (harness/fp8_check/compile/_cache.py), so switching one is never a stale hit
    env: tuple[str, ...] = ()
    yaml_text: str = ""

    @property
    def kind(self) -> str:
        return self.spec.KIND

    @property
    def priced_elsewhere(self) -> bool:
        """The cost estimate is priced at production shapes (`price_at`): compiled a second time there."""
        return self.spec.priced_elsewhere

    def at_production(self) -> "Case":
        """The case at its `price_at` shapes (a pattern's m, n, k; a python case's argument shapes)."""
        return replace(self, spec=self.spec.at_production())

    def production_text(self) -> str:
        """Where it is priced: `m=4096, n=14336, k=4096` or `x=[8, 2048, 1024], target=[8, 2048, 1024]`."""
        return self.spec.production_text()

    def timed_at(self, shape: Shape | None = None) -> "Case | None":
        """The case `fp8-check calibrate` times (see `Spec.timed_at`), or None."""
        spec = self.spec.timed_at(shape)
        return None if spec is None else replace(self, spec=spec)

    def required_modules(self) -> tuple[str, ...]:
        """The modules the case declares it needs (`requires:`), for what `fp8-check init` writes into the CI."""
        return self.spec.required_modules()

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
