"""Stage 2: render a `Case` into plain Python source for a JAX function (jinja2).

The rendered module defines `FN` (the function) and `ARGS` (its argument specs);
the worker executes exactly this source. `repro()` wraps it with a copy of
`harness/aot.py` and a small `__main__` into a standalone script.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import jinja2

from harness.pipeline.cases import FP8_MAX, Case
from harness.targets import Profile, Target

def py_literal(value) -> str:
    """A Python literal (repr) of a str, number, bool, None, or a tuple/list/dict of them: user text enters
    rendered source only through this filter, `py_text` or `py_comment`, so it can never become code."""
    return repr(value)


def py_text(text: str) -> str:
    """`text` as a triple-quoted string literal that keeps its line breaks and quotes readable.

    Backslashes are escaped (no `\\N` starts an escape); a double quote is escaped when the next
    character is one too, or when it is the last one, so no `\"\"\"` can close the literal early;
    every other non-printable character (CR, tabs, U+2028, NUL) is written as its escape
    sequence. The literal's value is exactly `text`.
    """
    text = str(text)
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"' if i + 1 == len(text) or text[i + 1] == '"' else '"')
        elif ch == "\n" or ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return '"""' + "".join(out) + '"""'


def py_comment(text) -> str:
    """`text` for the inside of a `#` comment: non-printable characters (line breaks) escaped."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent.parent / "templates"),
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
    autoescape=False,  # renders Python source, not markup: user text goes through the filters below
)
_ENV.filters.update(py_literal=py_literal, py_text=py_text, py_comment=py_comment)


@dataclass(frozen=True)
class Rendered:
    case_id: str
    source: str
    requires: tuple[str, ...] = ()  # optional dependencies (modules) the case declares: missing -> UNSUPPORTED


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """The (name, shape, dtype) of each argument of a pattern case, in call order."""
    if case.kind == "python":
        return [(n, tuple(s), d) for n, s, d in case.args]
    if case.kind == "block_scaled":
        return block_arg_specs(case)
    s = case.shape
    lead = (s.batch,) if s.batch else ()
    args = [("a", lead + (s.m, s.k), case.a_dtype)]
    args.append(("b", lead + ((s.n, s.k) if case.transpose_b else (s.k, s.n)), case.b_dtype))
    if case.input_scales in ("a", "both"):
        args.append(("a_scale", (), case.scale_dtype))
    if case.input_scales in ("b", "both"):
        args.append(("b_scale", (), case.scale_dtype))
    if case.epilogue == "matrix_bias":
        args.append(("bias", lead + (s.m, s.n), case.bias_dtype))
    elif case.has_bias:
        args.append(("bias", (s.n,), case.bias_dtype))
    if case.output_scale != "none":
        args.append(("out_scale", (), case.scale_dtype))
    return args


def block_arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """Arguments of a block-scaled case: operands, their per-block scales, global scales."""
    from harness.pipeline.block_cases import scale_columns

    s = case.shape
    lead = (s.batch,) if s.batch else ()
    kc = scale_columns(s.k, case.block.size)
    if case.block.api == "scaled_dot_general":
        args = [("a", lead + (s.m, s.k), case.block.input_dtype),
                ("b", lead + ((s.n, s.k) if case.transpose_b else (s.k, s.n)), case.block.input_dtype)]
        if case.block.global_scale:
            args.append(("global_scale", (1,), "float32"))
        return args
    args = [
        ("a", lead + (s.m, s.k), case.a_dtype),
        ("b", lead + ((s.n, s.k) if case.transpose_b else (s.k, s.n)), case.b_dtype),
        ("a_scales", lead + (s.m, kc), case.scale_dtype),
        ("b_scales", lead + ((s.n, kc) if case.transpose_b else (kc, s.n)), case.scale_dtype),
    ]
    if case.block.global_scale:
        args += [("a_global", (), "float32"), ("b_global", (), "float32")]
    return args


def _render_block(case: Case, args) -> str:
    from harness.pipeline.block_cases import API_FUNCTIONS

    batched = case.shape.batch is not None
    rank = 3 if batched else 2
    b_contract = rank - 1 if case.transpose_b else rank - 2
    batch = "(0,), (0,)" if batched else "(), ()"
    api_name = API_FUNCTIONS[case.block.api] or "a hand-written dequantize + dot_general"
    doc = _docstring(case) + (
        f"Block-scaled {case.block.format.upper()}-style matmul through {api_name}: blocks of {case.block.size} "
        f"along k, {case.scale_dtype} scales" + (", a float32 global scale" if case.block.global_scale else "") + ".\n")
    return _ENV.get_template("block.py.j2").render(
        case=case, docstring=doc, args=args, params=[name for name, _, _ in args], batched=batched,
        dims=f"((({rank - 1},), ({b_contract},)), ({batch}))",
        api_fn=API_FUNCTIONS[case.block.api], api_name=API_FUNCTIONS[case.block.api] or "a hand-written dequantize + dot_general",
    )


