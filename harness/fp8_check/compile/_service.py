"""Compile rendered cases in a long-lived worker subprocess.

`Compiler` owns one `fp8_check.worker.serve` process per mode. A case that crashes XLA
kills only the worker: the case gets the error (and the tail of the worker's
stderr) and the next case starts a fresh worker.
"""

from __future__ import annotations

import enum
import json
import os
import queue
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterable, Iterator, Protocol

from fp8_check.cases import Rendered
from fp8_check.compile._replay_worker import ReplayState
from fp8_check.core import checkout, package_path
from fp8_check.platforms import Profile
from fp8_check.targets import AutotuneResultsError, Coverage, Target

CHECKOUT = checkout()  # None when installed


PACKAGE = __name__.split(".")[0]  # the import name (`fp8_check`; the code lives in the folder harness/)
PACKAGE_DIR = package_path().resolve()


def harness_path() -> Path:
    """The directory the worker imports the package from (through PYTHONPATH).

    A private directory holding only a link named after the import name to the package's folder:
    putting site-packages itself on PYTHONPATH would shadow the JAX of a per-version environment
    (`fp8-check matrix`), and in a checkout the folder (harness/) is not named like the package.
    A checkout whose folder carries the import name is used as it is.
    """
    global _HARNESS_LINK
    if CHECKOUT is not None:  # harness/fp8_check: the folder carries the import name
        return CHECKOUT / "harness"
    if _HARNESS_LINK is None or not (_HARNESS_LINK / PACKAGE).exists():
        import atexit

        link_dir = Path(tempfile.mkdtemp(prefix="fp8-check-package-"))
        (link_dir / PACKAGE).symlink_to(PACKAGE_DIR, target_is_directory=True)
        if _HARNESS_LINK is None:
            atexit.register(remove_harness_link)
        _HARNESS_LINK = link_dir
    return _HARNESS_LINK


def remove_harness_link() -> None:
    """Remove the directory `harness_path` made: at exit, and before a process that leaves with `os._exit`
    (`fp8_check.compile._check_process`) does."""
    global _HARNESS_LINK
    if _HARNESS_LINK is not None:
        shutil.rmtree(_HARNESS_LINK, ignore_errors=True)
        _HARNESS_LINK = None


_HARNESS_LINK: Path | None = None

DEFAULT_TIMEOUT = 900.0  # seconds one case may compile (`--timeout`)
STARTUP_TIMEOUT = 600.0  # seconds a fresh worker may take to import JAX and build a target's device


