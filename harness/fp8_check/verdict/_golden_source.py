"""Which golden a result is judged against: the one of its own mode, else (device mode) the deviceless one.

Goldens are kept per mode, and nearly all of them — the library's and the ones users bless on a
laptop — are recorded deviceless. A run on a GPU (`--mode device`, or `auto` with a GPU) is judged
against the device golden when there is one covering the JAX version, otherwise against the
deviceless golden of the same target and profile, and says so: a difference is then a *fidelity
finding* (the deviceless compile did not predict what XLA does on this GPU, or XLA regressed),
not a missing golden (NEW).

A release no expectation covers is judged against the nearest golden (`Golden.nearest`: the newest blessed
release before it, else the oldest after it), and says so: `settle` is the one rule for what that judgment
means, for pattern goldens and model contracts alike — a regression (or mixed) difference stays FAIL, any other
difference is NEW with its differences listed, an identical signature is PASS with the note. NEW never hides
a regression (run, matrix, check, the pytest plugin and the merged results all judge through here).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fp8_check.verdict._golden import Expectation, Golden, check_identity, load, path_for
from fp8_check.verdict._outcome import FAIL, NEW, PASS, Outcome

FALLBACK_MODE = "deviceless"


@dataclass(frozen=True)
class GoldenSource:
    golden: Golden | None
    path: Path
    mode: str  # the mode of the golden used (differs from the result's on a fallback)
    fallback: bool = False
    expectation: Expectation | None = None  # what the result is judged against (None: NEW, nothing blessed)
    nearest: str = ""  # the release `expectation` was blessed on, when none covers the result's own release

    def nearest_note(self) -> str:
        return f"against the golden of {self.nearest}: this release has none" if self.nearest else ""

    def settle(self, out: Outcome, bless_hint: str = "") -> Outcome:
        """The outcome of a result judged against the nearest release's golden (`nearest`): FAIL only for a
        regression-class difference (regression or mixed; a FAIL with no verdict to tell it by stays FAIL), NEW
        for any other difference (its diffs and verdict kept, listed), PASS with the note when nothing differs.
        Unchanged when the release has its own expectation."""
        note = self.nearest_note()
        if not note:
            return out
        if out.code is FAIL and out.verdict is not None and not out.verdict.is_regression:
            out.code = NEW
            out.reason = f"{note}; {out.verdict.cls}, not a regression: {out.reason}" + (
                f"; {bless_hint}" if bless_hint else "")
        elif out.code in (FAIL, PASS) or out.reason:
            out.reason = note + (f"; {out.reason}" if out.reason else "")
        else:
            out.reason = note
        return out

    def fidelity_note(self) -> str:
        return (f"judged against the deviceless golden {self.path} (no device golden covers this version): "
                "a difference is a fidelity finding — the deviceless compile does not predict this GPU's fusion, "
                "or XLA regressed; record device goldens with `fp8-check bless --mode device`")


def find(goldens_root: Path, case: str, target: str, profile: str, mode: str, jax_version: str) -> GoldenSource:
    """The golden to judge by (loaded and identity-checked; raises GoldenError for a broken one): the
    mode's own expectation covering `jax_version`, else the deviceless one (device mode), else the nearest
    release's expectation of the own golden, else of the deviceless one; `expectation` None: nothing blessed."""
    own = _load(goldens_root, case, target, profile, mode)
    other = own if mode == FALLBACK_MODE else _load(goldens_root, case, target, profile, FALLBACK_MODE)
    sources = [(own, False)] + ([(other, True)] if other is not own else [])
    for src, fallback in sources:
        exp = src.golden.expected_for(jax_version) if src.golden is not None else None
        if exp is not None:
            return GoldenSource(src.golden, src.path, src.mode, fallback, exp)
    for src, fallback in sources:
        near = src.golden.nearest(jax_version) if src.golden is not None else None
        if near is not None:
            return GoldenSource(src.golden, src.path, src.mode, fallback, near[0], near[1])
    return own


def _load(root: Path, case: str, target: str, profile: str, mode: str) -> GoldenSource:
    path = path_for(root, case, target, profile, mode)
    g = load(path)
    if g is not None:
        check_identity(g, path, case, target, profile, mode)
    return GoldenSource(g, path, mode)
