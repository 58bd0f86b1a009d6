"""The per-field rules of harness/fp8_check/verdict/classify.py for gemms and block-scaled matmuls, and the class names both use.

Each rule maps one differing field (before -> after) to `(class, why)` pairs and states, with
`@explained`, what it calls a regression and an improvement: the rules table of docs/verdicts.md is
generated from these statements (docs/hooks.py), never retyped. Every field of `Gemm` and `BlockScaling` has an entry in
`GEMM_RULES` / `BLOCK_RULES`: a rule, or `Neutral(reason)` saying why it costs nothing
(tests/test_verdict_fields.py fails for a field with neither). Dtype questions (is it
narrow? did it get wider?) are answered by harness/fp8_check/core/dtypes.py. Pure: no I/O, no JAX.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence, TypeVar

from fp8_check import platforms
from fp8_check.core import dtypes
from fp8_check.verdict import device_validity
from fp8_check.verdict.comparator import MISSING

REGRESSION, IMPROVEMENT, NEUTRAL, MIXED = "regression", "improvement", "neutral", "mixed"
LINE_CLASSES = (REGRESSION, IMPROVEMENT, NEUTRAL)
CLASSES = (REGRESSION, IMPROVEMENT, NEUTRAL, MIXED)

_SIGNATURE_KEYS = ("kernels", "launches", "gemms", "unfused")
_SCALE_ROLES = ("a_scale", "b_scale", "c_scale", "d_scale")
_EPILOGUE_PARTS = ("BIAS", "RELU", "GELU", "AUX")




class Finding(NamedTuple):
    """What a rule found in one field: its class, why, and whether it decides the whole verdict.

    `decides`: this line alone makes the change a regression, whatever else improved (the FP8 gemm
    itself is gone). A rule states it here, in data; nothing reads a rule's wording to find out."""

    cls: str
    why: str
    decides: bool = False


@dataclass(frozen=True)
class Explained:
    """What a rule calls a regression and an improvement, one line each, stated next to the rule."""

    regression: str
    improvement: str = "the reverse"


_F = TypeVar("_F", bound=Callable[..., Any])


def explained(regression: str, improvement: str = "the reverse") -> Callable[[_F], _F]:
    """Decorator: attach the rule's `Explained` statement (read by `explanation`)."""
    def mark(rule: _F) -> _F:
        rule.__dict__["explained"] = Explained(regression, improvement)  # a function (or closure) carries it
        return rule
    return mark


def explanation(rule: object) -> Explained | None:
    """The statement a rule carries, or None for a rule nobody explained."""
    found = getattr(rule, "explained", None)
    return found if isinstance(found, Explained) else None


def _list(value: Any) -> list:
    return list(value) if isinstance(value, list) else []



def _family(target: Any) -> str:
    t = str(target)
    library = platforms.engine_of(t)
    if library is not None and library.family != "cudnn":
        return library.family
    if t.startswith("__triton") or "triton" in t:
        return "triton"
    if library is not None:
        return library.family
    return "plain"  # a dot left in a loop/input fusion, or a bare dot: no gemm emitter


def _fp8_engine(target: Any) -> bool:
    """The gemm library call whose every call is an FP8 gemm (cuBLASLt's, hipBLASLt's FP8 call): its platform says."""
    library = platforms.engine_of(str(target))
    return library is not None and library.fp8


def _is_fp8(dtype: Any) -> bool:
    """Narrow (FP8, FP4 or an E8M0 scale): see harness/fp8_check/core/dtypes.py."""
    return dtypes.is_narrow(dtype)


def _fp8_gemm(g: dict) -> bool:
    dts = g.get("operand_dtypes") or []
    return len(dts) == 2 and all(_is_fp8(d) for d in dts)


