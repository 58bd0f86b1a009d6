"""The FP8 answer of a result: how many matmuls run in FP8 and their FLOP share, and, when a program
quantizes to FP8 but no gemm runs in FP8, why — the one place every output takes it from.

    FP8 18/21 gemms, 89 % of FLOPs         the headline: FP8/FP4 gemms / matmuls, their share of matmul FLOPs
    no FP8: the program quantizes to f8e4m3fn, f8e5m2 (OCP FP8) but mi300x (gfx942) runs only ...

The reason is found in the program and the target, in this order: the target has no FP8 gemms at all
(a100); the program's FP8 family is not the one the target's gemm library runs (OCP vs fnuz on AMD),
with the fix for flax, qwix and JAX; otherwise XLA did not rewrite the pattern into an FP8 gemm. Where
the golden itself states no FP8 gemm (an a100 golden, block-scaled on h100), it is no FP8 by design.
Pure: an Outcome in, an `Fp8Answer` out.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from fp8_check import targets
from fp8_check.core import FP4_TYPES, FP8_TYPES, hlo_name, is_narrow
from fp8_check.signature import Signature, coverage
from fp8_check.verdict._contract import fp8_op_stripped, lost_fp8  # the one reader of FP8 op components
from fp8_check.verdict._outcome import Outcome

OCP = ("f8e4m3fn", "f8e5m2")
FNUZ = ("f8e4m3fnuz", "f8e5m2fnuz")
# The same fix in the three places FP8 types are chosen, per family the target runs.
FIX = {
    "fnuz": ("use the fnuz types: flax `fp8_ops.NANOOFp8DotGeneralOp` instead of `Fp8DotGeneralOp`; "
             "qwix qtypes `float8_e4m3fnuz`/`float8_e5m2fnuz`; JAX `jnp.float8_e4m3fnuz`/`jnp.float8_e5m2fnuz`"),
    "OCP": ("use the OCP types: flax `fp8_ops.Fp8DotGeneralOp` (not `NANOOFp8DotGeneralOp`); "
            "qwix qtypes `float8_e4m3fn`/`float8_e5m2`; JAX `jnp.float8_e4m3fn`/`jnp.float8_e5m2`"),
}
_TYPE = re.compile(r"(f[48]e\d+m\d+(?:fnuz|fnu|fn)?)(?![a-z0-9])", re.IGNORECASE)  # `tensor<4xf8E4M3FN>`: no word boundary before it


@dataclass(frozen=True)
class Fp8Answer:
    matmuls: int
    fp8: int  # matmuls with FP8/FP4 operands
    share: float | None  # of matmul FLOPs in FP8/FP4 (None: no sizes)
    program_fp8: tuple[str, ...] = ()  # FP8 types the program computes with (StableHLO or optimized HLO)
    no_fp8: str = ""  # why a program that quantizes to FP8 runs no FP8 gemm ('' when that is not the case)
    by_design: bool = False  # the golden states no FP8 gemm here
    # FP8 layers (an FP8 op in their path, or FP8 in another pass) with a matmul that is not FP8 here, with the
    # cause: `Model/block1/up/Fp8DotGeneralOp_0 (forward, backward-input): fed by a dequantize pattern ...`
    lost_layers: tuple[str, ...] = ()
    layers_by_design: bool = False  # the golden states each of them wide

    @property
    def headline(self) -> str:
        """`FP8 18/21 gemms, 89 % of FLOPs` (18 of 21 matmuls run as FP8/FP4 gemms, doing 89 % of the matmul FLOPs;
        18/21 by count is 86 %: the two numbers say different things, so both are labeled); `FP8 0/15 gemms` when
        none; '' without a matmul. The one home of this label: every output takes it from here."""
        if not self.matmuls:
            return ""
        if self.share is None or not self.fp8:
            return f"FP8 {self.fp8}/{self.matmuls} gemms"
        pct = 100 * self.share
        text = f"{pct:.1f}" if (round(pct) == 100 and self.share < 1) or round(pct) == 0 else f"{pct:.0f}"
        return f"FP8 {self.fp8}/{self.matmuls} gemms, {text} % of FLOPs"  # 99.6 % stays 99.6, never a rounded 100

    @property
    def warns(self) -> bool:
        """No FP8 where FP8 was asked for, and no golden says that is by design."""
        return (bool(self.no_fp8) and not self.by_design) or (bool(self.lost_layers) and not self.layers_by_design)

    def line(self) -> str:
        """The result's own line about a missing FP8 answer ('' when FP8 runs or was never asked for); where some
        matmuls run FP8, the FP8 layers that do not, by name, with the cause."""
        if not self.no_fp8 and self.lost_layers:
            head = "by design (the golden states them wide): " if self.layers_by_design else ""
            n = len(self.lost_layers)
            return f"{head}not FP8 in {n} FP8 layer{'s' if n != 1 else ''}: " + "; ".join(self.lost_layers)
        if not self.no_fp8:
            return ""
        if self.by_design:
            return (f"no FP8 here, by design: the golden states no FP8 gemm for this target (the program computes in "
                    f"{', '.join(self.program_fp8)})")
        return "no FP8: " + self.no_fp8

    def to_dict(self) -> dict:
        return {"headline": self.headline, "matmuls": self.matmuls, "fp8": self.fp8,
                "share": None if self.share is None else round(self.share, 4), "no_fp8": self.line()}


def program_fp8_types(*texts: str | None) -> tuple[str, ...]:
    """The FP8 (and FP4) types a program's text computes with (StableHLO `f8E4M3FN`, HLO `f8e4m3fn`), in HLO
    spelling; E8M0 scales are no data type."""
    found = {m.lower() for t in texts if t for m in _TYPE.findall(t)}
    return tuple(sorted(t for t in found if t in FP8_TYPES | FP4_TYPES))


def _family(types: tuple[str, ...]) -> str:
    fams = {"fnuz" if t in FNUZ else "OCP" for t in types if t in OCP + FNUZ}
    return "/".join(sorted(fams))


def reason(sig: Signature, program_fp8: tuple[str, ...], target: targets.Target | None) -> str:
    """Why `sig` runs no FP8 gemm although its program computes in `program_fp8` ('' when it does run one, or
    the program has no FP8 type)."""
    if not program_fp8 or any(g.fp8 for g in sig.gemms) or not sig.gemms:
        return ""
    types = ", ".join(program_fp8)
    unfolded = target.platform.unfolded_dequantize(_dequantized(sig.gemms, program_fp8)) if target is not None else ""
    if unfolded:  # a platform whose compiler does not fold the dequantize pattern (TPU): that is the cause
        capability = target.platform.fp8_capability(target.arch) if target is not None else ""
        return (f"the program quantizes to {types} but every matmul is {unfolded}"
                + (f". {capability[0].upper()}{capability[1:]}" if capability else ""))
    if target is not None and not target.native_fp8:
        return (f"the program quantizes to {types} but {target.name} ({target.arch or 'this architecture'}) has no FP8 "
                "tensor cores: every matmul runs in a wider type (expected on this GPU)")
    if target is not None:
        native = tuple(hlo_name(d) for d in target.native_fp8)
        foreign = tuple(t for t in program_fp8 if t not in native)
        if foreign and not any(t in native for t in program_fp8):
            runs = _family(native)
            return (f"the program quantizes to {', '.join(foreign)} ({_family(foreign)} FP8), which {target.name} "
                    f"({target.arch}) does not run in FP8 gemms (it runs {', '.join(native)}: {runs}); XLA upcasts "
                    f"them. Fix: {FIX.get(runs, 'quantize to ' + ', '.join(native))}")
    return (f"the program quantizes to {types} but XLA rewrote no matmul into an FP8 gemm (a pattern it did not "
            "match: see the unfused kernels with -v)")


def _dequantized(gemms, program_fp8: tuple[str, ...]) -> str:
    """The FP8 types the wide matmuls' fusions convert from (`f8e4m3fn`), else the program's."""
    found = sorted({c.split("->", 1)[0] for g in gemms if not g.fp8 for c in (g.converts or [])
                    if is_narrow(c.split("->", 1)[0])})
    return ", ".join(found or program_fp8)


def lost_layers(sig: Signature, program_fp8: tuple[str, ...], target: targets.Target | None) -> tuple[str, ...]:
    """Where some matmuls run FP8: each FP8 layer (an FP8 op in its path, or FP8 in another of its passes) with
    a matmul that is not FP8, its passes and the cause (the platform's, else XLA's missed rewrite)."""
    if not program_fp8 or not any(g.fp8 for g in sig.gemms):
        return ()
    by_layer: dict[str, list] = {}
    for g in sig.gemms:
        if g.layer:
            by_layer.setdefault(g.layer, []).append(g)
    out = []
    for layer, gemms in sorted(by_layer.items()):
        wide = [g for g in gemms if not g.fp8]
        if not wide or not (fp8_op_stripped(layer) != layer or any(g.fp8 for g in gemms)):
            continue
        passes = ", ".join(dict.fromkeys(g.pass_ or "forward" for g in wide))
        cause = target.platform.unfolded_dequantize(_dequantized(wide, program_fp8)) if target is not None else ""
        out.append(f"{layer} ({passes}): " + (cause or "XLA rewrote its matmul into no FP8 gemm (a pattern it did not "
                                                        "match: see the unfused kernels with -v)"))
    return tuple(out)


def _golden_states_wide(expected: dict | None, sig: Signature) -> bool:
    """The golden's contract states every lost layer's matmuls wide (blessed so)."""
    c = expected.get("contract") if isinstance(expected, dict) else None
    if not isinstance(c, dict):
        return False
    return not lost_fp8(c, sig)


def _golden_says_no_fp8(expected: dict | None) -> bool:
    if not isinstance(expected, dict):
        return False
    c = expected.get("contract")
    if isinstance(c, dict):
        rows = c.get("matmuls") or []
        return bool(rows) and not any(is_narrow(str(r.get("operands", "")).split(" x ")[0]) for r in rows
                                      if isinstance(r, dict))
    gemms = expected.get("gemms")
    if isinstance(gemms, list) and gemms:
        return not any(isinstance(g, dict) and any(is_narrow(str(d)) for d in g.get("operand_dtypes") or [])
                       for g in gemms)
    return False


@functools.lru_cache(maxsize=64)
def _target(name: str) -> targets.Target | None:
    try:
        return targets.load_target(name)
    except Exception:  # a results file from elsewhere may name a target this checkout lacks
        return None


def answer(out: Outcome) -> Fp8Answer:
    """The FP8 answer of one result (an empty one without a signature)."""
    sig = out.signature
    if sig is None:
        return Fp8Answer(0, 0, None)
    cov = coverage(sig)
    program = program_fp8_types(out.stablehlo, out.hlo)
    target = _target(out.target)
    why = reason(sig, program, target) if program and not cov.low_precision else ""
    layers = lost_layers(sig, program, target) if program and cov.low_precision else ()
    return Fp8Answer(cov.matmuls, cov.low_precision, cov.flop_fraction, program, why,
                     bool(why) and _golden_says_no_fp8(out.expected), layers,
                     bool(layers) and _golden_states_wide(out.expected, sig))
