"""`fp8-check matrix`: the case library across JAX versions, one isolated environment per version.

For each version, `envs.Manager` makes (or reuses) an environment with only
`jax[cuda12]==V`; the harness itself stays in this process and starts ONE
compile worker inside that environment (`Compiler(mode, python=env python)`),
which compiles every case of that version. Each outcome is judged against the
golden expectation covering that version (`Golden.expected_for`), so
version-ranged goldens work as they do for `fp8-check run`.

Per version:
- deviceless compilation impossible (JAX < 0.6.1): every case is UNSUPPORTED,
  and no environment is built;
- the environment cannot be installed: the version's status is `install-failed`
  with uv's error, and the other versions still run;
- the worker cannot start or the canary finds no FP8 gemm: status `broken`.

Output: per-version results JSON (schema fp8-check/results/1) under --out-dir,
the merged matrix JSON (schema fp8-check/matrix/1), the HTML report when
`harness.report.page` is installed, and a case x version grid on the terminal.

Exit code (`--fail-on`): `any` (default) 1 if any version has a bad outcome
(FAIL, XPASS, UNRESOLVED, NEW), else 3 if a version could not be installed or is
broken, else 0; `newest`: only the newest version that ran counts (the nightly's
rule: "a case regressed on the newest version"); `never`: 0.
"""

from __future__ import annotations

import glob
import json
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from packaging.version import Version

from harness.pipeline import golden
from harness.pipeline import results
from harness.pipeline import runner
from harness.pipeline.compile import Compiler, WorkerError
from harness.versions.envs import Env, InstallError, Manager
from harness.versions.releases import SELECTIONS, VersionError, format_list, parse_version, select_range, sort_versions
from harness import selection
from harness.outcome import code
from harness.pipeline.cases import CaseError

SCHEMA = "fp8-check/matrix/1"
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_ENV = 0, 1, 2, 3
FAIL_ON = ("any", "newest", "never")

SYMBOLS = {
    "PASS": "✓", "FAIL": "✗", "XFAIL": "x", "XPASS": "X", "UNSUPPORTED": "-", "UNRESOLVED": "?", "NEW": "N",
}
STYLES = {
    "PASS": "green", "FAIL": "bold red", "XFAIL": "cyan", "XPASS": "bold magenta", "UNSUPPORTED": "dim",
    "UNRESOLVED": "bold red", "NEW": "bold blue",
}
NOT_RUN = {"install-failed": "E", "broken": "B"}


# ------------------------------------------------------------------ running


class _NoCompiler:
    """Stands in for a worker where nothing can be compiled (every case is UNSUPPORTED before compiling)."""

    def __init__(self, version: str):
        self._env = {"jax": version, "jaxlib": None, "cuda_plugin": None, "note": "no environment built: nothing compiles"}

    def environment(self) -> dict:
        return self._env

    def compile(self, *a, **k):  # pragma: no cover - runner never calls it when every case is UNSUPPORTED
        raise AssertionError("nothing compiles on this version")


def planned(cases, targets, profiles) -> int:
    return sum(1 for _ in runner.plan(cases, targets, profiles))


