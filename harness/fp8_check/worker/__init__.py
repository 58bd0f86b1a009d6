"""What runs inside the compile worker, in any JAX environment (JAX and the standard library only) (stage `worker`, fp8_check/stages.py)."""
