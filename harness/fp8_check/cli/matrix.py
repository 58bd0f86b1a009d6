"""The command half of fp8_check.matrix._run (the matrix stage): the subcommands it registers."""

from __future__ import annotations

import glob
import sys
from pathlib import Path

from fp8_check import platforms, report, run
from fp8_check.cases import CaseError
from fp8_check.cli._options import output_paths, requirement_options, version_options
from fp8_check.compile import CompileCache, add_options, default_jobs
from fp8_check.core import EXIT_OK, EXIT_USAGE, Output, check_dir, check_file, shown_path, write_all
from fp8_check.matrix import (
    FAIL_ON,
    Matrix,
    MatrixError,
    Progress,
    closing_line,
    format_plan,
    load_plan,
    merge,
    missing,
    needed_sets,
    plan,
    plan_release,
    print_report,
    run_matrix,
    uploaded,
    versions_of,
    write,
)
from fp8_check.run import fail_on_type, load
from fp8_check.verdict import GoldenError
from fp8_check.versions import SELECTIONS, Manager, VersionError, add_with_options, extras_of, format_list, kind_for_mode


def write_html(result_files: list[str], path: Path) -> bool:
    """The HTML report of the per-version results files (one typed `Results` per JAX version)."""
    report.HtmlReport().write([load(Path(f)) for f in result_files], Path(path))
    return True


def register(subparsers) -> dict:
    p = subparsers.add_parser("matrix", help="run the cases across JAX versions, one cached uv environment per version")
    run.add_options(p)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--jax", help="versions, comma-separated (e.g. 0.6.1,0.8.0,0.12.0.1)")
    which.add_argument("--jax-range", help="released versions in A..B (both included), A.., ..B, or a specifier set")
    which.add_argument("--merge", nargs="+", metavar="JSON", help="merge matrix/results JSON files (globs allowed) instead of running")
    p.add_argument("--select", choices=SELECTIONS, default="all",
                   help="with --jax-range: all released versions, or 'minor': the newest of each minor series plus the oldest")
    p.add_argument("--list-versions", action="store_true", help="print the versions --jax/--jax-range selects and exit")
    p.add_argument("--list-jobs", action="store_true",
                   help="print the jobs a fanned-out CI runs, one per version x target group (NVIDIA, AMD, TPU: "
                        "each group compiles in its own environment), and exit; --format github: the `jobs=` and "
                        "`groups=` lines of the reusable workflow's resolve step")
    p.add_argument("--expect-jobs", type=Path, metavar="JSON",
                   help="with --merge: the planned jobs (--list-jobs --format json); each that uploaded nothing is "
                        "kept in the merged matrix as missing (version, target group, why) and the exit code is not 0")
    p.add_argument("--plan", action="store_true",
                   help="print what each version would run (rows compiled, UNSUPPORTED ones by reason, the requirement "
                        "sets' environments it builds) and exit; installs and compiles nothing")
    p.add_argument("--format", choices=("lines", "json", "github"), default="lines", help="for --list-versions, --list-jobs and --plan")
    p.add_argument("--jobs", type=int, default=2, help="versions compiled at once (default 2: on 2 cores the full library over 8 versions took 117 s vs 170 s with 1; environments build in the background)")
    p.add_argument("--out", type=Path, default=Path("reports/matrix.json"), help="matrix JSON (default: reports/matrix.json)")
    p.add_argument("--out-dir", type=Path, help="per-version results JSON (default: next to --out, in <name>.d/)")
    report.add_options(p, {"--html": "--out with .html"}, formats=report.of_many_runs())
    p.add_argument("--no-html", action="store_true")
    p.add_argument("--history", action="store_true",
                   help="also list the blessed history: signature changes between versions that the goldens expect "
                        "(collapsed to one line by default)")
    p.add_argument("--fail-on", type=fail_on_type(FAIL_ON), default="any",
                   help="what makes the exit code 1 (default: any; regression: only a FAIL classified as a regression or mixed, "
                        "or UNRESOLVED, on any version; cost:1%% or cost:40us: only such regressions whose estimated cost "
                        "reaches that share of the golden's estimate or those microseconds per call)")
    p.add_argument("--sort", choices=("case", "cost"), default="case",
                   help="grid row order: as the cases ran (default), or by estimated cost, the costliest change first")
    p.add_argument("--cache", type=Path, help="environments directory (default: $FP8_CHECK_CACHE/envs or ~/.cache/fp8-check/envs)")
    p.add_argument("--jax-index", metavar="URL",
                   help="extra PEP 503 package index with JAX builds, e.g. JAX's nightly index (default: $FP8_CHECK_JAX_INDEX); "
                        "pre-release versions are allowed, and --jax nightly picks the newest build on it")
    add_with_options(p)
    add_options(p, "compile workers in all, split over the --jobs versions running at once")
    p.set_defaults(mode="deviceless")  # across versions, deviceless unless asked (--mode device on a GPU host)
    return {"matrix": cmd_matrix}


