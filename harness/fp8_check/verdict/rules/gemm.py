"""The rules for a signature's `gemms` (harness/fp8_check/signature/_extract.py's `Gemm`), one entry per field.

Every field of `Gemm` has an entry in `GEMM_RULES`: a rule, or `Neutral(reason)` saying why it costs nothing
(tests/verdict/test_verdict_fields.py fails for a field with neither); `gemm_field` judges a whole gemm gained or lost.
Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from typing import Any

from fp8_check import platforms
from fp8_check.verdict import _device_validity
from fp8_check.verdict._comparator import MISSING
from fp8_check.verdict.rules.findings import (
    IMPROVEMENT,
    NEUTRAL,
    REGRESSION,
    Finding,
    Findings,
    Neutral,
    Rule,
    _family,
    _is_fp8,
    _list,
    _narrow_lost,
    _width_change,
    explained,
)

_SCALE_ROLES = ("a_scale", "b_scale", "c_scale", "d_scale")
_EPILOGUE_PARTS = ("BIAS", "RELU", "GELU", "AUX")


def _fp8_engine(target: Any) -> bool:
    """The gemm library call whose every call is an FP8 gemm (cuBLASLt's, hipBLASLt's FP8 call): its platform says."""
    library = platforms.engine_of(str(target))
    return library is not None and library.fp8


def _fp8_gemm(g: dict) -> bool:
    dts = g.get("operand_dtypes") or []
    return len(dts) == 2 and all(_is_fp8(d) for d in dts)


def _present(value: Any) -> bool:
    return value is not MISSING and value is not None and value is not False


def _gemm_name(gb: dict, ga: dict) -> str:
    return str(ga.get("target") or gb.get("target") or "gemm")


@explained('the cuBLASLt FP8 gemm → another gemm; a gemm emitter → a plain fusion',
           'the reverse; a rename within one family is neutral')
def _rule_target(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> Findings:
    fb, fa = _family(before), _family(after)
    if fb == fa:
        return [(NEUTRAL, f"renamed {before} -> {after}, same structure")]
    if _fp8_engine(before):
        return [Finding(REGRESSION, f"cuBLASLt FP8 gemm -> {after}", decides=True)]  # the FP8 matmul is gone
    if _fp8_engine(after):
        return [(IMPROVEMENT, f"{before} -> cuBLASLt FP8 gemm")]
    if fa == "plain":
        return [(REGRESSION, f"gemm emitter {before} -> {after} (no gemm kernel)")]
    if fb == "plain":
        return [(IMPROVEMENT, f"{before} -> gemm emitter {after}")]
    return [(NEUTRAL, f"gemm emitter {before} -> {after}")]


@explained('operands upcast: fewer FP8 operands (for a Triton fusion: its `dot` runs on upcast operands), or wider dtypes',
           'FP8 again / narrower')
def _rule_operand_dtypes(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    triton = _family(_gemm_name(gb, ga)) == "triton"
    return [_width_change(_list(before), _list(after), "Triton dot operands" if triton else "gemm operands")]


@explained('operand `a`/`b` wider; a scale (`*_scale`), `bias` or `c` no longer fed to the gemm (moved to a kernel of its own)',
           "narrower; fed to the gemm (a wide scale's dtype, f32 → bf16, is neutral)")
def _rule_operands(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    return _operand_role(sub, before, after)


@explained('the FP8 output no longer produced by the gemm (requantized outside); a wider output',
           'the gemm writes FP8 / narrower')
def _rule_output(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    if _is_fp8(before) and not _is_fp8(after):
        return [(REGRESSION, f"FP8 output no longer produced by the gemm ({before} -> {after}; requantized outside)")]
    if _is_fp8(after) and not _is_fp8(before):
        return [(IMPROVEMENT, f"the gemm writes the FP8 output ({before} -> {after}; requantization fused)")]
    return [_width_change([before], [after], "gemm output")] if before is not MISSING and after is not MISSING \
        else [(NEUTRAL, f"gemm output {before!r} -> {after!r}")]


def _presence(key: str, what: str) -> Rule:
    def rule(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
        if _present(before) and not _present(after):
            return [(REGRESSION, f"{what} no longer computed by the gemm")]
        if _present(after) and not _present(before):
            return [(IMPROVEMENT, f"{what} computed by the gemm")]
        return [(NEUTRAL, f"{key} {before!r} -> {after!r}")]
    return explained(f"{what} no longer computed by the gemm", f"{what} computed by the gemm")(rule)


@explained('epilogue parts (BIAS, RELU, GELU, AUX) moved out of the gemm',
           'parts fused in')
def _rule_epilogue(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    pb, pa = _epilogue_parts(before), _epilogue_parts(after)
    lost, gained = sorted(pb - pa), sorted(pa - pb)
    out = []
    if lost:
        out.append((REGRESSION, f"epilogue {', '.join(lost)} moved out of the gemm ({before} -> {after})"))
    if gained:
        out.append((IMPROVEMENT, f"epilogue {', '.join(gained)} fused into the gemm ({before} -> {after})"))
    return out or [(NEUTRAL, f"epilogue {before} -> {after}")]


@explained('C no longer accumulated by the gemm (beta → 0)',
           'beta 0 → non-zero')
def _rule_beta(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    zb, za = not _nonzero(before), not _nonzero(after)
    if not zb and za:
        return [(REGRESSION, "C matrix no longer accumulated by the gemm (beta -> 0)")]
    if zb and not za:
        return [(IMPROVEMENT, "C matrix accumulated by the gemm (beta != 0)")]
    return [(NEUTRAL, f"beta {before} -> {after}")]


@explained('a pattern op no longer inside the Triton gemm fusion',
           'an op fused in')
def _rule_fused_ops(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    b, a = _list(before), _list(after)
    out = [(IMPROVEMENT, f"{op} fused into the gemm fusion") for op in a if op not in b]
    out += [(REGRESSION, f"{op} no longer inside the gemm fusion") for op in b if op not in a]
    return out or [(NEUTRAL, "fused ops reordered")]


@explained('the gemm fusion loads fewer FP8 arrays (dequantized outside)',
           'more')
def _rule_inputs(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    # a library call (no `inputs`: not a fusion) loads its operands as they are (a BLAS-Lt MX gemm: FP8 data and
    # E8M0 scales), so a move to a fusion loading the same arrays is no change in what is loaded
    b = _list(before) if before is not MISSING else _library_loads(gb)
    a = _list(after) if after is not MISSING else _library_loads(ga)
    fb, fa = sum(map(_is_fp8, b)), sum(map(_is_fp8, a))
    if fa < fb:
        return [(REGRESSION, f"gemm fusion loads fewer FP8 arrays ({', '.join(b)} -> {', '.join(a)}): dequantized outside")]
    if fa > fb:
        return [(IMPROVEMENT, f"gemm fusion loads FP8 arrays ({', '.join(b)} -> {', '.join(a)})")]
    return [(NEUTRAL, f"gemm fusion inputs {', '.join(b) or '-'} -> {', '.join(a) or '-'}")]


def _library_loads(g: dict) -> list:
    """What a gemm library call reads: its operands' dtypes (a, b, then scales and the rest), in their order."""
    ops = g.get("operands") if isinstance(g, dict) else None
    return [str(t) for t in ops.values()] if isinstance(ops, dict) else []


