"""What changed between adjacent JAX versions, for the HTML matrix: per cell and per row.

Pure functions over typed outcomes (harness/fp8_check/verdict/_outcome.py): for each row
(case x target x profile x mode) in version order,

- `cell_changes`: per version, the kernel count and — where the signature differs
  from the previous version that has one — the change's class and its classified
  field lines, by `_contract_judge.change` (the comparison matrix and bisect use);
- `features`: what the row's signature fuses (FP8 gemm, epilogue, abs-max, FP8 output);
- `timeline_svg`: a small inline SVG of the kernel count and those features across
  versions. Every text in it is escaped; it carries no script and no links.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from fp8_check.core import is_narrow
from fp8_check.cost import CostDelta
from fp8_check.signature import Signature
from fp8_check.verdict import Outcome, change, changed

FEATURES = ("FP8 gemm", "epilogue", "abs-max", "FP8 output")
CLASS_COLORS = {"regression": "#c62828", "improvement": "#2e7d32", "neutral": "#9e9e9e", "mixed": "#8e24aa"}
_EPILOGUE_OPS = {"add", "maximum", "tanh", "erf", "exponential"}


@dataclass
class CellChange:
    jax: str
    kernels: int | None
    features: dict[str, bool] | None
    change_from: str | None = None  # the previous version with a signature, when the signature changed
    cls: str | None = None
    summary: str = ""
    lines: list[dict] = field(default_factory=list)
    cost: CostDelta | None = None  # both versions priced (harness/fp8_check/cost/_model.py)

    def to_dict(self) -> dict:
        d: dict = {"jax": self.jax, "kernels": self.kernels}
        if self.cls:
            d.update({"from": self.change_from, "class": self.cls, "summary": self.summary, "lines": self.lines})
            if self.cost is not None:
                d["cost"] = self.cost.to_dict()
        return d


def features(sig: Signature | dict | None) -> dict[str, bool] | None:
    if isinstance(sig, Signature):
        sig = sig.to_dict()
    if not isinstance(sig, dict) or not isinstance(sig.get("gemms"), list):
        return None
    gemms = [g for g in sig["gemms"] if isinstance(g, dict)]
    fp8 = [g for g in gemms if len(g.get("operand_dtypes") or []) == 2
           and all(is_narrow(d) for d in g["operand_dtypes"])]
    return {
        "FP8 gemm": bool(fp8),
        "epilogue": any((g.get("epilogue") not in (None, "DEFAULT")) or (_EPILOGUE_OPS & set(g.get("fused_ops") or []))
                        for g in gemms),
        "abs-max": any(g.get("damax_output") or g.get("amax") for g in gemms),
        "FP8 output": any(is_narrow(g.get("output")) for g in gemms),
    }


def cell_changes(outcomes: list[Outcome]) -> list[CellChange]:
    """One entry per outcome of a row (given oldest version first)."""
    out: list[CellChange] = []
    prev: Outcome | None = None
    for o in outcomes:
        sig = o.signature.to_dict() if o.signature is not None else None
        c = CellChange(o.jax, sig.get("kernels") if sig else None, features(sig))
        if sig is not None:
            if prev is not None:  # the matrix's own comparison (a model against its contract: by layer and pass)
                found = change(prev, o)
                v = found[1]
                if changed(found):
                    c.change_from, c.cls, c.summary = prev.jax, v.cls, v.summary()
                    c.lines = [x.to_dict() for x in v.lines]
                    c.cost = v.cost
            prev = o
        out.append(c)
    return out


def timeline_svg(row_label: str, cells: list[CellChange], step: int = 14) -> str:
    """Kernel count (line) and fused features (filled squares; hollow: not fused) per version; the points where
    the signature changed are circles coloured by class, with a tooltip. Compact: one path per feature row."""
    n = len(cells)
    left, top, chart_h, gap = 58, 9, 26, 10
    width = left + step * max(n, 1) + 4
    height = top + chart_h + 6 + gap * len(FEATURES)
    ks = [c.kernels for c in cells if isinstance(c.kernels, int)]
    kmax = max(ks + [1])

    def x(i: int) -> int:
        return left + step * i + step // 2

    def y(k: int) -> int:
        return round(top + chart_h - (k / kmax) * (chart_h - 4))

    label = escape(f"{row_label}: kernels and fused features across JAX versions")
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" role="img" '
             f'aria-label="{label}"><title>{label}</title><text x="1" y="{top + 8}" class="tl-label">kernels</text>']
    points = [(x(i), y(c.kernels)) for i, c in enumerate(cells) if isinstance(c.kernels, int)]
    if points:
        parts.append('<polyline fill="none" stroke="#1565c0" points="' + " ".join(f"{a},{b}" for a, b in points) + '"/>')
    last = None
    for i, c in enumerate(cells):
        if not isinstance(c.kernels, int):
            continue
        if c.kernels != last:
            parts.append(f'<text x="{x(i)}" y="{y(c.kernels) - 3}" class="tl-k" text-anchor="middle">{c.kernels}</text>')
            last = c.kernels
        if c.cls:
            tip = escape(f"jax {c.jax}: {c.kernels} kernels; {c.cls} since {c.change_from}: {c.summary}")
            parts.append(f'<circle cx="{x(i)}" cy="{y(c.kernels)}" r="3.5" fill="{CLASS_COLORS.get(c.cls, "#555")}">'
                         f'<title>{tip}</title></circle>')
    for j, name in enumerate(FEATURES):
        yy = top + chart_h + 6 + gap * j
        on: list[str] = []
        off: list[str] = []
        for i, c in enumerate(cells):
            if c.features is not None:
                (on if c.features.get(name) else off).append(f"M{x(i) - 2} {yy - 2}h5v5h-5z")
        parts.append(f'<text x="1" y="{yy + 3}" class="tl-label">{escape(name)}</text>')
        if on:
            parts.append(f'<path fill="#37474f" d="{"".join(on)}"/>')
        if off:
            parts.append(f'<path fill="none" stroke="#90a4ae" d="{"".join(off)}"/>')
    parts.append("</svg>")
    return "".join(parts)
