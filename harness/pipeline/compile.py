"""Stage 3: compile rendered cases in a long-lived worker subprocess.

`Compiler` owns one `harness.pipeline.worker` process per mode. A case that crashes XLA
kills only the worker: the case gets the error (and the tail of the worker's
stderr) and the next case starts a fresh worker.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from harness.pipeline.render import Rendered
from harness.targets import Profile, Target

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


PACKAGE = __name__.split(".")[0]  # the import name (`fp8_check`; the code lives in the folder harness/)
PACKAGE_DIR = Path(__file__).resolve().parent.parent


def harness_path() -> Path:
    """The directory the worker imports the package from (through PYTHONPATH).

    A private directory holding only a link named after the import name to the package's folder:
    putting site-packages itself on PYTHONPATH would shadow the JAX of a per-version environment
    (`fp8-check matrix`), and in a checkout the folder (harness/) is not named like the package.
    A checkout whose folder carries the import name is used as it is.
    """
    global _HARNESS_LINK
    if (REPO_ROOT / "pyproject.toml").is_file() and PACKAGE_DIR == (REPO_ROOT / PACKAGE).resolve():
        return REPO_ROOT
    if _HARNESS_LINK is None or not (_HARNESS_LINK / PACKAGE).exists():
        import atexit
        import shutil

        link_dir = Path(tempfile.mkdtemp(prefix="fp8-check-package-"))
        (link_dir / PACKAGE).symlink_to(PACKAGE_DIR, target_is_directory=True)
        atexit.register(shutil.rmtree, link_dir, True)
        _HARNESS_LINK = link_dir
    return _HARNESS_LINK


_HARNESS_LINK: Path | None = None

DEFAULT_TIMEOUT = 900.0  # seconds one case may compile (`--timeout`)
STARTUP_TIMEOUT = 600.0  # seconds a fresh worker may take to import JAX and build a target's device


class WorkerError(RuntimeError):
    """The worker died or stopped answering."""


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
    # Set when an optional dependency the case declares (`requires:`) is not installed: UNSUPPORTED.
    unsupported: str | None = None

    cached: bool = False  # answered from the compile cache (seconds: the original compile's)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class CompileRequest:
    """One compilation: `rendered` for `target` under `profile`; with `inputs`, also executed (device mode)."""

    rendered: Rendered
    target: Target
    profile: Profile
    inputs: list[dict] | None = None
    optional_options: dict | None = None  # XLA flags set only where the installed XLA has them


class Worker:
    def __init__(self, mode: str, python: str | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.mode = mode
        self.python = python or sys.executable
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self._stderr = None
        self.case_dir = os.getcwd()  # python cases' modules resolve from here (and PYTHONPATH)

    def start(self) -> None:
        self._stderr = tempfile.TemporaryFile(mode="w+b")
        env = dict(os.environ)
        # The worker imports `harness` from this checkout (or installed package), whatever environment
        # it runs in, and `kind: python` callables from the directory the run started in (the user's
        # project) or PYTHONPATH, as pytest does.
        paths = [str(harness_path()), self.case_dir] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        self.proc = subprocess.Popen(
            [self.python, "-m", f"{PACKAGE}.pipeline.worker", self.mode],
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
            return self._died(f"no answer within {timeout:g} s (--timeout)")
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            return self._died(f"the worker exited with status {self.proc.returncode}")
        return json.loads(line)

    def _died(self, why: str) -> dict:
        tail = self.stderr_tail().strip()
        self.proc = None
        raise WorkerError(why + (":\n" + tail if tail else ""))

    def kill(self) -> None:
        """Stop the worker now (interrupted run): it may be in the middle of a compile."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


class Compiler:
    """Compiles rendered cases for (target, profile) in a worker for `mode`."""

    def __init__(self, mode: str, python: str | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.mode = mode
        self.timeout = timeout
        self.worker = Worker(mode, python=python, timeout=timeout)
        self._environment: dict | None = None
        self._prepared: set[tuple[int, str]] = set()  # (worker pid, target config) with a device built

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
        one makes the compilation fail with 'UnsupportedFlag: …' (UNSUPPORTED), never an abort.
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
        try:
            # A fresh worker's start-up and a target's device do not count against the case's timeout.
            if not self.worker.alive or (self.worker.proc.pid, target.config_text) not in self._prepared:
                ready = self.prepare(target)
                if not ready.get("ok"):
                    out.error = ready.get("error", "unknown error")
                    return out
            return _answer(out, self.worker.request(request))
        except WorkerError as exc:
            out.error = f"worker crashed: {exc}"
            return out

    def compile_exported(self, name: str, exported: bytes, target: Target, profile: Profile) -> Compilation:
        """Compile a callable serialized with `jax.export` (`Exported.serialize()`) by the caller (harness.api)."""
        import base64

        out = Compilation(name, target.name, profile.name, self.mode)
        request = {
            "op": "compile_exported",
            "exported": base64.b64encode(bytes(exported)).decode(),
            "target_config": target.config_text,
            "target_versions": target.versions_dict(),
            "compiler_options": profile.compiler_options,
        }
        try:
            return _answer(out, self.worker.request(request))
        except WorkerError as exc:
            out.error = f"worker crashed: {exc}"
            return out

    def prepare(self, target: Target) -> dict:
        """Start the worker if needed and build `target`'s device (the worker's reply; WorkerError if it died)."""
        reply = self.worker.request({"op": "prepare", "target_config": target.config_text},
                                    timeout=max(self.timeout, STARTUP_TIMEOUT))
        if reply.get("ok"):
            self._prepared.add((self.worker.proc.pid, target.config_text))
        return reply

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
    elif reply.get("unsupported"):
        out.error = out.unsupported = reply["unsupported"]
    else:
        out.error = reply.get("error", "unknown error")
    return out
