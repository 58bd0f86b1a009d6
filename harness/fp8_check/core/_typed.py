"""Type checks for records read back from JSON files (results, matrices): a wrong-typed field is a
ValueError naming it, never a TypeError deep inside the report."""

from __future__ import annotations

import dataclasses
import types
import typing
from functools import cache


@cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def matches(value, hint) -> bool:
    """`value` has type `hint` (str, int, float, bool, None, X | None, list[X], dict[K, V], a dataclass)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is list:
        return isinstance(value, list) and all(matches(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(matches(k, args[0]) and matches(v, args[1]) for k, v in value.items())
    if dataclasses.is_dataclass(hint):
        return isinstance(value, dict)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def record(cls, d, where: str) -> dict:
    """`d` as keyword arguments of dataclass `cls`: a mapping of its fields with the declared types."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(d).__name__}")
    hints = _hints(cls)
    for key, value in d.items():
        if key not in hints:
            raise ValueError(f"{where}: unknown field '{key}'")
        if not matches(value, hints[key]):
            raise ValueError(f"{where}.{key}: expected {hints[key]}, got {type(value).__name__}")
    return d
