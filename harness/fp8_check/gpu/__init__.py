"""On a real GPU: numerics against a float64 reference, target spec capture, and the
fidelity of deviceless signatures against device compiles."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['CaptureError', 'DEVICE_PROFILES', 'NO_GPU', 'PINNED', 'agreement', 'autotune_results_for', 'build', 'collect', 'collect_replayed', 'from_results', 'measure', 'numerics', 'spec_text', 'table', 'write', 'write_spec']

_MODULES = {  # module -> the names of the face it defines
    'calibrate': ('NO_GPU', 'measure', 'table'),
    'capture': ('CaptureError', 'spec_text', 'write_spec'),
    'fidelity': ('DEVICE_PROFILES', 'PINNED', 'agreement', 'autotune_results_for', 'build', 'collect', 'collect_replayed', 'from_results', 'write'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.gpu._calibrate import NO_GPU, measure, table
    from fp8_check.gpu._capture import CaptureError, spec_text, write_spec
    from fp8_check.gpu._fidelity import (
        DEVICE_PROFILES,
        PINNED,
        agreement,
        autotune_results_for,
        build,
        collect,
        collect_replayed,
        from_results,
        write,
    )


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
