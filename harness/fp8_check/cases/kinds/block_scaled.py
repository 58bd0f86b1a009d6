"""The `block_scaled` case kind: MXFP8 / NVFP4 matmuls through JAX's block-scaling APIs.

Everything about this kind lives here: its fields (`BlockScaledSpec`), its schema (`KEYS`, `validate`), its arguments
(`arg_specs`), its rendering (`render`, templates/block.py.j2) and the XLA flags it sets
(`case_options`); its float64 reference is harness/fp8_check/gpu/_block_numerics.py. No other module switches on the kind's name (tests/house/test_architecture.py).


A block-scaled matmul multiplies low-precision data (E4M3, E5M2 or E2M1) whose
contracting dimension is split into blocks of `block_size` elements, each block
with its own scale (E8M0 for MX formats, E4M3 for NVFP4), optionally times a
global float32 scale. `api` says how the case writes it:

- `scaled_matmul`: `jax.nn.scaled_matmul(a, b, a_scales, b_scales)` on quantized inputs;
- `scaled_dot_general`: `jax.nn.scaled_dot_general` with `get_scaled_dot_general_config(format)`
  on high-precision inputs (JAX quantizes them);
- `lax_scaled_dot`: `jax.lax.scaled_dot(a, b, lhs_scale=…, rhs_scale=…)`;
- `hand_written`: dequantize each operand with its per-block scales, then `dot_general`.

Validation follows `cases.py`: one-line `CaseError`s naming file, line, case and field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from fp8_check.cases._model import Case, CaseError, MatmulSpec, boolean, choice, pos_int, shape
from fp8_check.cases._source import ENV, Rendered, docstring
from fp8_check.core import BLOCK_SCALE_DTYPES, DATA_DTYPES

NAME = "block_scaled"
REDUCIBLE = False  # `fp8-check reduce` and the minimal repro work on pattern fields

APIS = ("scaled_matmul", "scaled_dot_general", "lax_scaled_dot", "hand_written")
FORMATS = ("mxfp8", "nvfp4")
BLOCK_OUT_DTYPES = ("float32", "bfloat16")
INPUT_DTYPES = ("bfloat16", "float32")  # scaled_dot_general's high-precision inputs
HAND_DEQUANT = ("float32", "bfloat16")

# What each format means when a field is not given.
FORMAT_DEFAULTS = {
    "mxfp8": {"block_size": 32, "scale_dtype": "float8_e8m0fnu", "data_dtype": "float8_e4m3fn"},
    "nvfp4": {"block_size": 16, "scale_dtype": "float8_e4m3fn", "data_dtype": "float4_e2m1fn"},
}
# The JAX function each API needs: a case whose API the installed JAX lacks is UNSUPPORTED.
API_FUNCTIONS = {
    "scaled_matmul": "jax.nn.scaled_matmul",
    "scaled_dot_general": "jax.nn.scaled_dot_general",
    "lax_scaled_dot": "jax.lax.scaled_dot",
    "hand_written": None,
}

DEFAULT_SHAPE = {"m": 128, "n": 128, "k": 128}

KEYS = BLOCK_KEYS = (
    "id", "description", "kind", "api", "format", "a_dtype", "b_dtype", "block_size", "scale_dtype",
    "global_scale", "input_dtype", "dequant", "shape", "transpose_b", "out_dtype", "scaled_dot_triton",
    "profiles", "targets", "known_issues", "filecheck", "env",
)


@dataclass(frozen=True)
class Block:
    """How a block-scaled case scales: the API it goes through, the format, block size, global scale."""

    api: str
    format: str
    size: int  # elements of k per scale
    global_scale: bool = False
    input_dtype: str = ""  # scaled_dot_general: the high-precision inputs JAX quantizes


@dataclass(frozen=True)
class BlockScaledSpec(MatmulSpec):
    """A block-scaled case's own fields (the shared matmul fields in `MatmulSpec`)."""

    KIND: ClassVar[str] = NAME
    block: Block = Block("scaled_matmul", "mxfp8", 32)
    scaled_dot_triton: bool | None = None  # sets xla_gpu_experimental_scaled_dot_with_triton where XLA has it


def spec_of(case: Case) -> BlockScaledSpec:
    if not isinstance(case.spec, BlockScaledSpec):
        raise ValueError(f"case '{case.id}' is not a block-scaled case")
    return case.spec


def validate(path, line, cid, merged: dict, raw: dict, kw: dict) -> Case:
    """The case, with the block-scaling fields of `merged` (its `BlockScaledSpec`) added to the common ones in `kw`."""
    return Case(**kw, spec=BlockScaledSpec(**validate_block(path, line, cid, merged, raw)))


