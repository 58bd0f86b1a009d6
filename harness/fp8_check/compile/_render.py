"""Render a `Case` into plain Python source for a JAX function (jinja2).

The rendered module defines `FN` (the function) and `ARGS` (its argument specs);
the worker executes exactly this source. Each case kind renders itself
(harness/fp8_check/cases/kinds/); `repro()` wraps the source with a copy of
`harness/fp8_check/worker/_aot.py` and a small `__main__` into a standalone script.
"""

from __future__ import annotations

from fp8_check.cases import ENV, Case, Closure, Rendered, kind_of
from fp8_check.core import package_path
from fp8_check.platforms import Profile
from fp8_check.targets import Target


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """The (name, shape, dtype) of each argument of `case`, in call order."""
    return kind_of(case).arg_specs(case)


def render(case: Case) -> Rendered:
    return kind_of(case).render(case)


def case_options(case: Case) -> dict | None:
    """XLA flags a case sets on top of its profile (only where the installed XLA has them)."""
    return kind_of(case).case_options(case)


def repro(case: Case, target: Target, profile: Profile, jax_version: str, rendered: Rendered | None = None) -> str:
    """A standalone script: `python repro.py` compiles the case for `target` and prints the optimized HLO."""
    rendered = rendered or render(case)
    return repro_script(rendered.source, target, profile, jax_version, case_options(case), rendered.modules,
                        repro_needs(case, rendered))


def repro_needs(case: Case, rendered: Rendered) -> dict | None:
    """What a case's repro needs besides JAX (None: nothing): `requirements`, the distributions of its `requires:`
    and the packages of its `requirements:`, pinned to the versions installed here when they are (PEP 508 strings);
    `files`, the project modules it imports ([name, relpath, is a package, text] each: the repro embeds them);
    `incomplete`, why those may be incomplete ('' when complete). Stored with the result (results.py)."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    dists = metadata.packages_distributions()
    wanted: dict[str, str] = {}  # distribution (lower case) -> the requirement, as written
    for module in case.required_modules():
        for name in dists.get(module.split(".")[0], [module.split(".")[0]])[:1]:
            wanted.setdefault(name.lower(), name)
    for text in (case.requirements.requirements if case.requirements else ()):
        try:
            wanted.setdefault(Requirement(text).name.lower(), text)
        except InvalidRequirement:
            wanted.setdefault(text.lower(), text)
    pinned = []
    for text in wanted.values():
        try:
            req = Requirement(text)
            version = metadata.version(req.name)
        except (InvalidRequirement, metadata.PackageNotFoundError):
            pinned.append(text)  # not installed here: as the case wrote it
            continue
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        pinned.append(f"{req.name}{extras}=={version}" if req.specifier.contains(version, prereleases=True)
                      else text)
    files = [[f.name, f.relpath, f.package, f.text] for f in rendered.modules.files]
    if not pinned and not files:
        return None
    return {"requirements": pinned, "files": files, "incomplete": rendered.modules.why}


_WORKER = package_path("worker")  # the sources a repro embeds


def repro_script(case_source: str, target: Target, profile: Profile, jax_version: str,
                 optional_options: dict | None = None, modules: Closure | None = None,
                 needs_of: dict | None = None) -> str:
    """The repro around an already rendered case function (as stored in a results file).

    A python case's project modules are embedded (`modules`, or the `files` of `needs_of`, what `repro_needs`
    recorded with the result) and installed as real modules before the case imports them; a module not embedded
    is named in the header with the file to copy next to the script, and the script does not call itself
    standalone. Every requirement (JAX's and `needs_of`'s, with versions) is listed in the header and printed by
    `python repro.py --requirements` (a requirements file: `pip install -r`)."""
    import re

    modules = modules or Closure()
    needs_of = needs_of or {}
    aot_source = "\n\n".join((_WORKER / name).read_text() for name in ("_device_view.py", "_out_specs.py", "_aot.py"))
    embedded = {f.name: (f.relpath, f.package, f.text) for f in modules.files}
    for name, relpath, package, text in needs_of.get("files") or []:
        embedded.setdefault(str(name), (str(relpath), bool(package), str(text)))
    incomplete = modules.why or str(needs_of.get("incomplete") or "")
    imported = re.findall(r"importlib\.import_module\('([A-Za-z0-9_.]+)'\)", case_source)
    needs = [m for m in imported if m not in embedded]
    extra = [str(r) for r in needs_of.get("requirements") or []]
    platform = target.platform
    try:  # deviceless: the slim wheel set fp8-check compiles with (versions/_wheels.py)
        jax_reqs = platform.requirements(jax_version, "deviceless") or [platform.install(jax_version)]
    except (NotImplementedError, ValueError):  # a platform without wheel sets, a version it cannot read
        jax_reqs = [platform.install(jax_version)]
    return ENV.get_template("repro.py.j2").render(
        modules=embedded, needs=needs, incomplete=incomplete,
        copy=[m.replace(".", "/") + ".py" for m in needs],
        requirements=[*jax_reqs, *extra], device_requirements=[platform.install(jax_version), *extra],
        standalone=not needs and not incomplete,
        optional_options=optional_options or {},
        case_source=case_source,
        aot_source=aot_source,
        target=target,
        profile=profile,
        jax_version=jax_version,
        platform=target.platform,
        install=target.platform.install(jax_version),
        deviceless_env=target.platform.deviceless_env,
    )
