"""Reduce optimized HLO to a typed fusion signature: gemms, collectives, attribution, coverage (stage `signature`, fp8_check/stages.py)."""
