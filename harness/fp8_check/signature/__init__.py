"""Reduce optimized HLO to a typed fusion signature: gemms, collectives, attribution, coverage (stage `signature`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._attribution import BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, PASSES, layer_matches, pass_matches
    from ._collectives import device_groups, summary
    from ._constants import baked_in
    from ._coverage import attributed, coverage, engine, is_low_engine, layer_table, layers_text
    from ._extract import Kernel, extract, kernels
    from ._filecheck import run_filecheck
    from ._hlo import Instruction, Module, dtype_of, match_bracket, parse, split_top_level
    from ._identity import LISTS, aligned, found_by_label
    from ._types import KERNEL_CONVENTION, Gemm, Signature
else:
    __getattr__, __dir__, __all__ = attach(__name__)
