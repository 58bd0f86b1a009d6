"""Judge a signature: goldens, contracts, verdict rules, the canary, outcome codes (stage `verdict`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['BLOCK_SCALED_TARGET', 'CANARY', 'CODES', 'CanaryError', 'CanaryResult', 'Code', 'CudnnCanaryError', 'FAIL', 'FieldDiff', 'LayerRuleError', 'NEUTRAL', 'NEW', 'NumericsResult', 'Outcome', 'OutputCheck', 'PASS', 'PROBE', 'UNRESOLVED', 'UNSUPPORTED', 'Verdict', 'XFAIL', 'XPASS', 'answer', 'any_failure', 'canary', 'check_canary', 'check_cudnn', 'classify_extra', 'code', 'comparator', 'contract', 'contract_judge', 'cudnn_threshold', 'device_validity', 'expects_cudnn', 'golden', 'golden_source', 'is_collective_path', 'is_contract', 'parse', 'rules']

_MODULES = {  # module -> the names of the face it defines
    'canary': ('BLOCK_SCALED_TARGET', 'CANARY', 'CanaryError', 'CanaryResult', 'CudnnCanaryError', 'PROBE', 'check_canary', 'check_cudnn', 'cudnn_threshold', 'expects_cudnn'),
    'classify': ('Verdict', 'classify_extra'),
    'comparator': ('FieldDiff',),
    'contract_judge': ('is_contract',),
    'fp8_answer': ('answer',),
    'outcome': ('CODES', 'Code', 'FAIL', 'NEW', 'NumericsResult', 'Outcome', 'OutputCheck', 'PASS', 'UNRESOLVED', 'UNSUPPORTED', 'XFAIL', 'XPASS', 'any_failure', 'code'),
    'rules.collectives': ('is_collective_path',),
    'rules.findings': ('NEUTRAL',),
    'rules.layers': ('LayerRuleError', 'parse'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.verdict._canary import (
        BLOCK_SCALED_TARGET,
        CANARY,
        PROBE,
        CanaryError,
        CanaryResult,
        CudnnCanaryError,
        check_canary,
        check_cudnn,
        cudnn_threshold,
        expects_cudnn,
    )
    from fp8_check.verdict._classify import Verdict, classify_extra
    from fp8_check.verdict._comparator import FieldDiff
    from fp8_check.verdict._contract_judge import is_contract
    from fp8_check.verdict._fp8_answer import answer
    from fp8_check.verdict._outcome import (
        CODES,
        FAIL,
        NEW,
        PASS,
        UNRESOLVED,
        UNSUPPORTED,
        XFAIL,
        XPASS,
        Code,
        NumericsResult,
        Outcome,
        OutputCheck,
        any_failure,
        code,
    )
    from fp8_check.verdict.rules.collectives import is_collective_path
    from fp8_check.verdict.rules.findings import NEUTRAL
    from fp8_check.verdict.rules.layers import LayerRuleError, parse


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
