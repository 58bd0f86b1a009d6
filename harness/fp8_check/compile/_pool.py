"""A pool of long-lived compile workers, in front of the compile cache.

`CompilerPool` has `Compiler`'s API (`environment()`, `compile()`, `imap()`,
`close()`), so callers change little:

- `imap(requests)` compiles on up to `jobs` workers at once and yields the
  compilations **in request order** (callers print and write in plan order);
- each worker is a `Compiler` (one subprocess): an XLA abort or a timeout kills
  only that worker, the request that was on it gets the error, and that worker
  restarts for its next request — the other workers and requests are untouched;
- a request whose compilation is in the cache (`fp8_check.compile._cache`) is
  answered without a worker; workers start only when something misses, so an
  unchanged re-run never imports JAX;
- `prefetch(requests)` starts compiling ahead (the pytest plugin, whose items
  then ask one at a time with `compile()`).

In deviceless mode `environment()` comes from the worker's `probe` (package
metadata, no JAX import); in device mode from JAX in the worker (the GPU's
details belong to the environment and to the cache key).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import queue
import threading
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Iterable, Iterator

from fp8_check.cases import Rendered
from fp8_check.compile._cache import CompileCache, Entry, KeyMaterial, cacheable, imported_modules
from fp8_check.compile._service import DEFAULT_TIMEOUT, Compilation, Compiler, CompileRequest, WorkerError
from fp8_check.compile._sharing import derive, shareable_source
from fp8_check.platforms import Profile
from fp8_check.targets import LOAD_OPTION, Coverage, Target, key_options, shown_path


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def add_options(p, workers_help: str = "compile workers running at once") -> None:
    """`-j N` and `--no-cache` for a subcommand's parser."""
    p.add_argument("-j", "--workers", type=int, default=None, metavar="N",
                   help=f"{workers_help} (default: the number of cores, here {default_jobs()}; 1 with --mode device)")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the compile cache ($FP8_CHECK_COMPILE_CACHE, else compile/ in "
                        "$FP8_CHECK_CACHE or ~/.cache/fp8-check)")


@dataclasses.dataclass(frozen=True)
class PoolOptions:
    """`-j/--workers` and `--no-cache` (`add_options`) as given: `workers` None is the default count; `cache`
    False neither reads nor writes the compile cache."""

    workers: int | None = None
    cache: bool = True


