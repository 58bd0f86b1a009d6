"""The `pattern` case kind (the default): an FP8 matmul pattern described field by field.

Dequantize the FP8 inputs (optionally with scalar scales), dot, an optional epilogue
(relu, gelu, bias), optional abs-max capture, output scale, clamp and requantization:
exactly what XLA's FP8 gemm rewriter matches. Its fields (`PatternSpec`), schema (`KEYS`,
`validate`), arguments (`arg_specs`), rendering (`render`, templates/pattern.py.j2) and
reduction steps (`reduction_fields`, `simplifications`, used by `fp8-check reduce`) live here;
its float64 reference is harness/fp8_check/gpu/_pattern_numerics.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from fp8_check.cases._model import Case, CaseError, MatmulSpec, Shape, Spec, boolean, choice, shape
from fp8_check.cases._source import ENV, Rendered, docstring
from fp8_check.core import DATA_DTYPES, FP8_MAX, JAX_FP8, JAX_FP8_FNUZ, JAX_WIDE, SCALE_DTYPES

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
    "bias_dtype", "amax", "requantize", "profiles", "targets", "known_issues", "filecheck", "price_at", "env",
)


@dataclass(frozen=True)
class PatternSpec(MatmulSpec):
    """A pattern case's own fields (the shared matmul fields in `MatmulSpec`)."""

    KIND: ClassVar[str] = NAME
    input_scales: str = "none"
    output_scale: str = "none"
    clamp: bool = False
    epilogue: str = "none"
    bias_dtype: str | None = None
    amax: str = "none"
    requantize: str = "convert"  # how the output reaches out_dtype: astype, or lax.bitcast_convert_type
    price_at: Shape | None = None  # production shapes the cost estimate is priced at (compiled a second time)

    @property
    def has_bias(self) -> bool:
        return self.epilogue.startswith("bias") or self.epilogue == "matrix_bias"

    @property
    def priced_elsewhere(self) -> bool:
        return self.price_at is not None

    def at_production(self) -> Spec:
        return _reshaped(self, self.price_at or self.shape, self.price_at)

    def production_text(self) -> str:
        return "" if self.price_at is None else _reshaped(self, self.price_at, None).shape_text()

    def timed_at(self, shape: Shape | None) -> Spec | None:
        return _reshaped(self, shape or self.price_at or self.shape, None)


def _reshaped(spec: PatternSpec, shape: Shape, price_at: Shape | None) -> PatternSpec:
    changes: dict = {"shape": shape, "price_at": price_at}  # (mypy, reading harness/ as `harness.*`, misses inherited fields)
    return replace(spec, **changes)


def _spec(case: Case) -> PatternSpec:
    if not isinstance(case.spec, PatternSpec):
        raise ValueError(f"case '{case.id}' is not a pattern case")
    return case.spec


def validate(path, line, cid, merged: dict, raw: dict, kw: dict) -> Case:
    """The case, with the pattern fields of `merged` (its `PatternSpec`) added to the common ones in `kw`."""
    sk: dict = {}
    for fld, allowed_values in (
        ("a_dtype", DATA_DTYPES), ("b_dtype", DATA_DTYPES), ("dequant", DEQUANT_DTYPES),
        ("input_scales", INPUT_SCALES), ("scale_dtype", SCALE_DTYPES), ("output_scale", OUTPUT_SCALES),
        ("out_dtype", OUT_DTYPES), ("epilogue", EPILOGUES), ("amax", AMAX), ("requantize", REQUANTIZE),
    ):
        if fld in merged:
            sk[fld] = choice(path, line, cid, fld, merged[fld], allowed_values)
    for fld in ("transpose_b", "clamp"):
        if fld in merged:
            sk[fld] = boolean(path, line, cid, fld, merged[fld])
    if "shape" in merged:
        sk["shape"] = shape(path, line, cid, merged["shape"])
    if "price_at" in merged:
        sk["price_at"] = shape(path, line, cid, merged["price_at"], "price_at")
    if "bias_dtype" in merged:
        sk["bias_dtype"] = choice(path, line, cid, "bias_dtype", merged["bias_dtype"], DEQUANT_DTYPES)

    spec = PatternSpec(**sk)
    # Contradictory combinations.
    if spec.clamp and spec.out_dtype not in FP8_DTYPES:
        raise CaseError(path, line, cid, "clamp", f"clamp saturates to an FP8 format's range, but out_dtype is {spec.out_dtype}; allowed with out_dtype: {', '.join(FP8_DTYPES)}")
    if spec.requantize == "bitcast" and (spec.out_dtype not in FP8_DTYPES or spec.dequant == spec.out_dtype):
        raise CaseError(path, line, cid, "requantize", f"bitcast reinterprets the {spec.dequant} result as FP8 bytes; it needs an FP8 out_dtype, got {spec.out_dtype}; allowed: {', '.join(REQUANTIZE)}")
    if "bias_dtype" in raw and not spec.has_bias:
        raise CaseError(path, line, cid, "bias_dtype", f"set, but epilogue '{spec.epilogue}' has no bias; allowed with epilogue: bias, bias_relu, bias_gelu_tanh, bias_gelu_exact, matrix_bias")
    if "scale_dtype" in raw and spec.input_scales == "none" and spec.output_scale == "none":
        raise CaseError(path, line, cid, "scale_dtype", "set, but the case has no scale (input_scales: none, output_scale: none)")
    if spec.has_bias and spec.bias_dtype is None:
        spec = replace(spec, bias_dtype=spec.dequant)
    return Case(**kw, spec=spec)


