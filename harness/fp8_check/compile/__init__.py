"""Render a case, compile it in a worker, cache and share compilations, export users' callables (stage `compile`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['Compilation', 'CompileCache', 'CompileRequest', 'CompileService', 'Compiler', 'CompilerPool', 'DEFAULT_TIMEOUT', 'FailureKind', 'ReplayCompiler', 'WorkerError', 'default_profile_for', 'arg_specs', 'cache_dir', 'case_options', 'check_process', 'cpu_only_without_gpu', 'export_callable', 'find_results', 'non_native_fp8', 'pool', 'replays_autotune', 'results_for', 'sharding_of', 'target_devices']

_MODULES = {  # module -> the names of the face it defines
    'autotune_replay': ('ReplayCompiler', 'default_profile_for', 'find_results', 'replays_autotune', 'results_for'),
    'cache': ('CompileCache', 'cache_dir'),
    'export': ('cpu_only_without_gpu', 'export_callable', 'non_native_fp8', 'sharding_of', 'target_devices'),
    'pool': ('CompilerPool',),
    'render': ('arg_specs', 'case_options'),
    'service': ('Compilation', 'CompileRequest', 'CompileService', 'Compiler', 'DEFAULT_TIMEOUT', 'FailureKind', 'WorkerError'),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.compile._autotune_replay import (
        ReplayCompiler,
        default_profile_for,
        find_results,
        replays_autotune,
        results_for,
    )
    from fp8_check.compile._cache import CompileCache, cache_dir
    from fp8_check.compile._export import cpu_only_without_gpu, export_callable, non_native_fp8, sharding_of, target_devices
    from fp8_check.compile._pool import CompilerPool
    from fp8_check.compile._render import arg_specs, case_options
    from fp8_check.compile._service import (
        DEFAULT_TIMEOUT,
        Compilation,
        Compiler,
        CompileRequest,
        CompileService,
        FailureKind,
        WorkerError,
    )


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
