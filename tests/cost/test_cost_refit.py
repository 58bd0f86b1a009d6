"""The cost model's re-fit from a device-timed calibration (fp8_check.cost._refit).

SYNTHETIC INPUT: every calibration row here is generated in this file from a stated efficiency curve plus
deterministic noise; none is a measurement and none is committed as a result. The real input is the GPU
session's `kernels.json` (docs/gpu_session.md)."""

from __future__ import annotations

import math
import random

import pytest

from fp8_check.cost._model import hardware
from fp8_check.cost._refit import Curve, Timed, refit
from fp8_check.targets import load_target

HW = hardware(load_target("h100"))
SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384),
          (1024, 4096, 4096), (4096, 1024, 4096), (4096, 4096, 1024), (2048, 8192, 4096), (8192, 2048, 8192),
          (16384, 4096, 4096), (4096, 16384, 1024)]
# The stated truth the synthetic rows come from: a kernel reaches e_max of the peak on large gemms, half of it at f_half
TRUE = {"fp8": Curve(0.62, 2.0e10), "bf16": Curve(0.78, 1.0e10)}


def synthetic_calibration(noise: float = 0.08, seed: int = 49) -> list[Timed]:
    """SYNTHETIC: kernel times a device following TRUE would show, with ±noise (log-uniform), 24 rows."""
    rng = random.Random(seed)
    rows = []
    for cls, curve in TRUE.items():
        for m, n, k in SHAPES:
            flops = 2.0 * m * n * k
            a_bytes = 1 if cls == "fp8" else 2
            compute = flops / HW.peak_for(cls) / curve.at(flops) * 1e6
            memory = (m * k * a_bytes + k * n * a_bytes + m * n * (4 if cls == "fp8" else 2)) / HW.hbm * 1e6
            us = (max(compute, memory) + HW.launch_us) * math.exp(rng.uniform(-noise, noise))
            rows.append(Timed(m, n, k, cls, us))
    return rows


def test_refit_recovers_the_synthetic_curve_and_meets_the_bar():
    fit = refit(synthetic_calibration(), HW)
    assert len(fit.rows) == 24
    for cls, truth in TRUE.items():
        assert fit.curves[cls].e_max == pytest.approx(truth.e_max, rel=0.15)
    med_before, worst_before = fit.before
    assert med_before < 0.8  # the plain roofline is optimistic on synthetic data that is slower than peak
    assert fit.within(median=1.3, worst=2.0)
    med_after, worst_after = fit.after
    assert 1 / 1.1 < med_after < 1.1 and worst_after < 1.2
    assert "Median estimated/measured" in fit.markdown() and fit.markdown().count("\n| fp8 |") == 12


def test_refit_reports_rows_it_cannot_explain():
    """SYNTHETIC: one row 5x slower than the curve (a kernel that went wrong) stays visible as off by > 2x."""
    rows = synthetic_calibration()
    rows[3] = Timed(rows[3].m, rows[3].n, rows[3].k, rows[3].cls, rows[3].measured_us * 5)
    fit = refit(rows, HW)
    assert not fit.within()
    assert max(max(r.after, 1 / r.after) for r in fit.rows) > 2.0


def test_refit_needs_two_rows_per_class_and_known_classes():
    with pytest.raises(ValueError, match="class 'bf16' has 1 row"):
        refit([Timed(1024, 1024, 1024, "fp8", 50.0), Timed(2048, 2048, 2048, "fp8", 120.0),
               Timed(1024, 1024, 1024, "bf16", 60.0)], HW)
    with pytest.raises(ValueError, match="class 'int8' is not one of"):
        refit([Timed(1024, 1024, 1024, "int8", 50.0), Timed(2048, 2048, 2048, "int8", 120.0)], HW)
