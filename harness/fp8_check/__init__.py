"""fp8-check: regression tests for XLA's FP8 matmul fusions.

The public Python API lives in `fp8_check.api` and is re-exported here lazily
(`from fp8_check import assert_fusion` works): importing `harness` itself imports nothing,
because the compile worker imports `fp8_check.worker._aot` inside per-version
environments that hold only JAX.
"""

_API = ("BoundChecker", "Checker", "EnvironmentProblem", "FusionMismatch", "FusionReport", "assert_fusion",
        "check_golden", "export_callable", "fusion_diffs", "fusion_signature")
__all__ = list(_API)


def __getattr__(name):
    if name in _API:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.api"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
