"""The shared vocabulary: errors and exit codes, dtypes, bounded YAML, checked names and outputs, versions (stage `core`, fp8_check/stages.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = ['BLOCK_SCALE_DTYPES', 'BadInput', 'BrokenEnvironmentError', 'DATA_DTYPES', 'DISTRIBUTION', 'EXIT_ENV', 'EXIT_FAIL', 'EXIT_OK', 'EXIT_USAGE', 'FP8_MAX', 'Fp8CheckError', 'JAX_FP8', 'JAX_FP8_FNUZ', 'JAX_WIDE', 'OutputError', 'ReadError', 'SCALE_DTYPES', 'UnsafeName', 'WriteError', 'about', 'atomic_write', 'check_dir', 'check_file', 'dtypes', 'excerpt', 'files', 'load_json', 'names', 'outputs', 'package_path', 'read_text', 'record', 'remove_stale_temporaries', 'safe_yaml', 'shown_path', 'timeouts', 'version_line']

_MODULES = {  # module -> the names of the face it defines
    'about': ('DISTRIBUTION', 'version_line'),
    'dtypes': ('BLOCK_SCALE_DTYPES', 'DATA_DTYPES', 'FP8_MAX', 'JAX_FP8', 'JAX_FP8_FNUZ', 'JAX_WIDE', 'SCALE_DTYPES'),
    'errors': ('BadInput', 'BrokenEnvironmentError', 'EXIT_ENV', 'EXIT_FAIL', 'EXIT_OK', 'EXIT_USAGE', 'Fp8CheckError'),
    'files': ('atomic_write', 'excerpt', 'package_path', 'remove_stale_temporaries', 'shown_path'),
    'names': ('UnsafeName',),
    'outputs': ('OutputError', 'WriteError', 'check_dir', 'check_file'),
    'safe_yaml': ('ReadError', 'load_json', 'read_text'),
    'typed': ('record',),
}
_FACE = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from fp8_check.core._about import DISTRIBUTION, version_line
    from fp8_check.core._dtypes import BLOCK_SCALE_DTYPES, DATA_DTYPES, FP8_MAX, JAX_FP8, JAX_FP8_FNUZ, JAX_WIDE, SCALE_DTYPES
    from fp8_check.core._errors import (
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
    from fp8_check.core._files import ReadError, atomic_write, package_path, remove_stale_temporaries
    from fp8_check.core._names import UnsafeName
    from fp8_check.core._outputs import OutputError, WriteError, check_dir, check_file
    from fp8_check.core._safe_yaml import load_json, read_text
    from fp8_check.core._typed import record


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
