"""The one runner: what a command runs on, plan -> compile -> judge, the results file (stage `run`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._results import (
        READABLE,
        Results,
        ResultsError,
        from_json,
        load,
        outcome_from_json,
        outcome_to_json,
        repro_for,
        to_json,
        write,
    )
    from ._runner import (
        CanaryGate,
        NumericsCheck,
        canary_applies,
        compile_profile,
        deviceless_unsupported,
        fail_on_type,
        fails,
        is_regression,
        job_unsupported,
        judge_signature,
        plan,
        prefetch,
        price,
        request_for,
        run,
        unsupported_reason,
    )
    from ._selection import (
        DEFAULT_CASES,
        BrokenEnvironment,
        Selection,
        SelectionOptions,
        UsageError,
        add_options,
        add_timeout,
        check_spec_files,
        check_target_spec,
        comma_list,
        env_platform,
        environment_note,
        find_case,
        load_cases,
        mode_from,
        profiles_from,
        select,
        shipped,
        start_compiler,
        targets_from,
        unshipped_profiles,
    )
    from ._target_check import effective, environment_entry
else:
    __getattr__, __dir__, __all__ = attach(__name__)
