"""core/_files.py: the one writer of files and the one way to the package's own data.

Data is found through importlib.resources from the package's name; no module finds it (or the checkout)
by how deep it sits in the tree, so moving a module never breaks a path.
"""

from __future__ import annotations

import ast

from fp8_check.core import _files as files

from ..conftest import REPO

PACKAGE = REPO / "harness" / "fp8_check"


def test_package_data_is_found_by_name():
    assert (files.package_path("templates") / "report.html.j2").is_file()
    assert (files.package_path("targets", "h100.txtpb")).is_file()
    assert files.package_path("targets", "rates").is_dir()
    assert (files.package_path("worker") / "_aot.py").is_file()
    assert files.package_path().resolve() == PACKAGE.resolve()


def test_the_checkout_is_this_repository():
    assert files.checkout() == REPO.resolve()


def _depth_lookups(text: str) -> list[str]:
    """`Path(__file__)…parent.parent`, `…parents[N]`, `….with_name(…)`: a file found by where its module sits."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Name) and node.id == "__file__":
            found.append(f"line {node.lineno}: __file__")
    return found


def test_no_module_finds_data_by_its_depth():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        hits = _depth_lookups(path.read_text())
        if hits:
            offenders[str(path.relative_to(REPO))] = hits
    assert offenders == {}, "find package data with fp8_check.core._files.package_path, the checkout with files.checkout()"


def test_the_depth_check_can_fail():
    assert _depth_lookups('from pathlib import Path\nT = Path(__file__).resolve().parent.parent / "templates"\n') == \
        ["line 2: __file__"]
    assert _depth_lookups("import m\nx = m.__file__\n") == []  # another module's file is not this module's depth
