"""What every case kind renders with: the jinja2 environment, the filters user text goes through, `Rendered`.

A kind module (harness/fp8_check/cases/kinds/) turns its cases into Python source with these;
harness/fp8_check/compile/_render.py picks the kind. User text enters rendered source only
through `py_literal`, `py_text` or `py_comment`, so it can never become code.
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from fp8_check.cases._model import Case
from fp8_check.cases._user_modules import Closure
from fp8_check.core import package_path


def py_literal(value) -> str:
    """A Python literal (repr) of a str, number, bool, None, or a tuple/list/dict of them: user text enters
    rendered source only through this filter, `py_text` or `py_comment`, so it can never become code."""
    return repr(value)


def py_text(text: str) -> str:
    """`text` as a triple-quoted string literal that keeps its line breaks and quotes readable.

    Backslashes are escaped (no `\\N` starts an escape); a double quote is escaped when the next
    character is one too, or when it is the last one, so no `\"\"\"` can close the literal early;
    every other non-printable character (CR, tabs, U+2028, NUL) is written as its escape
    sequence. The literal's value is exactly `text`.
    """
    text = str(text)
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"' if i + 1 == len(text) or text[i + 1] == '"' else '"')
        elif ch == "\n" or ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return '"""' + "".join(out) + '"""'


def py_comment(text) -> str:
    """`text` for the inside of a `#` comment: non-printable characters (line breaks) escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(package_path("templates")),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # renders Python source, not markup: user text goes through the filters below
)
_ENV.filters.update(py_literal=py_literal, py_text=py_text, py_comment=py_comment)


@dataclass(frozen=True)
class Rendered:
    case_id: str
    source: str
    requires: tuple[str, ...] = ()  # optional dependencies (modules) the case declares: missing -> UNSUPPORTED
    # A python case's project modules (found by path, imported by the worker): the compile cache's key, the repro
    modules: Closure = Closure()


def docstring(case: Case) -> str:
    head = f"fp8-check case {case.id}" + (f": {case.description}" if case.description else "")
    return f"{head}\n\nRendered from {case.file}. fp8-check compiles exactly this source.\n"


ENV = _ENV
