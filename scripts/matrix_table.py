"""Print a matrix file as a release x outcome table (Markdown): FAIL, NEW and the others per JAX release.

    python scripts/matrix_table.py MATRIX.json [MATRIX.json ...]

Used by scripts/rebless.sh for the before/after table; reads the matrix document through fp8_check's reader.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from fp8_check.matrix._document import load_matrix

COLUMNS = ("FAIL", "NEW", "UNRESOLVED", "XPASS", "PASS", "XFAIL", "UNSUPPORTED")


def table(path: Path) -> str:
    m = load_matrix(path)
    rows = [f"{path}", "", "| release | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    total: Counter = Counter()
    for entry in m.versions:
        counts = Counter(o.code.name for o in entry.outcomes)
        total.update(counts)
        status = "" if entry.status.value == "ran" else f" ({entry.status.value})"
        rows.append(f"| {entry.jax}{status} | " + " | ".join(str(counts.get(c, 0)) for c in COLUMNS) + " |")
    rows.append("| **all** | " + " | ".join(f"**{total.get(c, 0)}**" for c in COLUMNS) + " |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    print("\n\n".join(table(Path(p)) for p in argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
