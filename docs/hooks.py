"""mkdocs hook: the reference pages generated from the code, never retyped.

A page asks for a generated block with a marker line `<!-- generated: NAME -->`:

- `verdict-rules`: the rules table, from the table that dispatches, fp8_check.verdict.rules' `FIELD_RULES`
  (a record's entry carries its own rules: `GEMM_RULES`, `BLOCK_RULES`, `COLLECTIVE_RULES`): each rule's
  `@explained` statement, each `Neutral` field's reason;
- `outcomes`: the outcome codes of fp8_check.verdict._outcome (`CODES`);
- `cli`: every command's `--help`, from the argparse parser of fp8_check.cli.main;
- `stages`: the stages of fp8_check/stages.py with the modules each folder holds (docs/pipeline.md);
- `import-exceptions`: tests/house/test_imports.py's table of imports kept inside functions (docs/imports.md);
- `benchmarks`: one line per benchmarks/bench_*.py (its docstring) and a link to its latest
  output, benchmarks/out/NAME.md, which `on_files` adds to the site as it is.

An unknown marker or a rule without a statement
raises, so `mkdocs build --strict` fails instead of publishing a stale page.
tests/house/test_docs.py builds the site and runs the docs' examples.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import re
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.M)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# ------------------------------------------------------------------ verdict rules


def verdict_rules_markdown() -> str:
    from fp8_check.verdict import rules as verdict_rules
    from fp8_check.verdict.rules.findings import Neutral, _narrow_lost, explanation

    rows: list[tuple[str, str, str]] = []
    neutral: list[tuple[str, str]] = []

    def add(path: str, rule: object) -> None:
        if isinstance(rule, Neutral):
            neutral.append((path, rule.reason))
            return
        stated = explanation(rule)
        if stated is None:
            raise ValueError(f"docs/hooks.py: the verdict rule for `{path}` states nothing (@explained)")
        rows.append((path, stated.regression, stated.improvement))

    for key, rule in verdict_rules.FIELD_RULES.items():  # the table that dispatches, as it dispatches
        if isinstance(rule, verdict_rules.Record):
            path = rule.label or key
            add(path, rule.whole)
            for sub, field_rule in rule.rules.items():
                add(f"{path}.{sub.rstrip('_')}", field_rule)
        else:
            add(key, rule)
    add("any field holding dtypes", _narrow_lost)

    out = ["| field | regression | improvement |", "|---|---|---|"]
    out += [f"| `{_cell(p)}` | {_cell(r)} | {_cell(i)} |" if "," not in p and " " not in p else f"| {_cell(p)} | {_cell(r)} | {_cell(i)} |"
            for p, r, i in rows]
    out += ["", "**Neutral** fields (a change costs nothing on the GPU; the reason is the rule's own):", "",
            "| field | why it is neutral |", "|---|---|"]
    out += [f"| `{_cell(p)}` | {_cell(why)} |" for p, why in neutral]
    return "\n".join(out)


# ------------------------------------------------------------------ outcome codes


def outcomes_markdown() -> str:
    from fp8_check.verdict import _outcome as outcome

    out = ["| code | grid symbol | exit 1? | meaning |", "|---|---|---|---|"]
    for c in outcome.CODES:
        out.append(f"| {c.name} | `{_cell(c.symbol)}` | {'yes' if c.is_failure else 'no'} | {_cell(c.meaning)} |")
    return "\n".join(out)


# ------------------------------------------------------------------ CLI


@contextlib.contextmanager
def _columns(n: int) -> Iterator[None]:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)  # argparse wraps to the terminal: the page must not depend on it
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _walk(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for sub in action.choices.values():
                if id(sub) not in seen:  # aliases map to the same parser
                    seen.add(id(sub))
                    yield from _walk(sub)


def cli_markdown() -> str:
    from fp8_check.cli.main import build_parser

    with _columns(100):
        parser, _ = build_parser()
        out = []
        for p in _walk(parser):
            out += [f"### `{p.prog}`", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(out)


# ------------------------------------------------------------------ benchmarks


def _benchmark_outputs() -> list[Path]:
    return sorted((REPO / "benchmarks" / "out").glob("*.md"))


def benchmarks_markdown() -> str:
    out = ["| benchmark | what it measures | latest output |", "|---|---|---|"]
    outputs = _benchmark_outputs()
    for script in sorted((REPO / "benchmarks").glob("bench_*.py")):
        doc = ast.get_docstring(ast.parse(script.read_text())) or ""
        first = doc.strip().split("\n\n")[0].replace("\n", " ")
        mine = [o for o in outputs if o.stem == script.stem or o.stem.startswith(script.stem + "_")]
        links = ", ".join(f"[{o.name}](benchmarks/{o.name})" for o in mine) or "not run yet"
        out.append(f"| `benchmarks/{script.name}` | {_cell(first)} | {links} |")
    return "\n".join(out)


# ------------------------------------------------------------------ the house: stages and import exceptions


def stages_markdown() -> str:
    """One row per stage of fp8_check/stages.py, bottom to top, with the modules its folder holds now."""
    from fp8_check.stages import STAGES

    package = REPO / "harness" / "fp8_check"
    out = ["| stage | what it holds | modules |", "|---|---|---|"]
    for name, purpose in STAGES:
        folder = package / name
        if folder.is_dir():
            mods = sorted(str(m.relative_to(folder).with_suffix("")).replace("/__init__", "/")
                          for m in folder.rglob("*.py") if m.name != "__init__.py" or m.parent != folder)
            mods = mods or ["__init__"]
            where = f"`{name}/`"
        else:
            mods, where = [], f"`{name}.py`"
        out.append(f"| {where} | {_cell(purpose)} | {', '.join(f'`{m}`' for m in mods) or '—'} |")
    return "\n".join(out)


def import_exceptions_markdown() -> str:
    """tests/house/test_imports.py's ALLOWED table: every fp8_check import kept inside a function, with its reason."""
    tree = ast.parse((REPO / "tests" / "house" / "test_imports.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "ALLOWED":
            allowed = ast.literal_eval(node.value)  # type: ignore[arg-type]
            break
    else:
        raise ValueError("docs/hooks.py: tests/house/test_imports.py has no ALLOWED table")
    out = ["| module | imports in a function | why |", "|---|---|---|"]
    for (module, imported), why in allowed.items():
        short = lambda name: name.removeprefix("fp8_check.")  # noqa: E731
        out.append(f"| `{short(module)}` | {'everything' if imported == '*' else f'`{short(imported)}`'} | {_cell(why)} |")
    return "\n".join(out)


GENERATORS = {
    "stages": stages_markdown,
    "import-exceptions": import_exceptions_markdown,
    "verdict-rules": verdict_rules_markdown,
    "outcomes": outcomes_markdown,
    "cli": cli_markdown,
    "benchmarks": benchmarks_markdown,
}


def expand(markdown: str, where: str = "page") -> str:
    """`markdown` with every marker replaced by its generated block."""
    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{where}: unknown generated block {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()
    return MARKER.sub(one, markdown)


# ------------------------------------------------------------------ mkdocs events


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown, page.file.src_uri)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for out in _benchmark_outputs():  # the benchmarks' own output, published as it is
        files.append(File.generated(config, f"benchmarks/{out.name}", content=out.read_text()))
    return files
