"""`fp8-check ci summary` on a matrix with N regressions (each its own signature change, so N issue bodies):
seconds for N = 1000, 2000, 4000 after a warm-up run (imports), measured in the same run; linear time means the
ratio per doubling stays near 2. Before the bodies were written without a folder scan per file, 1500 -> 3000 took
11.8 s -> 37.2 s (x3.15) on this 2-core machine.

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
    from fp8_check.cli import main as cli
    from tests.ci.test_issue_filing import _matrix

    bad = {f"c{i:05d}": ([{"path": "kernels", "expected": 1, "found": i + 2}], "") for i in range(n)}
    folder = tmp / str(n)
    folder.mkdir(parents=True)
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

    sizes = (1000, 2000, 4000)
    with tempfile.TemporaryDirectory() as d, contextlib.redirect_stdout(io.StringIO()):
        seconds(100, Path(d))  # warm-up: imports and first-use costs are not part of the scaling
        # the best of 3 per size: creating thousands of files is noisy on a shared disk (one open took 0.2-1.6 ms)
        took = {n: min(seconds(n, Path(d) / f"r{r}") for r in range(3)) for n in sizes}
    ratios = {f"{b}/{a}": took[b] / took[a] for a, b in zip(sizes, sizes[1:])}
    ratios[f"{sizes[-1]}/{sizes[0]}"] = took[sizes[-1]] / took[sizes[0]]  # linear: 4, quadratic: 16
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_issue_bodies.json").write_text(json.dumps({"seconds": took, "ratios": ratios}, indent=1) + "\n")
    lines = ["# ci summary: issue bodies for N regressions", "", "| N | seconds |", "|---|---|"]
    lines += [f"| {n} | {took[n]:.2f} |" for n in sizes]
    lines += ["", "Time ratios (per doubling 2 = linear, 4 = quadratic; 4000/1000: 4 = linear, 16 = quadratic): " + ", ".join(f"{k}: {v:.2f}" for k, v in ratios.items()), ""]
    (OUT / "bench_issue_bodies.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
