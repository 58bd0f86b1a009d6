"""The one runner: what a command runs on, plan -> compile -> judge, the results file (stage `run`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['BrokenEnvironment', 'CanaryGate', 'CudnnCanaryError', 'EXIT_FAIL', 'EXIT_OK', 'Results', 'UsageError', 'add_timeout', 'check_cudnn', 'check_target_spec', 'deviceless_unsupported', 'effective', 'environment_entry', 'fails', 'is_regression', 'plan', 'results', 'runner', 'selection', 'shipped', 'target_check']

_MODULES = {  # module -> the names of the face it defines
    'results': ('Results',),
    'runner': ('CanaryGate', 'deviceless_unsupported', 'fails', 'is_regression', 'plan'),
    'selection': ('BrokenEnvironment', 'EXIT_FAIL', 'EXIT_OK', 'UsageError', 'add_timeout', 'check_target_spec', 'shipped'),
    'target_check': ('CudnnCanaryError', 'check_cudnn', 'effective', 'environment_entry'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.run._results import Results
    from fp8_check.run._runner import CanaryGate, deviceless_unsupported, fails, is_regression, plan
    from fp8_check.run._selection import (
        EXIT_FAIL,
        EXIT_OK,
        BrokenEnvironment,
        UsageError,
        add_timeout,
        check_target_spec,
        shipped,
    )
    from fp8_check.run._target_check import CudnnCanaryError, check_cudnn, effective, environment_entry


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
