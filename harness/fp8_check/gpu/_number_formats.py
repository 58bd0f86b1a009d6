"""Number formats for the numerics check: numpy dtypes of case dtype names, unit roundoff, ulp, and `Reference`,
the float64 result with its error bound that each kind's numerics (pattern_numerics.py, block_numerics.py) computes."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np


def dtype_of(name: str) -> np.dtype:
    """The numpy dtype for a case dtype name (ml_dtypes for bfloat16 and the FP8 formats)."""
    return np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)


def unit_roundoff(name: str) -> float:
    return float(ml_dtypes.finfo(dtype_of(name)).eps) / 2


def ulp(x: np.ndarray, name: str) -> np.ndarray:
    """Spacing of format `name` at magnitude |x| (subnormal spacing below the smallest normal)."""
    fi = ml_dtypes.finfo(dtype_of(name))
    mag = np.maximum(np.abs(np.asarray(x, dtype=np.float64)), float(fi.smallest_normal))
    mag = np.where(np.isfinite(mag), mag, float(fi.max))
    return np.exp2(np.floor(np.log2(mag)) - fi.nmant)


@dataclass
class Reference:
    out: np.ndarray  # float64, before rounding to the output format
    err: np.ndarray  # per-element bound on |kernel value - out| before that rounding
    amax: np.ndarray | None = None
    amax_err: np.ndarray | float = 0.0