@explained("always: an FP8 gemm the platform's library has no kernel for (compiles deviceless, fails on the "
           "device; verdict/_device_validity.py)", "—")
def _rule_device(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    return [(REGRESSION, _device_validity.reason(before))]


# What XLA's default configuration decides where autotuning is off (a deviceless compile): Triton's tiles and
# split-K. A split-K gemm writes its partial sums in f32 and a kernel of its own reduces them; on a GPU the
# autotuner chooses. Such a change is neutral with this reason, never a regression with a price (classify.py).
DEVICELESS_DEFAULT = ("decided by XLA's deviceless default configuration (autotuning off: Triton tiles and "
                      "split-K), not by the program; a GPU autotunes this choice")

# Every field of fp8_check.signature._extract.Gemm: its rule, or why it is neutral; `device` is no field of a
# gemm but the device-validity rule's difference (`gemms[i].device`, judged by classify_extra).
GEMM_RULES: dict[str, "Rule | Neutral"] = {
    "target": _rule_target,
    "operand_dtypes": _rule_operand_dtypes,
    "operands": _rule_operands,
    "output": _rule_output,
    "amax": _presence("amax", "abs-max"),
    "damax_output": _presence("damax_output", "abs-max output (damax)"),
    "epilogue": _rule_epilogue,
    "beta": _rule_beta,
    "fused_ops": _rule_fused_ops,
    "inputs": _rule_inputs,
    "device": _rule_device,
    "dims": Neutral("dot dimension numbers changed (layout)"),
    # attribution (harness/fp8_check/signature/_attribution.py): where the gemm comes from, judged by a golden's layer rules
    "layer": Neutral("the layer the gemm belongs to (metadata; layer rules judge it)", label="layer"),
    "pass_": Neutral("the pass the gemm belongs to (forward / backward; metadata)", label="pass"),
    "source": Neutral("the source line of the gemm (metadata)", label="source"),
    "flops": Neutral("the gemm's arithmetic at this shape; what it costs is the cost estimate's to say", label="flops"),
    "alpha_real": Neutral("alpha is a scalar the gemm applies at no extra cost", label="alpha"),
    # a platform matmul's fusion (TPU): whether its operands stay FP8 is operand_dtypes' and inputs' rule
    "converts": Neutral("the type conversions inside the matmul's fusion (where a dequantization sits, which type it "
                        "computes in)", label="converts"),
    "matmul_op": Neutral("the HLO op a platform matmul is written as", label="matmul op"),
    "split_k": Neutral(DEVICELESS_DEFAULT, label="split-K"),
}


@explained('an FP8 gemm lost (a wider gemm lost or gained is neutral)',
           'an FP8 gemm gained')
def gemm_field(key: str | None, sub: str | None, before: Any, after: Any, gb: dict, ga: dict) -> Findings:
    name = _gemm_name(gb, ga)
    if key is None:  # a whole gemm appeared or disappeared
        if before is MISSING:
            fp8 = _fp8_gemm(after) if isinstance(after, dict) else False
            return [(IMPROVEMENT if fp8 else NEUTRAL, f"{'FP8 ' if fp8 else ''}gemm gained: {name}")]
        fp8 = _fp8_gemm(before) if isinstance(before, dict) else False
        return [(REGRESSION if fp8 else NEUTRAL, f"{'FP8 ' if fp8 else ''}gemm lost: {name}")]
    rule = GEMM_RULES.get(key)
    if rule is None:
        return [(NEUTRAL, f"gemms[].{key} changed (no cost rule for this field)")]
    if isinstance(rule, Neutral):
        return [(NEUTRAL, rule.why(before, after))]
    return rule(before, after, gb, ga, sub)


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
        # a wide scale's dtype costs nothing (f32 -> bf16); an E8M0 / FP8 one upcast does
        return _narrow_lost(before, after, what) or [(NEUTRAL, f"{what} dtype {before} -> {after}")]
    return _narrow_lost(before, after, f"operand {role}") or [(NEUTRAL, f"operand {role} {before!r} -> {after!r}")]


def _gemm_at(sig: dict, i: int, whole: Any) -> dict:
    if isinstance(whole, dict):
        return whole
    gemms = sig.get("gemms") if isinstance(sig, dict) else None
    if isinstance(gemms, list) and i < len(gemms) and isinstance(gemms[i], dict):
        return gemms[i]
    return {}


def judge(m: re.Match, before: Any, after: Any, b_sig: dict, a_sig: dict) -> Findings:
    """The table's entry (`gemms[i]`, `gemms[i].KEY`, `gemms[i].KEY.SUB`): `m` is its path matched; the gemm's
    other fields come from the signatures (`gemms[i]` there is the golden's i-th gemm and its counterpart)."""
    i, key, sub = int(m.group(1)), m.group(2), m.group(3)
    gemm_b = _gemm_at(b_sig, i, before if key is None else None)
    gemm_a = _gemm_at(a_sig, i, after if key is None else None)
    return gemm_field(key, sub, before, after, gemm_b, gemm_a)
