"""Across JAX versions: released versions (releases), per-version environments (envs),
the case x version matrix (matrix) and bisection to the first bad version (bisect)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['Env', 'InstallError', 'Manager', 'OtherEnvironments', 'SELECTIONS', 'VersionError', 'available', 'between', 'envs', 'find_uv', 'format_list', 'jax_index', 'newest_on_index', 'parse_version', 'requirement_envs', 'requirements', 'select_range', 'shared_xla', 'sort_versions', 'wheels', 'xla_commits']

_MODULES = {  # module -> the names of the face it defines
    'envs': ('Env', 'InstallError', 'Manager'),
    'other_environments': ('OtherEnvironments',),
    'releases': ('SELECTIONS', 'VersionError', 'available', 'between', 'format_list', 'jax_index', 'newest_on_index', 'parse_version', 'select_range', 'sort_versions'),
    'uvbin': ('find_uv',),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.versions._envs import Env, InstallError, Manager
    from fp8_check.versions._other_environments import OtherEnvironments
    from fp8_check.versions._uvbin import find_uv
    from fp8_check.versions.releases import (
        SELECTIONS,
        VersionError,
        available,
        between,
        format_list,
        jax_index,
        newest_on_index,
        parse_version,
        select_range,
        sort_versions,
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
