"""Re-fit the cost model's gemm efficiency from a device-timed calibration (the GPU session's `kernels` step).

The roofline prices a gemm at its tensor-core peak (fp8_check.cost._model.price_gemm); a real kernel reaches a
fraction of it, smaller for small gemms. The re-fit gives each tensor-core class (fp8, bf16) an efficiency
curve over the gemm's FLOPs,

    efficiency(F) = e_max * F / (F + F_half)

(two numbers per class: the large-gemm efficiency and the FLOPs at which half of it is reached), fitted to
the measured kernel times in log space, and says how far the re-fitted estimates are from the measurements:
the median and worst estimated/measured ratio, before and after. A calibration is the input; nothing here is
measured.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from fp8_check.cost._model import Hardware, price_gemm

CLASS_DTYPES = {"fp8": ("f8e4m3fn", "f8e4m3fn", "f32"), "bf16": ("bf16", "bf16", "bf16")}  # as kernel_timing runs them


@dataclass(frozen=True)
class Timed:
    """One calibration row: a gemm (m, n, k) of a class, and its kernel time measured on the device (µs)."""

    m: int
    n: int
    k: int
    cls: str  # fp8, bf16
    measured_us: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


@dataclass(frozen=True)
class Curve:
    e_max: float
    f_half: float  # FLOPs

    def at(self, flops: float) -> float:
        return self.e_max * flops / (flops + self.f_half)


@dataclass(frozen=True)
class Row:
    timed: Timed
    roofline_us: float  # the cost model as it is
    refit_us: float  # with the fitted efficiency

    @property
    def before(self) -> float:
        return self.roofline_us / self.timed.measured_us

    @property
    def after(self) -> float:
        return self.refit_us / self.timed.measured_us


@dataclass(frozen=True)
class Refit:
    curves: dict[str, Curve]
    rows: tuple[Row, ...]

    @staticmethod
    def _spread(ratios: list[float]) -> tuple[float, float]:
        """(median estimated/measured, worst factor either way)."""
        return statistics.median(ratios), max(max(r, 1 / r) for r in ratios)

    @property
    def before(self) -> tuple[float, float]:
        return self._spread([r.before for r in self.rows])

    @property
    def after(self) -> tuple[float, float]:
        return self._spread([r.after for r in self.rows])

    def within(self, median: float = 1.3, worst: float = 2.0) -> bool:
        """The issue's bar: the median estimate within `median`x of the measurement, no row off by more than `worst`x."""
        med, bad = self.after
        return max(med, 1 / med) <= median and bad <= worst

    def markdown(self) -> str:
        lines = ["| class | m | n | k | measured µs | roofline µs | est./meas. before | re-fit µs | est./meas. after |",
                 "|---|---|---|---|---|---|---|---|---|"]
        for r in self.rows:
            t = r.timed
            lines.append(f"| {t.cls} | {t.m} | {t.n} | {t.k} | {t.measured_us:.1f} | {r.roofline_us:.1f} | "
                         f"{r.before:.2f} | {r.refit_us:.1f} | {r.after:.2f} |")
        curves = "; ".join(f"{c}: e_max {v.e_max:.3f}, half at {v.f_half:.3g} FLOP" for c, v in sorted(self.curves.items()))
        (mb, wb), (ma, wa) = self.before, self.after
        return (f"Efficiency curves: {curves}\n\nMedian estimated/measured {mb:.2f} before, {ma:.2f} after; worst row "
                f"off by {wb:.2f}x before, {wa:.2f}x after.\n\n" + "\n".join(lines) + "\n")


def _work_us(t: Timed, hw: Hardware) -> tuple[float, float, float]:
    """(compute µs at the tensor-core rate, memory µs, launch µs): the roofline's parts for `t`."""
    a, b, out = CLASS_DTYPES[t.cls]
    priced = price_gemm(1, t.m, t.n, t.k, a, b, out, hw)
    return t.flops / hw.peak_for(t.cls) * 1e6, priced.bytes / hw.hbm * 1e6, hw.launch_us


def _estimate(t: Timed, hw: Hardware, curve: Curve | None) -> float:
    compute, memory, launch = _work_us(t, hw)
    if curve is not None:
        compute /= max(curve.at(t.flops), 1e-6)
    return max(compute, memory) + launch


def _fit_class(rows: list[Timed], hw: Hardware) -> Curve:
    """Least squares of log(estimate/measured) over a grid of F_half; e_max in closed form for each."""
    lo = math.log10(min(r.flops for r in rows)) - 2
    hi = math.log10(max(r.flops for r in rows)) + 1
    best: tuple[float, Curve] | None = None
    for i in range(241):
        f_half = 10 ** (lo + (hi - lo) * i / 240)
        # with memory ignored, log(measured) = log(compute) - log(e_max) - log(F/(F+F_half)) + launch: solve for e_max
        logs = []
        for r in rows:
            compute, _, launch = _work_us(r, hw)
            busy = max(r.measured_us - launch, 1e-3)
            logs.append(math.log(compute * (r.flops + f_half) / r.flops / busy))
        curve = Curve(min(math.exp(statistics.fmean(logs)), 1.0), f_half)
        err = sum(math.log(_estimate(r, hw, curve) / r.measured_us) ** 2 for r in rows)
        if best is None or err < best[0]:
            best = (err, curve)
    assert best is not None
    return best[1]


def refit(rows: list[Timed], hw: Hardware) -> Refit:
    """Fit one efficiency curve per class present in `rows` (at least two rows each) and price every row with it."""
    curves: dict[str, Curve] = {}
    for cls in sorted({r.cls for r in rows}):
        mine = [r for r in rows if r.cls == cls]
        if cls not in CLASS_DTYPES:
            raise ValueError(f"calibration: class '{cls}' is not one of {', '.join(CLASS_DTYPES)}")
        if len(mine) < 2:
            raise ValueError(f"calibration: class '{cls}' has {len(mine)} row(s); a curve needs at least two")
        curves[cls] = _fit_class(mine, hw)
    out = tuple(Row(r, _estimate(r, hw, None), _estimate(r, hw, curves[r.cls])) for r in rows)
    return Refit(curves, out)