def validate_block(path, line, cid, merged: dict, raw: dict) -> dict:
    """The block-scaling fields of `merged` as `BlockScaledSpec` keyword arguments."""
    kw: dict = {}
    api = choice(path, line, cid, "api", merged.get("api", "scaled_matmul"), APIS)
    fmt = choice(path, line, cid, "format", merged.get("format", "mxfp8"), FORMATS)
    fdef = FORMAT_DEFAULTS[fmt]
    input_dtype = ""
    if api == "scaled_dot_general":
        for fld in ("a_dtype", "b_dtype", "block_size", "scale_dtype", "dequant"):
            if fld in raw:
                raise CaseError(path, line, cid, fld, f"scaled_dot_general quantizes with the '{fmt}' "
                                "config, which fixes it; set 'format' (mxfp8, nvfp4) instead")
        input_dtype = choice(path, line, cid, "input_dtype", merged.get("input_dtype", "bfloat16"), INPUT_DTYPES)
    elif "input_dtype" in raw:
        raise CaseError(path, line, cid, "input_dtype", f"only scaled_dot_general takes high-precision inputs; api is {api}")
    kw["a_dtype"] = choice(path, line, cid, "a_dtype", merged.get("a_dtype", fdef["data_dtype"]), DATA_DTYPES)
    kw["b_dtype"] = choice(path, line, cid, "b_dtype", merged.get("b_dtype", fdef["data_dtype"]), DATA_DTYPES)
    size = pos_int(path, line, cid, "block_size", merged.get("block_size", fdef["block_size"]))
    kw["scale_dtype"] = choice(path, line, cid, "scale_dtype", merged.get("scale_dtype", fdef["scale_dtype"]), BLOCK_SCALE_DTYPES)
    global_scale = boolean(path, line, cid, "global_scale", merged.get("global_scale", False))
    if global_scale and api == "scaled_dot_general" and fmt != "nvfp4":
        raise CaseError(path, line, cid, "global_scale", "scaled_dot_general takes a global scale only in the nvfp4 config")
    if "dequant" in merged and api != "hand_written":
        raise CaseError(path, line, cid, "dequant", f"only hand_written cases dequantize themselves; api is {api}")
    kw["dequant"] = choice(path, line, cid, "dequant", merged.get("dequant", "float32"), HAND_DEQUANT)
    kw["transpose_b"] = boolean(path, line, cid, "transpose_b", merged.get("transpose_b", True))
    kw["out_dtype"] = choice(path, line, cid, "out_dtype", merged.get("out_dtype", "float32"), BLOCK_OUT_DTYPES)
    if "scaled_dot_triton" in merged:
        kw["scaled_dot_triton"] = boolean(path, line, cid, "scaled_dot_triton", merged["scaled_dot_triton"])
    kw["shape"] = shape(path, line, cid, merged.get("shape", DEFAULT_SHAPE))
    k = kw["shape"].k
    kw["block"] = Block(api, fmt, size, global_scale, input_dtype)
    if api in ("scaled_matmul", "lax_scaled_dot") and k % size:
        raise CaseError(path, line, cid, "shape.k", f"{api} infers the block size as k // (scale columns), so k={k} "
                        f"must be a multiple of block_size {size}; use hand_written or scaled_dot_general "
                        "for a ragged last block")
    fp4 = "float4_e2m1fn" in (kw["a_dtype"], kw["b_dtype"])
    if api == "scaled_dot_general" and fmt == "nvfp4":
        fp4 = True
    if fp4 and k % 2:
        raise CaseError(path, line, cid, "shape.k", f"float4_e2m1fn packs two values a byte: k={k} must be even")
    return kw


def scale_columns(k: int, block: int) -> int:
    """Scales per row: one per block, the last block possibly ragged."""
    return -(-k // block)



SCALED_DOT_TRITON_FLAG = "xla_gpu_experimental_scaled_dot_with_triton"


def case_options(case: Case) -> dict | None:
    """XLA flags a case sets on top of its profile (only where the installed XLA has them)."""
    spec = spec_of(case)
    return None if spec.scaled_dot_triton is None else {SCALED_DOT_TRITON_FLAG: spec.scaled_dot_triton}


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """Arguments of a block-scaled case: operands, their per-block scales, global scales."""
    spec = spec_of(case)
    block, s = spec.block, spec.shape
    lead = (s.batch,) if s.batch else ()
    kc = scale_columns(s.k, block.size)
    if block.api == "scaled_dot_general":
        args = [("a", lead + (s.m, s.k), block.input_dtype),
                ("b", lead + ((s.n, s.k) if spec.transpose_b else (s.k, s.n)), block.input_dtype)]
        if block.global_scale:
            args.append(("global_scale", (1,), "float32"))
        return args
    args = [
        ("a", lead + (s.m, s.k), spec.a_dtype),
        ("b", lead + ((s.n, s.k) if spec.transpose_b else (s.k, s.n)), spec.b_dtype),
        ("a_scales", lead + (s.m, kc), spec.scale_dtype),
        ("b_scales", lead + ((s.n, kc) if spec.transpose_b else (kc, s.n)), spec.scale_dtype),
    ]
    if block.global_scale:
        args += [("a_global", (), "float32"), ("b_global", (), "float32")]
    return args


def render(case: Case) -> Rendered:
    args = arg_specs(case)
    spec = spec_of(case)
    block = spec.block
    batched = spec.shape.batch is not None
    rank = 3 if batched else 2
    b_contract = rank - 1 if spec.transpose_b else rank - 2
    batch = "(0,), (0,)" if batched else "(), ()"
    api_name = API_FUNCTIONS[block.api] or "a hand-written dequantize + dot_general"
    doc = docstring(case) + (
        f"Block-scaled {block.format.upper()}-style matmul through {api_name}: blocks of {block.size} "
        f"along k, {spec.scale_dtype} scales" + (", a float32 global scale" if block.global_scale else "") + ".\n")
    source = ENV.get_template("block.py.j2").render(
        case=case, spec=spec, docstring=doc, args=args, params=[name for name, _, _ in args], batched=batched,
        dims=f"((({rank - 1},), ({b_contract},)), ({batch}))",
        api_fn=API_FUNCTIONS[block.api], api_name=API_FUNCTIONS[block.api] or "a hand-written dequantize + dot_general",
    )
    return Rendered(case.id, source, ())


def reduction_fields(case: Case) -> dict:
    raise ValueError(f"case '{case.id}' is kind: block_scaled; `reduce` simplifies pattern fields only")


def simplifications(fields: dict) -> list[tuple[str, dict]]:
    return []  # `fp8-check reduce` and the minimal repro work on pattern fields
