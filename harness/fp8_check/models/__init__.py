"""Real library layers checked by `kind: python` cases (imported by the compile worker)."""
