"""`fp8-check ci summary` on a matrix with N regressions (each its own signature change, so N issue bodies):
seconds for N = 750, 1500, 3000, measured in the same run; linear time means the ratio per doubling stays near 2
(it was about 3.2 before the bodies were written without a folder scan per file).

    python benchmarks/bench_issue_bodies.py      # writes benchmarks/out/bench_issue_bodies.json and .md
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
sys.path.insert(0, str(REPO))


def seconds(n: int, tmp: Path) -> float:
    from fp8_check import cli
    from tests.test_issue_filing import _matrix

    bad = {f"c{i:05d}": ([{"path": "kernels", "expected": 1, "found": i + 2}], "") for i in range(n)}
    folder = tmp / str(n)
    folder.mkdir()
    matrix = _matrix(folder, bad)
    start = time.perf_counter()
    code = cli.main(["ci", "summary", matrix, "--cases", str(folder / "none"), "--issues-dir", str(folder / "issues"),
                     "--summary-file", str(folder / "s.md")])
    took = time.perf_counter() - start
    assert code == 0 and len(list((folder / "issues").glob("*.md"))) == n
    return took


def main() -> None:
    import contextlib
    import io

    sizes = (750, 1500, 3000)
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        took = {n: seconds(n, Path(d)) for n in sizes}
    ratios = {f"{b}/{a}": took[b] / took[a] for a, b in zip(sizes, sizes[1:])}
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_issue_bodies.json").write_text(json.dumps({"seconds": took, "ratios": ratios}, indent=1) + "\n")
    lines = ["# ci summary: issue bodies for N regressions", "", "| N | seconds |", "|---|---|"]
    lines += [f"| {n} | {took[n]:.2f} |" for n in sizes]
    lines += ["", "Time ratio per doubling (2 = linear): " + ", ".join(f"{k}: {v:.2f}" for k, v in ratios.items()), ""]
    (OUT / "bench_issue_bodies.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
