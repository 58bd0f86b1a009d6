"""Judge a signature: goldens, contracts, verdict rules, the canary, outcome codes (stage `verdict`, fp8_check/stages.py)."""
