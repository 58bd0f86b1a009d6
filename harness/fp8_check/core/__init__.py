"""The shared vocabulary: errors and exit codes, dtypes, bounded YAML, checked names and outputs, versions (stage `core`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._about import DISTRIBUTION, installed, version_line
    from ._dtypes import (
        BITS,
        BLOCK_SCALE_DTYPES,
        DATA_DTYPES,
        FP4,
        FP4_TYPES,
        FP8,
        FP8_MAX,
        FP8_TYPES,
        JAX_FP8,
        JAX_FP8_FNUZ,
        JAX_WIDE,
        NARROW_TYPES,
        SCALE,
        SCALE_DTYPES,
        SCALE_TYPES,
        bits,
        dtype_class,
        hlo_name,
        is_fp8,
        is_narrow,
        upcast,
    )
    from ._errors import (
        EXIT_ENV,
        EXIT_FAIL,
        EXIT_OK,
        EXIT_USAGE,
        BadInput,
        BrokenEnvironmentError,
        Fp8CheckError,
        excerpt,
        shown_path,
    )
    from ._files import ReadError, atomic_write, checkout, package_path, read_text, remove_stale_temporaries
    from ._names import UnsafeName, check, inside
    from ._outputs import Output, OutputError, WriteError, check_dir, check_file, write_all
    from ._safe_yaml import MAX_BYTES, LimitError, LineLoader, UniqueKeyLoader, load, load_json, problem_line
    from ._timeouts import from_env, kill_group, option, resume, run, stop_all, stopping, wait_lock
    from ._typed import record
else:
    __getattr__, __dir__, __all__ = attach(__name__)
