"""Cases that name `requirements:` compile in a cached environment that has them, for the run's own JAX version.

`fp8-check run` (and `bless`, `show`) compile in fp8-check's own environment. A case that needs more (MaxText:
`requirements: maxtext`, about 25 packages and 1.7 GB) names a requirement set (harness/fp8_check/cases/_requirement_sets.py);
the run then builds on first use, or reuses, the per-version environment `envs.Manager` keeps for that set and
this environment's JAX version (the same cache and layout as `matrix --with-requirements`, never the main
`.venv`; uv runs under FP8_CHECK_UV_TIMEOUT), and compiles those cases there, on a pool of their own behind the
same compile cache. Every other request (the canaries, the other cases) compiles on the run's own pool, as the
ROCm targets' compiles go to their environment (harness/fp8_check/versions/_other_environments.py). When this environment already
has the set installed, it compiles them itself. A JAX outside the set's `jax` range makes those cases
UNSUPPORTED (the runner says so); an environment that cannot be built is a broken environment (exit 3).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from fp8_check.cases import check_requirement, outside
from fp8_check.compile import DEFAULT_TIMEOUT, Compilation, CompileRequest, CompilerPool
from fp8_check.core import BrokenEnvironmentError
from fp8_check.versions._envs import InstallError, Manager
from fp8_check.versions._wheels import kind_for_mode


class RequirementEnvironments:
    """A compile service in front of the run's own pool (`main`) and one pool per requirement set."""

    def __init__(self, main, pools: dict[tuple[str, ...], "CompilerPool | Uninstallable"],
                 names: dict[tuple[str, ...], str]):
        self.main, self.mode, self.jobs = main, main.mode, main.jobs
        self._pools, self._names = pools, names

    def _for(self, r: CompileRequest):
        return self._pools.get(r.requirements, self.main) if r.requirements else self.main

    def _groups(self, requests: list[CompileRequest]) -> dict[int, tuple[object, list[CompileRequest]]]:
        groups: dict[int, tuple[object, list[CompileRequest]]] = {}
        for r in requests:
            service = self._for(r)
            groups.setdefault(id(service), (service, []))[1].append(r)
        return groups

    def prefetch(self, requests: Iterable[CompileRequest]) -> None:
        for service, group in self._groups(list(requests)).values():
            if hasattr(service, "prefetch"):
                service.prefetch(group)

    def imap(self, requests: Iterable[CompileRequest]) -> Iterator[Compilation]:
        """Each request compiled in its environment; yielded in request order."""
        requests = list(requests)
        streams = {key: service.imap(group) for key, (service, group) in self._groups(requests).items()}  # type: ignore[attr-defined]
        for r in requests:
            yield next(streams[id(self._for(r))])

    def cache_summary(self) -> str:
        return "; ".join([self.main.cache_summary()] + [f"requirements {self._names[k]}: {p.compiled} compiled in "
                                                        "their environment" for k, p in self._pools.items()
                                                        if isinstance(p, CompilerPool)])

    def __getattr__(self, name: str):  # environment(), compile(), prepare(), target_config(), worker: the run's own
        return getattr(self.main, name)

    def kill(self) -> None:
        for pool in self._pools.values():
            pool.kill()
        self.main.kill()

    def abort(self) -> None:
        for pool in self._pools.values():
            pool.abort()
        self.main.abort()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self.main.close()

    def __enter__(self) -> "RequirementEnvironments":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()


class Uninstallable:
    """Stands in for the pool of a requirement set that could not be installed for this JAX (`matrix`): each of
    its cases' compilations fails with why, so those cases are UNRESOLVED and the release runs the others."""

    compiled = 0

    def __init__(self, mode: str, message: str):
        self.mode, self.message = mode, message

    def imap(self, requests: Iterable[CompileRequest]) -> Iterator[Compilation]:
        for r in requests:
            yield Compilation(r.rendered.case_id, r.target.name, r.profile.name, self.mode, error=self.message)

    def kill(self) -> None:
        pass

    abort = close = kill


@dataclass
class SetEnvironments:
    """One JAX version's environments of the requirement sets its cases need (`matrix`, `bisect`): `envs` by
    requirements, `failed` (requirements -> why uv could not install them), `names` (requirements -> set name)."""

    envs: dict[tuple[str, ...], object] = field(default_factory=dict)  # requirements -> Env
    failed: dict[tuple[str, ...], str] = field(default_factory=dict)
    names: dict[tuple[str, ...], str] = field(default_factory=dict)
    counts: dict[tuple[str, ...], int] = field(default_factory=dict)


def adding(manager: Manager, requirements) -> Manager:
    """A manager of the same environments folder, index, wheel set and platform as `manager` whose environments
    also have `requirements` (a case's set, per release in `matrix`)."""
    other = copy.copy(manager)
    other.extras = sorted({*manager.extras, *(check_requirement(r) for r in requirements)})
    return other


