"""The per-gemm field rules of harness/verdict.py, and the class names both use.

Each rule maps one differing gemm field (before -> after) to `(class, why)` pairs;
the README's "Verdicts" section states them. Pure: no I/O, no JAX.
"""

from __future__ import annotations

from typing import Any, Iterable

from harness.pipeline.signature import FP8_TYPES

REGRESSION, IMPROVEMENT, NEUTRAL, MIXED = "regression", "improvement", "neutral", "mixed"
LINE_CLASSES = (REGRESSION, IMPROVEMENT, NEUTRAL)
CLASSES = (REGRESSION, IMPROVEMENT, NEUTRAL, MIXED)

_SIGNATURE_KEYS = ("kernels", "launches", "gemms", "unfused")
_BYTES = {
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e3m4": 1, "f8e8m0fnu": 1,
    "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "f32": 4, "s32": 4, "tf32": 4, "f64": 8, "s64": 8,
}
_SCALE_ROLES = ("a_scale", "b_scale", "c_scale", "d_scale")
_EPILOGUE_PARTS = ("BIAS", "RELU", "GELU", "AUX")


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


MISSING = _Missing()


def _list(value: Any) -> list:
    return list(value) if isinstance(value, list) else []



def _family(target: Any) -> str:
    t = str(target)
    if t.startswith("__cublas$lt$matmul$f8"):
        return "cublas-fp8"
    if t.startswith("__cublas"):
        return "cublas"
    if t.startswith("__triton") or "triton" in t:
        return "triton"
    if t.startswith("__cudnn"):
        return "cudnn"
    return "plain"  # a dot left in a loop/input fusion, or a bare dot: no gemm emitter


def _is_fp8(dtype: Any) -> bool:
    return str(dtype) in FP8_TYPES


def _fp8_gemm(g: dict) -> bool:
    dts = g.get("operand_dtypes") or []
    return len(dts) == 2 and all(_is_fp8(d) for d in dts)


def _bytes(dtypes: Iterable[Any]) -> int | None:
    total = 0
    for d in dtypes:
        if str(d) not in _BYTES:
            return None
        total += _BYTES[str(d)]
    return total


def _width_change(before: list, after: list, what: str) -> tuple[str, str]:
    fb, fa = sum(map(_is_fp8, before)), sum(map(_is_fp8, after))
    b, a = "x".join(map(str, before)) or "-", "x".join(map(str, after)) or "-"
    if fa < fb:
        return REGRESSION, f"{what} upcast from FP8 ({b} -> {a})"
    if fa > fb:
        return IMPROVEMENT, f"{what} FP8 again ({b} -> {a})"
    nb, na = _bytes(before), _bytes(after)
    if nb is not None and na is not None and na != nb:
        return (REGRESSION, f"{what} wider ({b} -> {a})") if na > nb else (IMPROVEMENT, f"{what} narrower ({b} -> {a})")
    return NEUTRAL, f"{what} {b} -> {a}"


def _present(value: Any) -> bool:
    return value is not MISSING and value is not None and value is not False


