"""Stages have faces: outside a stage, code imports the stage, not its internals.

Every stage folder's `__init__.py` declares `__all__`: what the stage offers (written by
scripts/restructure.py from what other stages used; names load on first use, PEP 562). A module of
one stage imports another stage only as `from fp8_check.STAGE import NAME` with NAME on that face;
`from fp8_check.STAGE.module import x`, `import fp8_check.STAGE.module` and a `_private` name are
refused, but for the exceptions below, each with its reason. Read with `ast`; nothing is imported.
"""

from __future__ import annotations

import ast

from .conftest import REPO

PACKAGE = REPO / "harness" / "fp8_check"

# (stage, name) -> why another stage imports it from the stage's module, not from its face
EXCEPTIONS: dict[tuple[str, str], str] = {
# CLASHES
}


def stages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def face(stage: str) -> set[str] | None:
    """The stage's `__all__`; None when its __init__.py declares none."""
    tree = ast.parse((PACKAGE / stage / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return None


def violations(stage: str, module: str, source: str, faces: dict[str, set[str] | None]) -> list[str]:
    """Imports of another stage's internals in one module of `stage`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "fp8_check" and len(parts) > 2 and parts[1] in faces and parts[1] != stage:
                    out.append(f"{module}:{node.lineno}: import {a.name}")
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            parts = node.module.split(".")
            if parts[0] != "fp8_check" or len(parts) < 2 or parts[1] not in faces or parts[1] == stage:
                continue
            other = parts[1]
            for a in node.names:
                if len(parts) == 2 and a.name in (faces[other] or ()) and not a.name.startswith("_"):
                    continue
                if (other, a.name) in EXCEPTIONS:
                    continue
                out.append(f"{module}:{node.lineno}: from {node.module} import {a.name}")
    return out


def _all_violations() -> list[str]:
    faces = {s: face(s) for s in stages()}
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) == 1 and rel.name in ("__init__.py", "stages.py"):
            continue  # the package's own __init__ and the declaration belong to no stage
        stage = rel.parts[0].removesuffix(".py")
        out += violations(stage, str(rel), path.read_text(), faces)
    return out


def test_every_stage_declares_its_face():
    assert [s for s in stages() if face(s) is None] == []


def test_no_stage_imports_another_stages_internals():
    assert _all_violations() == []


def test_the_rule_finds_a_planted_violation():
    faces = {"verdict": {"golden"}, "run": set()}
    planted = "from fp8_check.verdict._golden import path_for\nimport fp8_check.verdict._golden\nfrom fp8_check.verdict import _x\n"
    assert violations("run", "run/x.py", planted, faces) == [
        "run/x.py:1: from fp8_check.verdict._golden import path_for", "run/x.py:2: import fp8_check.verdict._golden",
        "run/x.py:3: from fp8_check.verdict import _x"]
    assert violations("run", "run/x.py", "from fp8_check.verdict import golden\n", faces) == []
    assert violations("verdict", "verdict/y.py", planted, faces) == []  # inside its own stage


def test_every_exception_is_needed_and_says_why():
    for (stage, name), why in EXCEPTIONS.items():
        assert len(why) > 20, (stage, name)
        assert name not in (face(stage) or ()), (stage, name)
