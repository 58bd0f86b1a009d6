"""pytest plugin (entry point `pytest11: fp8_check`): fp8-check case files as pytest items.

    pytest cases/                       # every case x target x profile is a test item
    pytest cases/ -k relu -x --junitxml=out.xml -n 2

Which YAML files are collected — never arbitrary YAML of another project:
- a `*.yaml`/`*.yml` file is collected only if it is an fp8-check case file (a
  top-level `cases:` key), AND
- it lies under a directory named `cases` whose parent also has a `goldens`
  directory (the fp8-check project layout), or pytest was given `--fp8-check`.
`--no-fp8-check` (or `-p no:fp8_check`) turns collection off. Python test files
are never touched, so the project's own `pytest tests` runs as before.

Outcomes map to pytest's: PASS passes; FAIL, UNRESOLVED, NEW and XPASS fail
(with the field diffs or the error); XFAIL is xfail (known issue); UNSUPPORTED is
a skip with the reason. Options: --fp8-target (default h100), --fp8-profile
(default: every profile the mode supports; the `fp8` fixture: cublas), --fp8-mode (default auto),
--fp8-goldens (default: the `goldens` directory beside `cases`; the `fp8` fixture: <rootdir>/goldens).

A pool of compile workers per pytest process (`--fp8-jobs N`, default: the number
of cores), behind the compile cache (`--fp8-no-cache` bypasses it; see
harness/fp8_check/compile/_cache.py). At the first item the canary runs for every target,
then every collected item's compilation is started ahead, in item order, so the
pool keeps all workers busy while pytest reports items one by one. Under
pytest-xdist each xdist worker runs one compile worker and compiles on demand
(xdist already runs items in parallel).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from fp8_check import platforms, run
from fp8_check.cases import CaseError, load_file
from fp8_check.compile import CompilerPool, PoolOptions, cpu_only_without_gpu
from fp8_check.run import CanaryGate, canary_applies, plan, prefetch, request_for, unsupported_reason
from fp8_check.verdict import PASS, UNRESOLVED, UNSUPPORTED, XFAIL

if TYPE_CHECKING:  # pytest's failure representation is not exported by name
    from _pytest._code.code import TerminalRepr

_CASES_KEY = re.compile(r"^cases\s*:", re.M)


def pytest_addoption(parser):
    group = parser.getgroup("fp8-check", "fp8-check case files")
    group.addoption("--fp8-check", action="store_true", default=None,
                    help="collect fp8-check case files (top-level 'cases:') wherever they are")
    group.addoption("--no-fp8-check", action="store_false", dest="fp8_check",
                    help="never collect fp8-check case files")
    group.addoption("--fp8-target", default=platforms.default_target(), help=f"target(s), comma-separated (default: {platforms.default_target()})")
    group.addoption("--fp8-profile", default=None, help="profile(s), comma-separated "
                    f"(default: every profile the mode supports for case files; {platforms.default_profile()} for the fp8 fixture)")
    group.addoption("--fp8-mode", default="auto", choices=("auto", "deviceless", "device"), help="compile mode (default: auto)")
    group.addoption("--fp8-goldens", default=None, help="goldens directory (default: the 'goldens' beside 'cases' for case files; <rootdir>/goldens for the fp8 fixture)")
    group.addoption("--fp8-jobs", type=int, default=None, help="compile workers (default: the number of cores; 1 under xdist)")
    group.addoption("--fp8-no-cache", action="store_true", default=False, help="bypass the compile cache")
    group.addoption("--fp8-bless", action="store_true", default=False,
                    help="the fp8 fixture's check_golden records the goldens instead of comparing")


def _project_root(path: Path) -> Path | None:
    """The directory holding both `cases/` (an ancestor of `path`) and `goldens/`, if any."""
    for parent in path.parents:
        if parent.name == "cases" and (parent.parent / "goldens").is_dir():
            return parent.parent
    return None


def _is_case_file(path: Path) -> bool:
    try:
        return bool(_CASES_KEY.search(path.read_text(errors="replace")))
    except OSError:
        return False


def pytest_configure(config):
    # Before any test module imports JAX: on a machine without a GPU, JAX's CPU backend, quietly (no cuInit
    # traceback from the CUDA plugin). Nothing changes with a GPU, with JAX_PLATFORMS set, or with JAX already up.
    cpu_only_without_gpu()


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    flag = parent.config.getoption("fp8_check")
    if flag is False:
        return None
    if not flag and _project_root(file_path) is None:
        return None
    if not _is_case_file(file_path):
        return None
    return CaseFile.from_parent(parent, path=file_path)


class CaseFile(pytest.File):
    def collect(self):
        try:
            loaded = load_file(self.path)
        except CaseError as exc:
            raise self.CollectError(str(exc)) from None
        session = _session(self.config)
        try:
            targets, profiles = session.targets(), session.profiles()
        except run.UsageError as exc:
            raise self.CollectError(str(exc)) from None
        for case, target, profile in plan(loaded, targets, profiles):
            yield CaseItem.from_parent(self, name=f"{case.id}[{target.name}-{profile.name}]",
                                       case=case, target=target, profile=profile)


class Fp8Failure(Exception):
    def __init__(self, outcome):
        self.outcome = outcome
        super().__init__(str(getattr(outcome, "code", outcome)))


class CaseItem(pytest.Item):
    def __init__(self, *, case, target, profile, **kw):
        super().__init__(**kw)
        self.case, self.target, self.profile = case, target, profile

    def runtest(self):
        session = _session(self.config)
        compiler, problem = session.compiler(self.target, self)
        if problem:
            raise Fp8Failure(problem)
        goldens = session.goldens_root(self.path)
        [out] = run.run([self.case], [self.target], [self.profile.name], session.mode, compiler, goldens)
        self.user_properties += [("fp8_outcome", out.code.name), ("jax", out.jax), ("cached", str(out.cached).lower())]
        if out.signature:
            self.user_properties.append(("kernels", out.signature.kernels))
        if out.verdict is not None:
            self.user_properties.append(("verdict", out.verdict.cls))
            if out.verdict.cost is not None:
                self.user_properties.append(("estimated_cost_us", round(out.verdict.cost.delta_us, 3)))
        if out.code is PASS:
            return
        if out.code is UNSUPPORTED:
            pytest.skip(out.reason)
        if out.code is XFAIL:
            pytest.xfail(out.reason)
        raise Fp8Failure(out)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> str | TerminalRepr:
        if isinstance(excinfo.value, Fp8Failure):
            out = excinfo.value.outcome
            if isinstance(out, str):
                return out
            lines = [f"{out.code} {out.target}/{out.profile} {out.case} (jax {out.jax}, {out.mode})"
                     + (f" [{out.verdict.cls}]" if out.verdict is not None else "")]
            for d in out.diffs:
                why = "; ".join(f"{x.cls}: {x.why}" for x in out.verdict.for_path(d.path)) if out.verdict else ""
                lines.append(f"    {d}" + (f"  [{why}]" if why else ""))
            if out.verdict is not None:
                lines.append(f"    verdict: {out.verdict.cls} ({out.verdict.summary()})")
                if out.verdict.cost is not None:
                    lines.append(f"    cost: {out.verdict.cost.text()}")
            if out.reason:
                lines.append(out.reason if out.code is not UNRESOLVED else out.reason.strip()[-3000:])
            if out.autotune is not None:  # deviceless `default`: which decisions a results file made
                lines.append(f"    {out.autotune.summary()}")
            return "\n".join(lines)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, self.case.line - 1 if self.case.line else None, \
            f"fp8-check {self.case.id} {self.target.name}/{self.profile.name}"


class _Session:
    """Per pytest process: the targets, profiles and mode (chosen as the CLI does), and one compile worker."""

    def __init__(self, config):
        self.config = config
        self.mode = run.mode_from(config.getoption("fp8_mode"))
        self._compiler: CompilerPool | None = None
        self._env_error: str | None = None
        self._gate = CanaryGate(self.mode)  # once per target: may this environment judge it?

    def targets(self):
        return run.targets_from(self.config.getoption("fp8_target"), option="--fp8-target")

    def profiles(self):
        return run.profiles_from(self.config.getoption("fp8_profile"), self.mode, option="--fp8-profile")

    def goldens_root(self, case_path: Path) -> Path:
        given = self.config.getoption("fp8_goldens")
        if given:
            return Path(given)
        root = _project_root(Path(case_path))
        return (root or Path(self.config.rootpath)) / "goldens"

    def compiler(self, target, item=None):
        """(compiler, None), or (None, why) when the environment is broken for `target`."""
        if self._env_error:
            return None, self._env_error
        if self._compiler is None:
            xdist = hasattr(self.config, "workerinput")
            jobs = 1 if xdist else self.config.getoption("fp8_jobs")
            if jobs is not None and jobs < 1:
                self._env_error = f"--fp8-jobs: must be at least 1, got {jobs}"
                return None, self._env_error
            options = PoolOptions(workers=jobs, cache=not self.config.getoption("fp8_no_cache"))
            # the collected cases that name `requirements:` compile in their set's environment, as `run` does
            # (requirement_envs.py builds it on first use)
            cases = list({id(i.case): i.case for i in (item.session.items if item is not None else [])
                          if isinstance(i, CaseItem) and i.case.requirements}.values())
            if item is not None and isinstance(item, CaseItem) and item.case.requirements and item.case not in cases:
                cases.append(item.case)
            try:
                self._compiler, _ = run.start_compiler(self.mode, pool_options=options, for_targets=self.targets(),
                                                             cases=cases)
            except (run.BrokenEnvironment, run.UsageError) as exc:
                self._env_error = f"broken environment: {exc}"
                return None, self._env_error
            if item is not None and not xdist:
                self._prefetch(self._compiler, item.session.items)
        return self._checked(self._compiler, target)

    def _checked(self, compiler: CompilerPool, target):
        problem = self._gate.problem(compiler, target)
        return (None, problem) if problem else (compiler, None)

    def _prefetch(self, compiler: CompilerPool, items) -> None:
        """Start compiling every item that will compile, in item order, behind each target's canary
        (_runner.prefetch): the canary no longer holds the other workers up. If a canary then fails,
        its target's items report that instead of their compilation."""
        jax_version = compiler.environment()["jax"]
        requests: list = []
        targets: dict = {}
        for i in items:
            if not isinstance(i, CaseItem):
                continue
            if unsupported_reason(i.profile, self.mode, jax_version, i.target):
                continue  # UNSUPPORTED without compiling
            targets.setdefault(i.target.name, i.target)
            requests.append(request_for(i.case, i.target, i.profile, None, self.mode, jax_version,
                                               self.goldens_root(i.path)))
        prefetch(compiler, list(targets.values()), self.mode, requests,
                        canary=canary_applies(self.mode, jax_version))

    def close(self):
        if self._compiler is not None:
            self._compiler.close()
            self._compiler = None


