"""The `python` case kind: a function of your own (`callable: module:function`) with its argument specs:
a flat list of {name, shape, dtype}, or `args: module:factory`, a function returning a pytree of
ShapeDtypeStructs (a flax model's variables, an optax state), as `fp8-check check --args` takes.

The rendered source imports the function (inlining its module when it lies in this
checkout or the run's directory, so a repro stands alone); a dependency the case lists in
`requires` that is not installed makes it UNSUPPORTED. Its fields (`PythonSpec`), schema,
arguments and rendering (templates/python.py.j2) live here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from fp8_check.cases._model import Case, CaseError, Shape, Spec, choice, is_name, string
from fp8_check.cases._requirement_sets import case_set
from fp8_check.cases._sharded import jsonable, validate_sharded
from fp8_check.cases._source import ENV, Rendered, docstring
from fp8_check.cases._user_modules import closure, closure_of, defines, find
from fp8_check.core import DATA_DTYPES, SCALE_DTYPES

NAME = "python"
REDUCIBLE = False  # its fields are the user's function: nothing for `reduce` to simplify

KEYS = PYTHON_KEYS = ("id", "description", "kind", "callable", "args", "requires", "requirements", "profiles", "targets", "known_issues", "filecheck", "mesh", "out_shardings", "xla_options",
                           "price_at", "env")



@dataclass(frozen=True)
class PythonSpec(Spec):
    """A python case's own fields: the user's function, its arguments, production shapes and sharding."""

    KIND: ClassVar[str] = NAME
    callable: str  # module:function
    args: tuple[tuple[str, tuple[int, ...], str], ...] = ()
    args_factory: str | None = None  # `args: module:factory`: a pytree of ShapeDtypeStructs
    requires: tuple[str, ...] = ()  # optional dependencies (top-level modules): missing -> UNSUPPORTED
    price_args: tuple[tuple[str, tuple[int, ...]], ...] = ()  # `price_at: {args: {name: shape}}`
    price_factory: str | None = None  # `price_at: {factory: FUNCTION}` in the callable's module
    price_args_factory: str | None = None  # `price_at: {args: module:factory}` (a pytree, as `args:`)
    flat_factory: str | None = None  # set on the production copy: the rendered ARGS come from that function
    mesh: tuple[tuple[str, int], ...] = ()  # sharded (sharded_cases.py): mesh, specs, XLA flags
    shardings: tuple[tuple, ...] = ()
    out_shardings: tuple[tuple, ...] | None = None
    xla_options: tuple[tuple[str, object], ...] = ()

    def required_modules(self) -> tuple[str, ...]:
        return self.requires

    @property
    def priced_elsewhere(self) -> bool:
        return bool(self.price_args) or self.price_factory is not None or self.price_args_factory is not None

    def at_production(self) -> Spec:
        at = dict(self.price_args)
        return replace(self, args=tuple((n, at.get(n, s), d) for n, s, d in self.args),
                       flat_factory=self.price_factory, args_factory=self.price_args_factory or self.args_factory)

    def production_text(self) -> str:
        if self.price_factory:
            return f"the arguments {self.callable.split(':')[0]}.{self.price_factory}() returns"
        if self.price_args_factory:
            return f"the arguments {self.price_args_factory.replace(':', '.')}() returns"
        return ", ".join(f"{n}=[{', '.join(map(str, shape))}]" for n, shape in self.price_args)

    def timed_at(self, shape: Shape | None) -> Spec | None:
        return None  # its source imports the user's modules: calibrate times self-contained cases only


def _spec(case: Case) -> PythonSpec:
    if not isinstance(case.spec, PythonSpec):
        raise ValueError(f"case '{case.id}' is not a python case")
    return case.spec


def _args(path, line, cid, value):
    if not isinstance(value, list) or not value:
        raise CaseError(path, line, cid, "args", "expected a non-empty list of {name, shape, dtype}")
    out = []
    for i, item in enumerate(value):
        fld = f"args[{i}]"
        if not isinstance(item, dict) or not {"name", "shape", "dtype"} <= set(item) <= {"name", "shape", "dtype", "sharding"}:
            raise CaseError(path, line, cid, fld, f"expected a mapping with exactly name, shape, dtype (and optionally sharding); got {item!r}")
        name = string(path, line, cid, f"{fld}.name", item["name"])
        if not name.isidentifier():
            raise CaseError(path, line, cid, f"{fld}.name", f"not a Python identifier: {name!r}")
        shape = item["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise CaseError(path, line, cid, f"{fld}.shape", f"expected a list of positive integers, got {shape!r}")
        dtype = choice(path, line, cid, f"{fld}.dtype", item["dtype"], DATA_DTYPES + SCALE_DTYPES + ("int32",))
        out.append((name, tuple(shape), dtype))
    return tuple(out)



class Factory(str):
    """`price_at: {args: module:factory}`: the production arguments as a pytree factory (the form `args:` takes)."""


def _price_args(path, line, cid, value, args, requires):
    """`price_at: {args: {NAME: SHAPE, ...}}`: the production shapes of some arguments (the others keep theirs); or
    `price_at: {args: module:factory}`: a pytree factory as `args:` takes, at production shapes; or
    `price_at: {factory: FUNCTION}`: a function of the callable's module returning [(name, shape, dtype), ...] at
    production shapes (called in the compile worker). The function is compiled a second time there and priced."""
    names = {n: s for n, s, _ in args}
    if isinstance(value, dict) and set(value) == {"args"} and isinstance(value["args"], str):
        try:
            return Factory(_factory(path, line, cid, value["args"], requires))
        except CaseError as exc:  # the same checks as `args:`, named after this field
            raise CaseError(path, line, cid, "price_at.args", exc.message) from None
    if isinstance(value, dict) and set(value) == {"factory"}:
        if not isinstance(value["factory"], str) or not is_name(value["factory"]):
            raise CaseError(path, line, cid, "price_at.factory", f"expected the name of a function in the callable's "
                            f"module, got {value['factory']!r}")
        return value["factory"]
    if not isinstance(value, dict) or set(value) != {"args"} or not isinstance(value["args"], dict) or not value["args"]:
        raise CaseError(path, line, cid, "price_at", "expected {args: {NAME: [production shape], ...}}, "
                        "{args: module:factory} or {factory: FUNCTION} for a python case")
    out = []
    for name, shape in value["args"].items():
        fld = f"price_at.args.{name}"
        if name not in names:
            raise CaseError(path, line, cid, fld, f"no argument named {name!r}; the case has {', '.join(names)}")
        if not isinstance(shape, list) or len(shape) != len(names[name]) or \
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape):
            raise CaseError(path, line, cid, fld, f"expected a list of {len(names[name])} positive integers "
                            f"(the argument's rank), got {shape!r}")
        out.append((name, tuple(shape)))
    return tuple(out)


def _factory(path, line, cid, value: str, requires: list) -> str:
    """`args: module:factory`: a function of no arguments returning a tuple of positional arguments or a dict of
    keyword arguments, a pytree whose leaves are ShapeDtypeStructs (shardings allowed), as `check --args` takes.
    Read here, never imported: a project module must define the function; another module must be importable
    (or be among `requires`: then a missing one makes the case UNSUPPORTED)."""
    import importlib.util

    module, sep, function = value.partition(":")
    if not sep or not all(is_name(p) for p in module.split(".") + [function]):
        raise CaseError(path, line, cid, "args", "expected a list of {name, shape, dtype} or 'package.module:factory', "
                                                 f"got {value!r}")
    if (where := find(module)) is not None:
        if defines(module, function) is False:
            raise CaseError(path, line, cid, "args", f"module '{module}' ({where[0]}) defines no '{function}'")
        return value
    top = module.split(".")[0]
    if top in requires:
        return value
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise CaseError(path, line, cid, "args", f"cannot find module '{module}' of the args factory {value!r} in this "
                                                 "project or the installed packages (list it in requires if optional)")
    return value


def validate(path, line, cid, merged: dict, raw: dict, kw: dict) -> Case:
    """The case, with `callable`, `args` and `requires` of `merged` (its `PythonSpec`) added to the common fields in `kw`."""
    if "callable" not in merged:
        raise CaseError(path, line, cid, "callable", "missing; a python case names 'module:function'")
    target = string(path, line, cid, "callable", merged["callable"])
    module, _, function = target.partition(":")
    if not all(is_name(p) for p in module.split(".") + [function]):
        raise CaseError(path, line, cid, "callable", f"expected 'package.module:function', got {target!r}")
    sk: dict = {"callable": target}
    if "args" not in merged:
        raise CaseError(path, line, cid, "args", "missing; a python case lists its arguments or names their factory")
    given = merged.get("requires")
    requires: list = given if isinstance(given, list) else [given]
    if isinstance(merged["args"], str):
        sk["args_factory"] = _factory(path, line, cid, merged["args"], requires)
    else:
        sk["args"] = _args(path, line, cid, merged["args"])
    if "requires" in merged:
        value = merged["requires"]
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not value or not all(isinstance(v, str) and is_name(v) for v in value):
            raise CaseError(path, line, cid, "requires",
                            f"expected a list of optional top-level modules such as [flax], got {value!r}")
        sk["requires"] = tuple(dict.fromkeys(value))
    if "requirements" in merged:
        try:
            kw["requirements"] = case_set(merged["requirements"], path)
        except ValueError as exc:
            raise CaseError(path, line, cid, "requirements", str(exc)) from None
    raw_args = merged["args"] if isinstance(merged["args"], list) else []
    if "price_at" in merged:
        at = _price_args(path, line, cid, merged["price_at"], sk.get("args", ()), requires)
        if isinstance(at, Factory):
            sk["price_args_factory"] = str(at)
        elif isinstance(at, str):
            sk["price_factory"] = at
        else:
            sk["price_args"] = at
    sk.update(validate_sharded(path, line, cid, merged, raw_args, sk.get("args", ()), kw.get("targets", ()), CaseError))
    return Case(**kw, spec=PythonSpec(**sk))


def case_options(case: Case) -> dict | None:
    """A sharded case's XLA flags (sharded_cases.py), set only where the installed XLA has them."""
    return dict(_spec(case).xla_options) or None


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    return [(n, tuple(s), d) for n, s, d in _spec(case).args]


def render(case: Case) -> Rendered:
    """The module is imported by the worker, never pasted (fp8_check.cases._user_modules finds its project files)."""
    args = arg_specs(case)
    spec = _spec(case)
    module, function = (spec.callable or ":").split(":")
    specs_args: list = list(args)
    if spec.mesh:
        specs = spec.shardings or ((),) * len(args)
        specs_args = [(a, jsonable(sharding)) for a, sharding in zip(args, specs)]
    factory = (spec.args_factory or ":").split(":") if spec.args_factory else None
    source = ENV.get_template("python.py.j2").render(
        case=case, docstring=docstring(case), module=module, function=function, args=specs_args,
        factory=factory, flat_factory=spec.flat_factory, mesh=[list(axis) for axis in spec.mesh],
        out_specs=[jsonable(s) for s in spec.out_shardings] if spec.out_shardings is not None else None,
    )
    modules = closure_of(module, factory[0]) if factory else closure(module)
    return Rendered(case.id, source, spec.requires, modules)


def reduction_fields(case: Case) -> dict:
    raise ValueError(f"case '{case.id}' is kind: python; `reduce` simplifies pattern fields only")


def simplifications(fields: dict) -> list[tuple[str, dict]]:
    return []  # its fields are the user's function: nothing to simplify
