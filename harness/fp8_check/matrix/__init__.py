"""The case library across JAX versions: the matrix document, its views, news and version-ranged goldens (stage `matrix`, fp8_check/stages.py)."""