def _print_plan(versions, cases, targets, profiles, mode, skip, jax_range, fmt) -> int:
    """`matrix --plan`: one line (or one JSON record) per version, from `plan_release`."""
    import json

    plans = [plan_release(v, cases, targets, profiles, mode, skip, jax_range) for v in versions]
    if fmt == "json":
        print(json.dumps([p.to_json() for p in plans], indent=1))
        return EXIT_OK
    for p in plans:
        if p.reason:
            print(f"jax {p.jax}: nothing runs: {p.reason}")
            continue
        skipped = sum(p.unsupported.values())
        print(f"jax {p.jax}: {p.runs} runs" + (f", {skipped} UNSUPPORTED" if skipped else "")
              + (f"; environments of requirements {', '.join(p.sets)}" if p.sets else ""))
        for why, n in p.unsupported.items():
            print(f"    {n} UNSUPPORTED: {why}")
    return EXIT_OK


def cmd_matrix(args) -> int:
    try:
        if args.merge:
            if args.expect_jobs and not any(glob.glob(str(p), recursive=True) for p in args.merge):
                m = Matrix([], merged_from=[])  # every planned job died: each is named as missing
            else:
                m = merge(args.merge)
            if args.expect_jobs:
                m.missing_jobs = missing(load_plan(args.expect_jobs),
                                                     uploaded(m.merged_from or []))
        else:
            if args.expect_jobs:
                raise ValueError("--expect-jobs goes with --merge")
            versions = versions_of(version_options(args))
            if args.list_versions:
                print(format_list(versions, args.format))
                return EXIT_OK
            if args.list_jobs:
                given = run.comma_list(args.target or platforms.default_target())
                print(format_plan(plan(versions, run.targets_from(args.target), given),
                                              args.format))
                return EXIT_OK
            cases = run.load_cases(args.paths, args.filter)
            targets = run.targets_from(args.target)
            mode = run.mode_from(args.mode)
            profiles = run.profiles_from(args.profile, mode, for_targets=targets)
            out_dir = args.out_dir or args.out.with_name(args.out.stem + ".d")
            check_file(args.out, "--out")
            check_dir(out_dir, "--out-dir")
            run.check_spec_files(args.target, mode)
            extras, jax_range = extras_of(requirement_options(args))  # every version's: --with, --with-requirements
            skip = run.unshipped_profiles(args.goldens, targets, profiles) if not args.profile else {}
            # the cases' `requirements:`: one environment per set per version, for the cases planned here only
            sets = needed_sets(cases, targets, profiles, frozenset(skip))
            if args.plan:
                return _print_plan(versions, cases, targets, profiles, mode, frozenset(skip), jax_range, args.format)
            manager = Manager(args.cache, index_url=args.jax_index, extras=extras, jax_range=jax_range,
                              kind=kind_for_mode(mode), platform=run.env_platform(targets))
            print(f"fp8-check matrix: jax {', '.join(versions)}; mode {mode}; targets {', '.join(t.name for t in targets)}; "
                  f"profiles {', '.join(profiles)}; {len(cases)} cases; environments in {manager.root}"
                  + (f"; with {', '.join(manager.extras)}" if manager.extras else "")
                  + "".join(f"; requirements {n} ({c} cases, jax{r or ' any'})" for n, r, c in sets.values()), flush=True)
            if args.jobs < 1 or (args.workers is not None and args.workers < 1):
                raise ValueError("--jobs and -j/--workers must be at least 1")
            workers = max(1, (args.workers or default_jobs()) // args.jobs)
            cache = None if args.no_cache else CompileCache()
            for line in skip.values():
                print(f"fp8-check matrix: {line}", flush=True)
            m = run_matrix(versions, cases, targets, profiles, mode, args.goldens, out_dir, manager, args.jobs,
                           Progress(), workers=workers, cache=cache, skip=frozenset(skip), sets=sets)
    except (VersionError, MatrixError, ValueError) as exc:
        if isinstance(exc, (CaseError, GoldenError)):
            raise
        print(f"fp8-check: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    write_all([Output("matrix JSON", args.out, lambda p: write(p, m), primary=True)])  # results_file paths relative to it
    print_report(m, sort=args.sort, history=args.history)
    print(f"\nmatrix: {shown_path(args.out)}" + (f" (wall {m.wall_seconds:.1f}s)" if m.wall_seconds is not None else ""))
    if not args.no_html:
        files = [e.results_file for e in m.versions if e.results_file and Path(e.results_file).exists()]
        if files:  # the same policy as run: the report only warns
            chosen = report.chosen(output_paths(args), lambda f: args.out.with_suffix(".html") if f is report.HtmlReport else None,
                                    formats=report.of_many_runs())
            for f, _ in chosen:  # the planned jobs that uploaded nothing, in the report's header
                f.notes = [j.line() for j in m.missing_jobs]
            report.write(chosen, lambda: [load(Path(f)) for f in files])
    print(closing_line(m))  # the last line: the one-line verdict
    return m.exit_code(args.fail_on)
