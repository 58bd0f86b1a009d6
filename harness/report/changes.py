"""What changed between adjacent JAX versions, for the HTML matrix: per cell and per row.

Pure functions over results dicts (schema fp8-check/results/1): for each row
(case x target x profile x mode) in version order,

- `cell_changes`: per version, the kernel count and — where the signature differs
  from the previous version that has one — the change's class and its classified
  field lines (harness/verdict.py);
- `features`: what the row's signature fuses (FP8 gemm, epilogue, abs-max, FP8 output);
- `timeline_svg`: a small inline SVG of the kernel count and those features across
  versions. Every text in it is escaped; it carries no script and no links.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from harness import verdict
from harness.pipeline.signature import FP8_TYPES

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

    def to_dict(self) -> dict:
        d = {"jax": self.jax, "kernels": self.kernels}
        if self.cls:
            d.update({"from": self.change_from, "class": self.cls, "summary": self.summary, "lines": self.lines})
        return d


def features(sig: dict | None) -> dict[str, bool] | None:
    if not isinstance(sig, dict) or not isinstance(sig.get("gemms"), list):
        return None
    gemms = [g for g in sig["gemms"] if isinstance(g, dict)]
    fp8 = [g for g in gemms if len(g.get("operand_dtypes") or []) == 2
           and all(d in FP8_TYPES for d in g["operand_dtypes"])]
    return {
        "FP8 gemm": bool(fp8),
        "epilogue": any((g.get("epilogue") not in (None, "DEFAULT")) or (_EPILOGUE_OPS & set(g.get("fused_ops") or []))
                        for g in gemms),
        "abs-max": any(g.get("damax_output") or g.get("amax") for g in gemms),
        "FP8 output": any(str(g.get("output")) in FP8_TYPES for g in gemms),
    }


def cell_changes(results: list[dict]) -> list[CellChange]:
    """One entry per result of a row (given oldest version first)."""
    out: list[CellChange] = []
    prev_sig, prev_v = None, None
    for r in results:
        sig = r.get("signature") if isinstance(r.get("signature"), dict) else None
        c = CellChange(str(r.get("jax", "")), sig.get("kernels") if sig else None, features(sig))
        if sig is not None:
            if prev_sig is not None:
                v = verdict.classify(prev_sig, sig)
                if v.lines:
                    c.change_from, c.cls, c.summary = prev_v, v.cls, v.summary()
                    c.lines = [x.to_dict() for x in v.lines]
            prev_sig, prev_v = sig, c.jax
        out.append(c)
    return out


def timeline_svg(row_label: str, cells: list[CellChange], step: int = 26) -> str:
    """Kernel count (line) and fused features (filled dots) per version; change markers coloured by class."""
    n = len(cells)
    left, top, chart_h, dot_gap = 70, 8, 34, 11
    width = left + step * max(n, 1) + 6
    height = top + chart_h + 8 + dot_gap * len(FEATURES) + 4
    ks = [c.kernels for c in cells if isinstance(c.kernels, int)]
    kmax = max(ks + [1])
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(row_label)}: kernels and fused features '
             f'across JAX versions">']

    def x(i: int) -> float:
        return left + step * i + step / 2

    def y(k: int) -> float:
        return top + chart_h - (k / kmax) * (chart_h - 6)

    parts.append(f'<text x="2" y="{top + 10}" class="tl-label">kernels</text>')
    points = [(x(i), y(c.kernels)) for i, c in enumerate(cells) if isinstance(c.kernels, int)]
    if len(points) > 1:
        parts.append('<polyline fill="none" stroke="#1565c0" stroke-width="1.5" points="'
                     + " ".join(f"{px:.1f},{py:.1f}" for px, py in points) + '"/>')
    for i, c in enumerate(cells):
        if not isinstance(c.kernels, int):
            continue
        tip = f"jax {c.jax}: {c.kernels} kernel{'s' if c.kernels != 1 else ''}"
        if c.cls:
            tip += f"; {c.cls} since {c.change_from}: {c.summary}"
        color = CLASS_COLORS.get(c.cls or "", "#1565c0")
        r = 4 if c.cls else 2.5
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(c.kernels):.1f}" r="{r}" fill="{color}">'
                     f'<title>{escape(tip)}</title></circle>')
        parts.append(f'<text x="{x(i):.1f}" y="{y(c.kernels) - 5:.1f}" class="tl-k" text-anchor="middle">{c.kernels}</text>')
    base = top + chart_h + 8
    for j, name in enumerate(FEATURES):
        yy = base + dot_gap * j
        parts.append(f'<text x="2" y="{yy + 3}" class="tl-label">{escape(name)}</text>')
        for i, c in enumerate(cells):
            if c.features is None:
                continue
            on = c.features.get(name, False)
            tip = f"jax {c.jax}: {name} {'fused' if on else 'not fused'}"
            parts.append(f'<circle cx="{x(i):.1f}" cy="{yy:.1f}" r="3.5" fill="{"#37474f" if on else "none"}" '
                         f'stroke="#37474f" stroke-width="1"><title>{escape(tip)}</title></circle>')
    parts.append("</svg>")
    return "".join(parts)
