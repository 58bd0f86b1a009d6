"""No stale words: every path, dotted name and stage the prose names is one the tree has.

The docs (docs/*.md), the README, mkdocs.yml and the package's own text (docstrings and comments in
harness/) name files (`harness/fp8_check/verdict/_golden.py`), modules and their attributes
(`fp8_check.cost._model.Estimate`) and stages. A move that leaves one behind fails here: every
`harness/…` path exists (a glob matches something), every `fp8_check.x.y` names a module and,
after it, a name that module binds, nothing names the retired `pipeline/` folder, and no docstring
numbers a "Stage N" (the stages have names, in harness/fp8_check/stages.py). Read as text and with
`ast`; nothing is imported.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from ..conftest import REPO

PACKAGE = "fp8_check"
HARNESS = REPO / "harness"

# Text that names the old layout on purpose: (file, the heading from which on it is history) -> why.
HISTORY = {
    ("docs/layout.md", "## The move"): "how the move to stage folders was made: it names the old layout",
}

_PATH = re.compile(r"(?<![\w/.-])harness/[\w./*{},-]*")
_DOTTED = re.compile(r"(?<![\w.])" + PACKAGE + r"(?:\.[A-Za-z_]\w*)+")
_PIPELINE = re.compile(r"(?<![\w.-])pipeline/")
_STAGE_N = re.compile(r"\b[Ss]tage \d")


def _prose_of_module(source: str) -> str:
    """A module's prose: its docstrings (module, classes, functions) and comments, one per line."""
    parts = [ast.get_docstring(node, clean=False) or "" for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    parts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline) if tok.type == tokenize.COMMENT]
    return "\n".join(p for p in parts if p)


def _prose_files() -> dict[str, str]:
    """What people read: docs pages, README, mkdocs.yml, and the docstrings and comments of harness/."""
    out = {}
    for p in [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md", REPO / "mkdocs.yml",
              *sorted((HARNESS / PACKAGE).rglob("*.py"))]:
        rel = str(p.relative_to(REPO))
        text = p.read_text()
        for (f, heading), _why in HISTORY.items():
            if f == rel and heading in text:
                text = text[:text.index(heading)]
        out[rel] = _prose_of_module(text) if rel.endswith(".py") else text
    return out


def _path_exists(path: str) -> bool:
    path = path.rstrip(".,:;)`'\"")
    path = re.sub(r"\{[^}]*\}", "*", path)  # `{x,y}` alternatives: any of them
    path = "/".join("*" if re.fullmatch(r"[A-Z][A-Z_]*(\.\w+)?", s) and s != s.lower() else s for s in path.split("/"))
    path = re.sub(r"(?<=/)[A-Z][A-Z_]+(?=\.\w+$)", "*", path)  # a placeholder: targets/NAME.txtpb
    if any(c in path for c in "*?["):
        return any(REPO.glob(path.rstrip("/")))
    return (REPO / path).exists()


def missing_paths(files: dict[str, str]) -> list[str]:
    return [f"{rel}: {m.group(0)}" for rel, text in files.items() for m in _PATH.finditer(text)
            if not _path_exists(m.group(0))]


def _module_file(parts: list[str]) -> Path | None:
    base = HARNESS.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _binds(module: Path, name: str) -> bool:
    """The module binds `name` at its top level (def, class, assignment, import) or holds a submodule of that name."""
    if module.name == "__init__.py" and _module_file([*module.parent.relative_to(HARNESS).parts, name]):
        return True
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def unresolved_names(files: dict[str, str]) -> list[str]:
    out = []
    for rel, text in files.items():
        for m in _DOTTED.finditer(text):
            parts = m.group(0).split(".")
            i = max((k for k in range(1, len(parts) + 1) if _module_file(parts[:k])), default=0)
            module = _module_file(parts[:i]) if i else None
            rest = [p for p in parts[i:] if not p.startswith("__")]  # `fp8_check.__file__`: the module's own
            # a module, then one name it binds; a deeper attribute (`Estimate.total_us`) is the name's own business
            if module is None or (rest and not _binds(module, rest[0])):
                out.append(f"{rel}: {m.group(0)}")
    return sorted(set(out))


def stale_words(files: dict[str, str]) -> list[str]:
    out = []
    for rel, text in files.items():
        if _PIPELINE.search(text):
            out.append(f"{rel}: names the retired pipeline/ folder")
        m = _STAGE_N.search(text)
        if m:
            out.append(f"{rel}: numbers a stage ({m.group(0)}…)")
    return out


def test_every_harness_path_in_the_prose_exists():
    assert missing_paths(_prose_files()) == []


def test_every_dotted_name_in_the_prose_resolves():
    assert unresolved_names(_prose_files()) == []


def test_no_stale_words():
    assert stale_words(_prose_files()) == []


@pytest.mark.parametrize("text, found", [
    ("see harness/fp8_check/verdict/gone.py.", ["x.md: harness/fp8_check/verdict/gone.py."]),
    ("see harness/fp8_check/targets/*.txtpb and harness/fp8_check/verdict/_golden.py.", []),
    ("data in harness/fp8_check/{templates,targets}/", []),
])
def test_the_path_check_can_fail(text, found):
    assert missing_paths({"x.md": text}) == found


def test_the_name_check_can_fail():
    text = "fp8_check.verdict._golden.remove_stale_goldens moved; fp8_check.core._files.atomic_write, fp8_check.pipeline.cost; " \
           "fp8_check.cost._model.Estimate.total_us is fine"
    assert unresolved_names({"x.md": text}) == ["x.md: fp8_check.pipeline.cost", "x.md: fp8_check.verdict._golden.remove_stale_goldens"]


def test_the_stale_word_check_can_fail():
    found = stale_words({"a.md": "the old pipeline/ folder", "b.py": _prose_of_module('"""Stage 3: compile."""\nx = 1  # see pipeline/x.py\n'),
                         "c.py": _prose_of_module('"""The compile stage."""\nX = "a/pipeline/ regex is code, not prose"\n')})
    assert found == ["a.md: names the retired pipeline/ folder", "b.py: names the retired pipeline/ folder",
                     "b.py: numbers a stage (Stage 3…)"]


def test_history_is_kept_only_where_a_reason_says_so():
    for (rel, heading), why in HISTORY.items():
        assert heading in (REPO / rel).read_text(), (rel, heading)
        assert len(why) > 20
