"""Case files: the case model, its kinds, loading and validating YAML, users' modules (stage `cases`, fp8_check/stages.py)."""
