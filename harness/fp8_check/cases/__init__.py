"""Case files: the case model, its kinds, loading and validating YAML, users' modules (stage `cases`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['Block', 'BlockScaledSpec', 'Case', 'CaseError', 'Closure', 'ENV', 'PatternSpec', 'Rendered', 'Shape', 'check_requirement', 'kinds', 'load', 'outside', 'py_comment', 'py_literal', 'py_text', 'read_set', 'spec_of']

_MODULES = {  # module -> the names of the face it defines
    'kinds.block_scaled': ('Block', 'BlockScaledSpec', 'spec_of'),
    'kinds.pattern': ('PatternSpec',),
    'model': ('Case', 'CaseError', 'Shape'),
    'requirement_sets': ('check_requirement', 'outside', 'read_set'),
    'source': ('ENV', 'Rendered', 'py_comment', 'py_literal', 'py_text'),
    'user_modules': ('Closure',),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.cases._model import Case, CaseError, Shape
    from fp8_check.cases._requirement_sets import check_requirement, outside, read_set
    from fp8_check.cases._source import ENV, Rendered, py_comment, py_literal, py_text
    from fp8_check.cases._user_modules import Closure
    from fp8_check.cases.kinds.block_scaled import Block, BlockScaledSpec, spec_of
    from fp8_check.cases.kinds.pattern import PatternSpec


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
