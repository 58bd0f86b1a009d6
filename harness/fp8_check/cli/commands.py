"""The core commands: `run`, `bless`, `show`, `list`.

Like every command module (versions/matrix, versions/bisect, report/page, gpu/capture,
gpu/fidelity) this one registers its subcommands with `register(subparsers)` and
returns `{name: handler(args) -> exit code}`; `fp8_check.cli.main` only collects them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from fp8_check import platforms, report, run
from fp8_check.cases import load
from fp8_check.cli._options import output_paths, pool_options, selection_options
from fp8_check.compile import add_options, repro
from fp8_check.core import EXIT_FAIL, EXIT_OK, atomic_write, check_dir, check_file, remove_stale_temporaries
from fp8_check.cost import estimate, hardware
from fp8_check.matrix import Matrix, MatrixFileError, bless_from_matrix, closing_line, entry_from_results, one_version_hint
from fp8_check.report import plain, print_outcome, print_summary
from fp8_check.run import NumericsCheck, Results, UsageError, environment_entry, fail_on_type, fails, plan, request_for
from fp8_check.signature import extract
from fp8_check.targets import PROFILES
from fp8_check.verdict import (
    UNRESOLVED,
    UNSUPPORTED,
    GoldenError,
    Outcome,
    any_failure,
    bless,
    facts_of,
    fp8_layer_rules,
    path_for,
    stale,
    wants_contract,
)


def html_for(json_path: Path) -> Path:
    """The HTML report of a results file: named after it (`amd.json` -> `amd.html`), so that runs writing different
    results files do not overwrite each other's report; the default `results.json` keeps `report.html`."""
    return json_path.parent / ("report.html" if json_path.name == "results.json" else json_path.with_suffix(".html").name)


def register(sub) -> dict:
    p = sub.add_parser("run", help="compile cases and check their fusion signatures against goldens")
    run.add_options(p)
    report.add_options(p, {"--json": Path("reports/results.json"),
                            "--html": "next to the results JSON, named after it: results.json -> report.html, amd.json -> amd.html"})
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print every result (by default a plain expected PASS is only counted, per target/profile), "
                        "field diffs and full error texts")
    run.add_timeout(p)
    add_options(p)
    p.add_argument("--numerics", action="store_true",
                   help="also execute each case on the GPU and compare with a float64 reference (needs --mode device)")
    p.add_argument("--fail-on", type=fail_on_type(("any", "regression")), default="any",
                   help="exit 1 on any FAIL/XPASS/UNRESOLVED/NEW (default), or only on regressions: a FAIL whose verdict "
                        "is a regression or mixed, or a case that no longer compiles (docs/verdicts.md); cost:1%% or "
                        "cost:40us: only regressions whose estimated cost reaches that share of the golden's estimate "
                        "or those microseconds per call (docs/cost.md)")

    p = sub.add_parser("bless", help="record the current signatures as goldens (atomically) and print the diff")
    run.add_options(p)
    run.add_timeout(p)
    add_options(p)
    p.add_argument("--prune", action="store_true", help="also remove stale goldens: those of no case in PATHS")
    p.add_argument("--from-matrix", nargs="+", type=Path, metavar="MATRIX.json",
                   help="bless version-ranged goldens from matrix results instead of compiling: one expectation per run "
                        "of consecutive versions with an identical signature (docs/goldens.md)")
    p.set_defaults(target=None)  # h100 when compiling; with --from-matrix, every target in the matrix

    p = sub.add_parser("show", help="print a case's repro script, StableHLO, optimized HLO and signature")
    p.add_argument("case", help="case id")
    run.add_options(p)
    p.add_argument("--repro", type=Path, help="also write the standalone repro script to this file")
    run.add_timeout(p)
    add_options(p)

    p = sub.add_parser("list", help="list the cases")
    p.add_argument("paths", nargs="*", type=Path)
    p.add_argument("-k", dest="filter")
    return {"run": cmd_run, "bless": cmd_bless, "show": cmd_show, "list": cmd_list}


def _say(line: str) -> None:
    print(line, flush=True)


