"""Render a `Case` into plain Python source for a JAX function (jinja2).

The rendered module defines `FN` (the function) and `ARGS` (its argument specs);
the worker executes exactly this source. Each case kind renders itself
(harness/fp8_check/cases/kinds/); `repro()` wraps the source with a copy of
`harness/fp8_check/worker/aot.py` and a small `__main__` into a standalone script.
"""

from __future__ import annotations

from fp8_check.cases import ENV as _ENV, Case, Closure, Rendered as Rendered, kinds, py_comment, py_literal, py_text  # noqa: F401  (re-exported)
from fp8_check.core import package_path
from fp8_check.targets import Profile, Target


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """The (name, shape, dtype) of each argument of `case`, in call order."""
    return kinds.of(case).arg_specs(case)


def render(case: Case) -> Rendered:
    return kinds.of(case).render(case)


def case_options(case: Case) -> dict | None:
    """XLA flags a case sets on top of its profile (only where the installed XLA has them)."""
    return kinds.of(case).case_options(case)


def repro(case: Case, target: Target, profile: Profile, jax_version: str, rendered: Rendered | None = None) -> str:
    """A standalone script: `python repro.py` compiles the case for `target` and prints the optimized HLO."""
    rendered = rendered or render(case)
    return repro_script(rendered.source, target, profile, jax_version, case_options(case), rendered.modules)


_WORKER = package_path("worker")  # the sources a repro embeds


def repro_script(case_source: str, target: Target, profile: Profile, jax_version: str,
                 optional_options: dict | None = None, modules: Closure | None = None) -> str:
    """The standalone repro around an already rendered case function (as stored in a results file).

    A python case's project modules are embedded (`modules`) and installed as real modules before the case
    imports them; a module not embedded (a repro rendered from a results file) is named in the header."""
    import re

    modules = modules or Closure()
    aot_source = "\n\n".join((_WORKER / name).read_text() for name in ("device_view.py", "out_specs.py", "aot.py"))
    embedded = {f.name: (f.relpath, f.package, f.text) for f in modules.files}
    imported = re.findall(r"importlib\.import_module\('([A-Za-z0-9_.]+)'\)", case_source)
    needs = [m for m in imported if m not in embedded]
    return _ENV.get_template("repro.py.j2").render(
        modules=embedded, needs=needs, incomplete=modules.why,
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
