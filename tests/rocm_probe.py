"""Run by tests/platforms/test_rocm.py with a ROCm environment's interpreter: load the ROCm plugin deviceless (as
the compile worker does), compile one FP8 matmul for mi300x, and report which stand-in functions were
called while the plugin loaded and while XLA compiled.

    python rocm_probe.py LOG DTYPE
"""

import json
import os
import sys
import tempfile
from pathlib import Path

log, dtype = sys.argv[1], sys.argv[2]
os.environ["FP8_CHECK_STANDIN_LOG"] = log

from fp8_check import platforms  # noqa: E402
from fp8_check.worker import _aot as aot  # noqa: E402

dump = tempfile.mkdtemp(prefix="fp8-check-rocm-probe-")
aot.prepare_environment("deviceless", dump, deviceless_env=platforms.deviceless_environment())
platforms.prepare_deviceless()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def calls():
    return [line.split(" ", 1) for line in Path(log).read_text().splitlines()] if Path(log).exists() else []


spec = (Path(platforms.__file__).parent.parent / "targets" / "mi300x.txtpb").read_text()
config = aot.target_config_for(spec, {"runtime": [7, 0, 0]}, jax.__version__)
device = aot.compile_device("deviceless", config, platforms.AMD.jax_platform)
loaded = calls()


def fn(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.float32)


result = aot.compile_for(fn, [("a", (64, 64), dtype), ("b", (64, 32), dtype)], device,
                         {"xla_gpu_enable_triton_gemm": False}, dump)
print(json.dumps({"jax": jax.__version__, "load": loaded, "compile": calls()[len(loaded):],
                  "hlo": result["hlo"]}))
