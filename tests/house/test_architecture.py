"""The package's shape: no import cycles, nothing imports the CLI, one home for outcome codes.

Imports are read with the standard library's `ast` (every `import`/`from … import`, also those
inside functions), so the test sees the real dependency graph without importing anything.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fp8_check.verdict import _outcome as outcome

from ..conftest import REPO

PACKAGE = REPO / "harness" / "fp8_check"  # the folder; its import name is the package's own name (fp8_check)
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
    assert "fp8_check.verdict._comparator" in GRAPH["fp8_check.verdict._outcome"]
    assert "fp8_check.run" in GRAPH["fp8_check.cli.commands"]
    assert len(MODULES) > 25


def test_the_cycle_finder_finds_a_cycle():
    graph = {m: set(deps) for m, deps in GRAPH.items()}
    graph["fp8_check.verdict._comparator"] = graph["fp8_check.verdict._comparator"] | {"fp8_check.verdict._outcome"}
    assert _cycle(graph) is not None


def test_no_import_cycles():
    assert _cycle(GRAPH) is None, " -> ".join(_cycle(GRAPH) or [])


def test_nothing_imports_the_cli():
    importers = sorted(m for m, deps in GRAPH.items() if "fp8_check.cli.main" in deps)
    assert importers == []


def test_the_compile_worker_imports_only_aot():
    # it runs inside per-version environments that hold only JAX (and asks the platforms, standard library only)
    platform_modules = {m for m in GRAPH if m == "fp8_check.platforms" or m.startswith("fp8_check.platforms.")}
    # the faces' helper (fp8_check/_faces.py) is the standard library's ast and importlib
    faces = {f"{IMPORT_NAME}._faces"}
    assert GRAPH[f"{IMPORT_NAME}._faces"] == set()
    assert GRAPH["fp8_check.worker.serve"] <= {"fp8_check.worker._aot", "fp8_check.worker._guard", "fp8_check.worker",
                                                  "fp8_check.worker._device_view", IMPORT_NAME} | platform_modules | faces
    assert GRAPH["fp8_check.worker._guard"] == set()  # standard library only
    # a repro carries the three sources (compile/_render.py)
    assert GRAPH["fp8_check.worker._aot"] == {"fp8_check.worker._device_view", "fp8_check.worker._out_specs"}
    assert GRAPH["fp8_check.worker._device_view"] == GRAPH["fp8_check.worker._out_specs"] == set()
    for m in platform_modules:
        assert GRAPH[m] <= platform_modules | {IMPORT_NAME} | faces, m


def test_outcome_codes_are_defined_once():
    names = [c.name for c in outcome.CODES]
    definition = re.compile(r"""\b(?:%s)\s*=\s*Code\(|[\"'](?:%s)[\"']\s*[,)]\s*(?:#|$)""" % ("|".join(names), "|".join(names)))
    homes = sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if definition.search(p.read_text()))
    assert homes == ["harness/fp8_check/verdict/_outcome.py"]
    # nor tuples of outcome names that classify them again (e.g. ("PASS", "XFAIL", "UNSUPPORTED"))
    tuples = re.compile(r"\(\s*\"(?:%s)\"\s*,\s*\"(?:%s)\"" % ("|".join(names), "|".join(names)))
    assert [str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if tuples.search(p.read_text())] == []


def test_one_comparator_and_one_absent_sentinel():
    # golden diffs and verdict lines come from one walker (harness/fp8_check/verdict/_comparator.py): no second sentinel
    sentinel = re.compile(r"^(?:class _?Missing\b|_?MISSING\s*(?::[^=]+)?=)", re.M)
    homes = sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if sentinel.search(p.read_text()))
    assert homes == ["harness/fp8_check/verdict/_comparator.py"]


def test_the_canary_gate_is_in_one_place():
    # run/bless/matrix/bisect, the pytest plugin and the API ask runner.CanaryGate; only `fp8-check target-check`
    # compiles the canaries itself, to print what they found
    callers = sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py") if "check_canary(" in p.read_text())
    assert callers == sorted(["harness/fp8_check/verdict/_canary.py", "harness/fp8_check/run/_runner.py",
                           "harness/fp8_check/cli/target_check.py"])
    assert sorted(str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")
                  if re.search(r"^\s*(?:class CanaryGate|def canary_applies)\b", p.read_text(), re.M)) == \
        ["harness/fp8_check/run/_runner.py"]


def _outcome_name_uses(source: str) -> list[str]:
    """Where `source` compares with an outcome code's name as text (`code.name == "PASS"`, `x in ("NEW", "FAIL")`,
    `match ...: case "XFAIL"`) or keys a mapping by one (`{"NEW": ...}`): outcomes are compared as values
    (`o.code is PASS`); names are for files only (JSON written by results.py, read back through `outcome.code`)."""
    names = {c.name for c in outcome.CODES}

    def named(node: ast.AST | None) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(named(x) for x in node.elts)
        return False

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(named(x) for x in [node.left, *node.comparators]):
            out.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Dict) and any(named(k) for k in node.keys):
            out.append(f"line {node.lineno}: a mapping keyed by outcome names")
        elif isinstance(node, ast.MatchValue) and named(node.value):
            out.append(f"line {node.lineno}: case {ast.unparse(node.value)}")
    return out