def _used_profiles(sel: run.Selection) -> list[str]:
    """The selected profiles some selected case runs under on some selected target (the header lists these)."""
    used = {p.name for _, _, p in plan(sel.cases, sel.targets, sel.profiles)}
    return [p for p in sel.profiles if p in used]


def _header(env: dict, sel: run.Selection) -> str:
    """The run's first line: the JAX that compiles and its plugin for the targets' platform; when that is another
    environment than this one (a ROCm plugin for AMD targets), which release and why; the profiles the selected
    cases use, and what a profile's rows show where that is not what its name suggests (triton)."""
    platform = (run.env_platform(sel.targets) if sel.mode == "deviceless" else None) or platforms.DEFAULT
    note = run.environment_note(sel.targets, env) if sel.mode == "deviceless" else ""
    used = _used_profiles(sel)
    shows = [PROFILES[p].shows for p in used if PROFILES[p].shows]
    return (f"fp8-check: jax {env['jax']} (jaxlib {env['jaxlib']}, {platform.plugin_label} "
            f"{env.get(platform.report_key + '_plugin')}{'; ' + note if note else ''}), "
            f"mode {sel.mode}, targets {', '.join(t.name for t in sel.targets)}, profiles {', '.join(used)}, "
            f"{len(sel.cases)} cases" + "".join(f"\nfp8-check: {s}" for s in shows))


def _stale(args) -> list[Path] | None:
    """Goldens of no case in PATHS (all of them, not only those -k selects).

    None when PATHS names single case files: goldens of cases in other files are not stale
    then, so nothing is warned about and `--prune` refuses to guess.
    """
    paths = list(args.paths or [run.DEFAULT_CASES])
    if any(not Path(p).is_dir() for p in paths):
        return None
    return stale(args.goldens, {c.id for c in load(paths)})


def _paths_text(args) -> str:
    return ", ".join(map(str, args.paths or [run.DEFAULT_CASES]))


def cmd_run(args) -> int:
    sel = run.select(selection_options(args))
    if next(plan(sel.cases, sel.targets, sel.profiles), None) is None:  # "nothing ran", exit 0, was green
        raise UsageError(f"none of the {len(sel.cases)} selected case(s) runs on --target "
                         f"{','.join(t.name for t in sel.targets)} with --profile {','.join(sel.profiles)}: each "
                         "case lists the targets and profiles it runs on (`fp8-check list` shows them)")
    numerics = getattr(args, "numerics", False)
    if numerics and sel.mode != "device":
        raise UsageError("--numerics executes the compiled cases and needs a GPU: --mode device (this run is deviceless)")
    numerics_check: NumericsCheck | None = None
    if numerics:
        from fp8_check.gpu import Float64Reference  # the GPU layer's reference, handed to the runner

        numerics_check = Float64Reference()
    written = report.chosen(output_paths(args), lambda f: html_for(args.json) if f is report.HtmlReport else None)
    report.check_paths(written)  # fail before compiling, not after
    running = list(dict.fromkeys(c.id for c, _, _ in plan(sel.cases, sel.targets, sel.profiles)))
    needs = [c for c in sel.cases if c.id in running]  # requirement sets are announced for the cases that run
    compiler, env = run.start_compiler(sel.mode, args.timeout, sel.targets, pool_options(args), cases=needs, log=_say)
    with compiler:
        print(_header(env, sel), flush=True)
        stale = _stale(args)  # warned after every input error: those stay one line
        if stale:
            shown = ", ".join(map(str, stale[:3])) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
            print(f"fp8-check: warning: {len(stale)} stale golden(s) of no case in {_paths_text(args)}: {shown} "
                  "(`fp8-check bless --prune` removes them)", file=sys.stderr)
        if sel.mode == "device":
            device = str((env.get("device") or {}).get("name", "?"))
            for t in sel.targets:
                if t.name.lower() not in device.lower().replace(" ", ""):
                    print(f"fp8-check: warning: device mode compiles for the local GPU ({device}); "
                          f"its results are filed under --target {t.name}", file=sys.stderr)
        for t in sel.targets:
            for note in t.notes:
                print(f"fp8-check: target {t.name}: fixed: {note}", flush=True)
        skip = run.unshipped_profiles(sel.goldens, sel.targets, _used_profiles(sel)) if not args.profile else {}
        for line in skip.values():
            print(f"fp8-check: {line}", flush=True)
        outcomes = run.run(sel.cases, sel.targets, sel.profiles, sel.mode, compiler, sel.goldens,
                              on_outcome=lambda o: print_outcome(o, verbose=args.verbose)
                              if args.verbose or not plain(o) else None,
                              numerics=numerics_check, canary=True, skip=frozenset(skip))
    print_summary(outcomes, verbose=args.verbose)
    print(f"{compiler.cache_summary()}; {compiler.jobs} worker(s)")
    res = Results(
        {**env, "mode": sel.mode, "targets": [t.name for t in sel.targets], "profiles": sel.profiles,
         "compiler_options": {p: PROFILES[p].compiler_options for p in sel.profiles},
         "target_versions": {t.name: environment_entry(t, env["jax"]) for t in sel.targets}},
        outcomes, target_specs={t.name: t.config_text for t in sel.targets})
    res.path = str(args.json)
    report.write(written, [res])  # one failure policy: the results JSON must be written, the report only warns

    print(closing_line(Matrix([entry_from_results(res)])))  # the last line: the one-line verdict
    fail_on = getattr(args, "fail_on", "any")
    if fail_on != "any":
        return EXIT_FAIL if any(fails(o, fail_on) for o in outcomes) else EXIT_OK
    return EXIT_FAIL if any_failure(o.code for o in outcomes) else EXIT_OK


