"""`check`'s arguments: `--arg NAME=DTYPE[SHAPE]`, `--expect FIELD=VALUE` and `module:attr` specs, parsed into typed
values before anything is imported or compiled (cli/check.py runs the check)."""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass

from fp8_check.core import BadInput

_ARG = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([A-Za-z0-9_]+)\[([0-9,\s]*)\]$")
_INT_EXPECT = ("kernels", "gemms", "fp8_gemms")
_BOOL_EXPECT = ("damax", "fp8_output", "no_upcast_dot")
_STR_EXPECT = ("epilogue",)


class CheckUsage(BadInput, ValueError):
    """Bad input: one line naming the option and the value."""


@dataclass(frozen=True)
class ArgSpec:
    name: str
    dtype: str
    shape: tuple[int, ...]


def parse_arg(text: str) -> ArgSpec:
    """`x=bfloat16[64,128]` -> ArgSpec('x', 'bfloat16', (64, 128)); `s=float32[]` is a scalar."""
    m = _ARG.match(text.strip())
    if not m:
        raise CheckUsage(f"--arg {text!r}: expected NAME=DTYPE[SHAPE], e.g. x=float8_e4m3fn[64,128] or scale=float32[]")
    name, dtype, dims = m.groups()
    try:
        import ml_dtypes  # noqa: F401  (registers the FP8 names with numpy)
        import numpy as np

        np.dtype(getattr(ml_dtypes, dtype, dtype))
    except TypeError:
        raise CheckUsage(f"--arg {name}: unknown dtype '{dtype}' (e.g. float32, bfloat16, float8_e4m3fn, float8_e5m2, int32)") from None
    try:
        shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
    except ValueError:  # more digits than Python converts (4300)
        raise CheckUsage(f"--arg {name}: dimension too large in {dims[:40]!r}...") from None
    if any(d > 2**62 for d in shape):
        raise CheckUsage(f"--arg {name}: dimension too large: {max(shape)}")
    return ArgSpec(name, dtype, shape)


def parse_expect(items: list[str]) -> dict:
    """`--expect fp8_gemms=1 --expect epilogue=RELU` -> keyword arguments of fp8_check.api.fusion_diffs."""
    out: dict = {}
    allowed = _INT_EXPECT + _BOOL_EXPECT + _STR_EXPECT
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in allowed:
            raise CheckUsage(f"--expect {item!r}: expected KEY=VALUE with KEY one of {', '.join(allowed)}")
        if key in _INT_EXPECT:
            if not value.isdigit():
                raise CheckUsage(f"--expect {key}: expected a count, got {value!r}")
            out[key] = int(value)
        elif key in _BOOL_EXPECT:
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise CheckUsage(f"--expect {key}: expected true or false, got {value!r}")
            out[key] = value.lower() in ("true", "1", "yes")
        else:
            out[key] = value
    return out


def resolve(spec: str, option: str):
    """`package.module:attribute`, imported from the current directory or PYTHONPATH."""
    module, sep, attr = spec.partition(":")
    if not sep or not module or not re.fullmatch(r"[A-Za-z_][\w.]*", module) or not re.fullmatch(r"[A-Za-z_][\w.]*", attr):
        raise CheckUsage(f"{option} {spec!r}: expected module:function (e.g. mymodel:forward)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        raise CheckUsage(f"{option} {spec!r}: cannot import '{module}' from the current directory or PYTHONPATH: {exc}") from None
    except Exception as exc:  # the module itself fails (a SyntaxError, an exception at import time)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckUsage(f"{option} {spec!r}: importing '{module}' failed: {type(exc).__name__}: {first}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise CheckUsage(f"{option} {spec!r}: module '{module}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise CheckUsage(f"{option} {spec!r}: '{attr}' is not callable")
    return obj


def build_args(arg_specs: list[ArgSpec], factory) -> tuple[tuple, dict]:
    import jax
    import jax.numpy as jnp

    if factory is not None:
        try:
            made = factory()
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise CheckUsage(f"--args: the factory raised {type(exc).__name__}: {first}") from None
        if isinstance(made, dict):
            return (), made
        if isinstance(made, (tuple, list)):
            return tuple(made), {}
        raise CheckUsage(f"--args: the factory returned {type(made).__name__}; expected a tuple of arguments or a dict")
    return tuple(jax.ShapeDtypeStruct(a.shape, jnp.dtype(a.dtype)) for a in arg_specs), {}