def run_version(version: str, env_future: Future | None, cases, targets, profiles, mode: str, goldens_root: Path,
                out_dir: Path, progress: "Progress") -> dict:
    """Run the library on one version; returns the version's entry of the matrix document."""
    entry: dict = {"jax": version, "status": "ran", "error": "", "environment": {}, "env": {}, "run_seconds": 0.0,
                   "results_file": None, "summary": {}, "results": []}
    total = planned(cases, targets, profiles)
    reason = runner.deviceless_unsupported(version) if mode == "deviceless" else None
    start = time.perf_counter()
    progress.version_started(version)
    compiler = None
    try:
        if reason:
            entry["status"] = "unsupported"
            compiler = _NoCompiler(version)
        else:
            try:
                env: Env = env_future.result()
            except InstallError as exc:
                entry.update(status="install-failed", error=str(exc))
                progress.cases_skipped(version, total)
                return entry
            entry["env"] = {"path": str(env.path), "built": env.built, "seconds": round(env.seconds, 2), **env.info}
            compiler = Compiler(mode, python=str(env.python))
            try:
                compiler.environment()
                for t in targets:
                    runner.check_canary(compiler, t)
            except (WorkerError, runner.CanaryError) as exc:
                entry.update(status="broken", error=str(exc).strip())
                progress.cases_skipped(version, total)
                return entry
        outcomes = runner.run(cases, targets, profiles, mode, compiler, goldens_root,
                              on_outcome=lambda o: progress.case_done(version, o))
        env_info = compiler.environment()
        res = results.Results({**env_info, "mode": mode, "targets": [t.name for t in targets], "profiles": profiles},
                              outcomes, target_specs={t.name: t.config_text for t in targets})
        path = Path(out_dir) / f"results-jax-{version}.json"
        results.write(path, res)
        light = results.to_json(res, with_text=False)
        entry.update(environment=env_info, results_file=str(path), summary=light["summary"], results=light["results"])
        return entry
    finally:
        if isinstance(compiler, Compiler):
            compiler.close()
        entry["run_seconds"] = round(time.perf_counter() - start, 2)
        progress.version_done(version, entry)


def run_matrix(versions: list[str], cases, targets, profiles: list[str], mode: str, goldens_root: Path, out_dir: Path,
               manager: Manager | None = None, jobs: int = 1, progress: "Progress | None" = None) -> dict:
    """Every version's entry, oldest first, in a matrix document.

    Environments are built one at a time in a background thread, ahead of the
    versions that run (`jobs` at a time), so a build overlaps with compiling.
    """
    manager = manager or Manager()
    progress = progress or Progress()
    versions = sort_versions(versions)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_version = planned(cases, targets, profiles)
    needs_env = [v for v in versions if not (mode == "deviceless" and runner.deviceless_unsupported(v))]
    progress.start(versions, needs_env, per_version)
    start = time.perf_counter()
    builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fp8-env")
    futures: dict[str, Future] = {}

    def build(v: str) -> Env:
        progress.env_started(v)
        try:
            env = manager.ensure(v)
        except InstallError as exc:
            progress.env_done(v, None, str(exc))
            raise
        progress.env_done(v, env, "")
        return env

    try:
        for v in needs_env:
            futures[v] = builder.submit(build, v)
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="fp8-run") as pool:
            entries = list(pool.map(lambda v: run_version(v, futures.get(v), cases, targets, profiles, mode,
                                                          goldens_root, out_dir, progress), versions))
    except BaseException:
        for f in futures.values():
            f.cancel()
        raise
    finally:
        builder.shutdown(wait=True, cancel_futures=True)
        progress.stop()
    doc = document(entries, {"mode": mode, "targets": [t.name for t in targets], "profiles": profiles,
                             "wall_seconds": round(time.perf_counter() - start, 2)})
    return doc


# ------------------------------------------------------------------ the matrix document


def document(entries: list[dict], info: dict) -> dict:
    entries = sorted(entries, key=lambda e: Version(e["jax"]))
    doc = {"schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **info,
           "versions": entries}
    doc["changes"] = changes(doc)
    doc["regressions"] = regressions(doc)
    return doc


def _entry_from_results(doc: dict, path: str) -> dict:
    env = doc.get("environment", {})
    status = "ran"
    rs = doc.get("results", [])
    if rs and all(r["outcome"] == "UNSUPPORTED" for r in rs) and runner.deviceless_unsupported(env.get("jax", "0")):
        status = "unsupported"
    return {"jax": env.get("jax"), "status": status, "error": "", "environment": env, "env": {}, "run_seconds": 0.0,
            "results_file": path, "summary": doc.get("summary", {}),
            "results": [{k: v for k, v in r.items() if k not in ("source", "yaml", "hlo", "stablehlo")} for r in rs]}