def case_options(case: Case) -> dict | None:
    return None


def arg_specs(case: Case) -> list[tuple[str, tuple[int, ...], str]]:
    """The (name, shape, dtype) of each argument, in call order."""
    spec = _spec(case)
    s = spec.shape
    lead = (s.batch,) if s.batch else ()
    args: list[tuple[str, tuple[int, ...], str]] = [("a", lead + (s.m, s.k), spec.a_dtype)]
    args.append(("b", lead + ((s.n, s.k) if spec.transpose_b else (s.k, s.n)), spec.b_dtype))
    if spec.input_scales in ("a", "both"):
        args.append(("a_scale", (), spec.scale_dtype))
    if spec.input_scales in ("b", "both"):
        args.append(("b_scale", (), spec.scale_dtype))
    bias = spec.bias_dtype or spec.dequant  # validate() sets it for every case with a bias
    if spec.epilogue == "matrix_bias":
        args.append(("bias", lead + (s.m, s.n), bias))
    elif spec.has_bias:
        args.append(("bias", (s.n,), bias))
    if spec.output_scale != "none":
        args.append(("out_scale", (), spec.scale_dtype))
    return args



def render(case: Case) -> Rendered:
    args = arg_specs(case)
    spec = _spec(case)
    batched = spec.shape.batch is not None
    rank = 3 if batched else 2
    source = ENV.get_template("pattern.py.j2").render(
        case=case, spec=spec,
        docstring=docstring(case),
        args=args,
        params=[name for name, _, _ in args],
        a_scale=spec.input_scales in ("a", "both"),
        b_scale=spec.input_scales in ("b", "both"),
        batched=batched,
        a_contract=rank - 1,
        b_contract=rank - 1 if spec.transpose_b else rank - 2,
        batch_dims="(0,), (0,)" if batched else "(), ()",
        out_max=FP8_MAX.get(spec.out_dtype) if spec.clamp else None,
        max_name=spec.out_dtype.replace("float8_", "").upper() + "_MAX",
    )
    return Rendered(case.id, source, ())


# ------------------------------------------------------------ reduction (`fp8-check reduce`)

REDUCED_FIELDS = ("a_dtype", "b_dtype", "shape", "transpose_b", "dequant", "input_scales", "scale_dtype",
                  "output_scale", "clamp", "out_dtype", "epilogue", "bias_dtype", "amax", "requantize")
MIN_DIM = 16


def reduction_fields(case: Case) -> dict:
    """The pattern fields of `case` that differ from the schema defaults (what a case YAML needs)."""
    spec, default = _spec(case), PatternSpec()
    out: dict = {}
    for f in REDUCED_FIELDS:
        v = getattr(spec, f)
        if f == "shape":
            v = {k: x for k, x in (("m", v.m), ("n", v.n), ("k", v.k), ("batch", v.batch)) if x is not None}
            d = default.shape
            if v == {"m": d.m, "n": d.n, "k": d.k}:
                continue
        elif v == getattr(default, f):
            continue
        if f == "scale_dtype" and spec.input_scales == "none" and spec.output_scale == "none":
            continue
        if f == "bias_dtype" and not spec.has_bias:
            continue
        out[f] = v
    return out


def simplifications(fields: dict) -> list[tuple[str, dict]]:
    """(what is dropped, the simplified fields), simplest-first: epilogue parts, amax, bias, input and output
    scales, clamp, bitcast requantization, the requantization, scale dtype, transpose, batch, halving m, n, k."""
    out: list[tuple[str, dict]] = []

    def cand(what: str, **kw):
        new = {**fields, **kw}
        for k in [k for k, v in kw.items() if v is None]:
            new.pop(k, None)
        if new != fields:
            out.append((what, new))

    epi = fields.get("epilogue", "none")
    if epi != "none":
        cand("the epilogue", epilogue=None, bias_dtype=None)
        if epi.startswith("bias_"):
            cand("the bias", epilogue=epi[len("bias_"):], bias_dtype=None)
            cand(f"the {epi[len('bias_'):]} activation", epilogue="bias")
    if fields.get("amax", "none") != "none":
        cand("the amax", amax=None)
    scales = fields.get("input_scales", "none")
    if scales != "none":
        cand("the input scales", input_scales=None)
        if scales == "both":
            cand("the b scale", input_scales="a")
            cand("the a scale", input_scales="b")
    if fields.get("output_scale", "none") != "none":
        cand("the output scale", output_scale=None)
    if fields.get("clamp"):
        cand("the clamp", clamp=None)
    if fields.get("requantize", "convert") != "convert":
        cand("the bitcast requantization", requantize=None)
    if fields.get("out_dtype", "float32") != fields.get("dequant", "float32"):
        cand("the requantization", out_dtype=fields.get("dequant", "float32"), clamp=None, requantize=None)
    if fields.get("scale_dtype", "float32") != "float32":
        cand("the scale dtype", scale_dtype=None)
    if fields.get("transpose_b"):
        cand("the transposed b", transpose_b=None)
    shape = dict(fields.get("shape") or {"m": 64, "n": 32, "k": 64})
    if "batch" in shape:
        cand("the batch", shape={k: v for k, v in shape.items() if k != "batch"})
    for dim in ("m", "n", "k"):
        if shape.get(dim, MIN_DIM) // 2 >= MIN_DIM:
            cand(f"half of {dim}", shape={**shape, dim: shape[dim] // 2})
    return out

