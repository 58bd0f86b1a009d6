"""What a change costs, as a number that cannot mislead (harness/fp8_check/cost/_model.py computes it).

A `CostDelta` holds the estimates before and after a change on one GPU, and how far they can be trusted:

- `bound`: "" — both sides priced from known kernels (exact within the model); "at least" — a layer lost FP8
  and the rest of the baseline is not known well enough to net against: the FP8 loss alone (`floor_us`,
  never negative) is what is claimed; "at most" — the golden lists kernels whose shapes are unknown, priced
  as bare launches, so the baseline is a lower bound and the change can only cost less than the difference;
- a change smaller than the model's resolution (`RESOLUTION_US`, or `RESOLUTION_PCT` of the baseline) is
  printed as such, not as a signed number: a roofline has no finer grain than a fraction of one launch.
"""

from __future__ import annotations

from dataclasses import dataclass

AT_LEAST, AT_MOST = "at least", "at most"
RESOLUTION_US = 0.5  # a quarter of a launch (cost_table.LAUNCH_US): below it the model says nothing
RESOLUTION_PCT = 0.1


@dataclass(frozen=True)
class CostDelta:
    """What a change costs per call: the estimates before and after it, on one GPU."""

    before_us: float
    after_us: float
    hardware: str
    basis: str  # compiled: both programs priced | golden: the baseline rebuilt from the golden's signature
    shape: str = ""  # the shapes priced at when not the case's own (`price_at`)
    bound: str = ""  # "" exact within the model | "at least" | "at most" (module doc)
    floor_us: float = 0.0  # "at least": what the lost FP8 alone costs
    unknown: int = 0  # golden kernels of unknown size (priced as bare launches)
    note: str = ""  # e.g. XLA keeps FP8 at the shapes priced: the case-shape loss is priced at their dims

    @property
    def delta_us(self) -> float:
        """after - before, as priced (see `shown_us` for the number a report states)."""
        return self.after_us - self.before_us

    @property
    def shown_us(self) -> float:
        """The number stated: the FP8 loss alone for "at least", else the difference."""
        return self.floor_us if self.bound == AT_LEAST else self.delta_us

    @property
    def pct(self) -> float | None:
        return self.shown_us / self.before_us * 100 if self.before_us > 0 else None

    @property
    def below_resolution(self) -> bool:
        return abs(self.shown_us) < RESOLUTION_US or (self.pct is not None and abs(self.pct) < RESOLUTION_PCT)

    def short(self) -> str:
        """`+4.0 µs (+3.1 %)`, `at least +41.0 µs (+18.0 %)`, `at most +2.0 µs (+1.0 %)` or
        `below the model's resolution (|Δ| < 0.5 µs)`."""
        if self.below_resolution:
            res = f"below the model's resolution (|Δ| < {RESOLUTION_US:g} µs or {RESOLUTION_PCT:g} %)"
            return f"at least 0 µs: the FP8 loss is {res} at these shapes" if self.bound == AT_LEAST else res
        pct = f" ({round(self.pct, 1) + 0.0:+.1f} %)" if self.pct is not None else ""  # + 0.0: never "-0.0"
        head = f"{self.bound} " if self.bound else ""
        return f"{head}{round(self.shown_us, 1) + 0.0:+.1f} µs{pct}"

    def text(self) -> str:
        """`estimated +41.0 µs (+18.0 %) per call on H100 SXM at these shapes`."""
        where = f"at {self.shape}" if self.shape else "at these shapes"
        return f"estimated {self.short()} per call on {self.hardware} {where}"

    def detail(self) -> str:
        """The totals behind it and where the baseline comes from."""
        base = "both programs compiled" if self.basis == "compiled" else "baseline rebuilt from the golden's signature"
        why = ""
        if self.bound == AT_LEAST:
            why = "; the FP8 loss alone, with the golden's gemms repriced at FP8"
        if self.unknown:
            why += f"; {self.unknown} golden kernel(s) of unknown size priced as bare launches"
        if self.note:
            why += f"; {self.note}"
        return f"{self.before_us:.1f} -> {self.after_us:.1f} µs; {base}{why}"

    def to_dict(self) -> dict:
        pct = self.pct
        d = {"before_us": round(self.before_us, 3), "after_us": round(self.after_us, 3),
             "delta_us": round(self.shown_us, 3), "delta_pct": round(pct, 3) if pct is not None else None,
             "hardware": self.hardware, "basis": self.basis, "shape": self.shape}
        if self.bound:
            d["bound"] = self.bound
        if self.unknown:
            d["unknown_kernels"] = self.unknown
        if self.below_resolution:
            d["below_resolution"] = True
        if self.note:
            d["note"] = self.note
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "CostDelta | None":
        if not isinstance(d, dict) or "before_us" not in d:
            return None
        bound = str(d.get("bound") or "")
        return cls(float(d["before_us"]), float(d["after_us"]), str(d.get("hardware", "")), str(d.get("basis", "")),
                   str(d.get("shape") or ""), bound, float(d.get("delta_us") or 0.0) if bound == AT_LEAST else 0.0,
                   int(d.get("unknown_kernels") or 0), str(d.get("note") or ""))
