"""On a real GPU: numerics against a float64 reference, target spec capture, and the
fidelity of deviceless signatures against device compiles.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fp8_check._faces import attach

if TYPE_CHECKING:
    from ._calibrate import NO_GPU, measure, table
    from ._capture import CaptureError, capture, spec_text, write_spec
    from ._fidelity import (
        DEVICE_PROFILES,
        PINNED,
        agreement,
        autotune_results_for,
        build,
        collect,
        collect_replayed,
        from_results,
        write,
    )
    from ._numerics import Float64Reference
else:
    __getattr__, __dir__, __all__ = attach(__name__)
