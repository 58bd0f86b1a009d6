"""The argparse namespace stays in `cli/`: below it, a stage takes the typed record of its options.

`cli/_options.py` builds each stage's record (`SelectionOptions`, `PoolOptions`, `RequirementOptions`,
`VersionOptions`, the output paths) from the parsed options, once per command; a module below `cli/` names
no `Namespace` (argparse's or `types.SimpleNamespace`), calls no `getattr(args, …)` / `vars(args)`, and has
no function whose parameter `args` is read as a namespace (`args.target`). A module's own `main()` that
parses its options and reads them in the same function (`python -m fp8_check.versions.releases`) passes: its
namespace travels nowhere. Read with `ast`, as tests/house/test_architecture.py does; nothing is imported.
"""

from __future__ import annotations

import ast

from .test_architecture import MODULES

NAMESPACES = {"Namespace", "SimpleNamespace"}
READERS = {"getattr", "vars", "hasattr", "setattr"}


def findings(name: str, source: str) -> list[str]:
    """Where module `name` lets a namespace travel: `name:line what`."""
    tree = ast.parse(source)
    out: list[str] = []

    def add(node: ast.AST, what: str) -> None:
        out.append(f"{name}:{getattr(node, 'lineno', 0)} {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in NAMESPACES:
            add(node, node.id)
        elif isinstance(node, ast.Attribute) and node.attr in NAMESPACES:
            add(node, node.attr)
        elif isinstance(node, ast.ImportFrom) and any(a.name in NAMESPACES for a in node.names):
            add(node, f"imports {', '.join(a.name for a in node.names if a.name in NAMESPACES)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in READERS
              and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "args"):
            add(node, f"{node.func.id}(args")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            if "args" not in {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}:
                continue
            body = node.body if isinstance(node.body, list) else [node.body]
            for inner in (n for stmt in body for n in ast.walk(stmt)):
                if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) and inner.value.id == "args":
                    add(inner, f"parameter args read as a namespace: args.{inner.attr}")
    return sorted(set(out))


def below_cli(modules: dict[str, str]) -> list[str]:
    return [f for name, source in modules.items() if name.split(".")[1:2] != ["cli"] for f in findings(name, source)]


def test_no_namespace_travels_below_the_cli():
    sources = {name: path.read_text() for name, path in MODULES.items()}
    assert below_cli(sources) == []


def test_the_check_finds_a_namespace_below_the_cli():
    planted = ("import argparse\nfrom types import SimpleNamespace\n\n"
               "def from_args(args):\n    return getattr(args, 'target', None), args.mode\n\n"
               "def start(mode, args=None):\n    return argparse.Namespace(workers=1), vars(args)\n\n"
               "def tuples(args: tuple):\n    return [a[0] for a in args], len(args)\n\n"
               "def main(argv=None):\n    args = argparse.ArgumentParser().parse_args(argv)\n    return args.out\n")
    assert below_cli({"fp8_check.run._selection": planted}) == [
        "fp8_check.run._selection:2 imports SimpleNamespace",
        "fp8_check.run._selection:5 getattr(args",
        "fp8_check.run._selection:5 parameter args read as a namespace: args.mode",
        "fp8_check.run._selection:8 Namespace",
        "fp8_check.run._selection:8 vars(args",
    ]
    # the same source in cli/ is where the namespace belongs
    assert below_cli({"fp8_check.cli.commands": planted}) == []
