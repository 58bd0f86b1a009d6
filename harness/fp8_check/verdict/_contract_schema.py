"""A contract's schema (harness/fp8_check/verdict/_contract.py): its keys, their types and ranges, and its options,
checked when a golden is loaded; ContractError names the field and the value (one line).

Hardening round 5 (issue 43): `cost_us: 0` or below turned cost judging off in silence; NaN, inf, `operands: 5`,
`pass: [forward]`, `amax: "false"` (read as true) were taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fp8_check.signature import PASSES

DEFAULT_COST_TOLERANCE = 30.0  # % of the contract's estimated cost (docs/contracts.md says why)
OPTION_KEYS = ("cost_tolerance", "kernels")
CONTRACT_KEYS = ("matmuls", "collectives", "fp8_flops", "cost_us", "kernels")


class ContractError(ValueError):
    """A malformed contract or option: the message names the field."""


@dataclass(frozen=True)
class Options:
    cost_tolerance: float = DEFAULT_COST_TOLERANCE  # %
    kernels: bool = False  # state and judge the kernel count (off for models: elementwise work moves freely)

    def to_dict(self) -> dict:
        return {"cost_tolerance": f"{self.cost_tolerance:g}%", "kernels": self.kernels}


MAX_TOLERANCE = 1000.0  # % : a contract whose cost may move tenfold states no cost


def _number(value: Any) -> bool:
    """A YAML number (a bool is not one), finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def options_from(d: Any, where: str = "contract_options") -> Options:
    if d in (None, {}):
        return Options()
    if not isinstance(d, dict):
        raise ContractError(f"{where}: expected a mapping with keys {', '.join(OPTION_KEYS)}")
    unknown = sorted(set(d) - set(OPTION_KEYS))
    if unknown:
        raise ContractError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(OPTION_KEYS)}")
    given = d.get("cost_tolerance", DEFAULT_COST_TOLERANCE)
    try:
        tol = float(str(given).strip().rstrip("%").strip()) if isinstance(given, (str, int, float)) \
            and not isinstance(given, bool) else math.nan
    except ValueError:
        tol = math.nan
    if not (math.isfinite(tol) and 0 <= tol <= MAX_TOLERANCE):
        raise ContractError(f"{where}.cost_tolerance: expected a percentage from 0 to {MAX_TOLERANCE:g} such as 10%, "
                            f"got {str(given)[:40]!r}")
    if not isinstance(d.get("kernels", False), bool):
        raise ContractError(f"{where}.kernels: expected true or false")
    return Options(tol, bool(d.get("kernels", False)))


# The contract's schema: per key, what its value must be (checked by `validate`, one line naming the field).
MATMUL_KEYS = {"layer": str, "pass": str, "engine": str, "operands": str, "amax": bool, "epilogue": str}
COLLECTIVE_KEYS = {"layer": str, "op": str, "dtype": str, "core": str}  # core: `sparsecore` (absent: the TensorCore)


def _rows(rows: Any, where: str, schema: dict, required: tuple[str, ...]) -> None:
    if rows is None:
        return
    if not isinstance(rows, list):
        raise ContractError(f"{where}: expected a list of {{{', '.join(schema)}}}")
    for i, row in enumerate(rows):
        at = f"{where}[{i}]"
        if not isinstance(row, dict) or any(k not in row for k in required):
            raise ContractError(f"{at}: expected {{{', '.join(schema)}}} with {', '.join(required)}")
        for key, value in row.items():
            if key not in schema:
                raise ContractError(f"{at}.{key}: unknown key; allowed: {', '.join(schema)}")
            want = schema[key]
            if not isinstance(value, want) or (want is str and isinstance(value, bool)):
                raise ContractError(f"{at}.{key}: expected {'true or false' if want is bool else 'a string'}, "
                                    f"got {str(value)[:40]!r}")
        if "pass" in row and row["pass"] not in (*PASSES, "*"):
            raise ContractError(f"{at}.pass: expected one of {', '.join(PASSES)} or *, got {row['pass'][:40]!r}")


def validate(c: Any, where: str) -> dict:
    """A contract read from a golden: its schema checked (ContractError naming the field and value): rows of
    strings (`amax` a boolean, `pass` a pass name), `fp8_flops` a percentage 0..100, `cost_us` a finite number
    above 0 (0 or less would turn cost judging off), `kernels` a count."""
    if not isinstance(c, dict):
        raise ContractError(f"{where}: expected a mapping with keys {', '.join(CONTRACT_KEYS)}")
    unknown = sorted(set(c) - set(CONTRACT_KEYS))
    if unknown:
        raise ContractError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(CONTRACT_KEYS)}")
    _rows(c.get("matmuls"), f"{where}.matmuls", MATMUL_KEYS, ("layer", "engine"))
    _rows(c.get("collectives"), f"{where}.collectives", COLLECTIVE_KEYS, ("op", "dtype"))
    share, cost_us, kernels = c.get("fp8_flops"), c.get("cost_us"), c.get("kernels")
    if share is not None and not (_number(share) and 0 <= share <= 100):
        raise ContractError(f"{where}.fp8_flops: expected a percentage from 0 to 100, got {str(share)[:40]!r}")
    if cost_us is not None and not (_number(cost_us) and cost_us > 0):
        raise ContractError(f"{where}.cost_us: expected an estimated cost in µs above 0, got {str(cost_us)[:40]!r}")
    if kernels is not None and not (isinstance(kernels, int) and not isinstance(kernels, bool) and kernels >= 0):
        raise ContractError(f"{where}.kernels: expected a count (an integer >= 0), got {str(kernels)[:40]!r}")
    return c
