"""The deviceless `default` profile: compile as the device would, replaying the device's autotune results.

A deviceless compile cannot autotune; `default` deviceless compiles with XLA's defaults, loads the results
file captured on the device for this target and JAX release when one exists
(`goldens/<target>/autotune/<jax>.txt`, fp8_check.targets.autotune_results), and reports how many of the
program's autotuned decisions the file covered and why each other one was missing. The worker runs with
XLA's autotune lookup log on (`autotune_results.LOG_ENV`); what it logs during one compile is read back from
its stderr.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fp8_check.compile.render import Rendered
from fp8_check.compile.service import CHECKOUT, DEFAULT_TIMEOUT, Compilation, Compiler
from fp8_check.core import files
from fp8_check.targets import Profile, Target, autotune_results as ar

PROFILE_NAME = "default"


@dataclass(frozen=True)
class Replayed:
    """One deviceless `default` compile: the compilation and what the results file decided of it."""

    compilation: Compilation
    coverage: ar.Coverage


def find_results(target: str, jax_version: str, goldens_root: Path | None = None) -> Path | None:
    """The committed results file for `target` and JAX `jax_version`, or None when there is none (the checkout's
    goldens/ by default; an installed fp8-check has no checkout: then ./goldens). What is there is read and checked
    (`ar.load_results`, confined to the goldens folder): the path returned is the checked file, links resolved, which
    XLA then reads; AutotuneResultsError (one line, no content) for one that is not a results file."""
    return results_for(target, jax_version, goldens_root=goldens_root)


def results_for(target: str, jax_version: str, given: Path | None = None, goldens_root: Path | None = None) -> Path | None:
    """The one way to the results file a deviceless `default` compile replays: `given` (a file, or a folder holding
    <jax>.txt; read wherever it is, but only a regular file), else the committed one for `target` and this JAX
    (confined to the goldens folder), else None. The file is read through core/files.py and parsed here, so a link
    to /proc/self/environ, a pipe, a binary or a huge file is one AutotuneResultsError line that quotes none of it;
    the returned path is the checked file with its links resolved (what XLA reads)."""
    if given is not None:
        path = Path(given)
        path = path / f"{jax_version}.txt" if path.is_dir() else path
        if not path.exists() and not path.is_symlink():
            raise ar.AutotuneResultsError(f"{files.shown_path(path)}: no such file")
        ar.load_results(path)
        return path.resolve()
    root = Path(goldens_root or (CHECKOUT or Path()) / "goldens")
    path = ar.results_path(root, target, jax_version)
    if not path.exists() and not path.is_symlink():
        return None
    ar.load_results(path, home=root)
    return path.resolve()


def replay_profile(results: Path) -> Profile:
    """`default` for a deviceless compile: autotuning as XLA does it without a GPU, replaying `results`."""
    options = ar.replay_options(results)
    return Profile(PROFILE_NAME, options, deviceless=True,
                   description="XLA's defaults, deviceless: the device's autotune results replayed where a file has them")


class ReplayCompiler:
    """Deviceless compiles of the `default` profile in a worker whose XLA logs every autotune lookup."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, python: str | None = None, codegen_threads: int | None = None):
        self.compiler = Compiler("deviceless", python=python, timeout=timeout, codegen_threads=codegen_threads)
        self.compiler.worker.extra_env.update(ar.LOG_ENV)
        # Without a file XLA looks nothing up: an empty one makes it look up (and log) every decision
        self._none = Path(tempfile.mkdtemp(prefix="fp8-check-autotune-")) / "none.txt"
        self._none.write_text(ar.format_results([]))
        self._loads: tuple[str, int] | None = None  # the file the worker's XLA has read

    def environment(self) -> dict:
        return self.compiler.environment()

    def compile(self, rendered: Rendered, target: Target, results: Path | None,
                optional_options: dict | None = None) -> Replayed:
        """Compile `rendered` for `target`, replaying `results` (None: no file for this target and release)."""
        parsed = ar.load_results(results) if results else None  # AutotuneResultsError: a file that is not one
        worker = self.compiler.worker
        # XLA reads a results file once per process, into a process-wide cache: another file needs a fresh worker
        loads = (str(results or self._none), (results or self._none).stat().st_mtime_ns)
        if loads != self._loads and worker.proc is not None:
            worker.close()
        self._loads = loads
        pid, mark = (worker.proc.pid if worker.proc else None), worker.stderr_size()
        comp = self.compiler.compile(rendered, target, replay_profile(results or self._none),
                                     optional_options=optional_options)
        log = worker.stderr_since(mark if worker.proc is not None and worker.proc.pid == pid else 0)
        return Replayed(comp, ar.coverage(log, parsed))

    def close(self) -> None:
        self.compiler.close()
        shutil.rmtree(self._none.parent, ignore_errors=True)

    def __enter__(self) -> "ReplayCompiler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
