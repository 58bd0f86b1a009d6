"""Across JAX versions: released versions (releases), per-version environments (envs),
the case x version matrix (matrix) and bisection to the first bad version (bisect)."""
