"""The one runner: what a command runs on, plan -> compile -> judge, the results file (stage `run`, fp8_check/stages.py)."""