def _bless_from_matrix(args) -> int:
    if args.paths:
        raise UsageError("bless --from-matrix takes no case paths: the matrix says what ran (use -k, --target, --profile to narrow)")
    for path in args.from_matrix:
        if not path.is_file():
            raise UsageError(f"--from-matrix: no such file: {path}")
    try:
        changed, skipped = bless_from_matrix(args.from_matrix, args.goldens, args.filter,
                                                    run.comma_list(args.target) or None,
                                                    run.comma_list(args.profile) or None)
    except MatrixFileError as exc:
        raise UsageError(str(exc)) from None
    print(f"blessed from matrix: {changed} golden(s) changed" + (f", {skipped} row(s) not blessed (see above)" if skipped else ""))
    return EXIT_OK


def cmd_bless(args) -> int:
    remove_stale_temporaries(args.goldens)  # hidden .tmp goldens of a bless killed mid-write
    if getattr(args, "from_matrix", None):
        return _bless_from_matrix(args)
    sel = run.select(selection_options(args))
    for t in sel.targets:
        for p in sel.profiles:
            check_dir(path_for(sel.goldens, "x", t.name, p, sel.mode).parent, "--goldens")
    if args.prune:
        stale = _stale(args)
        if stale is None:
            raise UsageError("--prune needs case directories (default: cases/), not single case files: goldens of "
                             "cases in other files would look stale")
        for path in stale:
            try:
                path.unlink()
            except OSError as exc:
                raise UsageError(f"--prune: cannot remove {path}: {exc.strerror or exc}") from None
            print(f"pruned {path}: no case '{path.stem}' in {_paths_text(args)}")
    compiler, env = run.start_compiler(sel.mode, args.timeout, sel.targets, pool_options(args), cases=sel.cases, log=_say)
    counts = {"changed": 0, "unresolved": 0}
    hints: list[str] = []  # one line per case that a matrix shows on other versions (printed once, at the end)

    def bless_one(out: Outcome) -> None:
        """Record one judged outcome's signature (the runner classified it exactly as `run` does)."""
        where = f"{out.target}/{out.profile} {out.case}"
        if out.known_issue:
            issue = out.known_issue
            print(f"skipped {where}: known issue {issue['url'] or issue['summary']!r} is active on jax "
                  f"{out.jax}; a golden states the fused signature, so it is not blessed from a broken version")
            return
        if out.code is UNSUPPORTED:
            print(f"UNSUPPORTED {where}: {out.reason}")
            return
        if out.signature is None or out.code is UNRESOLVED:  # no signature, or an unreadable golden
            counts["unresolved"] += 1
            print(f"UNRESOLVED {where}: {out.reason.strip().splitlines()[0] if out.reason else 'unknown error'}")
            return
        try:
            is_contract, options = wants_contract(sel.goldens, out)  # a model: docs/contracts.md
            facts = facts_of(out, options) if is_contract else None
            rules = fp8_layer_rules(out.signature) if is_contract else None
            diff = bless(sel.goldens, out.case, out.target, out.profile, out.mode, out.jax, out.signature.to_dict(),
                                facts, rules, out.autotune.record() if out.autotune is not None else None)
            if rules and diff and "\n+layers:" in diff:
                print(f"layer rules written for {where} (every layer seen in FP8 must stay FP8; edit them in the "
                      f"golden's `layers:`):")
                for r in rules:
                    print(f"  {r['layer']}" + (f" @{r['pass']}" if "pass" in r else "") + ": FP8")
            hint = one_version_hint(out, Path("reports/matrix.json"))
            if hint and hint not in hints:
                hints.append(hint)
        except GoldenError as exc:  # a contradictory golden: fix it by hand
            counts["unresolved"] += 1
            print(f"UNRESOLVED {where}: {exc}")
            return
        if diff:
            counts["changed"] += 1
            sys.stdout.write(diff)
        else:
            print(f"unchanged {where}")

    with compiler:
        run.run(sel.cases, sel.targets, sel.profiles, sel.mode, compiler, sel.goldens, on_outcome=bless_one,
                   canary=True)
    for hint in hints:
        print(hint)
    changed, unresolved = counts["changed"], counts["unresolved"]
    print(f"blessed: {changed} golden(s) changed"
          + (f", {unresolved} case(s) did not compile or have a broken golden" if unresolved else ""))
    return EXIT_FAIL if unresolved else EXIT_OK


