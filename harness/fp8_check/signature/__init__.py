"""Reduce optimized HLO to a typed fusion signature: gemms, collectives, attribution, coverage (stage `signature`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['Gemm', 'KERNEL_CONVENTION', 'Signature', 'attributed', 'attribution', 'baked_in', 'device_groups', 'engine', 'hlo', 'identity', 'is_low_engine', 'layer_table', 'layers_text', 'match_bracket', 'run_filecheck', 'split_top_level', 'summary']

_MODULES = {  # module -> the names of the face it defines
    'collectives': ('device_groups', 'summary'),
    'constants': ('baked_in',),
    'coverage': ('attributed', 'engine', 'is_low_engine', 'layer_table', 'layers_text'),
    'filecheck': ('run_filecheck',),
    'hlo': ('match_bracket', 'split_top_level'),
    'types': ('Gemm', 'KERNEL_CONVENTION', 'Signature'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.signature._collectives import device_groups, summary
    from fp8_check.signature._constants import baked_in
    from fp8_check.signature._coverage import attributed, engine, is_low_engine, layer_table, layers_text
    from fp8_check.signature._filecheck import run_filecheck
    from fp8_check.signature._hlo import match_bracket, split_top_level
    from fp8_check.signature._types import KERNEL_CONVENTION, Gemm, Signature


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