def from_options(options: PoolOptions, mode: str, python: str | None = None, jobs: int | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> "CompilerPool":
    """The pool `options` ask for (`jobs`, when given, overrides -j); raises ValueError on a bad -j."""
    workers = jobs if jobs is not None else options.workers
    if workers is not None and workers < 1:
        raise ValueError(f"-j/--workers: must be at least 1, got {workers}")
    cache = CompileCache() if options.cache else None
    return CompilerPool(mode, jobs=workers, python=python, timeout=timeout, cache=cache)


class _Key:
    """A request's cache key, or why it is not cached; and the key it shares with identical compilations
    of other cases (`harness/fp8_check/compile/_sharing.py`), if it may share one."""

    def __init__(self, key: str | None, why_not: str | None, imports: dict, shared: str | None = None):
        self.key, self.why_not, self.imports, self.shared = key, why_not, imports, shared


class CompilerPool:
    def __init__(self, mode: str, jobs: int | None = None, python: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 cache: CompileCache | None = None):
        self.mode = mode
        # device mode: one worker unless asked (every worker would hold the one GPU and autotune on it at once;
        # sixteen workers on an H200 each took JAX's default 75 % of its memory: RESOURCE_EXHAUSTED in autotuning)
        self.jobs = max(1, jobs or (1 if mode == "device" else default_jobs()))
        self.cache = cache
        # Several workers share the cores: each compiles its LLVM modules on its share instead of on every
        # core (XLA's default), which would only make them compete (measured: 5 % less CPU and wall time).
        threads = max(1, default_jobs() // self.jobs) if self.jobs > 1 else None
        self._compilers = [Compiler(mode, python=python, timeout=timeout, codegen_threads=threads)
                           for _ in range(self.jobs)]
        # Last in, first out: a borrower gets the worker used last, so a probe after the first reuses that
        # worker's process instead of starting another one, and compiles prefer a warm worker.
        self._idle: queue.LifoQueue[Compiler] = queue.LifoQueue()
        for c in self._compilers:
            self._idle.put(c)
        self._executor = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="fp8-compile")
        self._lock = threading.Lock()
        self._probe: dict | None = None
        self._imports: dict[str, str] = {}
        self._environment: dict | None = None
        self._prefetched: dict[tuple, Future] = {}
        self._warmed = False
        self._shared: dict[str, Future] = {}  # shared key -> the first such request's compilation
        self.compiled = 0  # compilations done by a worker (misses and uncached requests)
        self.shared = 0  # answered from another case's identical compilation

    # ------------------------------------------------------------ workers

    @contextmanager
    def _borrow(self):
        compiler = self._idle.get()
        try:
            yield compiler
        finally:
            self._idle.put(compiler)

    def _ask_probe(self, names: set[str]) -> dict:
        with self._borrow() as c:
            reply = c.worker.request({"op": "probe", "names": sorted(names)})
        if not reply.get("ok"):
            raise WorkerError(reply.get("traceback") or reply.get("error", "unknown error"))
        return reply["probe"]

    def _resolve(self, names: set[str]) -> None:
        """Make sure the probe ran and `names` are resolved in the compiling environment (one worker round trip)."""
        with self._lock:
            missing = set(names) - set(self._imports)
            if self._probe is not None and not missing:
                return
            probe = self._ask_probe(missing)
            if self._probe is None:
                self._probe = probe
            self._imports.update(probe["imports"])

    def environment(self) -> dict:
        if self._environment is None:
            self._resolve(set())
            if self.mode == "device":
                with self._borrow() as c:
                    self._environment = c.environment()
            else:
                assert self._probe is not None  # _resolve probed
                env = self._probe["environment"]
                if not env.get("jax"):
                    raise WorkerError("jax is not installed in the compile environment")
                self._environment = dict(env)
        return self._environment

    # ------------------------------------------------------------ start-up (before any compile runs)

    @property
    def worker(self):
        """The first worker: the one `prepare()` uses (its stderr explains a target spec XLA rejected)."""
        return self._compilers[0].worker

    def prepare(self, target: Target) -> dict:
        """Build `target`'s device in the first worker (see `Compiler.prepare`); only before compiling starts."""
        return self._compilers[0].prepare(target)

    def target_config(self, target: Target) -> dict:
        """See `Compiler.target_config` (asked of the first worker)."""
        return self._compilers[0].target_config(target)

    def kill(self) -> None:
        for c in self._compilers:
            c.worker.kill()

    # ------------------------------------------------------------ cache keys

    def _key(self, r: CompileRequest) -> _Key:
        if self.cache is None:
            return _Key(None, "the cache is off", {})
        names, dynamic = imported_modules(r.rendered.source)
        self._resolve(names)
        imports = {n: _covered(self._imports[n], r.rendered) for n in sorted(names)}
        why_not = cacheable(self.mode, r.profile.compiler_options, imports, dynamic, r.inputs is not None)
        if why_not:
            return _Key(None, why_not, imports)
        env = self.environment()
        probe = self._probe
        assert probe is not None  # self._resolve(names) above probed the environment
        material = KeyMaterial(
            source=r.rendered.source,
            target_config=r.target.config_text,
            compiler_options=dict(key_options(r.profile.compiler_options),  # a results file: its content
                                  **({"optional_options": r.optional_options} if r.optional_options else {})),
            mode=self.mode,
            versions={k: env.get(k) if self.mode == "device" else probe["environment"].get(k)
                      for k in ("jax", "jaxlib", "jaxlib_git_hash", "cuda_plugin", "cuda_pjrt", "python")},
            xla_flags=probe["environment"].get("xla_flags", ""),
            env_vars=probe["env_vars"],
            distributions=probe["distributions"],
            imports=imports,
            requires=tuple(getattr(r.rendered, "requires", ())),
            device=env.get("device") if self.mode == "device" else None,
            case_env={name: os.environ.get(name) for name in r.env},
        )
        shareable = shareable_source(r.rendered.source) if r.inputs is None else None
        shared = dataclasses.replace(material, source=shareable).key() if shareable is not None else None
        return _Key(material.key(), None, imports, shared)

    # ------------------------------------------------------------ compiling

    def _run(self, r: CompileRequest, key: _Key) -> Compilation:
        with self._borrow() as c:
            comp = c.compile(r.rendered, r.target, r.profile, inputs=r.inputs, optional_options=r.optional_options)
        with self._lock:
            self.compiled += 1
        if key.key and self.cache is not None:
            self._store(r, key, comp)
        elif key.why_not and self.cache is not None:
            with self._lock:
                self.cache.stats.uncacheable += 1
        return comp

    def _store(self, r: CompileRequest, key: _Key, comp: Compilation) -> None:
        if key.key and self.cache is not None and (comp.ok or comp.unsupported) and not comp.asked_locally:
            self.cache.put(key.key, Entry(comp.hlo, comp.stablehlo, comp.seconds, comp.error, comp.unsupported,
                                          comp.autotune.to_json(full=True) if comp.autotune is not None else None),
                           note={"case": r.rendered.case_id, "target": r.target.name, "profile": r.profile.name,
                                 "mode": self.mode})

    def _follow(self, first: Future, r: CompileRequest, key: _Key) -> Future:
        """`r`'s compilation, derived from `first` (an identical compilation of another case) once it is done;
        compiled on its own if `first` failed (a crash or a timeout may be transient) or was cancelled."""
        out: Future = Future()

        def settle(result: Compilation | None = None, error: BaseException | None = None) -> None:
            if out.set_running_or_notify_cancel():  # False: cancelled, nobody waits for it
                if error is not None:
                    out.set_exception(error)
                else:
                    out.set_result(result)

        def own_done(g: Future) -> None:
            if g.cancelled():
                settle(error=CancelledError())
            else:
                settle(g.result() if g.exception() is None else None, g.exception())

        def first_done(f: Future) -> None:
            comp = None if f.cancelled() or f.exception() is not None else f.result()
            if comp is not None and (comp.ok or comp.unsupported):
                derived = derive(comp, r.rendered.case_id, r.target.name, r.profile.name)
                with self._lock:
                    self.shared += 1
                self._store(r, key, derived)
                settle(derived)
                return
            try:
                self._executor.submit(self._run, r, key).add_done_callback(own_done)
            except RuntimeError as exc:  # the pool is shutting down
                settle(error=exc)

        first.add_done_callback(first_done)
        return out

    @staticmethod
    def _identity(r: CompileRequest) -> tuple:
        return (r.rendered.case_id, hashlib.sha256(r.rendered.source.encode()).hexdigest(), r.target.name,
                r.target.config_text, r.profile.name, r.inputs is not None,
                json.dumps(r.optional_options, sort_keys=True, default=str))

    def _submit(self, r: CompileRequest) -> Future:
        with self._lock:
            pending = self._prefetched.pop(self._identity(r), None)
        if pending is not None:
            return pending
        key = self._key(r)
        if key.key and self.cache is not None:
            entry = self.cache.get(key.key)
            if entry is not None:
                done: Future = Future()
                done.set_result(Compilation(r.rendered.case_id, r.target.name, r.profile.name, self.mode,
                                            hlo=entry.hlo, stablehlo=entry.stablehlo, seconds=entry.seconds,
                                            error=entry.error, unsupported=entry.unsupported, cached=True,
                                            autotune=_cached_coverage(entry, r.profile)))
                if key.shared:
                    with self._lock:
                        self._shared.setdefault(key.shared, done)
                return done
        if key.shared:
            with self._lock:
                first = self._shared.get(key.shared)
            if first is not None:
                return self._follow(first, r, key)
        self._warm_up(r.target)
        future = self._executor.submit(self._run, r, key)
        if key.shared:
            with self._lock:
                self._shared.setdefault(key.shared, future)
        return future

    def _warm_up(self, target: Target) -> None:
        """At the first compile, let every other worker import JAX and build its device meanwhile."""
        with self._lock:
            if self._warmed:
                return
            self._warmed = True
        for _ in range(self.jobs - 1):
            self._executor.submit(self._warm_one, target)

    def _warm_one(self, target: Target) -> None:
        with self._borrow() as c:
            try:
                c.prepare(target)  # import JAX and build the device (Compiler.compile then skips it)
            except WorkerError:
                pass  # the next compile on it restarts it and reports the problem

    def imap(self, requests: Iterable[CompileRequest]) -> Iterator[Compilation]:
        """Compile every request (cache first, then up to `jobs` workers at once); yield in request order."""
        requests = list(requests)
        names: set[str] = set()
        if self.cache is not None:
            for r in requests:
                names |= imported_modules(r.rendered.source)[0]
        self._resolve(names)  # one round trip for the whole batch
        futures = [self._submit(r) for r in requests]
        try:
            for f in futures:
                yield f.result()
        finally:
            for f in futures:
                f.cancel()

    def prefetch(self, requests: Iterable[CompileRequest]) -> None:
        """Start compiling `requests` now; a later `compile()` of the same request takes its result."""
        requests = list(requests)
        names: set[str] = set()
        if self.cache is not None:
            for r in requests:
                names |= imported_modules(r.rendered.source)[0]
        self._resolve(names)
        for r in requests:
            f = self._submit(r)
            with self._lock:
                self._prefetched.setdefault(self._identity(r), f)

    def compile(self, rendered: Rendered, target: Target, profile: Profile, inputs: list[dict] | None = None,
                optional_options: dict | None = None) -> Compilation:
        return self._submit(CompileRequest(rendered, target, profile, inputs, optional_options)).result()

    def cache_summary(self) -> str:
        if self.cache is None:
            return f"compile cache off; {self.compiled} compiled"
        s = self.cache.stats
        text = f"compile cache: {s.hits} hit(s), {self.compiled} compiled"
        if self.shared:
            text += f", {self.shared} shared (an identical compilation of another case)"
        if s.uncacheable:
            text += f" ({s.uncacheable} not cacheable)"
        if s.corrupt:
            text += f", {s.corrupt} corrupt entr{'y' if s.corrupt == 1 else 'ies'} replaced"
        return text + f" [{self.cache.root}]"

    def _drop_prefetched(self) -> None:
        """Cancel what was prefetched and has not started (a started compile runs to its end)."""
        with self._lock:
            pending = list(self._prefetched.values())
            self._prefetched.clear()
        for f in pending:
            f.cancel()

    def close(self) -> None:
        self._drop_prefetched()
        self._executor.shutdown(wait=True, cancel_futures=True)
        for c in self._compilers:  # let every worker start exiting before waiting for any
            proc = c.worker.proc
            if proc is not None and proc.poll() is None and proc.stdin:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for c in self._compilers:
            c.close()
        if self.cache is not None and self.cache.stats.writes:
            self.cache.evict()

    def __enter__(self) -> "CompilerPool":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:  # interrupted (Ctrl-C, SIGTERM, SIGHUP) or failed: do not wait for compiles
            self.abort()
        else:
            self.close()

    def abort(self) -> None:
        """Stop now: drop what has not started, kill every worker (a running compile ends with the worker)."""
        self._drop_prefetched()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.kill()


def _cached_coverage(entry: Entry, profile: Profile) -> "Coverage | None":
    """A cached replay's coverage, naming the results file this run loads (the key holds its content, not its path)."""
    if entry.autotune is None:
        return None
    cov = Coverage.from_json(entry.autotune)
    path = str(profile.compiler_options.get(LOAD_OPTION) or "")
    return dataclasses.replace(cov, results=shown_path(path)) if cov.results and path else cov


def _covered(how: str, rendered: Rendered) -> str:
    """A project module a python case imports, whose files the key holds (`source:` + their digest), or `how`."""
    modules = rendered.modules
    if how.startswith("local:") and modules.complete and modules.covers(how[len("local:"):]):
        return "source:" + modules.digest()
    return how