def gemm_field(key: str | None, sub: str | None, before: Any, after: Any, gb: dict, ga: dict) -> list[tuple[str, str]]:
    name = str(ga.get("target") or gb.get("target") or "gemm")
    triton = _family(name) == "triton"
    if key is None:  # a whole gemm appeared or disappeared
        if before is MISSING:
            fp8 = _fp8_gemm(after) if isinstance(after, dict) else False
            return [(IMPROVEMENT if fp8 else NEUTRAL, f"{'FP8 ' if fp8 else ''}gemm gained: {name}")]
        fp8 = _fp8_gemm(before) if isinstance(before, dict) else False
        return [(REGRESSION if fp8 else NEUTRAL, f"{'FP8 ' if fp8 else ''}gemm lost: {name}")]
    if key == "target":
        fb, fa = _family(before), _family(after)
        if fb == fa:
            return [(NEUTRAL, f"renamed {before} -> {after}, same structure")]
        if fb == "cublas-fp8":
            return [(REGRESSION, f"cuBLASLt FP8 gemm -> {after}")]
        if fa == "cublas-fp8":
            return [(IMPROVEMENT, f"{before} -> cuBLASLt FP8 gemm")]
        if fa == "plain":
            return [(REGRESSION, f"gemm emitter {before} -> {after} (no gemm kernel)")]
        if fb == "plain":
            return [(IMPROVEMENT, f"{before} -> gemm emitter {after}")]
        return [(NEUTRAL, f"gemm emitter {before} -> {after}")]
    if key == "operand_dtypes":
        cls, why = _width_change(_list(before), _list(after), "Triton dot operands" if triton else "gemm operands")
        return [(cls, why)]
    if key == "operands":
        return _operand_role(sub, before, after)
    if key == "output":
        if _is_fp8(before) and not _is_fp8(after):
            return [(REGRESSION, f"FP8 output no longer produced by the gemm ({before} -> {after}; requantized outside)")]
        if _is_fp8(after) and not _is_fp8(before):
            return [(IMPROVEMENT, f"the gemm writes the FP8 output ({before} -> {after}; requantization fused)")]
        return [_width_change([before], [after], "gemm output")] if before is not MISSING and after is not MISSING \
            else [(NEUTRAL, f"gemm output {before!r} -> {after!r}")]
    if key in ("amax", "damax_output"):
        what = "abs-max output (damax)" if key == "damax_output" else "abs-max"
        if _present(before) and not _present(after):
            return [(REGRESSION, f"{what} no longer computed by the gemm")]
        if _present(after) and not _present(before):
            return [(IMPROVEMENT, f"{what} computed by the gemm")]
        return [(NEUTRAL, f"{key} {before!r} -> {after!r}")]
    if key == "epilogue":
        pb, pa = _epilogue_parts(before), _epilogue_parts(after)
        lost, gained = sorted(pb - pa), sorted(pa - pb)
        if lost and not gained:
            return [(REGRESSION, f"epilogue {', '.join(lost)} moved out of the gemm ({before} -> {after})")]
        if gained and not lost:
            return [(IMPROVEMENT, f"epilogue {', '.join(gained)} fused into the gemm ({before} -> {after})")]
        out = []
        if lost:
            out.append((REGRESSION, f"epilogue {', '.join(lost)} moved out of the gemm ({before} -> {after})"))
        if gained:
            out.append((IMPROVEMENT, f"epilogue {', '.join(gained)} fused into the gemm ({before} -> {after})"))
        return out or [(NEUTRAL, f"epilogue {before} -> {after}")]
    if key == "beta":
        zb, za = not _nonzero(before), not _nonzero(after)
        if not zb and za:
            return [(REGRESSION, "C matrix no longer accumulated by the gemm (beta -> 0)")]
        if zb and not za:
            return [(IMPROVEMENT, "C matrix accumulated by the gemm (beta != 0)")]
        return [(NEUTRAL, f"beta {before} -> {after}")]
    if key == "fused_ops":
        b, a = _list(before), _list(after)
        out = [(IMPROVEMENT, f"{op} fused into the gemm fusion") for op in a if op not in b]
        out += [(REGRESSION, f"{op} no longer inside the gemm fusion") for op in b if op not in a]
        return out or [(NEUTRAL, "fused ops reordered")]
    if key == "inputs":
        b, a = _list(before), _list(after)
        fb, fa = sum(map(_is_fp8, b)), sum(map(_is_fp8, a))
        if fa < fb:
            return [(REGRESSION, f"gemm fusion loads fewer FP8 arrays ({', '.join(b)} -> {', '.join(a)}): dequantized outside")]
        if fa > fb:
            return [(IMPROVEMENT, f"gemm fusion loads FP8 arrays ({', '.join(b)} -> {', '.join(a)})")]
        return [(NEUTRAL, f"gemm fusion inputs {', '.join(b) or '-'} -> {', '.join(a) or '-'}")]
    if key == "dims":
        return [(NEUTRAL, "dot dimension numbers changed (layout)")]
    if key == "alpha_real":
        return [(NEUTRAL, f"alpha {before} -> {after}")]
    return [(NEUTRAL, f"gemms[].{key} changed (no cost rule for this field)")]


def _nonzero(value: Any) -> bool:
    try:
        return float(value) != 0.0
    except (TypeError, ValueError):
        return False


def _epilogue_parts(value: Any) -> set[str]:
    if not isinstance(value, str):
        return set()
    text = value.upper().replace("ADD", "BIAS")
    return {p for p in _EPILOGUE_PARTS if p in text}


def _operand_role(role: str | None, before: Any, after: Any) -> list[tuple[str, str]]:
    if role is None:  # the whole map: one line per role that differs
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        out = []
        for r in list(b) + [k for k in a if k not in b]:
            if b.get(r, MISSING) != a.get(r, MISSING):
                out += _operand_role(r, b.get(r, MISSING), a.get(r, MISSING))
        return out or [(NEUTRAL, "operands unchanged")]
    if role in ("a", "b"):
        if before is MISSING or after is MISSING:
            return [(NEUTRAL, f"operand {role} {before!r} -> {after!r}")]
        return [_width_change([before], [after], f"operand {role}")]
    what = {"bias": "bias vector", "c": "C matrix"}.get(role, role.replace("_", " ") if role in _SCALE_ROLES else role)
    if role in _SCALE_ROLES or role in ("bias", "c"):
        if before is not MISSING and after is MISSING:
            return [(REGRESSION, f"{what} no longer applied by the gemm (moved to its own kernel)")]
        if before is MISSING and after is not MISSING:
            return [(IMPROVEMENT, f"{what} applied by the gemm")]
        return [(NEUTRAL, f"{what} dtype {before} -> {after}")]
    return [(NEUTRAL, f"operand {role} {before!r} -> {after!r}")]
