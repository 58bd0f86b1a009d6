"""`--fail-on cost:THRESHOLD`: when an estimated cost (harness/fp8_check/cost/_model.py) fails a run (harness/fp8_check/run/_runner.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from fp8_check.cost._delta import CostDelta


@dataclass(frozen=True)
class Threshold:
    """`--fail-on cost:1%` (a share of the baseline's estimate) or `cost:40us` (microseconds per call)."""

    value: float
    unit: str  # "%" | "us"

    def met_by(self, delta: CostDelta) -> bool:
        if self.unit == "us":
            return delta.shown_us >= self.value
        if delta.pct is None:  # nothing to take a share of: any added cost counts
            return delta.shown_us > 0
        return delta.pct >= self.value


def parse_threshold(text: str) -> Threshold:
    """`1%`, `0.5 %`, `40us`, `40µs` -> Threshold (ValueError with what is allowed)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(%|us|µs)\s*", text)
    if not m:
        raise ValueError(f"cost threshold {text!r}: expected a percentage such as 1% or microseconds such as 40us")
    return Threshold(float(m.group(1)), "%" if m.group(2) == "%" else "us")
