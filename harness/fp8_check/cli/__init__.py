"""The command line and the pytest plugin: commands register here, nothing imports them (stage `cli`, fp8_check/stages.py)."""

from __future__ import annotations

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = []

# ---- end of the face
