"""Render a case, compile it in a worker, cache and share compilations, export users' callables (stage `compile`, fp8_check/stages.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._autotune_replay import ReplayCompiler, default_profile_for, find_results, replays_autotune, results_for
    from ._cache import CompileCache, cache_dir
    from ._check_process import child, run
    from ._export import cpu_only_without_gpu, export_callable, non_native_fp8, sharding_of, target_devices
    from ._pool import CompilerPool, PoolOptions, add_options, default_jobs, from_options
    from ._render import arg_specs, case_options, render, repro, repro_needs, repro_script
    from ._service import DEFAULT_TIMEOUT, Compilation, Compiler, CompileRequest, CompileService, FailureKind, WorkerError
else:
    __getattr__, __dir__, __all__ = attach(__name__)
