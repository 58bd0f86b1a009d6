"""scripts/restructure.py: the move to one name and stage folders (docs/layout.md).

The rewriting rules are checked on small texts; the tables against the live tree: before the move every
file under harness/ has a line in MOVES and the moved import graph already respects the declared stage
order; after it, `--check` finds nothing of the old layout.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import REPO

_spec = importlib.util.spec_from_file_location("restructure", REPO / "scripts" / "restructure.py")
assert _spec and _spec.loader
rs = importlib.util.module_from_spec(_spec)
sys.modules["restructure"] = rs
_spec.loader.exec_module(rs)

_stages_spec = importlib.util.spec_from_file_location("restructure_stages", REPO / "scripts" / "restructure" / "stages.py")
assert _stages_spec and _stages_spec.loader
stages = importlib.util.module_from_spec(_stages_spec)
_stages_spec.loader.exec_module(stages)

MOVED = not (REPO / "harness" / "pipeline").exists()  # the move is done in this checkout


def rewrite(text: str, moved: bool = False, path: str = "x.py") -> tuple[str, rs.Report]:
    report = rs.Report()
    return rs.rewrite_text(text, path, moved, report), report


# ------------------------------------------------------------------ the rules


def test_a_from_import_whose_names_go_to_different_stages_is_split():
    text = "    from fp8_check.pipeline import golden, cost  # noqa: E402\n"
    assert rewrite(text)[0] == ("    from fp8_check.verdict import golden  # noqa: E402\n"
                                "    from fp8_check.cost import cost  # noqa: E402\n")


def test_a_from_import_of_names_keeps_its_layout_and_comments():
    text = "from fp8_check.pipeline.signature_types import (  # noqa: F401\n    FP4_TYPES,\n    Gemm,\n)\n"
    assert rewrite(text)[0] == text.replace("pipeline.signature_types", "signature.signature_types")
    assert rewrite("from fp8_check.pipeline import kinds as k\n")[0] == "from fp8_check.cases import kinds as k\n"


def test_a_module_that_becomes_a_package_name_is_told_apart():
    # verdict.py -> verdict/verdict.py: before the move `fp8_check.verdict` is the module
    assert rewrite("from fp8_check import verdict, outcome\n")[0] == "from fp8_check.verdict import verdict, outcome\n"
    assert rewrite("from fp8_check.verdict import Verdict\n")[0] == "from fp8_check.verdict.verdict import Verdict\n"
    assert rewrite('entry = "fp8_check.cli:main"\n')[0] == 'entry = "fp8_check.cli.cli:main"\n'
    # after it, the package
    assert rewrite("from fp8_check.verdict import golden\n", moved=True)[0] == "from fp8_check.verdict import golden\n"


def test_dotted_names_in_strings_yaml_and_commands():
    assert rewrite('mock.patch("fp8_check.pipeline.golden.compare")')[0] == 'mock.patch("fp8_check.verdict.golden.compare")'
    assert rewrite("callable: fp8_check.layers.decoder:price_fwd\n", path="c.yaml")[0] == "callable: fp8_check.models.decoder:price_fwd\n"
    assert rewrite("python -m fp8_check.upstream.xla_commits --update", path="x.yml")[0] == "python -m fp8_check.versions.xla_commits --update"
    assert rewrite("import fp8_check.pipeline.aot as aot\n")[0] == "import fp8_check.worker.aot as aot\n"
    # kept: a package of both layouts, the package itself, API names
    for same in ("from fp8_check.versions import envs\n", "from fp8_check import assert_fusion\n", "import fp8_check\n",
                 "from fp8_check.targets import Profile\n"):
        assert rewrite(same)[0] == same


def test_paths_in_prose_and_in_path_expressions():
    assert rewrite("see harness/pipeline/golden.py.", path="d.md")[0] == "see harness/fp8_check/verdict/golden.py."
    assert rewrite("harness/layers/ and harness/templates/repro.py.j2", path="d.md")[0] == \
        "harness/fp8_check/models/ and harness/fp8_check/templates/repro.py.j2"
    assert rewrite('p = REPO / "harness" / "targets" / f"{n}.txtpb"\n')[0] == \
        'p = REPO / "harness" / "fp8_check" / "targets" / f"{n}.txtpb"\n'
    assert rewrite('p = REPO / "harness" / "layers" / "maxtext-requirements.txt"\n')[0] == \
        'p = REPO / "harness" / "fp8_check" / "models" / "maxtext-requirements.txt"\n'


def test_paths_inside_the_wheel():
    assert rewrite('needed = ("fp8_check/pipeline/worker.py", "fp8_check/targets/h100.txtpb")')[0] == \
        'needed = ("fp8_check/worker/worker.py", "fp8_check/targets/h100.txtpb")'
    assert rewrite("harness/fp8_check/verdict/golden.py", moved=True, path="d.md")[0] == "harness/fp8_check/verdict/golden.py"


def test_what_has_no_single_home_is_reported_not_guessed():
    text, report = rewrite("the stages in harness/pipeline/ and fp8_check.pipeline", path="d.md")
    assert text == "the stages in harness/pipeline/ and fp8_check.pipeline"
    assert report.unresolved["d.md"] == ["dotted name with no home: fp8_check.pipeline", "path with no single home: harness/pipeline/"]


def test_rewriting_twice_changes_nothing():
    text = ("from fp8_check.pipeline import golden, cost, runner\nfrom fp8_check import verdict\n"
            "x = 'fp8_check.pipeline.worker'  # harness/pipeline/worker.py\n")
    once = rewrite(text)[0]
    assert once != text
    assert rewrite(once, moved=True)[0] == once


# ------------------------------------------------------------------ the tables


def test_moves_go_to_declared_stages_and_no_folder_gets_more_than_15_modules():
    folders: dict[str, int] = {}
    for old, new in rs.MOVES.items():
        if new is None:
            continue
        stage = new.split("/")[0].removesuffix(".py")
        assert stage in stages.NAMES or new == "__init__.py", (old, new)
        folder = new.rpartition("/")[0]
        folders[folder] = folders.get(folder, 0) + 1
    assert max(folders.values()) <= 15, folders
    assert len(set(v for v in rs.MOVES.values() if v)) == len([v for v in rs.MOVES.values() if v])  # no two files to one


def test_an_unknown_module_is_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "harness" / "pipeline").mkdir(parents=True)
    (tmp_path / "harness" / "pipeline" / "brand_new.py").write_text("")
    monkeypatch.setattr(rs, "ROOT", tmp_path)
    with pytest.raises(SystemExit, match=r"not in MOVES .*\n  harness/pipeline/brand_new.py"):
        rs.apply(dry=True)


def _old_graph() -> dict[str, set[str]]:
    base = REPO / "harness"
    names = {rs._dotted(str(p.relative_to(base))): p for p in base.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level:
                    mod = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([mod] if mod else []))
                targets = [f"{mod}.{a.name}" for a in node.names]
                if any(t not in names for t in targets):
                    targets.append(mod)  # names from the package itself, not only its modules
            else:
                continue
            for t in targets:
                while t and t not in names:
                    t = t.rpartition(".")[0]
                if t and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


@pytest.mark.skipif(MOVED, reason="the move is done: tests/test_layers.py checks the stages on the real folders")
def test_the_tree_is_covered_and_the_moved_graph_already_respects_the_stage_order():
    assert rs.unknown_files(rs.old_layout_files()) == []  # a module added since: one line in MOVES_TABLE
    rank = {s: i for i, s in enumerate(stages.NAMES)}

    def stage(old: str) -> str | None:
        new = rs.OLD_MODULES[old]
        return None if new is None or new.count(".") == 0 or new == "fp8_check.pipeline" else new.split(".")[1]

    upward = sorted(f"{m} -> {d}" for m, deps in _old_graph().items() for d in deps
                    if stage(m) and stage(d) and rank[stage(d)] > rank[stage(m)])  # type: ignore[index]
    assert upward == []


@pytest.mark.skipif(not MOVED, reason="before the move: the test above checks the tables against the tree")
def test_nothing_of_the_old_layout_remains():
    assert rs.check() == []


def test_the_declaration_reads_as_the_pipeline():
    order = stages.NAMES
    assert [order.index(s) for s in ("cases", "compile", "signature", "cost", "verdict", "run", "report", "cli")] == \
        sorted(order.index(s) for s in ("cases", "compile", "signature", "cost", "verdict", "run", "report", "cli"))
    assert Path(REPO / "scripts" / "restructure" / "test_layers.py").is_file()
