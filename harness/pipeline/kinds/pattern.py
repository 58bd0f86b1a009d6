"""The `pattern` case kind (the default): an FP8 matmul pattern described field by field.

Dequantize the FP8 inputs (optionally with scalar scales), dot, an optional epilogue
(relu, gelu, bias), optional abs-max capture, output scale, clamp and requantization:
exactly what XLA's FP8 gemm rewriter matches. Its schema (`KEYS`, `validate`), arguments
(`arg_specs`) and rendering (`render`, templates/pattern.py.j2) live here.
"""

from __future__ import annotations

from dataclasses import replace

from fp8_check.dtypes import DATA_DTYPES, FP8_MAX, JAX_FP8, JAX_FP8_FNUZ, JAX_WIDE, SCALE_DTYPES
from fp8_check.pipeline.case_model import Case, CaseError, boolean, choice, shape
from fp8_check.pipeline.source import ENV, Rendered, docstring

NAME = "pattern"
REDUCIBLE = True  # `fp8-check reduce` and the minimal repro drop and simplify its fields

DEQUANT_DTYPES = JAX_WIDE
FP8_DTYPES = JAX_FP8 + JAX_FP8_FNUZ
OUT_DTYPES = FP8_DTYPES + ("bfloat16", "float16", "float32")
INPUT_SCALES = ("none", "a", "b", "both")
OUTPUT_SCALES = ("none", "multiply", "divide")
EPILOGUES = (
    "none",
    "relu",
    "gelu_tanh",
    "gelu_exact",
    "bias",
    "bias_relu",
    "bias_gelu_tanh",
    "bias_gelu_exact",
    "matrix_bias",
)
AMAX = ("none", "pre_scale")
REQUANTIZE = ("convert", "bitcast")
KEYS = PATTERN_KEYS = (
    "id", "description", "kind", "a_dtype", "b_dtype", "shape", "transpose_b", "dequant",
    "input_scales", "scale_dtype", "output_scale", "clamp", "out_dtype", "epilogue",
    "bias_dtype", "amax", "requantize", "profiles", "targets", "known_issues", "filecheck", "price_at",
)


def validate(path, line, cid, merged: dict, raw: dict, kw: dict) -> Case:
    """The case, with the pattern fields of `merged` added to the common ones in `kw`."""
    for fld, allowed_values in (
        ("a_dtype", DATA_DTYPES), ("b_dtype", DATA_DTYPES), ("dequant", DEQUANT_DTYPES),
        ("input_scales", INPUT_SCALES), ("scale_dtype", SCALE_DTYPES), ("output_scale", OUTPUT_SCALES),
        ("out_dtype", OUT_DTYPES), ("epilogue", EPILOGUES), ("amax", AMAX), ("requantize", REQUANTIZE),
    ):
        if fld in merged:
            kw[fld] = choice(path, line, cid, fld, merged[fld], allowed_values)
    for fld in ("transpose_b", "clamp"):
        if fld in merged:
            kw[fld] = boolean(path, line, cid, fld, merged[fld])
    if "shape" in merged:
        kw["shape"] = shape(path, line, cid, merged["shape"])
    if "price_at" in merged:
        kw["price_at"] = shape(path, line, cid, merged["price_at"], "price_at")
    if "bias_dtype" in merged:
        kw["bias_dtype"] = choice(path, line, cid, "bias_dtype", merged["bias_dtype"], DEQUANT_DTYPES)

    case = Case(**kw)
    # Contradictory combinations.
    if case.clamp and case.out_dtype not in FP8_DTYPES:
        raise CaseError(path, line, cid, "clamp", f"clamp saturates to an FP8 format's range, but out_dtype is {case.out_dtype}; allowed with out_dtype: {', '.join(FP8_DTYPES)}")
    if case.requantize == "bitcast" and (case.out_dtype not in FP8_DTYPES or case.dequant == case.out_dtype):
        raise CaseError(path, line, cid, "requantize", f"bitcast reinterprets the {case.dequant} result as FP8 bytes; it needs an FP8 out_dtype, got {case.out_dtype}; allowed: {', '.join(REQUANTIZE)}")
    if "bias_dtype" in raw and not case.has_bias:
        raise CaseError(path, line, cid, "bias_dtype", f"set, but epilogue '{case.epilogue}' has no bias; allowed with epilogue: bias, bias_relu, bias_gelu_tanh, bias_gelu_exact, matrix_bias")
    if "scale_dtype" in raw and case.input_scales == "none" and case.output_scale == "none":
        raise CaseError(path, line, cid, "scale_dtype", "set, but the case has no scale (input_scales: none, output_scale: none)")
    if case.has_bias and case.bias_dtype is None:
        case = replace(case, bias_dtype=case.dequant)
    return case




def case_options(case: Case) -> dict | None:
    return None


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """The (name, shape, dtype) of each argument, in call order."""
    s = case.shape
    lead = (s.batch,) if s.batch else ()
    args: list[tuple[str, tuple[int, ...], str]] = [("a", lead + (s.m, s.k), case.a_dtype)]
    args.append(("b", lead + ((s.n, s.k) if case.transpose_b else (s.k, s.n)), case.b_dtype))
    if case.input_scales in ("a", "both"):
        args.append(("a_scale", (), case.scale_dtype))
    if case.input_scales in ("b", "both"):
        args.append(("b_scale", (), case.scale_dtype))
    bias = case.bias_dtype or case.dequant  # validate() sets it for every case with a bias
    if case.epilogue == "matrix_bias":
        args.append(("bias", lead + (s.m, s.n), bias))
    elif case.has_bias:
        args.append(("bias", (s.n,), bias))
    if case.output_scale != "none":
        args.append(("out_scale", (), case.scale_dtype))
    return args



def render(case: Case) -> Rendered:
    args = arg_specs(case)
    batched = case.shape.batch is not None
    rank = 3 if batched else 2
    source = ENV.get_template("pattern.py.j2").render(
        case=case,
        docstring=docstring(case),
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


