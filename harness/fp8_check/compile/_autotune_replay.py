"""The deviceless `default` profile: compile as the device would, replaying the device's autotune results.

A deviceless compile cannot autotune; `default` deviceless compiles with XLA's defaults, loads the results
file captured on the device for this target and JAX release when one exists
(`goldens/<target>/autotune/<jax>.txt`, fp8_check.targets._autotune_results), else an empty one (the stand-in),
and reports how many of the program's autotuned decisions the file covered and why each other one was
missing. `Compiler` (fp8_check.compile._service) does the work for any request whose profile loads a results
file: a worker of its own with XLA's autotune lookup log on (`autotune_results.LOG_ENV`), a fresh one per file
(XLA reads a file once per process), and the coverage read back from what it logged during the compile
(`Compilation.autotune`). The compile cache keys on the file's content (`autotune_results.key_options`).

Every entry point gets `default` deviceless through `default_profile_for`: `run`, `bless`, `matrix`, `bisect` and the
pytest plugin in the runner's requests, `check` and the API in theirs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fp8_check.cases import Rendered
from fp8_check.compile._service import CHECKOUT, DEFAULT_TIMEOUT, Compilation, Compiler
from fp8_check.core import shown_path
from fp8_check.platforms import Profile
from fp8_check.targets import AutotuneResultsError, Coverage, Target, load_results, replay_options, results_path, stand_in

PROFILE_NAME = "default"


@dataclass(frozen=True)
class Replayed:
    """One deviceless `default` compile: the compilation and what the results file decided of it."""

    compilation: Compilation
    coverage: Coverage


def replays_autotune(profile: Profile | str, target: Target) -> bool:
    """Whether a deviceless compile of `profile` for `target` replays autotune results (`default` on a platform
    whose XLA replays them: NVIDIA)."""
    name = profile if isinstance(profile, str) else profile.name
    return name == PROFILE_NAME and target.platform.replays_autotune


def find_results(target: str, jax_version: str, goldens_root: Path | None = None) -> Path | None:
    """The committed results file for `target` and JAX `jax_version`, or None when there is none (the checkout's
    goldens/ by default; an installed fp8-check has no checkout: then ./goldens). What is there is read and checked
    (`ar.load_results`, confined to the goldens folder): the path returned is the checked file, links resolved, which
    XLA then reads; AutotuneResultsError (one line, no content) for one that is not a results file."""
    return results_for(target, jax_version, goldens_root=goldens_root)


def results_for(target: str, jax_version: str, given: Path | None = None, goldens_root: Path | None = None) -> Path | None:
    """The one way to the results file a deviceless `default` compile replays: `given` (a file, or a folder holding
    <jax>.txt; read wherever it is, but only a regular file), else the committed one for `target` and this JAX
    (confined to the goldens folder), else None. The file is read through core/_files.py and parsed here, so a link
    to /proc/self/environ, a pipe, a binary or a huge file is one AutotuneResultsError line that quotes none of it;
    the returned path is the checked file with its links resolved (what XLA reads)."""
    if given is not None:
        path = Path(given)
        path = path / f"{jax_version}.txt" if path.is_dir() else path
        if not path.exists() and not path.is_symlink():
            raise AutotuneResultsError(f"{shown_path(path)}: no such file")
        load_results(path)
        return path.resolve()
    root = Path(goldens_root or (CHECKOUT or Path()) / "goldens")
    path = results_path(root, target, jax_version)
    if not path.exists() and not path.is_symlink():
        return None
    load_results(path, home=root)
    return path.resolve()


def replay_profile(results: Path | None) -> Profile:
    """`default` for a deviceless compile: autotuning as XLA does it without a GPU, replaying `results` (None: no
    file for this target and release; the stand-in is loaded)."""
    options = replay_options(Path(results).resolve() if results else stand_in())  # the worker runs elsewhere
    return Profile(PROFILE_NAME, options, deviceless=True,
                   description="XLA's defaults, deviceless: the device's autotune results replayed where a file has them")


def default_profile_for(target: Target, jax_version: str, goldens_root: Path | None = None) -> Profile:
    """The deviceless `default` for `target` and JAX `jax_version`: replaying the results file under
    `goldens_root` (`<target>/autotune/<jax>.txt`) when there is one."""
    return replay_profile(find_results(target.name, jax_version, goldens_root))


class ReplayCompiler:
    """Deviceless compiles of the `default` profile, each with its coverage (one `Compiler`, which does the work)."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, python: str | None = None, codegen_threads: int | None = None):
        self.compiler = Compiler("deviceless", python=python, timeout=timeout, codegen_threads=codegen_threads)

    def environment(self) -> dict:
        return self.compiler.environment()

    def compile(self, rendered: Rendered, target: Target, results: Path | None,
                optional_options: dict | None = None) -> Replayed:
        """Compile `rendered` for `target`, replaying `results` (None: no file for this target and release)."""
        if results:
            load_results(results)  # AutotuneResultsError: a file that is not one
        comp = self.compiler.compile(rendered, target, replay_profile(results), optional_options=optional_options)
        coverage = comp.autotune or Coverage(str(results or ""), 0, 0)
        return Replayed(comp, coverage)

    def close(self) -> None:
        self.compiler.close()

    def __enter__(self) -> "ReplayCompiler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
