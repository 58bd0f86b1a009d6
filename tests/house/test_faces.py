"""Stages have faces: outside a stage, code imports the stage's names from its face, never its modules.

A stage's `__init__.py` is its face, written by a person: one `if TYPE_CHECKING:` block that imports each name
the stage offers from the private module defining it (`from ._errors import BadInput`), read at run time by
`fp8_check._faces.attach` (names load on first use, PEP 562). The face lists the stage's concepts: no module, no
standard-library name, no name another stage defines. A module of one stage imports another stage only as
`from fp8_check.STAGE import NAME` with NAME on that face (or `from fp8_check import STAGE`); a module path
(`fp8_check.STAGE.module`) or a private name across stages is refused. No exceptions. Read with `ast`.
"""

from __future__ import annotations

import ast
import sys

import pytest

from fp8_check._faces import face_of

from ..conftest import REPO

PACKAGE = REPO / "harness" / "fp8_check"
NO_FACE = {"cli", "models"}  # nothing imports the commands; cases name the models by module path


def stages() -> list[str]:
    return sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def face(stage: str) -> dict[str, str]:
    """name -> the private module of the stage that the face says defines it."""
    return face_of((PACKAGE / stage / "__init__.py").read_text())


def defined_names(path) -> set[str]:
    """What a module defines at its top level (not what it imports)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                out |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def module_file(stage: str, module: str):
    path = PACKAGE / stage / (module.replace(".", "/") + ".py")
    return path if path.is_file() else PACKAGE / stage / module.replace(".", "/") / "__init__.py"


def imported_from(path, name: str) -> str | None:
    """The module a top-level import of `path` binds `name` from (`os`, `pathlib`, `fp8_check.verdict`)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    return a.name
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if (a.asname or a.name) == name:
                    return "." * node.level + (node.module or "")
    return None


def face_problems(stage: str, names: dict[str, str], root=PACKAGE) -> list[str]:
    """A face entry that is a module, a standard-library name, another stage's name or a private name."""
    out = []
    modules = {p.stem for p in (root / stage).glob("*.py")} | {p.name for p in (root / stage).iterdir() if p.is_dir()}
    for name, module in sorted(names.items()):
        path = module_file(stage, module) if root is PACKAGE else root / stage / f"{module}.py"
        if name.startswith("_"):
            out.append(f"{stage}.{name}: a private name")
        elif name in modules:
            out.append(f"{stage}.{name}: a module of the stage, not a name")
        elif name not in defined_names(path):
            source = imported_from(path, name) or "?"
            top = source.split(".")[0]
            what = ("a standard-library " + ("module" if source == name else "name") if top in sys.stdlib_module_names
                    else f"another stage's name ({source})" if source.startswith("fp8_check.") else f"not defined there ({source})")
            out.append(f"{stage}.{name}: {what}, not a name {module} defines")
    return out


def violations(stage: str, module: str, source: str, faces: dict[str, set[str]]) -> list[str]:
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
            for a in node.names:
                if len(parts) == 2 and a.name in faces[parts[1]] and not a.asname:
                    continue
                out.append(f"{module}:{node.lineno}: from {node.module} import {a.name}"
                           + (f" as {a.asname}" if a.asname else ""))
    return out


def _all_violations() -> list[str]:
    faces = {s: set(face(s)) for s in stages() if s not in NO_FACE}
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) == 1 and rel.name in ("__init__.py", "stages.py", "_faces.py"):
            continue  # the package's own __init__, the declaration and the face helper belong to no stage
        stage = rel.parts[0].removesuffix(".py")
        out += violations(stage, str(rel), path.read_text(), faces)
    return out


@pytest.mark.parametrize("stage", [s for s in stages() if s not in NO_FACE])
def test_every_face_lists_names_of_its_own_stage(stage):
    names = face(stage)
    assert names, f"{stage}/__init__.py lists no names"
    assert face_problems(stage, names) == []


def test_the_face_check_finds_a_module_a_stdlib_name_and_another_stages_name(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "_results.py").write_text("import os\nfrom fp8_check.verdict import Outcome\n"
                                                   "class Results: ...\n")
    (tmp_path / "run" / "selection.py").write_text("")
    planted = {"Results": "_results", "selection": "_results", "os": "_results", "Outcome": "_results"}
    assert face_problems("run", planted, root=tmp_path) == [
        "run.Outcome: another stage's name (fp8_check.verdict), not a name _results defines",
        "run.os: a standard-library module, not a name _results defines",
        "run.selection: a module of the stage, not a name"]


def test_no_stage_imports_another_stages_internals():
    assert _all_violations() == []


def test_the_rule_finds_a_planted_violation():
    faces = {"verdict": {"Golden"}, "run": set()}
    planted = ("from fp8_check.verdict._golden import path_for\nimport fp8_check.verdict._golden\n"
               "from fp8_check.verdict import _golden\nfrom fp8_check.verdict import Golden as G\n")
    assert violations("run", "run/x.py", planted, faces) == [
        "run/x.py:1: from fp8_check.verdict._golden import path_for", "run/x.py:2: import fp8_check.verdict._golden",
        "run/x.py:3: from fp8_check.verdict import _golden", "run/x.py:4: from fp8_check.verdict import Golden as G"]
    assert violations("run", "run/x.py", "from fp8_check.verdict import Golden\n", faces) == []
    assert violations("verdict", "verdict/y.py", planted, faces) == []  # inside its own stage


def test_a_face_refuses_an_alias_and_a_repeated_name():
    with pytest.raises(ValueError, match="no alias"):
        face_of("if TYPE_CHECKING:\n    from ._a import x as y\n")
    with pytest.raises(ValueError, match="each name once"):
        face_of("if TYPE_CHECKING:\n    from ._a import x\n    from ._b import x\n")
    with pytest.raises(ValueError, match="its own modules"):
        face_of("if TYPE_CHECKING:\n    from fp8_check.core import x\n")


def test_a_face_loads_nothing_until_a_name_is_asked_for():
    import subprocess

    code = ("import sys, fp8_check.core as core; before = {m for m in sys.modules if m.startswith('fp8_check.core.')}; "
            "core.BadInput; after = {m for m in sys.modules if m.startswith('fp8_check.core.')}; "
            "print(sorted(before), sorted(after - before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] ['fp8_check.core._errors']"


def errand_paths(text: str) -> list[str]:
    """The repository paths the errands section of docs/layout.md names (in backticks)."""
    section = text.split("## Errands", 1)[1].split("\n## ", 1)[0]
    import re

    return [p for p in re.findall(r"`((?:harness|tests|docs)/[^`\s]+)`", section)]


def test_the_errands_name_files_that_exist():
    paths = errand_paths((REPO / "docs" / "layout.md").read_text())
    assert len(paths) > 15
    missing = [p for p in paths if not (list(REPO.glob(p)) if "*" in p else (REPO / p).exists())]
    assert missing == []


def test_the_errand_check_finds_a_missing_file():
    planted = "## Errands\n- `harness/fp8_check/verdict/rules_gemm.py` and `docs/verdicts.md`\n## Next\n`docs/x.md`\n"
    paths = errand_paths(planted)
    assert paths == ["harness/fp8_check/verdict/rules_gemm.py", "docs/verdicts.md"]
    assert not (REPO / paths[0]).exists()