def ensure_sets(sets: dict[tuple[str, ...], tuple[str, str, int]], jax_version: str, manager_for,
                log: Callable[[str], None] = print) -> SetEnvironments:
    """The environments for `jax_version` of the requirement sets `sets` (`sets_of`) whose range includes it
    (the others' cases are UNSUPPORTED there: the runner says why), each built by `manager_for(requirements)`
    (an `envs.Manager`) on first use. A set uv cannot install with this JAX is `failed`, never the release."""
    out = SetEnvironments()
    for reqs, (name, jax_range, count) in sets.items():
        if outside(jax_range, jax_version, name):
            continue
        out.names[reqs], out.counts[reqs] = name, count
        try:
            env = manager_for(reqs).ensure(jax_version)
        except InstallError as exc:
            out.failed[reqs] = f"cannot install the requirements {name} for jax {jax_version}: {exc}"
            log(f"jax {jax_version}: requirements {name}: could not be installed: {str(exc).splitlines()[0]}")
            continue
        out.envs[reqs] = env
        if env.built:
            log(f"jax {jax_version}: requirements {name}: environment built in {env.seconds:.1f}s")
    return out


def service_for(main, sets: SetEnvironments | None, mode: str, workers: int, timeout: float = DEFAULT_TIMEOUT,
                cache=None):
    """`main`, or a service that sends each case with `requirements:` to its set's pool in `sets` (started now),
    or to an `Uninstallable` when the set could not be installed."""
    if sets is None or not (sets.envs or sets.failed):
        return main
    pools: dict[tuple[str, ...], CompilerPool | Uninstallable] = {}
    try:
        for reqs, env in sets.envs.items():
            if env.info.get("own_environment"):  # type: ignore[attr-defined]
                continue  # this environment has them: the main pool compiles them
            pools[reqs] = CompilerPool(mode, jobs=max(1, min(workers, sets.counts.get(reqs, 1))),
                                       python=str(env.python), timeout=timeout, cache=cache)  # type: ignore[attr-defined]
    except BaseException:
        for pool in pools.values():
            pool.kill()
        raise
    for reqs, why in sets.failed.items():
        pools[reqs] = Uninstallable(mode, why)
    return RequirementEnvironments(main, pools, sets.names) if pools else main


def sets_of(cases) -> dict[tuple[str, ...], tuple[str, str, int]]:
    """requirements -> (name, jax range, how many cases) of the cases that name `requirements:`."""
    return {k: (name, jax, len(ids)) for k, (name, jax, ids) in _sets(cases).items()}


def _sets(cases) -> dict[tuple[str, ...], tuple[str, str, list[str]]]:
    out: dict[tuple[str, ...], tuple[str, str, list[str]]] = {}
    for case in cases:
        if case.requirements:
            wanted = case.requirements.requirements
            out.setdefault(wanted, (case.requirements.name, case.requirements.jax, []))[2].append(case.id)
    return out


def _for_cases(ids: list[str]) -> str:
    """`case qwix_dense`, `cases a, b and 3 more`: which selected cases need a requirement set."""
    shown = ", ".join(ids[:2]) + (f" and {len(ids) - 2} more" if len(ids) > 2 else "")
    return f"case{'s' if len(ids) > 1 else ''} {shown}"


def wrap(main, cases, jax_version: str, mode: str, timeout: float = DEFAULT_TIMEOUT, cache=None, platform=None,
         log: Callable[[str], None] = print):
    """`main`, or a service that compiles the requirement sets of `cases` in their environments for `jax_version`
    (built now when missing: `log` says so). BrokenEnvironmentError when one cannot be built."""
    pools: dict[tuple[str, ...], CompilerPool | Uninstallable] = {}
    names: dict[tuple[str, ...], str] = {}
    try:
        for reqs, (name, jax_range, ids) in _sets(cases).items():
            count = len(ids)
            if outside(jax_range, jax_version, name):
                continue  # its cases are UNSUPPORTED here (the runner says why)
            manager = Manager(extras=list(reqs), kind=kind_for_mode(mode), platform=platform)
            said: list[str] = []

            def building(line: str, name=name, reqs=reqs, ids=ids, said=said) -> None:  # only when one is built
                if not said:
                    said.append(line)
                    log(f"fp8-check: requirements {name} ({_for_cases(ids)}): building the environment for jax "
                        f"{jax_version} ({len(reqs)} requirements; once, then cached) ...")

            try:
                env = manager.ensure(jax_version, log=building)
            except InstallError as exc:
                raise BrokenEnvironmentError(f"cannot install the requirements {name} for jax {jax_version}: {exc}") from None
            if env.info.get("own_environment"):
                continue  # installed here: those cases compile in this environment, nothing to announce
            log(f"fp8-check: requirements {name} ({_for_cases(ids)}): "
                + (f"built in {env.seconds:.0f} s" if env.built else "cached") + f": {env.path}")
            pools[reqs] = CompilerPool(mode, jobs=min(main.jobs, count), python=str(env.python), timeout=timeout,
                                       cache=cache)
            names[reqs] = name
    except BaseException:
        for pool in pools.values():
            pool.kill()
        raise
    return RequirementEnvironments(main, pools, names) if pools else main
