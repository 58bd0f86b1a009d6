"""The package's shape: no import cycles, nothing imports the CLI, one home for outcome codes.

Imports are read with the standard library's `ast` (every `import`/`from … import`, also those
inside functions), so the test sees the real dependency graph without importing anything.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import outcome

from .conftest import REPO

PACKAGE = REPO / "harness"  # the folder; its import name is the package's own name (fp8_check)
IMPORT_NAME = outcome.__name__.split(".")[0]


def _module_name(path: Path) -> str:
    parts = [IMPORT_NAME] + list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path) -> set[str]:
    """The harness modules `name` imports (resolving relative imports and `from pkg import module`)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != name and (t == IMPORT_NAME or t.startswith(IMPORT_NAME + ".")):
                out.add(t)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in `graph` (module -> imported modules, packages ignored), or None."""
    modules = {m for m in graph if not MODULES[m].name == "__init__.py"}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if n not in modules:
                continue
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if not state.get(n):
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(modules):
        if not state.get(m):
            found = visit(m)
            if found:
                return found
    return None


def test_the_import_graph_is_read():
    # the walker must see real edges, or the tests below could never fail
    assert "harness.pipeline.golden" in GRAPH["harness.outcome"]
    assert "harness.selection" in GRAPH["harness.commands"]
    assert len(MODULES) > 25


def test_the_cycle_finder_finds_a_cycle():
    graph = {m: set(deps) for m, deps in GRAPH.items()}
    graph["harness.pipeline.golden"] = graph["harness.pipeline.golden"] | {"harness.outcome"}
    assert _cycle(graph) is not None


def test_no_import_cycles():
    assert _cycle(GRAPH) is None, " -> ".join(_cycle(GRAPH) or [])


def test_nothing_imports_the_cli():
    importers = sorted(m for m, deps in GRAPH.items() if "harness.cli" in deps)
    assert importers == []


def test_the_compile_worker_imports_only_aot():
    # it runs inside per-version environments that hold only JAX
    assert GRAPH["harness.pipeline.worker"] <= {"harness.pipeline.aot", "harness.pipeline", IMPORT_NAME}
    assert GRAPH["harness.pipeline.aot"] == set()


def test_outcome_codes_are_defined_once():
    names = [c.name for c in outcome.CODES]
    definition = re.compile(r"""\b(?:%s)\s*=\s*Code\(|[\"'](?:%s)[\"']\s*[,)]\s*(?:#|$)""" % ("|".join(names), "|".join(names)))
    homes = sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if definition.search(p.read_text()))
    assert homes == ["harness/outcome.py"]
    # nor tuples of outcome names that classify them again (e.g. ("PASS", "XFAIL", "UNSUPPORTED"))
    tuples = re.compile(r"\(\s*\"(?:%s)\"\s*,\s*\"(?:%s)\"" % ("|".join(names), "|".join(names)))
    assert [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if tuples.search(p.read_text())] == []


@pytest.mark.parametrize("c", outcome.CODES, ids=lambda c: c.name)
def test_each_code_knows_what_it_is(c):
    assert outcome.code(c.name) is c
    assert len(c.symbol) == 1
    # lit's rule: what makes a run fail
    assert c.is_failure == (c.name in {"FAIL", "XPASS", "UNRESOLVED", "NEW"})
    assert c.paint(True).startswith("\033[") and c.paint(False) == c.name


def test_unknown_code_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown outcome 'MAYBE'"):
        outcome.code("MAYBE")


def test_no_module_is_too_long():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}
