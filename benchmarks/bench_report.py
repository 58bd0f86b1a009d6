"""Benchmark the HTML report: size and time to open for the whole case library.

    python benchmarks/bench_report.py                          # run the library (cases/) with this JAX, then measure
    python benchmarks/bench_report.py --old /path/jax-0.8.0/bin/python --old ...   # + the library on older JAX
    python benchmarks/bench_report.py --results a.json b.json  # measure existing results files instead

Scenarios:
- library: the real results (one results file per JAX version);
- synthetic-Nv: the library results relabelled as N JAX versions with every text made
  unique per version (the worst case for the page's paragraph interning), to show
  the size budget at work.
For each: generation time, report size, and in headless Chromium (/usr/bin/chromium,
Playwright) the time from navigation to the page's ready mark (parsed, data island
decoded, grid filtered) and to a rendered detail after clicking a non-passing cell;
median of --repeat loads. Writes benchmarks/out/bench_report.json and .md. Numbers
are measurements, not assertions (the tests assert behaviour).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fp8_check.report import (
    _model as model,  # noqa: E402
    _page as report,  # noqa: E402
)
from fp8_check.run._results import Results  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
NEWER_FIELDS = re.compile(r"^\s*thread_dim_limit_[xyz]:.*\n", re.M)


def run_library(out: Path, python: str | None) -> Path:
    """The whole library, deviceless, h100, with this JAX (the CLI) or an older interpreter (same pipeline)."""
    if python is None:
        cmd = [str(REPO / ".venv" / "bin" / "fp8-check"), "run", "--mode", "deviceless", "--target", "h100",
               "--json", str(out), "--html", str(out.with_suffix(".html"))]
        subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, check=False)
        return out
    code = f"""
import re, sys
sys.path.insert(0, {str(REPO)!r})
from pathlib import Path
from fp8_check.cases import _load as cases
from fp8_check.run import _results as results
from fp8_check.run import _runner as runner
from fp8_check import targets
from fp8_check.compile._service import Compiler
t = targets.load_target("h100")
t = targets.parse_target(t.name, re.sub({NEWER_FIELDS.pattern!r}, "", t.config_text, flags=re.M))
cs = cases.load([Path("cases")])
profiles = ["cublas", "triton"]
with Compiler("deviceless", python={python!r}) as c:
    env = c.environment()
    outs = runner.run(cs, [t], profiles, "deviceless", c, Path("goldens"))
res = results.Results({{**env, "mode": "deviceless", "targets": ["h100"], "profiles": profiles,
    "compiler_options": {{p: targets.PROFILES[p].compiler_options for p in profiles}}}}, outs,
    target_specs={{t.name: t.config_text}})
results.write(Path({str(out)!r}), res)
"""
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
    return out


def synthetic(inputs: list[Results], n_versions: int) -> list[Results]:
    base = inputs[-1]
    out = []
    for k in range(n_versions):
        v = f"0.{4 + k}.0"
        outcomes = [dataclasses.replace(o, jax=v, **{t: getattr(o, t).replace("\n\n", f"\n\n# jax {v}\n")
                                                     for t in ("hlo", "stablehlo", "source") if getattr(o, t)})
                    for o in base.outcomes]
        env = {**base.environment, "jax": v, "jaxlib": v, "jaxlib_git_hash": None}
        out.append(dataclasses.replace(base, environment=env, outcomes=outcomes))
    return out


def measure_page(path: Path, repeat: int) -> dict:
    from playwright.sync_api import sync_playwright

    ready, detail, errors, requests = [], [], [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        for _ in range(repeat):
            ctx = browser.new_context(viewport={"width": 1300, "height": 900})
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("request", lambda r: None if r.url.startswith("file://") else requests.append(r.url))
            t0 = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready='1']", timeout=60_000)
            wall = (time.perf_counter() - t0) * 1000
            ready.append({"ready_ms": float(page.get_attribute("body", "data-ready-ms")), "wall_ms": wall})
            cell = page.locator("#grid td.cell:not(.o-PASS)[data-i]").first
            if cell.count() == 0:
                cell = page.locator("#grid td.cell[data-i]").first
            t1 = time.perf_counter()
            cell.locator("a").click()
            page.locator("#detail h2").wait_for(state="visible")
            detail.append((time.perf_counter() - t1) * 1000)
            ctx.close()
        browser.close()
    return {
        "ready_ms_median": statistics.median(x["ready_ms"] for x in ready),
        "wall_to_ready_ms_median": round(statistics.median(x["wall_ms"] for x in ready), 1),
        "wall_to_ready_ms_max": round(max(x["wall_ms"] for x in ready), 1),
        "click_to_detail_ms_median": round(statistics.median(detail), 1),
        "console_errors": errors, "network_requests": requests,
    }


def scenario(name: str, inputs: list[Results], out_dir: Path, repeat: int) -> dict:
    t0 = time.perf_counter()
    html = report.render_html(inputs)
    gen = time.perf_counter() - t0
    path = out_dir / f"report-{name}.html"
    path.write_text(html)
    n = sum(len(res.outcomes) for res in inputs)
    row = {"scenario": name, "results": n, "jax_versions": len({o.jax for res in inputs for o in res.outcomes}),
           "generate_s": round(gen, 2), "bytes": len(html.encode()), "mb": round(len(html.encode()) / 1e6, 2),
           "under_5mb": len(html.encode()) < 5_000_000,
           "texts_left_out": "results are left out" in html, **measure_page(path, repeat)}
    row["opens_under_2s"] = row["wall_to_ready_ms_max"] < 2000
    print(json.dumps({k: v for k, v in row.items() if k not in ("console_errors", "network_requests")}), flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", nargs="*", type=Path, help="results files to use instead of running the library")
    ap.add_argument("--old", action="append", default=[], help="older JAX interpreter to also run the library with")
    ap.add_argument("--synthetic", default="8", help="comma-separated version counts for the synthetic scenarios ('' for none)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    out_dir = REPO / "benchmarks" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="fp8-bench-report-"))
    files = list(args.results or [])
    if not files:
        t0 = time.perf_counter()
        files.append(run_library(tmp / "results-current.json", None))
        for i, py in enumerate(args.old):
            files.append(run_library(tmp / f"results-old{i}.json", py))
        print(f"ran the library in {time.perf_counter() - t0:.0f} s", flush=True)
    inputs = model.load(files).results
    rows = [scenario("library", inputs, out_dir, args.repeat)]
    for n in [int(x) for x in args.synthetic.split(",") if x.strip()]:
        rows.append(scenario(f"synthetic-{n}v", synthetic(inputs, n), out_dir, args.repeat))
    doc = {"benchmark": "report", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "machine": {"platform": platform.platform(), "python": platform.python_version(), "chromium": CHROMIUM},
           "inputs": [str(f) for f in files], "rows": rows}
    (out_dir / "bench_report.json").write_text(json.dumps(doc, indent=1) + "\n")
    md = ["| scenario | results | JAX versions | generate s | MB | texts left out | ready ms (median) | wall to ready ms (max) | click to detail ms |",
          "|---|---|---|---|---|---|---|---|---|"]
    md += [f"| {r['scenario']} | {r['results']} | {r['jax_versions']} | {r['generate_s']} | {r['mb']} | {r['texts_left_out']} | "
           f"{r['ready_ms_median']} | {r['wall_to_ready_ms_max']} | {r['click_to_detail_ms_median']} |" for r in rows]
    (out_dir / "bench_report.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out_dir / 'bench_report.json'} and bench_report.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
