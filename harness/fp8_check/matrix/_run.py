"""`fp8-check matrix`: the case library across JAX versions, one isolated environment per version.

For each version, `envs.Manager` makes (or reuses) an environment with only
JAX V (deviceless: the slim wheel set of `fp8_check.versions._wheels`; device mode: `jax[cuda12]==V`); the harness itself stays in this process and starts ONE
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
(schema fp8-check/matrix/2), the HTML report when `fp8_check.report._page` is installed,
and a case x version grid on the terminal.

Exit code (`--fail-on`): `any` (default) 1 if any version has a bad outcome
(FAIL, XPASS, UNRESOLVED, NEW), else 3 if a version could not be installed or is
broken, else 0; `newest`: only the newest version that ran counts (the nightly's
rule: "a case regressed on the newest version"), and 3 when a version asked for
could not be installed or is broken (a broken release never passes); `never`: 0.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

from fp8_check.cases import outside
from fp8_check.compile import Compilation, CompileCache, CompilerPool, WorkerError
from fp8_check.core import WriteError, check
from fp8_check.matrix._document import Matrix, Status, VersionEntry
from fp8_check.matrix._view import Progress
from fp8_check.run import Results, deviceless_unsupported, environment_entry, job_unsupported, plan, run, write
from fp8_check.targets import PROFILES
from fp8_check.verdict import UNSUPPORTED, CanaryError, Outcome
from fp8_check.versions import (
    Env,
    InstallError,
    Manager,
    Recorder,
    Replay,
    RequirementEnvironments,
    SetEnvironments,
    VersionError,
    adding,
    ensure_sets,
    jax_index,
    newest_on_index,
    select_range,
    service_for,
    sets_of,
    sort_versions,
    twins,
)

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
    return sum(1 for _ in plan(cases, targets, profiles, skip))


def needed_sets(cases, targets, profiles, skip: frozenset = frozenset()) -> dict:
    """The requirement sets (`_requirement_envs.sets_of`) of the cases planned on the selected targets and
    profiles: only those get an environment per release (an h100 run never installs a TPU case's qwix)."""
    seen: dict[str, object] = {}
    for case, _t, _p in plan(cases, targets, profiles, skip):
        seen.setdefault(case.id, case)
    return sets_of(seen.values())


@dataclasses.dataclass(frozen=True)
class ReleasePlan:
    """What `matrix` would do on one release, decided without installing anything (`matrix --plan`): `reason`
    why nothing runs there ('' when it runs), the planned rows that compile (`runs`) and the UNSUPPORTED ones by
    reason, and the requirement sets whose environments it builds besides its own."""

    jax: str
    reason: str
    runs: int
    unsupported: dict[str, int]
    sets: tuple[str, ...]

    def to_json(self) -> dict:
        return {"jax": self.jax, "runs": self.runs, "reason": self.reason, "unsupported": self.unsupported,
                "requirement_sets": list(self.sets)}


def plan_release(version: str, cases, targets, profiles, mode: str = "deviceless", skip: frozenset = frozenset(),
                 jax_range: str = "") -> ReleasePlan:
    """The plan of one release: the same rules `run_version` and the runner apply (`jax_range`: the
    `--with-requirements` range), nothing built or compiled."""
    reason = outside(jax_range, version, "--with-requirements") or (
        deviceless_unsupported(version, targets) if mode == "deviceless" else None) or ""
    runs, unsupported = 0, dict[str, int]()
    for case, target, profile in plan(cases, targets, profiles, skip):
        why = reason or job_unsupported(case, target, profile, mode, version)
        if why:
            unsupported[why] = unsupported.get(why, 0) + 1
        else:
            runs += 1
    sets = needed_sets(cases, targets, profiles, skip)
    built = tuple(n for n, r, _c in sets.values() if not reason and not outside(r, version, n))
    return ReleasePlan(version, reason, runs, unsupported, built)


def run_version(version: str, env_future: Future | None, cases, targets, profiles, mode: str, goldens_root: Path,
                out_dir: Path, progress: Progress, workers: int = 1, cache: CompileCache | None = None,
                shared: dict | None = None, skip: frozenset = frozenset(), reason: str | None = None) -> VersionEntry:
    """Run the library on one version; returns the version's entry of the matrix.

    `shared` (versions with the same XLA, `shared_xla`): {"record": True} keeps this version's
    compilations in shared["recorder"]; {"replay": Recorder, "of": V} judges V's compilations
    for this version instead of compiling. `env_future` gives the version's environment and those of the
    requirement sets its cases need (`_requirement_envs.SetEnvironments`); `reason`: why nothing runs here."""
    entry = VersionEntry(version)
    total = planned(cases, targets, profiles, skip)
    if reason is None and mode == "deviceless":
        reason = deviceless_unsupported(version, targets)
    start = time.perf_counter()
    progress.version_started(version)
    compiler: Any = None  # a CompilerPool, a Replay of a twin version's compilations, or _NoCompiler
    live: CompilerPool | None = None  # this version's pool, killed at once on Ctrl-C (_abort_running)
    try:
        if shared and shared.get("replay") and not reason:
            compiler = Replay(shared["replay"], version, shared["of"])
            entry.env = {"same_xla_as": shared["of"], "built": False, "seconds": 0.0}
        elif reason or env_future is None:
            entry.status = Status.UNSUPPORTED
            compiler = _NoCompiler(version, mode)
        else:
            try:
                env: Env
                env, sets = env_future.result()
            except InstallError as exc:
                entry.status, entry.error = Status.INSTALL_FAILED, str(exc)
                progress.cases_skipped(version, total)
                return entry
            entry.env = {"path": str(env.path), "built": env.built, "seconds": round(env.seconds, 2), **env.info}
            if sets is not None and (sets.envs or sets.failed):
                entry.env["requirements"] = {sets.names[k]: ({"path": str(e.path), "built": e.built}
                                                             if (e := sets.envs.get(k)) is not None
                                                             else {"error": sets.failed[k]}) for k in sets.names}
            # `workers` compile workers in the version's environment, behind the shared compile
            # cache (its key holds the version's jax/jaxlib/plugin and installed distributions); the cases
            # with `requirements:` compile in their set's environment for this version
            compiler = live = CompilerPool(mode, jobs=workers, python=str(env.python), cache=cache)
            _LIVE_POOLS.add(live)
            compiler = service_for(live, sets, mode, workers, cache=cache)
            if shared and shared.get("record"):
                compiler = shared["recorder"] = Recorder(compiler)
        try:  # the canary is checked (and compiled alongside the cases) before any outcome
            if reason and not deviceless_unsupported(version, targets if mode == "deviceless" else ()):
                outcomes = [Outcome(c.id, t.name, p.name, mode, version, UNSUPPORTED, reason,
                                           description=c.description, yaml=c.yaml_text, file=c.file)
                            for c, t, p in plan(cases, targets, profiles, skip)]  # --with-requirements' range
                for o in outcomes:
                    progress.case_done(version, o)
            else:
                outcomes = run(cases, targets, profiles, mode, compiler, goldens_root,
                                      on_outcome=lambda o: progress.case_done(version, o),
                                      canary=not reason and not (shared and shared.get("replay")), skip=skip,
                                      broken_targets=entry.broken_targets)
        except (WorkerError, CanaryError) as exc:
            entry.status, entry.error = Status.BROKEN, str(exc).strip()
            progress.cases_skipped(version, total)
            return entry
        env_info = compiler.environment()
        res = Results({**env_info, "mode": mode, "targets": [t.name for t in targets], "profiles": profiles,
                               "compiler_options": {p: PROFILES[p].compiler_options for p in profiles},  # as compiled
                               "target_versions": {t.name: environment_entry(t, env_info["jax"]) for t in targets}},
                              outcomes, target_specs={t.name: t.config_text for t in targets})
        written = Path(out_dir) / f"results-jax-{check('jax version', version)}.json"
        path: Path | None = written
        try:
            write(written, res)
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
        if isinstance(compiler, (CompilerPool, Recorder, RequirementEnvironments)):
            compiler.close()
        entry.run_seconds = round(time.perf_counter() - start, 2)
        progress.version_done(entry)


def run_matrix(versions: list[str], cases, targets, profiles: list[str], mode: str, goldens_root: Path, out_dir: Path,
               manager: Manager | None = None, jobs: int = 1, progress: Progress | None = None,
               workers: int = 1, cache: CompileCache | None = None, skip: frozenset = frozenset(),
               sets: dict | None = None) -> Matrix:
    """Every version's entry, oldest first, in a matrix.

    Environments are built one at a time in a background thread, ahead of the
    versions that run (`jobs` at a time), so a build overlaps with compiling.
    Each running version compiles on `workers` workers, through `cache` (None: no cache).
    Deviceless, versions that ship the same XLA commit as a newer one in the list are not
    compiled: the newer one's compilations are judged for them (`shared_xla`); they run
    after it (if it could not run, they build and compile on their own).
    `sets` (`needed_sets`): the requirement sets of the planned cases; each version builds (behind its own
    environment) the environment of each set whose range includes it: the set's cases compile there, and
    where the range excludes the version they are UNSUPPORTED with the reason, the version runs the rest.
    A version outside the `--with-requirements` range (`manager.jax_range`) runs nothing (UNSUPPORTED).
    """
    manager = manager or Manager()
    progress = progress or Progress()
    versions = sort_versions(versions)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    per_version = planned(cases, targets, profiles, skip)
    sets = sets or {}
    excluded = {v: why for v in versions if (why := outside(manager.jax_range, v, "--with-requirements"))}
    needs_env = [v for v in versions if not (mode == "deviceless" and deviceless_unsupported(v, targets))
                 and v not in excluded]
    # not with --with: the extra packages are resolved per version, so the environments differ beyond XLA; a
    # requirement set's cases are replayed only where its range says the same of both versions
    same_xla = twins(needs_env) if mode == "deviceless" and not manager.extras else {}
    same_xla = {v: rep for v, rep in same_xla.items()
                if all(bool(outside(r, v, n)) == bool(outside(r, rep, n)) for n, r, _c in sets.values())}
    shared: dict[str, dict] = {rep: {"record": True} for rep in same_xla.values()}
    needs_env = [v for v in needs_env if v not in same_xla]
    progress.start(versions, needs_env, per_version)
    start = time.perf_counter()
    builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fp8-env")
    futures: dict[str, Future] = {}

    def build(v: str) -> tuple[Env, SetEnvironments | None]:
        progress.env_started(v)
        try:
            env = manager.ensure(v)
        except InstallError as exc:
            progress.env_done(v, None, str(exc))
            raise
        progress.env_done(v, env, "")
        found = ensure_sets(sets, v, lambda r: adding(manager, r),
                                                log=progress.say) if sets else None
        return env, found

    def one(v: str) -> VersionEntry:
        share = shared.get(v)
        if v in same_xla:
            rep = done[same_xla[v]].result()  # submitted before v: a slot is running or has run it
            recorder = shared[same_xla[v]].get("recorder")
            if rep.status is Status.RAN and recorder is not None:
                share = {"replay": recorder, "of": same_xla[v]}
            else:  # the version compiled for it could not run: build and compile this one
                futures[v] = builder.submit(build, v)
        return run_version(v, futures.get(v), cases, targets, profiles, mode, goldens_root, out_dir, progress,
                           workers, cache, share, skip, reason=excluded.get(v))

    runners = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="fp8-run")
    interrupted = False
    try:
        for v in needs_env:
            futures[v] = builder.submit(build, v)
        done: dict[str, Future] = {}
        for v in [v for v in versions if v not in same_xla] + [v for v in versions if v in same_xla]:
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