_KEY = pytest.StashKey[_Session]()


def _session(config) -> _Session:
    if _KEY not in config.stash:
        config.stash[_KEY] = _Session(config)
    return config.stash[_KEY]


def pytest_unconfigure(config):
    if _KEY in config.stash:
        config.stash[_KEY].close()
    _close_fixture_checker(config)


# ------------------------------------------------------------------ the `fp8` fixture for users' own tests
#
# A test that takes `fp8` runs once per --fp8-target x profile (profile: --fp8-profile, default
# `cublas`, XLA's FP8 GEMM rewriter; deviceless Triton without autotuning upcasts FP8 dots by
# design) and gets a `fp8_check.api.BoundChecker`: fp8.signature(fn, *args), fp8.assert_fusion(fn,
# *args, fp8_gemms=1, ...), fp8.check_golden(name, fn, *args) (goldens under --fp8-goldens, else
# <rootdir>/goldens; --fp8-bless records them). One compile worker per pytest process.


def _fixture_params(config) -> list[tuple[str, str]]:
    session = _session(config)
    try:
        targets = session.targets()
        given = config.getoption("fp8_profile")
        profiles = session.profiles() if given else [platforms.default_profile()]
    except (run.UsageError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    return [(t.name, p) for t in targets for p in profiles]


def pytest_generate_tests(metafunc):
    if "fp8" in metafunc.fixturenames:
        params = _fixture_params(metafunc.config)
        metafunc.parametrize("fp8", params, indirect=True, ids=[f"{t}-{p}" for t, p in params])


_CHECKER_KEY = pytest.StashKey[object]()


@pytest.fixture
def fp8(request):
    """fp8-check's API bound to this test's target and profile (fp8_check.api.BoundChecker)."""
    from fp8_check import api  # what the fixture binds, imported when a test asks for it (see pytest_configure)

    config = request.config
    target, profile = getattr(request, "param", None) or _fixture_params(config)[0]
    if _CHECKER_KEY not in config.stash:
        config.stash[_CHECKER_KEY] = api.Checker(_session(config).mode)
    given = config.getoption("fp8_goldens")
    goldens = Path(given) if given else Path(config.rootpath) / "goldens"
    return api.BoundChecker(config.stash[_CHECKER_KEY], target, profile, goldens, bless=config.getoption("fp8_bless"))


def _close_fixture_checker(config):
    if _CHECKER_KEY in config.stash:
        config.stash[_CHECKER_KEY].close()