def _width_change(before: list, after: list, what: str) -> tuple[str, str]:
    """A dtype list's change: fewer narrow values or more bits is an upcast (regression), the reverse an improvement."""
    b, a = "x".join(map(str, before)) or "-", "x".join(map(str, after)) or "-"
    fb, fa = sum(map(_is_fp8, before)), sum(map(_is_fp8, after))
    if fa < fb:
        return REGRESSION, f"{what} upcast from {_narrow_name(before)} ({b} -> {a})"
    if fa > fb:
        return IMPROVEMENT, f"{what} {_narrow_name(after)} again ({b} -> {a})"
    change = dtypes.upcast(before, after)
    if change:
        return (REGRESSION, f"{what} wider ({b} -> {a})") if change > 0 else (IMPROVEMENT, f"{what} narrower ({b} -> {a})")
    return NEUTRAL, f"{what} {b} -> {a}"


def _narrow_name(values: list) -> str:
    """'FP8', 'FP4' or 'FP8/FP4': the narrow classes among `values` (for the why text)."""
    classes = {dtypes.dtype_class(v) for v in values if _is_fp8(v)}
    names = [n for c, n in ((dtypes.FP8, "FP8"), (dtypes.FP4, "FP4"), (dtypes.SCALE, "E8M0")) if c in classes]
    return "/".join(names) or "FP8"


@explained("a narrow type (FP8, FP4, E8M0) replaced by a wider one, whatever the field's own rule says",
           '—')
def _narrow_lost(before: Any, after: Any, what: str) -> list[tuple[str, str]]:
    """The rule every dtype-valued field shares: a narrow type replaced by a wider one is an upcast."""
    b = before if isinstance(before, list) else [before] if isinstance(before, str) else []
    a = after if isinstance(after, list) else [after] if isinstance(after, str) else []
    if not b or not a:
        return []
    fb, fa = sum(map(_is_fp8, b)), sum(map(_is_fp8, a))
    if fa < fb:
        return [(REGRESSION, f"{what} upcast from {_narrow_name(b)} ({'x'.join(b)} -> {'x'.join(a)})")]
    if fa > fb:
        return [(IMPROVEMENT, f"{what} {_narrow_name(a)} again ({'x'.join(b)} -> {'x'.join(a)})")]
    return []


def _present(value: Any) -> bool:
    return value is not MISSING and value is not None and value is not False


@dataclass(frozen=True)
class Neutral:
    """A field that costs nothing on the GPU when it changes; `reason` says why.

    The line reads `LABEL BEFORE -> AFTER` when a label is given, else the reason."""

    reason: str
    label: str | None = None

    def why(self, before: Any, after: Any) -> str:
        return f"{self.label} {before} -> {after}" if self.label else self.reason


# What a rule returns: (class, why) pairs, or a `Finding` where it states more (that it decides the verdict).
Findings = Sequence["tuple[str, str] | Finding"]
# A rule: (before, after, gemm or block before, gemm or block after, sub-key) -> [(class, why)].
Rule = Callable[[Any, Any, dict, dict, "str | None"], Findings]


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
           "device; verdict/device_validity.py)", "—")
def _rule_device(before: Any, after: Any, gb: dict, ga: dict, sub: str | None) -> list[tuple[str, str]]:
    return [(REGRESSION, device_validity.reason(before))]


# What XLA's default configuration decides where autotuning is off (a deviceless compile): Triton's tiles and
# split-K. A split-K gemm writes its partial sums in f32 and a kernel of its own reduces them; on a GPU the
# autotuner chooses. Such a change is neutral with this reason, never a regression with a price (classify.py).
DEVICELESS_DEFAULT = ("decided by XLA's deviceless default configuration (autotuning off: Triton tiles and "
                      "split-K), not by the program; a GPU autotunes this choice")

# Every field of fp8_check.signature.extract.Gemm: its rule, or why it is neutral; `device` is no field of a
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
    # attribution (harness/fp8_check/signature/attribution.py): where the gemm comes from, judged by a golden's layer rules
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


# ------------------------------------------------------------------ block-scaled matmuls (`block_scaled`)

_DECOMPOSED = "decomposed"


