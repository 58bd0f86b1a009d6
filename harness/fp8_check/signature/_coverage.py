"""FP8 coverage of a signature: how many matmuls run in FP8/FP4, on which engine, and the FLOP share.

    coverage: 9 matmuls, 6 FP8/FP4 (6 cuBLASLt FP8), 3 wider (3 cuBLAS f32); 66.7 % of matmul FLOPs in FP8/FP4

and the per-layer table (layer x pass -> engine and operand dtypes) that `check`, `run -v`,
the HTML report and issue bodies show. Pure: a `Signature` in, dataclasses and text out.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fp8_check import platforms
from fp8_check.platforms import Platform
from fp8_check.signature._types import Gemm, Signature


def engine(g: Gemm, platform: Platform = platforms.DEFAULT) -> str:
    """Where the matmul runs, and on what: `cuBLASLt FP8`, `Triton FP8`, `cuDNN block-scaled`, `cuBLAS bf16`, ...
    (the gemm libraries named as on `platform`: `hipBLASLt FP8` on AMD)."""
    t = g.target or "?"
    dtypes = sorted(set(g.operand_dtypes)) or ["?"]
    kind = "x".join(dtypes)
    library = platform.engine_of(t)
    if library is not None and library.fp8:
        return library.label
    if library is not None and library.fp8_label and g.fp8:
        return library.fp8_label
    if "triton" in t:
        return "Triton FP8" if g.fp8 else f"Triton {kind}"
    if library is not None:
        return f"{library.label} {kind}"
    fused = next((p for p in platforms.registered() if g.matmul_op and g.matmul_op in p.matmul_ops), None)
    if fused is not None:  # a platform whose matmuls are fusions, no library call (TPU): named on any platform
        return f"{fused.fused_matmul_label} FP8" if g.fp8 else f"{fused.fused_matmul_label} {kind}"
    return f"{t} {kind} (no gemm emitter)"


@dataclass
class Coverage:
    matmuls: int
    low_precision: int  # FP8 or FP4 operands
    engines: dict[str, int] = field(default_factory=dict)  # engine -> matmuls, low-precision ones first
    flops: int = 0  # of the matmuls whose sizes could be read
    low_precision_flops: int = 0

    @property
    def flop_fraction(self) -> float | None:
        return self.low_precision_flops / self.flops if self.flops else None

    def line(self) -> str:
        if not self.matmuls:
            return "coverage: no matmul"
        low = {e: n for e, n in self.engines.items() if _is_low(e)}
        wide = {e: n for e, n in self.engines.items() if not _is_low(e)}
        text = f"coverage: {self.matmuls} matmul{'s' if self.matmuls != 1 else ''}, {self.low_precision} FP8/FP4"
        if low:
            text += " (" + ", ".join(f"{n} {e}" for e, n in low.items()) + ")"
        if wide:
            text += f", {self.matmuls - self.low_precision} wider (" + ", ".join(f"{n} {e}" for e, n in wide.items()) + ")"
        if self.flop_fraction is not None:
            text += f"; {100 * self.flop_fraction:.1f} % of matmul FLOPs in FP8/FP4"
        return text

    def to_dict(self) -> dict:
        return {"matmuls": self.matmuls, "fp8_or_fp4": self.low_precision, "engines": dict(self.engines),
                "flops": self.flops, "fp8_or_fp4_flops": self.low_precision_flops,
                "flop_fraction": None if self.flop_fraction is None else round(self.flop_fraction, 4)}


def is_low_engine(engine_name: str) -> bool:
    """An engine label of FP8/FP4 matmuls on any platform (`cuBLASLt FP8`, `hipBLASLt FP8`, `TPU matmul FP8`)."""
    return engine_name == "Triton FP8" or any(engine_name in p.low_precision_labels() for p in platforms.registered())


_is_low = is_low_engine


def coverage(sig: Signature, platform: Platform = platforms.DEFAULT) -> Coverage:
    engines = Counter(engine(g, platform) for g in sig.gemms)
    ordered = dict(sorted(engines.items(), key=lambda kv: (not _is_low(kv[0]), -kv[1], kv[0])))
    sized = [g for g in sig.gemms if g.flops]
    return Coverage(len(sig.gemms), sum(g.fp8 for g in sig.gemms), ordered,
                    sum(g.flops or 0 for g in sized), sum(g.flops or 0 for g in sized if g.fp8))


def attributed(sig: Signature | None) -> bool:
    """Whether any matmul of the signature carries a layer (a model, not a bare pattern)."""
    return sig is not None and any(g.layer for g in sig.gemms)


@dataclass(frozen=True)
class LayerRow:
    layer: str
    pass_: str
    engine: str
    dtypes: str  # "f8e4m3fn x f8e5m2 -> f32"
    count: int
    flops: int
    source: str


def layer_rows(sig: Signature, platform: Platform = platforms.DEFAULT) -> list[LayerRow]:
    """One row per layer x pass x engine x dtypes, in layer order (forward before backward)."""
    groups: dict[tuple, list[Gemm]] = {}
    for g in sig.gemms:
        dtypes = f"{' x '.join(g.operand_dtypes)} -> {g.output or '?'}"
        key = (g.layer or "(no layer)", g.pass_ or "-", engine(g, platform), dtypes)
        groups.setdefault(key, []).append(g)
    order = {"forward": 0, "backward-input": 1, "backward-weight": 2, "backward": 3}
    rows = [LayerRow(k[0], k[1], k[2], k[3], len(v), sum(g.flops or 0 for g in v),
                     ", ".join(sorted({g.source for g in v if g.source})))
            for k, v in groups.items()]
    return sorted(rows, key=lambda r: (r.layer, order.get(r.pass_, 9), r.engine, r.dtypes))


def layers_text(sig: Signature | None) -> str:
    """The per-layer table and the coverage line, for reports and issue bodies ('' for a bare pattern)."""
    if sig is None or not attributed(sig):
        return ""
    return "\n".join([*layer_table(sig), "", coverage(sig).line()])


def layer_table(sig: Signature, platform: Platform = platforms.DEFAULT) -> list[str]:
    """The per-layer table as aligned text lines (header first); [] when no matmul carries a layer."""
    if not attributed(sig):
        return []
    rows = layer_rows(sig, platform)
    width = max(len("layer"), *(len(r.layer) for r in rows))
    eng = max(len("engine"), *(len(r.engine) + (len(f"{r.count}x ") if r.count > 1 else 0) for r in rows))
    out = [f"{'layer':<{width}}  {'pass':<15}  {'engine':<{eng}}  operands -> output  (source)"]
    for r in rows:
        e = (f"{r.count}x " if r.count > 1 else "") + r.engine
        out.append(f"{r.layer:<{width}}  {r.pass_:<15}  {e:<{eng}}  {r.dtypes}" + (f"  ({r.source})" if r.source else ""))
    return out
