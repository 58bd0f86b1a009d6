"""A stage's face: the names it offers other stages, each loaded from its private module on first use.

A stage's `__init__.py` is its face, written by a person: one `if TYPE_CHECKING:` block of imports from the
stage's private modules (`from ._errors import BadInput, Fp8CheckError`), the single list of its names, and one
call that makes them real at run time (the `lazy_loader.attach_stub` idea, with the block as the stub):

    if TYPE_CHECKING:
        from ._errors import BadInput
    else:
        __getattr__, __dir__, __all__ = attach(__name__)

`attach` reads that block with `ast` (nothing is imported), and returns a PEP 562 `__getattr__` that imports a
name's module the first time the name is asked for, so importing a face imports none of its modules: start-up
stays lazy, and the compile worker, which imports `fp8_check.platforms` inside JAX environments of any age,
loads only what it asks for. mypy reads the same block (implicit re-export is on for the faces, pyproject.toml).
Standard library only; it belongs to no stage (fp8_check/stages.py).
"""

from __future__ import annotations

import ast
import importlib
import sys
from importlib import resources
from typing import Any, Callable


def face_of(source: str) -> dict[str, str]:
    """name -> the private module (`_errors`) that defines it, read from a face's `if TYPE_CHECKING:` block."""
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if not (isinstance(stmt, ast.ImportFrom) and stmt.level == 1 and stmt.module):
                    raise ValueError(f"line {stmt.lineno}: a face imports names from its own modules only")
                for alias in stmt.names:
                    if alias.asname or alias.name in out:
                        raise ValueError(f"line {stmt.lineno}: {alias.name}: no alias, each name once")
                    out[alias.name] = stmt.module
    return out


def attach(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """`__getattr__`, `__dir__` and `__all__` for the face `package` (its `__init__.py`, found as package data)."""
    names = face_of(resources.files(package).joinpath("__init__.py").read_text(encoding="utf-8"))

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # the next use finds it without asking again
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__, sorted(names)
