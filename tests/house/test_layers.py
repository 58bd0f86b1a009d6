"""The stage folders and their order: harness/fp8_check/stages.py declares them, bottom to top.

A module imports modules of its own stage and of the stages below it, never one above: read from the
source with `ast` (every `import`, also those inside functions), so nothing is imported to check it.
The folder list is the declaration (no folder that is not a stage, no stage without its folder), and no
folder holds more than 15 modules.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fp8_check import stages

# the package's import graph, read once (tests/house/test_architecture.py: every import, also inside functions)
from .test_architecture import GRAPH, IMPORT_NAME as NAME, MODULES, PACKAGE  # noqa: E402

MAX_MODULES = 15
# Stage folders allowed more modules, each with why (a concept chooses its seams, not a cap).
LARGE_STAGES: dict[str, str] = {
    "fp8_check/cli": "every command registers here, one module a command family (16 after round 2): a command "
                     "is one module, however many commands there are",
}
UNSTAGED = {NAME, f"{NAME}.stages", f"{NAME}._faces"}  # the package marker, the declaration, the face helper


def stage_of(module: str) -> str | None:
    """The stage a module belongs to: its folder under the package, or itself (a top-level stage module)."""
    if module in UNSTAGED:
        return None
    return module.split(".")[1]


def upward_imports(graph: dict[str, set[str]], order: tuple[str, ...] = stages.NAMES) -> list[str]:
    rank = {s: i for i, s in enumerate(order)}
    out = []
    for m, deps in graph.items():
        sm = stage_of(m)
        for d in deps:
            sd = stage_of(d)
            if sm is None or sd is None:
                continue
            if rank[sd] > rank[sm]:
                out.append(f"{m} ({sm}) imports {d} ({sd})")
    return sorted(out)


def folder_sizes(root: Path = PACKAGE) -> dict[str, int]:
    return {str(d.relative_to(root.parent)): n for d in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]
            if "__pycache__" not in d.parts and (n := len(list(d.glob("*.py"))))}


def test_the_import_graph_is_read():
    # real edges, or the checks below could never fail
    assert "fp8_check.verdict._comparator" in GRAPH["fp8_check.verdict._outcome"]
    assert "fp8_check.worker._aot" in GRAPH["fp8_check.worker.serve"]
    assert len(MODULES) > 80


def test_the_declaration_is_the_folder_list():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.rglob("*.py"))}  # templates/ holds data
    top_modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "stages", "_faces"}
    assert len(set(stages.NAMES)) == len(stages.NAMES)
    assert folders | top_modules == set(stages.NAMES)
    assert all(purpose and "\n" not in purpose for _, purpose in stages.STAGES)


def test_every_module_has_a_stage():
    assert sorted(m for m in MODULES if m not in UNSTAGED and stage_of(m) not in stages.NAMES) == []


def test_no_module_imports_a_stage_above_its_own():
    assert upward_imports(GRAPH) == []


def test_the_stage_check_finds_an_upward_import():
    graph = {m: set(deps) for m, deps in GRAPH.items()}
    graph["fp8_check.cases._load"] |= {"fp8_check.verdict._golden", "fp8_check.cases._model"}
    graph["fp8_check.signature._hlo"] |= {"fp8_check.cli.commands"}
    assert upward_imports(graph) == [
        "fp8_check.cases._load (cases) imports fp8_check.verdict._golden (verdict)",
        "fp8_check.signature._hlo (signature) imports fp8_check.cli.commands (cli)",
    ]
    # and the order is what decides: swapped, the same graph has other offenders
    order = list(stages.NAMES)
    i, j = order.index("signature"), order.index("cost")
    order[i], order[j] = order[j], order[i]
    assert "fp8_check.cost._model (cost) imports fp8_check.signature (signature)" in upward_imports(GRAPH, tuple(order))


@pytest.mark.parametrize("stage", [s for s in stages.NAMES if (PACKAGE / s).is_dir()])
def test_no_folder_holds_more_than_15_modules(stage):
    sizes = {k: n for k, n in folder_sizes().items() if k == f"{NAME}/{stage}" or k.startswith(f"{NAME}/{stage}/")}
    over = {k: v for k, v in sizes.items() if v > MAX_MODULES and k not in LARGE_STAGES}
    assert sizes and not over, over


def test_the_folder_count_counts(tmp_path):
    (tmp_path / "pkg" / "a").mkdir(parents=True)
    for i in range(16):
        (tmp_path / "pkg" / "a" / f"m{i}.py").write_text("")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    assert folder_sizes(tmp_path / "pkg") == {"pkg": 1, "pkg/a": 16}


def test_the_worker_imports_only_its_stage_and_the_platforms():
    # it runs inside per-version environments that hold only JAX
    for m in MODULES:
        if stage_of(m) == "worker":
            assert {stage_of(d) for d in GRAPH[m]} <= {"worker", "platforms", None}, m
        if stage_of(m) == "platforms":
            assert {stage_of(d) for d in GRAPH[m]} <= {"platforms", None}, m
    assert GRAPH["fp8_check.worker._guard"] == set()  # standard library only


def test_nothing_below_the_cli_imports_it():
    assert sorted(m for m, deps in GRAPH.items() if stage_of(m) != "cli" and any(stage_of(d) == "cli" for d in deps)) == []