def merge(paths: list[str]) -> dict:
    """One matrix document from matrix documents and/or results documents (globs allowed); the later file wins per version."""
    files: list[str] = []
    for p in paths:
        found = sorted(glob.glob(str(p), recursive=True))
        if not found:
            raise FileNotFoundError(f"no file matches {p}")
        files += found
    by_version: dict[str, dict] = {}
    info: dict = {}
    for f in files:
        doc = json.loads(Path(f).read_text())
        schema = str(doc.get("schema", ""))
        if schema.startswith("fp8-check/matrix/"):
            for e in doc["versions"]:
                rf = e.get("results_file")
                if rf and not Path(rf).is_absolute():  # relative to the file it was read from
                    e["results_file"] = str((Path(f).parent / rf).resolve())
                by_version[str(parse_version(e["jax"]))] = e
            for k in ("mode", "targets", "profiles"):
                info.setdefault(k, doc.get(k))
        elif schema.startswith("fp8-check/results/"):
            e = _entry_from_results(doc, f)
            by_version[str(parse_version(e["jax"]))] = e
            for k in ("mode", "targets", "profiles"):
                info.setdefault(k, doc.get("environment", {}).get(k))
        else:
            raise ValueError(f"{f}: neither a matrix nor a results file (schema {schema!r})")
    return document(list(by_version.values()), {**info, "merged_from": files})


def _relative(path: Path, base: Path) -> str:
    import os

    try:
        return os.path.relpath(path.resolve(), base.resolve())
    except ValueError:
        return str(path.resolve())


def rows(doc: dict) -> list[tuple[str, str, str]]:
    """Every (case, target, profile) in the matrix, in the order they ran."""
    seen: dict[tuple[str, str, str], None] = {}
    for e in doc["versions"]:
        for r in e.get("results", []):
            seen.setdefault((r["case"], r["target"], r["profile"]), None)
    return list(seen)


def cell(entry: dict, key: tuple[str, str, str]) -> dict | None:
    idx = entry.setdefault("_index", None)
    if idx is None:
        idx = {(r["case"], r["target"], r["profile"]): r for r in entry.get("results", [])}
        entry["_index"] = idx
    return idx.get(key)


def changes(doc: dict) -> list[dict]:
    """Where a row's signature differs from the one of the previous version that has one."""
    out = []
    for key in rows(doc):
        prev_v, prev_sig = None, None
        for e in doc["versions"]:
            r = cell(e, key)
            sig = r.get("signature") if r else None
            if sig is None:
                continue
            if prev_sig is not None and sig != prev_sig:
                diffs = golden.compare(prev_sig, sig)
                if diffs:
                    out.append({"case": key[0], "target": key[1], "profile": key[2], "from": prev_v, "to": e["jax"],
                                "diffs": [{"path": d.path, "before": _plain(d.expected), "after": _plain(d.found)}
                                          for d in diffs]})
            prev_v, prev_sig = e["jax"], sig
    for e in doc["versions"]:
        e.pop("_index", None)
    return out


def _plain(value):
    return None if value is golden._MISSING else value


def newest_ran(doc: dict) -> dict | None:
    ran = [e for e in doc["versions"] if e["status"] == "ran"]
    return ran[-1] if ran else None


def regressions(doc: dict) -> list[dict]:
    """Rows with a bad outcome on the newest version that ran, noting whether the version before it was OK."""
    newest = newest_ran(doc)
    if not newest:
        return []
    ran = [e for e in doc["versions"] if e["status"] == "ran"]
    before = ran[-2] if len(ran) > 1 else None
    out = []
    for r in newest["results"]:
        if code(r["outcome"]).is_failure:
            key = (r["case"], r["target"], r["profile"])
            prev = cell(before, key) if before else None
            out.append({"case": key[0], "target": key[1], "profile": key[2], "jax": newest["jax"],
                        "outcome": r["outcome"], "reason": (r.get("reason") or "").splitlines()[0] if r.get("reason") else "",
                        "previous": {"jax": before["jax"], "outcome": prev["outcome"]} if prev else None})
    for e in doc["versions"]:
        e.pop("_index", None)
    return out


