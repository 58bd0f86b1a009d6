"""Render a case, compile it in a worker, cache and share compilations, export users' callables (stage `compile`, fp8_check/stages.py)."""
