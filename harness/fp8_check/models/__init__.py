"""Real library layers checked by `kind: python` cases (imported by the compile worker)."""

from __future__ import annotations

# ---- the stage's face (scripts/restructure.py): what other stages import from it, loaded on first use
__all__ = []

# ---- end of the face
