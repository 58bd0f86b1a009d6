"""Judge a signature: goldens, contracts, verdict rules, the canary, outcome codes (stage `verdict`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._canary import CanaryError, CudnnCanaryError, check_canary, check_cudnn, expects_cudnn, requests
    from ._classify import Verdict, classify, classify_extra
    from ._comparator import FieldDiff, compare, list_diff
    from ._contract import fp8_facts, fp8_layer_rules, lost_fp8, lost_layers, matmul_rows
    from ._contract_judge import KEY, change, changed, cost_reaches, facts_of, is_contract, judge, wants_contract
    from ._device_validity import diffs, is_device_field
    from ._fp8_answer import answer
    from ._golden import (
        Expectation,
        Golden,
        GoldenError,
        bless,
        golden_files,
        golden_files_of,
        load,
        path_for,
        same_expectations,
        stale,
    )
    from ._golden_source import find
    from ._outcome import (
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
    from .rules.collectives import is_collective_path
    from .rules.findings import NEUTRAL
    from .rules.layers import LOW, LayerRule, LayerRuleError, check_layers, from_dicts, parse
else:
    __getattr__, __dir__, __all__ = attach(__name__)
