"""Price a signature: the roofline cost model, its rates and its deltas (stage `cost`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['CostDelta', 'Estimate', 'Timed', 'between', 'hardware', 'model', 'policy']

_MODULES = {  # module -> the names of the face it defines
    '_delta': ('CostDelta',),
    'model': ('Estimate', 'between', 'hardware'),
    'refit': ('Timed',),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.cost._delta import CostDelta
    from fp8_check.cost._model import Estimate, between, hardware
    from fp8_check.cost._refit import Timed


def __getattr__(name: str) -> Any:
    """A name of the face, imported from its module on first use (PEP 562): start-up stays lazy."""
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
# ---- end of the face