REPO_ROOT = Path(__file__).resolve().parent.parent.parent
_PACKAGE = __name__.split(".")[0]  # the import name; the folder is harness/
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def _module_file(module: str) -> Path | None:
    """The source file of `module` when it lies in this checkout or the run's directory (inlined so repros
    stand alone).

    Found by path, without importing anything in this process: a case's module is only ever
    imported by the compile worker. Other modules (PYTHONPATH, installed packages) are imported
    by the rendered source; one that cannot be imported makes the case UNRESOLVED (UNSUPPORTED
    when it is a dependency the case lists in `requires`).
    """
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    if parts[0] == _PACKAGE and (REPO_ROOT / "pyproject.toml").is_file():
        # this package's own modules (e.g. its flax layers), in the checkout's folder harness/
        base = _PACKAGE_DIR.joinpath(*parts[1:])
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file() and all((_PACKAGE_DIR.joinpath(*parts[1:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                return path.resolve()
    for root in _source_roots():
        base = root.joinpath(*parts)
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            # every package on the way must be a regular package under the same root
            if path.is_file() and all((root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                path = path.resolve()
                if any(part in ("site-packages", "dist-packages") for part in path.parts):
                    return None  # an installed package (also fp8-check itself, installed from a wheel)
                return path
    return None


def _source_roots() -> list[Path]:
    """Where inlined modules may come from: this checkout (when it is one) and the current directory (the user's project)."""
    roots = [Path.cwd().resolve()]
    if (REPO_ROOT / "pyproject.toml").is_file():
        roots.insert(0, REPO_ROOT)
    return roots


def _relative(path: Path) -> Path:
    for root in _source_roots():
        if root in path.parents:
            return path.relative_to(root)
    return path


def _docstring(case: Case) -> str:
    head = f"fp8-check case {case.id}" + (f": {case.description}" if case.description else "")
    return f"{head}\n\nRendered from {case.file}. fp8-check compiles exactly this source.\n"


def render(case: Case) -> Rendered:
    args = arg_specs(case)
    if case.kind == "python":
        module, function = case.callable.split(":")
        module_path = _module_file(module)
        source = _ENV.get_template("python.py.j2").render(
            case=case, docstring=_docstring(case), module=module, function=function, args=args,
            module_path=_relative(module_path) if module_path else None,
            module_source=module_path.read_text().rstrip() if module_path else None,
        )
        return Rendered(case.id, source, case.requires)
    if case.kind == "block_scaled":
        return Rendered(case.id, _render_block(case, args), case.requires)
    batched = case.shape.batch is not None
    rank = 3 if batched else 2
    source = _ENV.get_template("pattern.py.j2").render(
        case=case,
        docstring=_docstring(case),
        args=args,
        params=[name for name, _, _ in args],
        a_scale=case.input_scales in ("a", "both"),
        b_scale=case.input_scales in ("b", "both"),
        batched=batched,
        a_contract=rank - 1,
        b_contract=rank - 1 if case.transpose_b else rank - 2,
        batch_dims="(0,), (0,)" if batched else "(), ()",
        out_max=FP8_MAX.get(case.out_dtype) if case.clamp else None,
        max_name=case.out_dtype.replace("float8_", "").upper() + "_MAX",
    )
    return Rendered(case.id, source, case.requires)


def repro(case: Case, target: Target, profile: Profile, jax_version: str, rendered: Rendered | None = None) -> str:
    """A standalone script: `python repro.py` compiles the case for `target` and prints the optimized HLO."""
    from harness.pipeline.block_cases import case_options

    return repro_script((rendered or render(case)).source, target, profile, jax_version, case_options(case))


def repro_script(case_source: str, target: Target, profile: Profile, jax_version: str,
                 optional_options: dict | None = None) -> str:
    """The standalone repro around an already rendered case function (as stored in a results file)."""
    aot_source = (Path(__file__).parent / "aot.py").read_text()
    return _ENV.get_template("repro.py.j2").render(
        optional_options=optional_options or {},
        case_source=case_source,
        aot_source=aot_source,
        target=target,
        profile=profile,
        jax_version=jax_version,
    )
