#!/usr/bin/env python3
"""Rewrite the import name of fp8-check's package from the folder's name to `fp8_check`.

The code lives in the `harness/` folder; the wheel and the editable install expose it as
`fp8_check` (pyproject.toml: `sources`, `dev-mode-dirs`). This rewrites every *import* of the
old name — `OLD.module`, `from OLD import`, `import OLD` — in the repository's text files, and
leaves folder paths (`harness/pipeline/…`) and prose alone. Idempotent: a second run changes
nothing. Run from anywhere:

    python3 scripts/rename_import.py            # rewrite, print the files it changed
    python3 scripts/rename_import.py --check    # exit 1 if anything is left to rewrite
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OLD = "harn" + "ess"  # spelled in two parts so that this file never matches its own patterns
NEW = "fp8_check"
SUFFIXES = {".py", ".j2", ".yml", ".yaml", ".toml", ".md", ".sh", ".cfg", ".ini", ".txt"}
DATA_DIRS = ("tests/fixtures/",)  # recorded data (HLO dumps, results files): paths, not imports; its scripts are code
SELF = Path(__file__).resolve()

RULES = [
    # OLD.something (a module path, `python -m OLD.x`, entry points "OLD.cli:main", `OLD.api`)
    (re.compile(r"(?<![\w.\-/])" + OLD + r"\.(?=[A-Za-z_])"), NEW + "."),
    # from OLD import x
    (re.compile(r"\bfrom " + OLD + r" import\b"), f"from {NEW} import"),
    # import OLD (alone, or `import OLD, sys` / `import OLD as h`), not `import OLD/…`
    (re.compile(r"\bimport " + OLD + r"(?=[\s,;)]|$)", re.M), f"import {NEW}"),
]


def files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    paths = []
    for raw in out.decode().split("\0"):
        if not raw or (raw.startswith(DATA_DIRS) and not raw.endswith(".py")):
            continue
        p = ROOT / raw
        if p.suffix in SUFFIXES and p.is_file() and not p.is_symlink() and p.resolve() != SELF:
            paths.append(p)
    return paths


def rewrite(text: str) -> str:
    for pattern, repl in RULES:
        text = pattern.sub(repl, text)
    return text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for p in files():
        text = p.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            changed.append(p.relative_to(ROOT))
            if not check:
                p.write_text(new, encoding="utf-8")
    for p in changed:
        print(p)
    if check:
        return 1 if changed else 0
    print(f"rename_import: {len(changed)} file(s) rewritten", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
