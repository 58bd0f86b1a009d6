"""Identical compilations, compiled once: two requests whose programs can only differ in the name of their case.

Rendered cases carry their id, description and case file in the module docstring, and the worker
compiles each under its own file name (`_aot.case_file_name`). Everything else can be byte-identical:
the library's seed cases repeat patterns of other files (`seed_plain_f32` and `scale_none`), and a
canary repeats a library case. Such requests share a key (`shareable_source` in place of the source
in the compile-cache key material): the pool compiles the first and answers the others from it
(`derive`), replacing the first case's file name with theirs in the HLO texts, which is the only
place it appears. That is what compiling them would give: XLA's output does not depend on metadata,
and the file name only reaches the program as metadata (`source_file`, stack-frame tables).

A source is shared only when that holds by construction:
- its docstring occupies whole lines of its own (blanked, not removed, so every line number stays);
- the rest of it never names what differs between the cases besides the docstring: the module's
  `__doc__`, `__file__`, `__name__`, `__spec__`, `__loader__`, `__cached__`, `globals`, `vars`,
  `inspect`, `sys._getframe` or a traceback;
- the request is cacheable (its key covers everything else it depends on; `cache.cacheable`).
`tests/compile/test_pool.py` compares every outcome of a run with sharing against `--no-cache` (HLO included);
`tests/compile/test_sharing.py` tests these rules.
"""

from __future__ import annotations

import ast
import dataclasses

from fp8_check.compile._service import Compilation
from fp8_check.worker import case_file_name

# Names through which a module can read what differs between two shared cases (its docstring, its
# file and module name) or reach its own frame.
_SELF_REFERENCES = frozenset({"__doc__", "__file__", "__name__", "__spec__", "__loader__", "__cached__", "globals",
                              "vars", "locals", "inspect", "_getframe", "traceback", "linecache", "__builtins__"})


def shareable_source(source: str) -> str | None:
    """`source` with its module docstring blanked (line numbers kept), or None if it may not be shared."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            if any(part in _SELF_REFERENCES for n in names for part in n.split(".")):
                return None
        elif name in _SELF_REFERENCES:
            return None
    first = tree.body[0] if tree.body else None
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)):
        return source  # no docstring: the source itself, file name apart
    lines = source.splitlines(keepends=True)
    start, end = first.lineno - 1, first.end_lineno or first.lineno
    last = lines[end - 1].rstrip("\r\n").rstrip()
    if first.col_offset != 0 or first.end_col_offset != len(last):
        return None  # the docstring shares a line with code
    return "".join(lines[:start]) + "\n" * (end - start) + "".join(lines[end:])


def derive(comp: Compilation, case_id: str, target: str, profile: str) -> Compilation:
    """What compiling `case_id` for `target` under `profile` gives, from the compilation of a request it shares
    a key with (equal target spec and options; the names may differ): the same program, under its own file name."""
    old, new = case_file_name(comp.case_id), case_file_name(case_id)

    def rename(text: str | None) -> str | None:
        return text.replace(old, new) if text else text

    return dataclasses.replace(comp, case_id=case_id, target=target, profile=profile,
                               hlo=rename(comp.hlo), stablehlo=rename(comp.stablehlo),
                               error=rename(comp.error), unsupported=rename(comp.unsupported), cached=False,
                               shared_from=comp.case_id)
