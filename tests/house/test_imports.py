"""fp8_check's own imports sit at the top of their module; one inside a function needs a reason here.

A module-level import shows a module's dependencies where a reader (and the architecture test) looks
first, and fails at import, not in the middle of a command. The exceptions, each with its reason
(docs/imports.md has the start-up measurements):
- start-up cost: a module every `fp8-check` start, every `import fp8_check.api` or the checking child of
  `fp8-check check` imports keeps a heavy dependency out of that path;
- side effects: importing `fp8_check.api` runs the CPU-only hook, wanted only where the API is used;
- separate processes: the GPU session's supervisor, whose steps import what they need in their own child.
Imports are read with `ast`, as in test_architecture.py; nothing is imported.
"""

from __future__ import annotations

import ast

from .test_architecture import IMPORT_NAME, MODULES

# (importing module, imported module or "*" for every import in the module) -> why it stays inside a function
ALLOWED: dict[tuple[str, str], str] = {
    ("fp8_check.cli.commands", "fp8_check.gpu"):
        "start-up: numerics imports numpy and ml_dtypes, needed only by `run --numerics`; every CLI start imports commands",
    ("fp8_check.cli.pytest_plugin", "fp8_check.api"):
        "side effect and start-up: importing api runs the CPU-only hook (a GPU probe, JAX_PLATFORMS=cpu without one); "
        "the plugin loads in every pytest process of an environment with fp8-check and runs the hook at configure time",
    ("fp8_check.gpu.session", "*"):
        "per-step environments: the session's supervisor imports the standard library and platforms only; each step "
        "(a child process with a time budget) imports the pipeline, JAX and numpy for itself",
    # `import fp8_check.api` stays light (the compile service, the runner, the case kinds and their jinja2 templates
    # load on first use): a user's script or test imports it, and `fp8-check check` runs the user's code in a child
    # (`python -m fp8_check.cli.check`) whose start-up, until the user's module is imported, counts against --timeout.
    ("fp8_check.cli.check", "fp8_check.compile"): "start-up of the checking child: the parent's side (it imports the compile service)",
    ("fp8_check.api", "fp8_check.compile"): "start-up of every api import: the compile service loads with the first Checker",
    ("fp8_check.versions._other_environments", "fp8_check.compile"): "start-up of every api import: as api -> compile",
    ("fp8_check.versions._other_environments", "fp8_check.versions._envs"):
        "start-up of every api import: envs (releases, wheels, uv) serves only a target on another platform's plugin",
    ("fp8_check.cli.check", "fp8_check.report"):
        "start-up of the checking child: the output registry (the results file, the HTML page and jinja2) loads in the "
        "parent's parser and, in the child, only to write --json after the check",
    ("fp8_check.cli.check", "fp8_check.run"):
        "start-up of the checking child: the run stage serves the parent's parser (`--timeout`) and, in the child, "
        "only the results file written for --json after the check (as check -> report.formats)",
    ("fp8_check.cli.check", "fp8_check.api"):
        "side effect: importing api runs the CPU-only hook (a GPU probe, JAX_PLATFORMS=cpu without one); every CLI "
        "start imports check, and only `fp8-check check` (before the checked module imports JAX) wants the hook",
}


def in_function_imports(name: str, source: str) -> list[tuple[int, str]]:
    """(line, imported module) for every fp8_check import inside a function of module `name`."""
    tree = ast.parse(source)
    package = name if name in MODULES and MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import):
                found.extend([(child.lineno, a.name) for a in child.names if a.name.split(".")[0] == IMPORT_NAME])
            elif in_function and isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if base.split(".")[0] == IMPORT_NAME:
                    # `from pkg import module` names the module; `from module import name` the module
                    found.extend([(child.lineno, f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
                                  for a in child.names])
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, False)
    return found


def offenders(sources: dict[str, str], allowed: dict[tuple[str, str], str]) -> list[str]:
    return sorted(f"{name}:{line} imports {target} inside a function"
                  for name, source in sources.items() for line, target in in_function_imports(name, source)
                  if (name, target) not in allowed and (name, "*") not in allowed)


SOURCES = {name: path.read_text() for name, path in MODULES.items()}


def test_internal_imports_are_at_module_top_unless_allowed():
    assert offenders(SOURCES, ALLOWED) == []


def test_every_allowed_entry_is_still_needed():
    used = {(name, target) for name, source in SOURCES.items() for _, target in in_function_imports(name, source)}
    stale = [k for k in ALLOWED if k not in used and not (k[1] == "*" and any(n == k[0] for n, _ in used))]
    assert stale == []
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_check_finds_an_import_inside_a_function():
    source = ("from fp8_check import outcome\n\n"
              "def f():\n    from fp8_check.verdict import golden\n    import fp8_check.verdict._classify\n"
              "    from . import check\n    import json\n    return golden\n")
    assert offenders({"fp8_check.cli.commands": source}, ALLOWED) == [
        "fp8_check.cli.commands:4 imports fp8_check.verdict inside a function",
        "fp8_check.cli.commands:5 imports fp8_check.verdict._classify inside a function",
        "fp8_check.cli.commands:6 imports fp8_check.cli.check inside a function",
    ]
    # an allowed pair passes; the same import in another module does not
    numerics = "def f():\n    from fp8_check.gpu import Float64Reference\n"
    assert offenders({"fp8_check.cli.commands": numerics}, ALLOWED) == []
    assert offenders({"fp8_check.run._selection": numerics}, ALLOWED) == ["fp8_check.run._selection:2 imports fp8_check.gpu inside a function"]
    # and a method of a class counts as a function
    assert offenders({"fp8_check.api": "class A:\n    def m(self):\n        from fp8_check import targets\n"}, {}) == [
        "fp8_check.api:3 imports fp8_check.targets inside a function"]
