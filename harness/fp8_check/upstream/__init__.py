"""From a regression to a ready upstream bug: XLA commit ranges, the first diverging pass,
minimal repros, case reduction and XLA-style FileCheck tests (issue #12)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['BY_REFERENCE', 'CRITERIA', 'NO_COMPILE', 'RegressionError', 'Tester', 'Verdict', 'commit_ranges', 'explain', 'issue', 'search', 'to_yaml']

_MODULES = {  # module -> the names of the face it defines
    'bisect': ('BY_REFERENCE', 'CRITERIA', 'NO_COMPILE', 'Tester', 'Verdict', 'commit_ranges', 'search'),
    'reduce': ('RegressionError', 'to_yaml'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.upstream._bisect import BY_REFERENCE, CRITERIA, NO_COMPILE, Tester, Verdict, commit_ranges, search
    from fp8_check.upstream._reduce import RegressionError, to_yaml


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
