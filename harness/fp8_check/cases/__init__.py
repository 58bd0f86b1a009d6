"""Case files: the case model, its kinds, loading and validating YAML, users' modules (stage `cases`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._load import discover, from_mapping, load, load_file, matching
    from ._model import Case, CaseError, Shape
    from ._requirement_sets import check_requirement, outside, read_set
    from ._source import ENV, Rendered, py_comment, py_literal, py_text
    from ._user_modules import Closure
    from .kinds import Kind, kind_of
    from .kinds.block_scaled import Block, BlockScaledSpec, spec_of
    from .kinds.pattern import PatternSpec
else:
    __getattr__, __dir__, __all__ = attach(__name__)
