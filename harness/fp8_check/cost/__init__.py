"""Price a signature: the roofline cost model, its rates and its deltas (stage `cost`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._delta import CostDelta
    from ._model import Estimate, against_expected, between, estimate, hardware
    from ._policy import parse_threshold
    from ._refit import Timed, refit
else:
    __getattr__, __dir__, __all__ = attach(__name__)