@explained('a block-scaled kernel (cuDNN, Triton, scaled-dot) → `decomposed`',
           'the reverse')
def _rule_form(before: Any, after: Any, bb: dict, ba: dict, sub: str | None) -> list[tuple[str, str]]:
    if before != _DECOMPOSED and after == _DECOMPOSED:
        return [(REGRESSION, f"no block-scaled kernel any more ({before} -> {after}): the scales are applied "
                             "by kernels of their own and the gemm runs on dequantized data")]
    if before == _DECOMPOSED and after != _DECOMPOSED:
        return [(IMPROVEMENT, f"a block-scaled kernel again ({before} -> {after})")]
    return [(NEUTRAL, f"block-scaled kernel {before} -> {after}")]


def _dtype_rule(what: str) -> Rule:
    def rule(before: Any, after: Any, bb: dict, ba: dict, sub: str | None) -> list[tuple[str, str]]:
        if before is MISSING or after is MISSING:
            return [(NEUTRAL, f"{what} {before!r} -> {after!r}")]
        return [_width_change(_list(before), _list(after), what)]
    return explained(f"{what} upcast (fewer FP8/FP4/E8M0 values, or wider)", "narrow again")(rule)


def _count_rule(what: str) -> Rule:
    def rule(before: Any, after: Any, bb: dict, ba: dict, sub: str | None) -> list[tuple[str, str]]:
        if isinstance(before, int) and isinstance(after, int):
            if after > before:
                return [(REGRESSION, f"{after - before} more {what} ({before} -> {after})")]
            return [(IMPROVEMENT, f"{before - after} fewer {what} ({before} -> {after})")]
        return [(NEUTRAL, f"{what}: {before!r} -> {after!r}")]
    return explained(f"more {what}", "fewer")(rule)


# Every field of fp8_check.signature.extract.BlockScaling: its rule, or why it is neutral.
BLOCK_RULES: dict[str, "Rule | Neutral"] = {
    "form": _rule_form,
    "target": Neutral("the block-scaled kernel's name; `form` and `gemms` carry what it costs",
                      label="block-scaled kernel"),
    "data_dtypes": _dtype_rule("block-scaled data"),
    "scale_dtypes": _dtype_rule("block scales at the kernel"),
    "inputs": _dtype_rule("low-precision inputs"),
    "scale_kernels": _count_rule("kernel(s) rewriting the scales outside the gemm"),
    "data_kernels": _count_rule("kernel(s) rewriting the data outside the gemm"),
    "global_scale": Neutral("which kernels read the global scale; a kernel of its own shows in `kernels` and `launches`",
                            label="global scale read by"),
}


@explained('the block-scaled matmul gone (no FP4 or E8M0 value left)',
           'a block-scaled matmul appeared')
def block_field(key: str | None, before: Any, after: Any) -> Findings:
    """`block_scaled` (key None: the whole record) or `block_scaled.KEY` changed."""
    if key is None:
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        if before is MISSING or not b:
            narrow = any(_is_fp8(d) for d in _list(a.get("data_dtypes")))
            return [(IMPROVEMENT if narrow else NEUTRAL, "a block-scaled matmul appeared")]
        if after is MISSING or not a:
            narrow = any(_is_fp8(d) for d in _list(b.get("data_dtypes")))
            return [(REGRESSION if narrow else NEUTRAL, "the block-scaled matmul is gone (no FP4 or E8M0 value left)")]
        out: list[tuple[str, str] | Finding] = []
        for k in list(b) + [k for k in a if k not in b]:
            if b.get(k, MISSING) != a.get(k, MISSING):
                out += block_field(k, b.get(k, MISSING), a.get(k, MISSING))
        return out
    rule = BLOCK_RULES.get(key)
    if rule is None:
        return [(NEUTRAL, f"block_scaled.{key} changed (no cost rule for this field)")]
    if isinstance(rule, Neutral):
        return [(NEUTRAL, rule.why(before, after))]
    return rule(before, after, {}, {}, None)


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
