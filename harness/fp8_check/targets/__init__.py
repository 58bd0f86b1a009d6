"""What a case is compiled for: GPU target specs (with their data), profiles, modes (stage `targets`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._autotune_results import (
        AUTOTUNE_DIR,
        FORMAT_OPTION,
        LOAD_OPTION,
        LOG_ENV,
        WRITTEN_BACKENDS,
        AutotuneResultsError,
        Coverage,
        Entry,
        ReplayKey,
        ResultsFile,
        capture_options,
        coverage,
        format_results,
        key_options,
        load_results,
        logged_loaded,
        replay_options,
        results_path,
        shown_path,
        stand_in,
    )
    from ._specs import (
        MODES,
        MULTI_DEVICE_TARGETS,
        PROFILES,
        TARGET_DIR,
        Target,
        TargetSpecError,
        all_target_names,
        as_profile,
        as_target,
        canonical_target,
        gpu_present,
        load_target,
        parse_target,
        platform_of,
        platform_target_names,
        profile_alias,
        profile_applies,
        profile_label,
        resolve_mode,
        target_names,
    )
else:
    __getattr__, __dir__, __all__ = attach(__name__)