def cmd_show(args) -> int:
    case = run.find_case(args.paths, args.case)
    target = run.targets_from(args.target)[0]
    mode = run.mode_from(args.mode)
    profile = PROFILES[run.profiles_from(args.profile, mode, for_targets=[target])[0]]
    if args.repro:
        check_file(args.repro, "--repro")
    # one compilation: a second worker would only import JAX for nothing
    compiler, env = run.start_compiler(mode, args.timeout, [target], pool_options(args), workers=args.workers or 1,
                                             cases=[case], log=_say)
    with compiler:  # in the environment of the case's `requirements:` when it names them
        # deviceless `default`: replaying the committed autotune results, as `run` does
        [comp] = list(compiler.imap([request_for(case, target, profile, None, mode, env["jax"],
                                                        getattr(args, "goldens", None))]))
    script = repro(case, target, profile, env["jax"])
    if args.repro:
        atomic_write(args.repro, script)  # creates missing folders
    print(f"# ---- repro: {case.id} for {target.name}/{profile.name} ({mode}), jax {env['jax']}")
    print(script)
    if not comp.ok:
        print(f"# ---- compile error\n{comp.error}")
        return EXIT_FAIL
    print("# ---- StableHLO")
    print(comp.stablehlo)
    print("# ---- optimized HLO")
    print(comp.hlo)
    print("# ---- signature")
    import yaml

    hlo = comp.hlo or ""  # set whenever the compilation succeeded
    print(yaml.safe_dump(extract(hlo).to_dict(), sort_keys=False))

    est = estimate(hlo, hardware(target))
    print(f"# ---- estimated cost on {est.hardware} (roofline, docs/cost.md): {est.total_us:.1f} µs per call")
    for k in est.kernels:
        print(f"{k.us:10.1f} µs  {k.bound:<8} {k.label}")
    if args.repro:
        print(f"# repro written to {args.repro}: run it with `python {args.repro}`")
    return EXIT_OK


def cmd_list(args) -> int:
    for c in run.load_cases(args.paths, args.filter):  # none at all: one line, exit 2 (as run says)
        print(f"{c.id:<40} {c.description}")
    return EXIT_OK