class WorkerError(RuntimeError):
    """The worker died or stopped answering (`timed_out`: it did not answer within the timeout)."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


class FailureKind(enum.Enum):
    """Why a compilation has no HLO: a value, decided where the failure happens (never read back from its text)."""

    COMPILE_ERROR = "compile error"  # JAX or XLA raised (the case's own error, or XLA refusing it)
    CRASH = "crash"  # the worker died (an XLA abort, a segfault)
    TIMEOUT = "timeout"  # no answer within --timeout
    UNSUPPORTED = "unsupported"  # this environment lacks what the case needs (a dependency, an API, an XLA flag)
    BROKEN_ENVIRONMENT = "broken environment"  # the worker could not build the target's device


@dataclass(frozen=True)
class Failure:
    kind: FailureKind
    message: str  # the full error text


@dataclass
class Compilation:
    case_id: str
    target: str
    profile: str
    mode: str
    hlo: str | None = None
    stablehlo: str | None = None
    seconds: float = 0.0
    error: str | None = None
    # Numerics (device mode): the executable's outputs on the requested inputs,
    # as encoded by the worker ({dtype, shape, data: base64}), or why it did not run.
    outputs: list[dict] | None = None
    execute_error: str | None = None
    # Why the case cannot compile in this environment (UNSUPPORTED): an optional dependency it declares
    # (`requires:`) is not installed, its block-scaling API or an XLA flag it sets is missing. Equal to `error`.
    unsupported: str | None = None
    kind: FailureKind | None = None  # with `error`: what failed (default: a compile error, or unsupported)

    cached: bool = False  # answered from the compile cache (seconds: the original compile's)
    shared_from: str | None = None  # answered from the identical compilation of this case (harness/fp8_check/compile/_sharing.py)
    autotune: Coverage | None = None  # a replay's (deviceless `default`): what its autotune results file decided
    # What the case's module asked JAX at import that this machine answered, not the target (a backend): never cached
    asked_locally: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def failure(self) -> Failure | None:
        """None when it compiled; else what kind of failure, as a value."""
        if self.error is None:
            return None
        if self.unsupported is not None:
            return Failure(FailureKind.UNSUPPORTED, self.unsupported)
        return Failure(self.kind or FailureKind.COMPILE_ERROR, self.error)


@dataclass(frozen=True)
class CompileRequest:
    """One compilation: `rendered` for `target` under `profile`; with `inputs`, also executed (device mode)."""

    rendered: Rendered
    target: Target
    profile: Profile
    inputs: list[dict] | None = None
    optional_options: dict | None = None  # XLA flags set only where the installed XLA has them
    # the case's `requirements:`: compiled in a cached environment that has them (harness/fp8_check/versions/_requirement_envs.py);
    # a compiler of one environment compiles it in its own
    requirements: tuple[str, ...] = ()
    env: tuple[str, ...] = ()  # the case's `env:` names: their values now are part of the compile cache's key


class CompileService(Protocol):
    """What compiles cases: the single worker (`Compiler`) and the pool (`pool.CompilerPool`) both provide it.

    Typed requests in (`CompileRequest`, or `rendered` + target + profile), typed replies out
    (`Compilation`, with a `Failure` value when it failed); the worker's JSON protocol stays
    inside this module and the pool."""

    mode: str

    def environment(self) -> dict: ...

    def prepare(self, target: Target) -> dict: ...

    def compile(self, rendered: Rendered, target: Target, profile: Profile, inputs: list[dict] | None = None,
                optional_options: dict | None = None) -> Compilation: ...

    def imap(self, requests: Iterable[CompileRequest]) -> Iterator[Compilation]: ...

    def target_config(self, target: Target) -> dict: ...

    def close(self) -> None: ...


class _Spawner:
    """Starts the worker processes, all from one thread that lives as long as this process.

    A worker asks Linux for SIGTERM when its parent dies (PR_SET_PDEATHSIG), and Linux means the
    *thread* that started it: a worker started from a pool's thread was killed when that thread
    ended, at the pool's close, before it could remove its dump directory."""

    _lock = threading.Lock()
    _requests: "queue.SimpleQueue[tuple[Future, list[str], dict]] | None" = None

    @classmethod
    def popen(cls, argv: list[str], **kwargs) -> subprocess.Popen:
        with cls._lock:
            if cls._requests is None:
                cls._requests = queue.SimpleQueue()
                threading.Thread(target=cls._serve, args=(cls._requests,), name="fp8-worker-spawner",
                                 daemon=True).start()
            requests = cls._requests
        started: Future = Future()
        requests.put((started, argv, kwargs))
        return started.result()

    @staticmethod
    def _serve(requests: "queue.SimpleQueue[tuple[Future, list[str], dict]]") -> None:
        while True:
            started, argv, kwargs = requests.get()
            try:
                started.set_result(subprocess.Popen(argv, **kwargs))
            except BaseException as exc:  # e.g. the interpreter is missing: the caller gets it
                started.set_exception(exc)


