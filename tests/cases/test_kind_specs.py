"""Each case kind owns a typed spec (`Case.spec`); no module but the kind's own reads its fields.

`Case` holds the fields every kind has; a kind's own fields are a frozen `Spec` subclass in its module
(PatternSpec, BlockScaledSpec, PythonSpec; the matmul fields pattern and block-scaled cases share are
`case_model.MatmulSpec`). Callers reach them through the kind (`kinds.kind_of(case)`: arguments, rendering,
XLA flags, reduction steps) and the spec's methods (production shapes, calibration); a kind's float64
numerics is its own module next to the GPU code. The finder below is AST-based: an attribute named like
a spec field read on `<x>.spec`, on a name bound to a spec (`spec = case.spec`, `spec_of(case)`, a
parameter or variable annotated with a spec class), or a spec handed to `getattr`/`replace`.
No module outside the kinds switches on kind names: tests/house/test_architecture.py.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from fp8_check.cases._model import Case, MatmulSpec, Spec
from fp8_check.cases.kinds.block_scaled import BlockScaledSpec
from fp8_check.cases.kinds.pattern import PatternSpec
from fp8_check.cases.kinds.python import PythonSpec

PACKAGE = Path(__file__).resolve().parents[2] / "harness" / "fp8_check"

# The modules that may read each spec's fields: the kind's module and its numerics.
OWNERS: dict[type, tuple[str, ...]] = {
    MatmulSpec: ("cases/_model.py", "cases/kinds/pattern.py", "cases/kinds/block_scaled.py",
                 "gpu/_pattern_numerics.py", "gpu/_block_numerics.py"),
    PatternSpec: ("cases/kinds/pattern.py", "gpu/_pattern_numerics.py"),
    BlockScaledSpec: ("cases/kinds/block_scaled.py", "gpu/_block_numerics.py"),
    PythonSpec: ("cases/kinds/python.py",),
}
SPEC_CLASSES = {"Spec", "MatmulSpec", *(cls.__name__ for cls in OWNERS)}
SPEC_GETTERS = {"spec_of", "_spec"}  # a kind's own `spec_of(case) -> ItsSpec`


def own_fields(cls: type) -> set[str]:
    """The fields a spec class adds (a subclass's inherited ones belong to its base)."""
    base = {f.name for base in cls.__mro__[1:] if dataclasses.is_dataclass(base) for f in dataclasses.fields(base)}
    return {f.name for f in dataclasses.fields(cls)} - base


FIELDS = {cls: own_fields(cls) for cls in OWNERS}
EVERY_FIELD = set().union(*FIELDS.values())


def allowed(relpath: str) -> set[str]:
    return set().union(*(FIELDS[cls] for cls, owners in OWNERS.items() if relpath in owners))


def _is_spec_expr(node: ast.AST, names: set[str]) -> bool:
    """`x.spec`, a name bound to a spec, or `spec_of(...)`."""
    if isinstance(node, ast.Attribute) and node.attr == "spec":
        return True
    if isinstance(node, ast.Name) and node.id in names:
        return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in SPEC_GETTERS
    return False


def _annotated_spec(annotation: ast.AST | None) -> bool:
    if annotation is None:
        return False
    text = ast.unparse(annotation)
    return any(part.strip(" '\"") in SPEC_CLASSES for part in text.replace("|", " ").replace("[", " ").replace("]", " ").split())


def spec_reads(source: str, forbidden: set[str], owner: bool = False) -> list[str]:
    """`line: text` of each read of a forbidden spec field (see the module docstring); `getattr` on a spec is
    flagged unless the module owns a spec (its names can be anything)."""
    tree = ast.parse(source)
    names: set[str] = set()
    for node in ast.walk(tree):  # names bound to a spec, anywhere in the module (scopes are small)
        if isinstance(node, ast.Assign) and _is_spec_expr(node.value, set()):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (
                _annotated_spec(node.annotation) or (node.value is not None and _is_spec_expr(node.value, set()))):
            names.add(node.target.id)
        elif isinstance(node, ast.arg) and _annotated_spec(node.annotation):
            names.add(node.arg)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in forbidden and _is_spec_expr(node.value, names):
            hits.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "replace") \
                and node.args and _is_spec_expr(node.args[0], names):
            if (node.func.id == "getattr" and not owner) or any(k.arg in forbidden for k in node.keywords):
                hits.append(f"{node.lineno}: {ast.unparse(node)}")
    return hits


def test_case_holds_only_the_common_fields():
    assert {f.name for f in dataclasses.fields(Case)} == {
        "id", "file", "line", "spec", "description", "profiles", "targets", "known_issues", "filecheck", "requirements", "env", "yaml_text"}
    for cls in OWNERS:
        assert issubclass(cls, Spec) and dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls


def test_every_kind_has_its_spec():
    from fp8_check.cases import kinds

    assert {cls.KIND for cls in (PatternSpec, BlockScaledSpec, PythonSpec)} == set(kinds.KINDS)


def test_no_module_reads_another_kinds_spec_fields():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        hits = spec_reads(path.read_text(), EVERY_FIELD - allowed(rel), owner=bool(allowed(rel)))
        if hits:
            offenders[rel] = hits
    assert offenders == {}, "read a kind's spec fields outside its module; add what you need to the Kind protocol " \
                            "or the spec's methods instead"


def test_the_owner_table_names_real_modules():
    for owners in OWNERS.values():
        for rel in owners:
            assert (PACKAGE / rel).is_file(), rel


@pytest.mark.parametrize("source", [
    "x = case.spec.epilogue",
    "spec = case.spec\nif spec.clamp:\n    pass",
    "def f(s: PatternSpec):\n    return s.price_at",
    "def f(s: 'BlockScaledSpec | None'):\n    return s.block",
    "v = getattr(case.spec, name)",
    "c = replace(case.spec, shape=None)",
    "s = spec_of(case)\nprint(s.callable)",
    "k = kinds.kind_of(case).spec_of(case).mesh",
])
def test_the_finder_finds_a_spec_read(source):
    assert spec_reads(source, EVERY_FIELD)


@pytest.mark.parametrize("source", [
    "x = case.spec.production_text()",  # a method: the spec's own answer
    "x = case.shape",  # not a spec (a Case has no such field; mypy catches that)
    "x = signature.gemms[0].epilogue",
    "c = replace(case, spec=case.spec.at_production())",
])
def test_the_finder_leaves_other_reads_alone(source):
    assert not spec_reads(source, EVERY_FIELD)
