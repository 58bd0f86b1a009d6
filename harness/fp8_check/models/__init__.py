"""Real library layers checked by `kind: python` cases (imported by the compile worker)."""

# no face: cases name these modules by path (`callable: fp8_check.models.decoder:...`)