class Worker:
    def __init__(self, mode: str, python: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 codegen_threads: int | None = None):
        self.mode = mode
        self.codegen_threads = codegen_threads  # None: XLA's default (every core); see aot.prepare_environment
        self.python = python or sys.executable
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self._stderr: IO[bytes] | None = None
        self.dump_dir: str | None = None  # XLA's dumps, made here and removed here once the process is gone
        self.case_dir = os.getcwd()  # python cases' modules resolve from here (and PYTHONPATH)
        self.extra_env: dict[str, str] = {}  # set over the inherited environment (autotune replay: XLA's lookup log)

    def start(self) -> None:
        self._forget()
        self._stderr = tempfile.TemporaryFile(mode="w+b")
        self.dump_dir = tempfile.mkdtemp(prefix="fp8-check-dump-")
        env = dict(os.environ)
        # The worker imports the package from this checkout (or installed package), whatever environment
        # it runs in, and `kind: python` callables from where user_modules.source_roots finds them (this
        # checkout, when it is one, and the directory the run started in: the user's project) or
        # PYTHONPATH, as pytest does.
        checkout = [str(CHECKOUT)] if CHECKOUT is not None else []
        paths = [str(harness_path()), *checkout, self.case_dir] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        env.update(self.extra_env)
        if self.mode == "device":  # workers (and `-j N`) share the GPU: none takes JAX's default 75 % of its memory
            env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        self.proc = _Spawner.popen(
            [self.python, "-m", f"{PACKAGE}.worker.serve", self.mode, "--dump-dir", self.dump_dir,
             *(["--codegen-threads", str(self.codegen_threads)] if self.codegen_threads else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            cwd=str(harness_path()),
        )

    def stderr_tail(self, limit: int = 4000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def stderr_size(self) -> int:
        """How many bytes the worker has written to stderr so far (a mark for `stderr_since`)."""
        return self._stderr.seek(0, os.SEEK_END) if self._stderr is not None else 0

    def stderr_since(self, mark: int) -> str:
        """What the worker wrote to stderr after `mark` (`stderr_size`); all of it after a restart."""
        if self._stderr is None:
            return ""
        self._stderr.seek(mark if mark <= self.stderr_size() else 0)
        return self._stderr.read().decode("utf-8", "replace")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def request(self, payload: dict, timeout: float | None = None) -> dict:
        timeout = self.timeout if timeout is None else timeout
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        assert self.proc and self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write((json.dumps(payload) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died("the worker exited before taking the request")
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            self.proc.kill()
            self.proc.wait()
            return self._died(f"no answer within {timeout:g} s (--timeout)", timed_out=True)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            return self._died(f"the worker exited with status {self.proc.returncode}")
        return json.loads(line)

    def _died(self, why: str, timed_out: bool = False) -> dict:
        tail = self.stderr_tail().strip()
        self.proc = None
        self._forget()
        raise WorkerError(why + (f": {tail.splitlines()[-1].strip()[:300]}\n{tail}" if tail else ""), timed_out=timed_out)

    def _forget(self) -> None:
        """Remove the dump directory of a process that is gone (it may have been killed before removing it)."""
        if self.dump_dir is not None:
            shutil.rmtree(self.dump_dir, ignore_errors=True)
            self.dump_dir = None

    def kill(self) -> None:
        """Stop the worker now (interrupted run): it may be in the middle of a compile."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self._forget()

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self._forget()


class Compiler:
    """Compiles rendered cases for (target, profile) in a worker for `mode`; a profile that replays autotune results
    in a worker of its own, one per file, which logs every lookup (fp8_check.compile._replay_worker)."""

    def __init__(self, mode: str, python: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 codegen_threads: int | None = None):
        self.mode = mode
        self.timeout = timeout
        self.worker = Worker(mode, python=python, timeout=timeout, codegen_threads=codegen_threads)
        self._environment: dict | None = None
        self._prepared: set[tuple[int, str]] = set()  # (worker pid, target config) with a device built
        self.replay = ReplayState()  # the autotune results file the worker's XLA loads (autotune_replay)

    def environment(self) -> dict:
        if self._environment is None:
            reply = self.worker.request({"op": "environment"}, timeout=max(self.timeout, STARTUP_TIMEOUT))
            if not reply.get("ok"):
                raise WorkerError(reply.get("traceback") or reply.get("error", "unknown error"))
            self._environment = reply["environment"]
        return self._environment

    def compile(self, rendered: Rendered, target: Target, profile: Profile, inputs: list[dict] | None = None,
                optional_options: dict | None = None) -> Compilation:
        """Compile `rendered`; with `inputs` (encoded arrays, see `numerics.encode`) also execute it (device mode).

        `optional_options` are XLA flags set only where the installed XLA has them; a missing
        one makes the compilation UNSUPPORTED (`unsupported` says which), never an abort.
        """
        out = Compilation(rendered.case_id, target.name, profile.name, self.mode)
        request = {
            "op": "compile",
            "case_id": rendered.case_id,
            "source": rendered.source,
            "target_config": target.config_text,
            "target_versions": target.versions_dict(),
            "compiler_options": profile.compiler_options,
            "requires": list(rendered.requires),
        }
        if inputs is not None:
            request["inputs"] = inputs
        if optional_options:
            request["optional_options"] = optional_options
        return self._send(out, request, target, profile, prepare=True)

    def _send(self, out: Compilation, request: dict, target: Target, profile: Profile, prepare: bool) -> Compilation:
        """Send one compile request to a worker right for `profile`'s autotune replay; fill `out` (and its coverage)."""
        try:
            loads = self.replay.ready(self.worker, profile)
        except (OSError, AutotuneResultsError) as exc:
            out.error = f"autotune results: {exc}"
            return out
        try:
            # A fresh worker's start-up and a target's device do not count against the case's timeout.
            proc = self.worker.proc
            if prepare and (proc is None or not self.worker.alive or (proc.pid, target.config_text) not in self._prepared):
                ready = self.prepare(target)
                if not ready.get("ok"):
                    out.error, out.kind = ready.get("error", "unknown error"), FailureKind.BROKEN_ENVIRONMENT
                    return out
            mark = self.replay.mark(self.worker)
            out = _answer(out, self.worker.request(request))
        except WorkerError as exc:
            out.error = f"worker crashed: {exc}"
            out.kind = FailureKind.TIMEOUT if exc.timed_out else FailureKind.CRASH
            return out
        if loads and out.ok:
            try:
                out.autotune = self.replay.coverage(self.worker, mark)
            except AutotuneResultsError as exc:
                out.error = str(exc)
        return out

    def compile_exported(self, name: str, exported: bytes, target: Target, profile: Profile,
                         sharding: dict | None = None) -> Compilation:
        """Compile a callable serialized with `jax.export` (`Exported.serialize()`) by the caller (fp8_check.api);
        `sharding` (fp8_check.compile._export.sharding_of): its mesh and input partition specs, for a multi-device target."""
        import base64

        out = Compilation(name, target.name, profile.name, self.mode)
        request = {
            "op": "compile_exported",
            "exported": base64.b64encode(bytes(exported)).decode(),
            "target_config": target.config_text,
            "target_versions": target.versions_dict(),
            "compiler_options": profile.compiler_options,
        }
        if sharding:
            request["sharding"] = sharding
        return self._send(out, request, target, profile, prepare=False)

    def prepare(self, target: Target) -> dict:
        """Start the worker if needed and build `target`'s device (the worker's reply; WorkerError if it died)."""
        reply = self.worker.request({"op": "prepare", "target_config": target.config_text},
                                    timeout=max(self.timeout, STARTUP_TIMEOUT))
        if reply.get("ok") and self.worker.proc is not None:
            self._prepared.add((self.worker.proc.pid, target.config_text))
        return reply

    def target_config(self, target: Target) -> dict:
        """The spec exactly as this worker's XLA gets it ({config, jax, dnn_field}); RuntimeError if it fails."""
        reply = self.worker.request({"op": "target_config", "target_config": target.config_text,
                                     "target_versions": target.versions_dict()})
        if not reply.get("ok"):
            raise RuntimeError(reply.get("error", "unknown error"))
        return reply

    def topology(self) -> dict:
        """The local GPU's topology as the worker sees it (device mode; `fp8-check target capture`)."""
        reply = self.worker.request({"op": "topology"})
        if not reply.get("ok"):
            raise WorkerError(reply.get("error", "unknown error"))
        return reply["topology"]

    def imap(self, requests) -> "Iterator[Compilation]":
        """Compile `requests` (CompileRequest) one after the other, yielding in order (see pool.CompilerPool)."""
        for r in requests:
            yield self.compile(r.rendered, r.target, r.profile, inputs=r.inputs, optional_options=r.optional_options)

    def close(self) -> None:
        self.worker.close()

    def __enter__(self) -> "Compiler":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:  # interrupted (Ctrl-C, SIGTERM, SIGHUP) or failed: do not wait for the worker
            self.worker.kill()
        else:
            self.close()


def _answer(out: Compilation, reply: dict) -> Compilation:
    """Fill `out` from the worker's reply to a compile request."""
    if reply.get("ok"):
        out.hlo, out.stablehlo, out.seconds = reply["hlo"], reply["stablehlo"], reply["seconds"]
        out.outputs, out.execute_error = reply.get("outputs"), reply.get("execute_error")
        out.asked_locally = list(reply.get("asked_locally") or [])
    elif reply.get("unsupported"):
        out.error = out.unsupported = reply["unsupported"]
    else:
        out.error = reply.get("error", "unknown error")
    return out