def exit_code(doc: dict, fail_on: str) -> int:
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "newest":
        newest = newest_ran(doc)
        if newest is None:
            return EXIT_ENV
        return EXIT_FAIL if doc["regressions"] else EXIT_OK
    bad = any(code(r["outcome"]).is_failure for e in doc["versions"] for r in e.get("results", []))
    if bad:
        return EXIT_FAIL
    if any(e["status"] in NOT_RUN for e in doc["versions"]):
        return EXIT_ENV
    return EXIT_OK


def write(path: Path, doc: dict) -> None:
    golden.atomic_write(Path(path), json.dumps(doc, indent=1) + "\n")


# ------------------------------------------------------------------ terminal


def grid_table(doc: dict):
    """A rich Table: one row per case x target x profile, one column per version."""
    from rich.table import Table
    from rich.text import Text

    changed = {(c["case"], c["target"], c["profile"], c["to"]) for c in doc["changes"]}
    table = Table(title=f"fp8-check matrix ({doc.get('mode', '?')})", show_lines=False, pad_edge=False)
    table.add_column("case", no_wrap=True)
    table.add_column("target/profile", no_wrap=True)
    for e in doc["versions"]:
        table.add_column(e["jax"], justify="center", no_wrap=True)
    for key in rows(doc):
        cells = []
        for e in doc["versions"]:
            if e["status"] in NOT_RUN:
                cells.append(Text(NOT_RUN[e["status"]], style="bold red"))
                continue
            r = cell(e, key)
            if r is None:
                cells.append(Text(""))
                continue
            sig = r.get("signature")
            text = SYMBOLS.get(r["outcome"], "?") + (str(sig["kernels"]) if sig and "kernels" in sig else "")
            style = STYLES.get(r["outcome"], "")
            if key + (e["jax"],) in changed:
                text += "*"
                style += " on yellow"
            cells.append(Text(text, style=style))
        table.add_row(key[0], f"{key[1]}/{key[2]}", *cells)
    for e in doc["versions"]:
        e.pop("_index", None)
    return table


LEGEND = ("✓ PASS  ✗ FAIL  x XFAIL  X XPASS  - UNSUPPORTED  ? UNRESOLVED  N NEW (no golden for the version); "
          "the number is the kernel count; * (highlighted) the signature changed since the previous version; "
          "E the version could not be installed, B its environment is broken")


def print_report(doc: dict, stream: TextIO | None = None, max_diffs: int = 3) -> None:
    from rich.console import Console

    stream = stream or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    width = 40 + 18 + 7 * len(doc["versions"])
    console = Console(file=stream, force_terminal=tty, no_color=not tty, width=None if tty else max(100, width),
                      highlight=False, soft_wrap=not tty)
    console.print(grid_table(doc))
    console.print(LEGEND, style="dim", soft_wrap=True)
    for e in doc["versions"]:
        if e["status"] in ("install-failed", "broken"):
            console.print(f"jax {e['jax']}: {e['status']}: {e['error']}", style="red", markup=False, soft_wrap=True)
    if doc["changes"]:
        console.print(f"\nSignature changes between adjacent versions ({len(doc['changes'])}):", markup=False)
        for c in doc["changes"]:
            console.print(f"  {c['target']}/{c['profile']} {c['case']}: {c['from']} -> {c['to']}", markup=False)
            for d in c["diffs"][:max_diffs]:
                console.print(f"      {d['path']}: {_short(d['before'])} -> {_short(d['after'])}", markup=False,
                              soft_wrap=True)
            if len(c["diffs"]) > max_diffs:
                console.print(f"      ... {len(c['diffs']) - max_diffs} more field(s)", markup=False)
    counts = []
    for e in doc["versions"]:
        s = e.get("summary") or {}
        text = ", ".join(f"{n} {k}" for k, n in s.items() if n) or e["status"]
        counts.append(f"  jax {e['jax']:<9} {text}")
    console.print("\nPer version:", markup=False)
    for line in counts:
        console.print(line, markup=False)
    if doc["regressions"]:
        console.print(f"\nBad on the newest version ({doc['regressions'][0]['jax']}):", style="bold red", markup=False)
        for r in doc["regressions"]:
            prev = f" (was {r['previous']['outcome']} on {r['previous']['jax']})" if r["previous"] else ""
            console.print(f"  {r['outcome']:<10} {r['target']}/{r['profile']} {r['case']}{prev}", markup=False)


