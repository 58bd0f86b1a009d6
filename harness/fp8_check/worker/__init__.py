"""What runs inside the compile worker, in any JAX environment (JAX and the standard library only) (stage `worker`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['BACKEND_QUESTIONS', 'not_representative', 'TOPOLOGY_LINE', 'aot', 'device_count', 'dnn_field_read', 'dnn_fields_written', 'missing_module', 'strip_version_fields', 'target_config_for', 'target_view', 'topology_of']

_MODULES = {  # module -> the names of the face it defines
    'aot': ('TOPOLOGY_LINE', 'device_count', 'dnn_field_read', 'dnn_fields_written', 'strip_version_fields', 'target_config_for', 'topology_of'),
    'device_view': ('BACKEND_QUESTIONS', 'not_representative', 'target_view'),
    'serve': ('missing_module',),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.worker._aot import (
        TOPOLOGY_LINE,
        device_count,
        dnn_field_read,
        dnn_fields_written,
        strip_version_fields,
        target_config_for,
        topology_of,
    )
    from fp8_check.worker._device_view import BACKEND_QUESTIONS, not_representative, target_view
    from fp8_check.worker.serve import missing_module


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
