"""`fp8-check matrix`: the case library across JAX versions, one isolated environment per version.

For each version, `envs.Manager` makes (or reuses) an environment with only
JAX V (deviceless: the slim wheel set of `fp8_check.versions.wheels`; device mode: `jax[cuda12]==V`); the harness itself stays in this process and starts ONE
pool of compile workers inside that environment (`CompilerPool(mode, python=env python)`,
behind the compile cache), which compiles every case of that version. Each outcome is judged against the
golden expectation covering that version (`Golden.expected_for`), so
version-ranged goldens work as they do for `fp8-check run`.

Per version:
- deviceless compilation impossible (JAX < 0.6.1): every case is UNSUPPORTED,
  and no environment is built;
- the environment cannot be installed: the version's status is `install-failed`
  with uv's error, and the other versions still run;
- the worker cannot start or the canary finds no FP8 gemm: status `broken`.

This module runs the versions and is the command; the document (typed entries, JSON,
changes, regressions, exit code) is `matrix_document`, the terminal grid and progress
`matrix_view`. Output: per-version results JSON under --out-dir, the matrix JSON
(schema fp8-check/matrix/2), the HTML report when `fp8_check.report.page` is installed,
and a case x version grid on the terminal.

Exit code (`--fail-on`): `any` (default) 1 if any version has a bad outcome
(FAIL, XPASS, UNRESOLVED, NEW), else 3 if a version could not be installed or is
broken, else 0; `newest`: only the newest version that ran counts (the nightly's
rule: "a case regressed on the newest version"), and 3 when the newest version asked for
could not be installed or is broken (a broken release never passes); `never`: 0.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from fp8_check.report import formats
from fp8_check.run import selection
from fp8_check.verdict import golden
from fp8_check.core import names
from fp8_check.run import results
from fp8_check.run import runner
from fp8_check.cases.cases import CaseError
from fp8_check.compile import pool as pool_mod
from fp8_check.compile.cache import CompileCache
from fp8_check.compile.compile import Compilation, WorkerError
from fp8_check.core.outputs import WriteError, check_dir, check_file
from fp8_check.compile.pool import CompilerPool
from fp8_check.targets import PROFILES
from fp8_check.versions import requirements, shared_xla, wheels
from fp8_check.versions.envs import Env, InstallError, Manager
from fp8_check.matrix.matrix_document import EXIT_OK, EXIT_USAGE, FAIL_ON, Matrix, MatrixError, Status, VersionEntry, \
    merge, write
from fp8_check.matrix.matrix_view import Progress, print_report
from fp8_check.matrix.news import closing_line
from fp8_check.versions.releases import SELECTIONS, VersionError, format_list, jax_index, newest_on_index, select_range, sort_versions
from fp8_check.run.target_check import environment_entry
from fp8_check.core import outputs


# ------------------------------------------------------------------ running


class _NoCompiler:
    """Stands in for a worker where nothing can be compiled (every case is UNSUPPORTED before compiling)."""

    def __init__(self, version: str, mode: str = "deviceless"):
        self.mode = mode
        self._env = {"jax": version, "jaxlib": None, "cuda_plugin": None, "note": "no environment built: nothing compiles"}

    def environment(self) -> dict:
        return self._env

    # The runner never calls these when every case is UNSUPPORTED (pragma: no cover).
    def compile(self, rendered, target, profile, inputs=None, optional_options=None) -> Compilation:
        raise AssertionError("nothing compiles on this version")

    def imap(self, requests) -> Iterator[Compilation]:
        raise AssertionError("nothing compiles on this version")

    def prepare(self, target) -> dict:
        raise AssertionError("nothing compiles on this version")

    def target_config(self, target) -> dict:
        raise AssertionError("nothing compiles on this version")

    def close(self) -> None:
        pass


# The compile pools of the versions running now: an interrupted matrix kills their workers at once
# instead of waiting for every running version's compiles (Ctrl-C, SIGTERM).
_LIVE_POOLS: set[CompilerPool] = set()


def _abort_running() -> None:
    for pool in list(_LIVE_POOLS):
        pool.abort()


def planned(cases, targets, profiles, skip: frozenset = frozenset()) -> int:
    return sum(1 for _ in runner.plan(cases, targets, profiles, skip))


def run_version(version: str, env_future: Future | None, cases, targets, profiles, mode: str, goldens_root: Path,
                out_dir: Path, progress: Progress, workers: int = 1, cache: CompileCache | None = None,
                shared: dict | None = None, skip: frozenset = frozenset()) -> VersionEntry:
    """Run the library on one version; returns the version's entry of the matrix.

    `shared` (versions with the same XLA, `shared_xla`): {"record": True} keeps this version's
    compilations in shared["recorder"]; {"replay": Recorder, "of": V} judges V's compilations
    for this version instead of compiling."""
    entry = VersionEntry(version)
    total = planned(cases, targets, profiles, skip)
    reason = runner.deviceless_unsupported(version, targets) if mode == "deviceless" else None
    start = time.perf_counter()
    progress.version_started(version)
    compiler: Any = None  # a CompilerPool, a Replay of a twin version's compilations, or _NoCompiler
    live: CompilerPool | None = None  # this version's pool, killed at once on Ctrl-C (_abort_running)
    try:
        if shared and shared.get("replay") and not reason:
            compiler = shared_xla.Replay(shared["replay"], version, shared["of"])
            entry.env = {"same_xla_as": shared["of"], "built": False, "seconds": 0.0}
        elif reason or env_future is None:
            entry.status = Status.UNSUPPORTED
            compiler = _NoCompiler(version, mode)
        else:
            try:
                env: Env = env_future.result()
            except InstallError as exc:
                entry.status, entry.error = Status.INSTALL_FAILED, str(exc)
                progress.cases_skipped(version, total)
                return entry
            entry.env = {"path": str(env.path), "built": env.built, "seconds": round(env.seconds, 2), **env.info}
            # `workers` compile workers in the version's environment, behind the shared compile
            # cache (its key holds the version's jax/jaxlib/plugin and installed distributions)
            compiler = live = CompilerPool(mode, jobs=workers, python=str(env.python), cache=cache)
            _LIVE_POOLS.add(live)
            if shared and shared.get("record"):
                compiler = shared["recorder"] = shared_xla.Recorder(compiler)
        try:  # the canary is checked (and compiled alongside the cases) before any outcome
            outcomes = runner.run(cases, targets, profiles, mode, compiler, goldens_root,
                                  on_outcome=lambda o: progress.case_done(version, o),
                                  canary=not reason and not (shared and shared.get("replay")), skip=skip)
        except (WorkerError, runner.CanaryError) as exc:
            entry.status, entry.error = Status.BROKEN, str(exc).strip()
            progress.cases_skipped(version, total)
            return entry
        env_info = compiler.environment()
        res = results.Results({**env_info, "mode": mode, "targets": [t.name for t in targets], "profiles": profiles,
                               "compiler_options": {p: PROFILES[p].compiler_options for p in profiles},  # as compiled
                               "target_versions": {t.name: environment_entry(t, env_info["jax"]) for t in targets}},
                              outcomes, target_specs={t.name: t.config_text for t in targets})
        written = Path(out_dir) / f"results-jax-{names.check('jax version', version)}.json"
        path: Path | None = written
        try:
            results.write(written, res)
        except WriteError as exc:  # a full disk: the outcomes still go into the matrix (without their texts)
            entry.error, path = exc.strerror or "", None
            print(f"fp8-check: warning: jax {version}: {exc.strerror}", file=sys.stderr)
        # the matrix keeps the lean outcomes; the texts stay in the per-version results file
        lean = [dataclasses.replace(o, hlo=None, stablehlo=None, source="", yaml="") for o in outcomes]
        entry.environment, entry.results_file, entry.outcomes = env_info, str(path) if path else None, lean
        return entry
    finally:
        if live is not None:
            _LIVE_POOLS.discard(live)
        if isinstance(compiler, (CompilerPool, shared_xla.Recorder)):
            compiler.close()
        entry.run_seconds = round(time.perf_counter() - start, 2)
        progress.version_done(entry)


def run_matrix(versions: list[str], cases, targets, profiles: list[str], mode: str, goldens_root: Path, out_dir: Path,
               manager: Manager | None = None, jobs: int = 1, progress: Progress | None = None,
               workers: int = 1, cache: CompileCache | None = None, skip: frozenset = frozenset()) -> Matrix:
    """Every version's entry, oldest first, in a matrix.

    Environments are built one at a time in a background thread, ahead of the
    versions that run (`jobs` at a time), so a build overlaps with compiling.
    Each running version compiles on `workers` workers, through `cache` (None: no cache).
    Deviceless, versions that ship the same XLA commit as a newer one in the list are not
    compiled: the newer one's compilations are judged for them (`shared_xla`); they run
    after it (if it could not run, they build and compile on their own).
    """
    manager = manager or Manager()
    progress = progress or Progress()
    versions = sort_versions(versions)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_version = planned(cases, targets, profiles, skip)
    needs_env = [v for v in versions if not (mode == "deviceless" and runner.deviceless_unsupported(v, targets))]
    # not with --with: the extra packages are resolved per version, so the environments differ beyond XLA
    twins = shared_xla.twins(needs_env) if mode == "deviceless" and not manager.extras else {}
    shared: dict[str, dict] = {rep: {"record": True} for rep in twins.values()}
    needs_env = [v for v in needs_env if v not in twins]
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

    def one(v: str) -> VersionEntry:
        share = shared.get(v)
        if v in twins:
            rep = done[twins[v]].result()  # submitted before v: a slot is running or has run it
            recorder = shared[twins[v]].get("recorder")
            if rep.status is Status.RAN and recorder is not None:
                share = {"replay": recorder, "of": twins[v]}
            else:  # the version compiled for it could not run: build and compile this one
                futures[v] = builder.submit(build, v)
        return run_version(v, futures.get(v), cases, targets, profiles, mode, goldens_root, out_dir, progress,
                           workers, cache, share, skip)

    runners = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="fp8-run")
    interrupted = False
    try:
        for v in needs_env:
            futures[v] = builder.submit(build, v)
        done: dict[str, Future] = {}
        for v in [v for v in versions if v not in twins] + [v for v in versions if v in twins]:
            done[v] = runners.submit(one, v)
        entries = [done[v].result() for v in versions]
    except BaseException:
        interrupted = True  # Ctrl-C or a signal: kill the running compiles instead of waiting for them
        for f in futures.values():
            f.cancel()
        _abort_running()
        raise
    finally:
        runners.shutdown(wait=not interrupted, cancel_futures=True)
        builder.shutdown(wait=not interrupted, cancel_futures=True)
        progress.stop()
    return Matrix(entries, mode, [t.name for t in targets], profiles,
                  wall_seconds=round(time.perf_counter() - start, 2))


# ------------------------------------------------------------------ HTML report (optional module)


def write_html(result_files: list[str], path: Path) -> bool:
    """The HTML report of the per-version results files (one typed `Results` per JAX version)."""
    formats.HtmlReport().write([results.load(Path(f)) for f in result_files], Path(path))
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
    formats.add_options(p, {"--html": "--out with .html"}, formats=formats.of_many_runs())
    p.add_argument("--no-html", action="store_true")
    p.add_argument("--history", action="store_true",
                   help="also list the blessed history: signature changes between versions that the goldens expect "
                        "(collapsed to one line by default)")
    p.add_argument("--fail-on", type=runner.fail_on_type(FAIL_ON), default="any",
                   help="what makes the exit code 1 (default: any; regression: only a FAIL classified as a regression or mixed, "
                        "or UNRESOLVED, on any version; cost:1%% or cost:40us: only such regressions whose estimated cost "
                        "reaches that share of the golden's estimate or those microseconds per call)")
    p.add_argument("--sort", choices=("case", "cost"), default="case",
                   help="grid row order: as the cases ran (default), or by estimated cost, the costliest change first")
    p.add_argument("--cache", type=Path, help="environments directory (default: $FP8_CHECK_CACHE/envs or ~/.cache/fp8-check/envs)")
    p.add_argument("--jax-index", metavar="URL",
                   help="extra PEP 503 package index with JAX builds, e.g. JAX's nightly index (default: $FP8_CHECK_JAX_INDEX); "
                        "pre-release versions are allowed, and --jax nightly picks the newest build on it")
    requirements.add_with_options(p)
    pool_mod.add_options(p, "compile workers in all, split over the --jobs versions running at once")
    p.set_defaults(mode="deviceless")  # across versions, deviceless unless asked (--mode device on a GPU host)
    return {"matrix": cmd_matrix}


def versions_from_args(args) -> list[str]:
    if args.jax:
        names = [v.strip() for v in args.jax.split(",") if v.strip()]
        if not names:
            raise VersionError(f"--jax {args.jax!r}: no version given (e.g. --jax 0.6.1,0.12.0.1)")
        if "nightly" in names:
            index = jax_index(getattr(args, "jax_index", None))
            if not index:
                raise VersionError("--jax nightly needs a package index with JAX nightlies: --jax-index URL or $FP8_CHECK_JAX_INDEX")
            names = [newest_on_index(index) if v == "nightly" else v for v in names]
        return sort_versions(names)
    if args.jax_range:
        return select_range(args.jax_range, args.select)
    raise VersionError("give --jax V1,V2,... or --jax-range A..B")


def cmd_matrix(args) -> int:
    try:
        if args.merge:
            m = merge(args.merge)
        else:
            versions = versions_from_args(args)
            if args.list_versions:
                print(format_list(versions, args.format))
                return EXIT_OK
            cases = selection.load_cases(args.paths, args.filter)
            targets = selection.targets(args.target)
            mode = selection.mode(args.mode)
            profiles = selection.profiles(args.profile, mode, for_targets=targets)
            out_dir = args.out_dir or args.out.with_name(args.out.stem + ".d")
            check_file(args.out, "--out")
            check_dir(out_dir, "--out-dir")
            selection.check_spec_files(args.target, mode)
            extras, jax_range = requirements.extras_from_args(args, cases)  # and the cases' `requirements:`
            manager = Manager(args.cache, index_url=args.jax_index, extras=extras, jax_range=jax_range,
                              kind=wheels.kind_for_mode(mode), platform=selection.env_platform(targets))
            print(f"fp8-check matrix: jax {', '.join(versions)}; mode {mode}; targets {', '.join(t.name for t in targets)}; "
                  f"profiles {', '.join(profiles)}; {len(cases)} cases; environments in {manager.root}"
                  + (f"; with {', '.join(manager.extras)}" if manager.extras else ""), flush=True)
            if args.jobs < 1 or (args.workers is not None and args.workers < 1):
                raise ValueError("--jobs and -j/--workers must be at least 1")
            workers = max(1, (args.workers or pool_mod.default_jobs()) // args.jobs)
            cache = None if args.no_cache else CompileCache()
            skip = selection.unshipped_profiles(args.goldens, targets, profiles) if not args.profile else {}
            for line in skip.values():
                print(f"fp8-check matrix: {line}", flush=True)
            m = run_matrix(versions, cases, targets, profiles, mode, args.goldens, out_dir, manager, args.jobs,
                           Progress(), workers=workers, cache=cache, skip=frozenset(skip))
    except (VersionError, MatrixError, ValueError) as exc:
        if isinstance(exc, (CaseError, golden.GoldenError)):
            raise
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    outputs.write_all([outputs.Output("matrix JSON", args.out, lambda p: write(p, m), primary=True)])  # results_file paths relative to it
    print_report(m, sort=args.sort, history=args.history)
    print(f"\nmatrix: {args.out}" + (f" (wall {m.wall_seconds:.1f}s)" if m.wall_seconds is not None else ""))
    if not args.no_html:
        files = [e.results_file for e in m.versions if e.results_file and Path(e.results_file).exists()]
        if files:  # the same policy as run: the report only warns
            chosen = formats.chosen(args, lambda f: args.out.with_suffix(".html") if f is formats.HtmlReport else None,
                                    formats=formats.of_many_runs())
            formats.write(chosen, lambda: [results.load(Path(f)) for f in files])
    print(closing_line(m))  # the last line: the one-line verdict
    return m.exit_code(args.fail_on)
