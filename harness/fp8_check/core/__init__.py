"""The shared vocabulary: errors and exit codes, dtypes, bounded YAML, checked names and outputs, versions (stage `core`, fp8_check/stages.py)."""
