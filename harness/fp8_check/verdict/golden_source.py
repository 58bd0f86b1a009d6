"""Which golden a result is judged against: the one of its own mode, else (device mode) the deviceless one.

Goldens are kept per mode, and nearly all of them — the library's and the ones users bless on a
laptop — are recorded deviceless. A run on a GPU (`--mode device`, or `auto` with a GPU) is judged
against the device golden when there is one covering the JAX version, otherwise against the
deviceless golden of the same target and profile, and says so: a difference is then a *fidelity
finding* (the deviceless compile did not predict what XLA does on this GPU, or XLA regressed),
not a missing golden (NEW).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fp8_check.verdict import golden

FALLBACK_MODE = "deviceless"


@dataclass(frozen=True)
class GoldenSource:
    golden: golden.Golden | None
    path: Path
    mode: str  # the mode of the golden used (differs from the result's on a fallback)
    fallback: bool = False

    def fidelity_note(self) -> str:
        return (f"judged against the deviceless golden {self.path} (no device golden covers this version): "
                "a difference is a fidelity finding — the deviceless compile does not predict this GPU's fusion, "
                "or XLA regressed; record device goldens with `fp8-check bless --mode device`")


def find(goldens_root: Path, case: str, target: str, profile: str, mode: str, jax_version: str) -> GoldenSource:
    """The golden to judge by (loaded and identity-checked; raises golden.GoldenError for a broken one)."""
    own = _load(goldens_root, case, target, profile, mode)
    if mode == FALLBACK_MODE or (own.golden is not None and own.golden.expected_for(jax_version) is not None):
        return own
    other = _load(goldens_root, case, target, profile, FALLBACK_MODE)
    if other.golden is not None and other.golden.expected_for(jax_version) is not None:
        return GoldenSource(other.golden, other.path, FALLBACK_MODE, fallback=True)
    return own


def _load(root: Path, case: str, target: str, profile: str, mode: str) -> GoldenSource:
    path = golden.path_for(root, case, target, profile, mode)
    g = golden.load(path)
    if g is not None:
        golden.check_identity(g, path, case, target, profile, mode)
    return GoldenSource(g, path, mode)