# ------------------------------------------------------------------ which versions (the CLI's --jax, --jax-range)


@dataclasses.dataclass(frozen=True)
class VersionOptions:
    """The versions a matrix runs, as given: `--jax V1,V2` (may name `nightly`), else `--jax-range` with
    `--select`; `--jax-index` (None: $FP8_CHECK_JAX_INDEX) is where `nightly` is looked up."""

    jax: str | None = None
    jax_range: str | None = None
    select: str = "all"
    jax_index: str | None = None


def versions_of(options: VersionOptions) -> list[str]:
    """The JAX versions `options` name, sorted; VersionError (one line) when they name none."""
    if options.jax:
        names = [v.strip() for v in options.jax.split(",") if v.strip()]
        if not names:
            raise VersionError(f"--jax {options.jax!r}: no version given (e.g. --jax 0.6.1,0.12.0.1)")
        if "nightly" in names:
            index = jax_index(options.jax_index)
            if not index:
                raise VersionError("--jax nightly needs a package index with JAX nightlies: --jax-index URL or $FP8_CHECK_JAX_INDEX")
            names = [newest_on_index(index) if v == "nightly" else v for v in names]
        return sort_versions(names)
    if options.jax_range:
        return select_range(options.jax_range, options.select)
    raise VersionError("give --jax V1,V2,... or --jax-range A..B")