def _short(value, limit: int = 70) -> str:
    text = golden._show(golden._MISSING if value is None else value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Progress:
    """Progress of environment builds and compiles: a rich bar with ETA on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.live = (hasattr(self.stream, "isatty") and self.stream.isatty()) if live is None else live
        self._lock = threading.Lock()
        self._bar = None
        self._done: dict[str, int] = {}
        self._per_version = 0

    def start(self, versions: list[str], needs_env: list[str], per_version: int) -> None:
        self._per_version = per_version
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeElapsedColumn, \
                TimeRemainingColumn

            self._bar = Bar(TextColumn("{task.description:<24}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), console=Console(file=self.stream), transient=False)
            self._envs = self._bar.add_task("environments", total=len(needs_env))
            self._cases = self._bar.add_task("cases", total=per_version * len(versions))
            self._bar.start()
        else:
            self._say(f"matrix: {len(versions)} version(s) x {per_version} case run(s); "
                      f"{len(needs_env)} environment(s) to check or build")

    def _say(self, text: str) -> None:
        with self._lock:
            if self._bar:
                self._bar.console.print(text, markup=False, highlight=False)
            else:
                print(text, file=self.stream, flush=True)

    def env_started(self, version: str) -> None:
        if self._bar:
            self._bar.update(self._envs, description=f"environment jax {version}")

    def env_done(self, version: str, env: Env | None, error: str) -> None:
        if self._bar:
            self._bar.advance(self._envs)
            self._bar.update(self._envs, description="environments")
        if env is None:
            self._say(f"jax {version}: environment could not be installed: {error.splitlines()[0] if error else ''}")
        elif env.built or not self._bar:
            self._say(f"jax {version}: environment {'built' if env.built else 'cached'} in {env.seconds:.1f}s "
                      f"(jaxlib {env.info.get('jaxlib')}, plugin {env.info.get('cuda_plugin')})")

    def version_started(self, version: str) -> None:
        self._done[version] = 0

    def case_done(self, version: str, outcome) -> None:
        self._done[version] = self._done.get(version, 0) + 1
        if self._bar:
            self._bar.update(self._cases, advance=1, description=f"cases (jax {version})")

    def cases_skipped(self, version: str, n: int) -> None:
        if self._bar:
            self._bar.advance(self._cases, n)

    def version_done(self, version: str, entry: dict) -> None:
        if self._bar:
            left = self._per_version - self._done.get(version, 0)
            if entry["status"] == "ran" and left > 0:
                self._bar.advance(self._cases, left)
        s = entry.get("summary") or {}
        text = ", ".join(f"{n} {k}" for k, n in s.items() if n)
        self._say(f"jax {version}: {entry['status']} in {entry['run_seconds']:.1f}s" + (f": {text}" if text else "")
                  + (f": {entry['error'].splitlines()[0]}" if entry.get("error") else ""))

    def stop(self) -> None:
        if self._bar:
            self._bar.stop()
            self._bar = None


# ------------------------------------------------------------------ HTML report (optional module)


def write_html(result_files: list[str], path: Path) -> bool:
    """The HTML report of the per-version results, if `harness.report.page` exists (written by another stage).

    Expected API: `harness.report.write_html(results_docs: list[dict], path: Path) -> None`, taking
    results documents (schema fp8-check/results/1, one per JAX version).
    """
    import importlib

    try:
        report = importlib.import_module("harness.report.page")
    except ModuleNotFoundError as exc:
        if exc.name not in ("harness.report.page",):
            raise
        return False
    docs = [results.load(Path(f)) for f in result_files]  # typed Results; write_html renders them
    report.write_report(docs, Path(path))
    return True


# ------------------------------------------------------------------ CLI


def register(subparsers) -> dict:
    p = subparsers.add_parser("matrix", help="run the cases across JAX versions, one cached uv environment per version")
    selection.add_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--jax", help="versions, comma-separated (e.g. 0.6.1,0.8.0,0.12.0.1)")
    which.add_argument("--jax-range", help="released versions in A..B (both included), A.., ..B, or a specifier set")
    which.add_argument("--merge", nargs="+", metavar="JSON", help="merge matrix/results JSON files (globs allowed) instead of running")
    p.add_argument("--select", choices=SELECTIONS, default="all",
                   help="with --jax-range: all released versions, or 'minor': the newest of each minor series plus the oldest")
    p.add_argument("--list-versions", action="store_true", help="print the versions --jax/--jax-range selects and exit")
    p.add_argument("--format", choices=("lines", "json", "github"), default="lines", help="for --list-versions")
    p.add_argument("--jobs", type=int, default=2, help="versions compiled at once (default 2: on 2 cores the full library over 8 versions took 117 s vs 170 s with 1; environments build in the background)")
    p.add_argument("--out", type=Path, default=Path("reports/matrix.json"), help="matrix JSON (default: reports/matrix.json)")
    p.add_argument("--out-dir", type=Path, help="per-version results JSON (default: next to --out, in <name>.d/)")
    p.add_argument("--html", type=Path, help="HTML report (default: --out with .html, if harness.report.page exists)")
    p.add_argument("--no-html", action="store_true")
    p.add_argument("--fail-on", choices=FAIL_ON, default="any", help="what makes the exit code 1 (default: any)")
    p.add_argument("--cache", type=Path, help="environments directory (default: $FP8_CHECK_CACHE/envs or ~/.cache/fp8-check/envs)")
    p.set_defaults(mode="deviceless")  # across versions, deviceless unless asked (--mode device on a GPU host)
    return {"matrix": cmd_matrix}


def versions_from_args(args) -> list[str]:
    if args.jax:
        return sort_versions(v for v in args.jax.split(",") if v.strip())
    if args.jax_range:
        return select_range(args.jax_range, args.select)
    raise VersionError("give --jax V1,V2,... or --jax-range A..B")


def cmd_matrix(args) -> int:

    try:
        if args.merge:
            doc = merge(args.merge)
        else:
            versions = versions_from_args(args)
            if args.list_versions:
                print(format_list(versions, args.format))
                return EXIT_OK
            cases = selection.load_cases(args.paths, args.filter)
            targets = selection.targets(args.target)
            mode = selection.mode(args.mode)
            profiles = selection.profiles(args.profile, mode)
            out_dir = args.out_dir or args.out.with_name(args.out.stem + ".d")
            manager = Manager(args.cache) if args.cache else Manager()
            print(f"fp8-check matrix: jax {', '.join(versions)}; mode {mode}; targets {', '.join(t.name for t in targets)}; "
                  f"profiles {', '.join(profiles)}; {len(cases)} cases; environments in {manager.root}", flush=True)
            doc = run_matrix(versions, cases, targets, profiles, mode, args.goldens, out_dir, manager, args.jobs,
                             Progress())
    except (VersionError, FileNotFoundError, ValueError) as exc:
        if isinstance(exc, (CaseError, golden.GoldenError)):
            raise
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for e in doc["versions"]:
        rf = e.get("results_file")
        if rf and Path(rf).exists():
            e["results_file"] = _relative(Path(rf), args.out.parent)
    write(args.out, doc)
    print_report(doc)
    print(f"\nmatrix: {args.out}" + (f" (wall {doc['wall_seconds']:.1f}s)" if "wall_seconds" in doc else ""))
    if not args.no_html:
        files = [str(args.out.parent / e["results_file"]) for e in doc["versions"]
                 if e.get("results_file") and (args.out.parent / e["results_file"]).exists()]
        html = args.html or args.out.with_suffix(".html")
        if files and write_html(files, html):
            print(f"report: {html}")
    return exit_code(doc, args.fail_on)