def test_outcome_codes_are_compared_as_values():
    offenders = {str(p.relative_to(REPO)): hits for p in PACKAGE.rglob("*.py")
                 if p != PACKAGE / "verdict" / "_outcome.py" and (hits := _outcome_name_uses(p.read_text()))}
    assert offenders == {}


def test_the_outcome_name_finder_finds_string_comparisons():
    assert _outcome_name_uses('if out.code.name == "PASS":\n    pass')
    assert _outcome_name_uses("ok = 'XFAIL' != o.code.name")
    assert _outcome_name_uses('bad = name in ("FAIL", "XPASS")')
    assert _outcome_name_uses('where = {"NEW": "bless it"}.get(o.code.name)')
    assert _outcome_name_uses('match name:\n    case "UNSUPPORTED":\n        pass')
    assert not _outcome_name_uses('if out.code is PASS or out.code in (FAIL, XPASS):\n    pass')
    assert not _outcome_name_uses('doc = {"outcome": o.code.name}\nif kind == "pattern":\n    pass')


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


# Modules over 450 lines, each with why it is one piece (a concept chooses its seams, not a cap).
LONG_MODULES: dict[str, str] = {
    'fp8_check.api': "456 lines at the restructure: one concept (split where a seam appears)",
    'fp8_check.run._runner': "the one runner (plan -> canary -> compile -> judge) with the platform filter (#47) and "
                            "the device-validity diffs (#44): one concept, 471 lines",
    'fp8_check.compile._service': "the compile worker and its compiler, whose one send path also switches a worker "
                                 "to replay autotune results (#58; the rest lives in compile/_replay_worker.py)",
}


def test_no_module_is_too_long():
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 450 and m not in LONG_MODULES}
    assert long == {}


# ------------------------------------------------------------------ case kinds

KIND_DIR = PACKAGE / "cases" / "kinds"


def _kind_switches(text: str, names: list[str]) -> list[str]:
    """Lines that compare a `kind` with a kind's name, or map two kind names to something (a switch on kinds)."""
    alt = "|".join(map(re.escape, names))
    compare = re.compile(r"""\bkind\s*(?:==|!=|\bin\b|\bnot in\b)\s*[(\[{]?\s*["'](?:%s)["']""" % alt)
    reverse = re.compile(r"""["'](?:%s)["']\s*(?:==|!=)\s*\w*\.?kind\b""" % alt)
    mapping = re.compile(r"""[{,]\s*["'](?:%s)["']\s*:""" % alt)
    return [line.strip() for line in text.splitlines()
            if compare.search(line) or reverse.search(line) or len(mapping.findall(line)) >= 2]


def test_no_module_outside_the_kinds_switches_on_kind_names():
    from fp8_check.cases import kinds

    names = list(kinds.KINDS)
    offenders = {str(p.relative_to(REPO)): hits for p in PACKAGE.rglob("*.py")
                 if KIND_DIR not in p.parents and (hits := _kind_switches(p.read_text(), names))}
    assert offenders == {}


def test_the_kind_switch_finder_finds_a_switch():
    names = ["pattern", "python", "block_scaled"]
    assert _kind_switches('    if case.kind == "block_scaled":', names)
    assert _kind_switches("    elif case.kind != 'pattern':", names)
    assert _kind_switches('    if case.kind not in ("pattern", "block_scaled"):', names)
    assert _kind_switches('    allowed = {"pattern": A, "python": B}[kind]', names)
    assert not _kind_switches('    if instr.fusion_kind == "kLoop":', names)
    assert not _kind_switches("""    env = {'python': platform.python_version()}""", names)


def test_every_kind_module_is_registered_and_complete():
    from fp8_check.cases import kinds

    modules = sorted(p.stem for p in KIND_DIR.glob("*.py") if p.stem != "__init__")
    assert sorted(kinds.KINDS) == modules  # a new kind is one new module, registered once
    for name, kind in kinds.KINDS.items():
        assert kind.NAME == name
        assert {"id", "kind", "profiles", "targets", "known_issues", "filecheck"} <= set(kind.KEYS)
        for attr in ("validate", "arg_specs", "render", "case_options"):
            assert callable(getattr(kind, attr)), (name, attr)


def test_kinds_do_not_import_each_other():
    kind_modules = {f"fp8_check.cases.kinds.{p.stem}" for p in KIND_DIR.glob("*.py") if p.stem != "__init__"}
    for m in kind_modules:
        assert GRAPH[m] & kind_modules == set(), m


# The layer order: tests/house/test_layers.py, from harness/fp8_check/stages.py.
