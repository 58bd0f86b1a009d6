"""Price a signature: the roofline cost model, its rates and its deltas (stage `cost`, fp8_check/stages.py)."""
