"""scripts/restructure.py (issue 48, part B): the pieces that rewrite, split and write faces, on small inputs.

The whole run is proved on a scratch clone (the slow test at the end: the script applies, `--check`
passes, and a second run changes nothing); these check each rule where it can fail.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import restructure  # noqa: E402  (a script, not a package)

sys.path.pop(0)


def _rewriter() -> restructure.Rewriter:
    moves = {"matrix/matrix_document.py": "matrix/_document.py", "verdict/verdict.py": "verdict/_classify.py",
             "cost/cost.py": "cost/_model.py"}
    p = restructure.Plan(moves=moves, symbols={"fp8_check.report._page.cmd_report": "fp8_check.cli.report.cmd_report"})
    return restructure.Rewriter(p.names, p.moves)


@pytest.mark.parametrize("before, after", [
    ("from fp8_check.verdict import verdict\n", "from fp8_check.verdict import classify as verdict\n"),
    # the new name contains the old one's tail: still a move
    ("    from fp8_check.matrix import matrix_document as md\n", "    from fp8_check.matrix import document as md\n"),
    ("from fp8_check.verdict.verdict import Line as Line, classify\n", "from fp8_check.verdict._classify import Line as Line, classify\n"),
    ("from fp8_check.report._page import cmd_report, write_report\n",
     "from fp8_check.cli.report import cmd_report\nfrom fp8_check.report._page import write_report\n"),
    ("x = 'fp8_check.cost.cost.Estimate'\n", "x = 'fp8_check.cost._model.Estimate'\n"),
    ('m = f"{PACKAGE}.cost.cost"\n', 'm = f"{PACKAGE}.cost.model"\n'),
    ("see harness/fp8_check/verdict/verdict.py.\n", "see harness/fp8_check/verdict/_classify.py.\n"),
    ('OWNERS = ("cost/cost.py", `cost/cost.py`, "cost/cost.pyc")\n', 'OWNERS = ("cost/_model.py", `cost/_model.py`, "cost/cost.pyc")\n'),
    ("from fp8_check.verdict import (  # noqa: F401  (re-exported)\n    golden,\n)\n",
     "from fp8_check.verdict import (  # noqa: F401  (re-exported)\n    golden,\n)\n"),
    ("from fp8_check.verdict import golden\n", "from fp8_check.verdict import golden\n"),
])
def test_references_follow_their_module(before, after):
    assert _rewriter().rewrite(before, "x.py", restructure.Report()) == after


def test_continued_imports_are_joined_before_rewriting():
    text = "from fp8_check.a import x, \\\n    y\nz = 1 + \\\n    2\n"
    assert restructure.join_continued_imports(text) == "from fp8_check.a import x, y\nz = 1 + \\\n    2\n"


def test_the_command_half_is_what_registers_runs_and_writes_outputs():
    source = '''
from fp8_check.report import _formats as formats
from fp8_check.run import _runner as runner

def library(x):
    return runner.run(x)

def _only_for_commands():
    return 1

def _shared():
    return 2

def write_html(p):
    return formats.write(p)

def register(sub):
    return {"x": cmd_x}

def cmd_x(args):
    return _only_for_commands() + _shared() + library(args)

def other():
    return _shared()
'''
    assert restructure._command_names(source, "matrix") == ["_only_for_commands", "write_html", "register", "cmd_x"]
    assert restructure._command_names("def helper():\n    pass\n", "matrix") == []


@pytest.mark.parametrize("rel, stutters", [
    ("cost/cost.py", True), ("cost/cost_delta.py", True), ("cases/sharded_cases.py", True), ("cases/case_model.py", True),
    ("worker/worker_guard.py", True), ("verdict/verdict_rules.py", True), ("cost/_model.py", False),
    ("verdict/rules_gemm.py", False), ("run/_runner.py", False), ("api.py", False), ("cases/kinds/pattern.py", False),
])
def test_a_module_repeating_its_folder_is_found(rel, stutters):
    assert restructure.stutters(rel) is stutters


def test_a_face_loads_its_names_on_first_use(tmp_path, monkeypatch):
    """The face written into a stage's __init__.py: `__all__`, and each name imported when first asked for."""
    pkg = tmp_path / "stagex"
    pkg.mkdir()
    (pkg / "heavy.py").write_text("LOADED = True\ndef judge():\n    return 'judged'\n")
    face = restructure.Face("stagex", names={"judge": "heavy", "heavy": ""})
    text = ('"""A stage."""\n\nfrom __future__ import annotations\n\nimport importlib\n'
            "from typing import TYPE_CHECKING, Any\n\n" + restructure.face_block(face, ""))
    (pkg / "__init__.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    stagex = importlib.import_module("stagex")
    assert stagex.__all__ == ["heavy", "judge"]
    assert "stagex.heavy" not in sys.modules  # nothing loaded at import: start-up stays as it was
    from stagex import judge  # noqa: E402

    assert judge() == "judged" and "stagex.heavy" in sys.modules
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        stagex.nothing  # noqa: B018
    from stagex import heavy  # a submodule on the face: the ordinary import

    assert heavy.LOADED
    for name in ("stagex", "stagex.heavy"):
        sys.modules.pop(name, None)


def test_a_name_that_is_also_a_submodule_stays_a_module_import():
    """`from fp8_check.signature import coverage` would give the module `coverage` once anyone imported it (the
    import system sets the package attribute), not the function of that name: such a name is a clash."""
    faces = restructure.compute_faces()
    for stage, face in faces.items():
        for name, module in face.names.items():
            submodule = restructure.ROOT / restructure.BASE_REL / stage / f"{name}.py"
            assert module == "" or not submodule.is_file(), (stage, name, module)


def test_no_row_moves_a_module_onto_another_rows_old_path():
    assert not set(restructure.MOVES.values()) & set(restructure.MOVES)
    assert all(not restructure.stutters(new) for new in restructure.MOVES.values())


@pytest.mark.slow
def test_the_script_applies_on_a_clone_and_a_second_run_changes_nothing(tmp_path):
    """A scratch clone of this checkout (with the script as it is here): apply, --check, apply again."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=300)
    for rel in ("scripts/restructure.py", "scripts/restructure/test_faces.py"):
        (clone / rel).parent.mkdir(parents=True, exist_ok=True)
        (clone / rel).write_text((REPO / rel).read_text())
    run = lambda *a: subprocess.run([sys.executable, "scripts/restructure.py", *a], cwd=clone, capture_output=True,  # noqa: E731
                                    text=True, timeout=600)
    first = run()
    assert first.returncode == 0, first.stdout + first.stderr
    assert "not rewritten" not in first.stdout, first.stdout
    check = run("--check")
    assert check.returncode == 0, check.stdout
    git = lambda *a: subprocess.run(["git", *a], cwd=clone, capture_output=True, text=True, timeout=120).stdout  # noqa: E731
    git("add", "-A")
    # --allow-empty: on a tree the script has already been applied to (main since round 2), the first run changes nothing
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "applied"],
                   cwd=clone, check=True, timeout=120)
    second = run()
    assert second.returncode == 0 and git("status", "--porcelain") == "", git("status", "--porcelain")
    assert Path(clone / "tests" / "test_faces.py").is_file()
