"""Names that become parts of a path: one check, shared by every writer.

A case id, a target, profile or mode name, a JAX version in a per-version results file name,
a `check --golden` name: each one ends up as a single file or folder name under a folder the
user chose (`goldens/<target>/<profile>/<mode>/<case>.yaml`, `<out-dir>/results-jax-<version>.json`,
`reports/upstream/<case>.<target>.<profile>.json`). Such names can come from files nobody here
wrote (a matrix JSON downloaded from a CI run, a results file), so each is checked where the
path is made: an absolute path, `..`, a separator, a leading dot or dash, a control character
or an overlong name is refused (`UnsafeName`, bad input: exit 2), and `inside` proves that the
joined path stays under its root.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from fp8_check.core._errors import BadInput

# What a case id may be (fp8_check.cases._load uses the same pattern); target, profile and
# mode names and versions are plainer still. Matched whole (fullmatch): no trailing newline.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]*")
MAX_LEN = 128


class UnsafeName(BadInput, ValueError):
    """A name that cannot be one path part (bad input: exit 2)."""


def check(kind: str, value: object) -> str:
    """`value` as one safe path part, or UnsafeName naming `kind` (e.g. 'case', 'target')."""
    if not isinstance(value, str):
        raise UnsafeName(f"{kind} name {value!r}: expected a string")
    if not NAME_RE.fullmatch(value) or len(value) > MAX_LEN:
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise UnsafeName(f"{kind} name {shown!r} cannot be part of a file name: use at most {MAX_LEN} letters, digits, "
                         "'_', '.', '+', '-', starting with a letter or digit")
    return value


def inside(root: Path | str, *parts: tuple[str, str]) -> Path:
    """`root / part…` after checking each (kind, name) part; the result never leaves `root` (lexically)."""
    path = Path(root)
    for kind, name in parts:
        path = path / check(kind, name)
    base = os.path.normpath(os.path.abspath(root))
    full = os.path.normpath(os.path.abspath(path))
    if os.path.commonpath([base, full]) != base:  # cannot happen after check(); kept as the invariant
        raise UnsafeName(f"{path}: outside {root}")
    return path
