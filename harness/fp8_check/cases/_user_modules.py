"""The modules a `kind: python` case imports from the user's project: found by path, never pasted.

A case's module is *imported* by the compile worker (the directory the run starts in and
PYTHONPATH are on its path, as for pytest), so a module behaves exactly as it does anywhere
else: a docstring before `from __future__ import …`, `__file__`, relative imports and imports
of sibling modules all work. This module only reads files, without importing anything:

- `closure(module)`: the module's source file, the `__init__.py` of each package on the way, and
  (transitively) every module they import statically that lies in the same project (the
  checkout or the current directory; never installed packages). The compile cache keys a
  python case on these texts (`digest`), and `show --repro` embeds them into the repro, which
  then installs them as real modules (`repro.py.j2`), so it stands alone.
- A closure is `complete` unless one of those modules imports dynamically (`importlib`,
  `__import__`, `exec`): then the cache does not cache the case and the repro says what it needs.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from fp8_check.core import checkout, package_path

CHECKOUT = checkout()  # None when installed
_PACKAGE = __name__.split(".")[0]  # fp8-check's import name; in a checkout its folder is harness/
_PACKAGE_DIR = package_path()
_DYNAMIC = {"__import__", "exec", "eval", "import_module", "runpy", "exec_module"}
MAX_FILES = 200  # a closure larger than this is not followed further (incomplete)


@dataclass(frozen=True)
class ModuleFile:
    name: str  # dotted module name
    relpath: str  # relative to its root, POSIX style (what the repro calls __file__)
    path: str  # absolute, resolved (what the compile worker imports)
    package: bool  # an __init__.py
    text: str


@dataclass(frozen=True)
class Closure:
    files: tuple[ModuleFile, ...] = ()
    complete: bool = True
    why: str = ""  # why it is incomplete

    def digest(self) -> str:
        h = hashlib.sha256()
        for f in sorted(self.files, key=lambda f: f.name):
            h.update(f"{f.name}\0{f.path}\0{f.text}\0".encode())
        return h.hexdigest()

    def covers(self, path: str) -> bool:
        return any(f.path == path for f in self.files)


def closure_of(*modules: str) -> Closure:
    """The union of the closures of `modules` (a case's function and its argument factory): each file once."""
    files: dict[str, ModuleFile] = {}
    whys = []
    for module in dict.fromkeys(modules):
        one = closure(module)
        files.update({f.name: f for f in one.files})
        if not one.complete:
            whys.append(one.why)
    return Closure(tuple(files.values()), not whys, "; ".join(dict.fromkeys(whys)))


def defines(module: str, name: str) -> bool | None:
    """Whether the project module `module` defines `name` at its top level (read, never imported); None when
    `module` is not a project module or does not parse, or binds names in ways a reading cannot follow."""
    found = find(module)
    if found is None:
        return None
    try:
        tree = ast.parse(found[0].read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in _walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Name,)) and node.id == name and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in node.names):
                return True
    return False


def source_roots() -> list[Path]:
    """Where a case's project modules may come from: this checkout (when it is one) and the current directory."""
    roots = [Path.cwd().resolve()]
    if CHECKOUT is not None:
        roots.insert(0, CHECKOUT)
    return list(dict.fromkeys(roots))


def find(module: str) -> tuple[Path, Path, bool] | None:
    """(file, root, is a package) of `module` in the project, by path; None for anything else (installed, missing)."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    bases = [(root, root.joinpath(*parts)) for root in source_roots()]
    if parts[0] == _PACKAGE and CHECKOUT is not None:
        bases.insert(0, (CHECKOUT, _PACKAGE_DIR.joinpath(*parts[1:])))  # fp8-check's own modules (its flax layers)
    for root, base in bases:
        pkg = base.parents[len(parts) - 2] if len(parts) > 1 else base  # the top-level package's folder
        for path, package in ((base / "__init__.py", True), (base.with_suffix(".py"), False)):
            # every package on the way must be a regular package under the same root
            if path.is_file() and all((pkg.joinpath(*parts[1:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                path = path.resolve()
                if any(part in ("site-packages", "dist-packages") for part in path.parts):
                    return None  # an installed package (also fp8-check itself, installed from a wheel)
                return path, root, package
    return None


def _walk(tree: ast.AST):
    """Every node, except the bodies of a module's PEP 562 hooks (`__getattr__`, `__dir__`): what they import
    is loaded on attribute access only (`harness/fp8_check/__init__.py` re-exports its API that way)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.Module):
            todo.extend(n for n in node.body if not (isinstance(n, ast.FunctionDef) and n.name in ("__getattr__", "__dir__")))
        else:
            todo.extend(ast.iter_child_nodes(node))


def _imports(tree: ast.AST, name: str, package: bool) -> tuple[set[str], str]:
    """Absolute names of the modules `tree` imports statically, and why it is dynamic ('' if it is not)."""
    pkg = name if package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".") if pkg else []
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod:
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names if a.name != "*")  # `from pkg import submodule`
        elif isinstance(node, ast.Name) and node.id in _DYNAMIC:
            return out, f"{name} imports or executes code dynamically ({node.id})"
        elif isinstance(node, ast.Attribute) and node.attr in _DYNAMIC:
            return out, f"{name} imports or executes code dynamically ({node.attr})"
    return out, ""


@functools.lru_cache(maxsize=1024)  # one parse per file version (a run renders many cases of one module)
def _scan(path: str, mtime_ns: int, size: int, name: str, package: bool) -> tuple[str, frozenset[str], str]:
    text = Path(path).read_text(encoding="utf-8")
    names, dynamic = _imports(ast.parse(text), name, package)
    return text, frozenset(names), dynamic


def closure(module: str) -> Closure:
    """The project files importing `module` runs (see the module docstring); empty when it is not a project module."""
    files: dict[str, ModuleFile] = {}
    todo = [module]
    why = ""
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # the packages on the way run their __init__ first
            sub = ".".join(parts[:i])
            if sub in files:
                continue
            found = find(sub)
            if found is None:
                break
            path, root, package = found
            try:
                st = path.stat()
                text, names, dynamic = _scan(str(path), st.st_mtime_ns, st.st_size, sub, package)
            except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
                why = why or f"{sub} cannot be read or parsed here"
                break
            relpath = "/".join(sub.split(".")) + ("/__init__.py" if package else ".py")  # where the repro installs it
            files[sub] = ModuleFile(sub, relpath, str(path), package, text)
            why = why or dynamic
            todo.extend(n for n in names if n not in files)
            if len(files) > MAX_FILES:
                return Closure(tuple(files.values()), False, f"more than {MAX_FILES} project modules")
    return Closure(tuple(files.values()), not why, why)
