"""The one runner: what a command runs on, plan -> compile -> judge, the results file (stage `run`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._results import READABLE, Results, ResultsError, from_json, load, repro_for, write
    from ._runner import (
        CanaryGate,
        NumericsCheck,
        deviceless_unsupported,
        fail_on_type,
        fails,
        is_regression,
        job_unsupported,
        judge_signature,
        plan,
        request_for,
        run,
    )
    from ._selection import (
        BrokenEnvironment,
        UsageError,
        add_options,
        add_timeout,
        check_target_spec,
        csv,
        load_cases,
        shipped,
        targets,
    )
    from ._target_check import effective, environment_entry
else:
    __getattr__, __dir__, __all__ = attach(__name__)
