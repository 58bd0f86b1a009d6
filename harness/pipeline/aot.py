"""Ahead-of-time compilation of one JAX function for one GPU target, with or without a GPU.

This module is deliberately self-contained (standard library + JAX): the worker
imports it, and every rendered repro script carries a verbatim copy of it, so a
repro compiles exactly the way fp8-check does.

Deviceless compilation ("deviceless"): JAX's compile-only topology API builds a
device from a GpuTargetConfig text proto, and XLA compiles for it on a machine
without a GPU. `prepare_environment` must run before `import jax`.
"""

import glob
import os
import shutil
import time


def prepare_environment(mode, dump_dir):
    """Set the process environment for `mode` ('deviceless' or 'device'); call before importing jax."""
    if mode == "deviceless":
        # Never touch a GPU: only the CPU backend is initialised, the CUDA plugin
        # is used as a compiler. The plugin's CUDA version check calls cuInit,
        # which fails without a driver, so it is skipped.
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"
    # compiled.as_text() is empty for deviceless executables on JAX 0.6-0.8;
    # the optimized-HLO dump works on every version.
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = (flags + " --xla_dump_to=" + dump_dir + " --xla_dump_hlo_as_text").strip()


def compile_device(mode, target_config):
    """The device to compile for: a compile-only device built from `target_config`, or the local GPU."""
    import jax

    if mode == "device":
        return jax.devices("gpu")[0]
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(platform="cuda", target_config=target_config, topology="1x1x1")
    return topology.devices[0]


def compile_for(fn, args, device, compiler_options, dump_dir):
    """Lower and compile `fn` for `device`.

    `args` is a list of (name, shape, dtype-name). Returns a dict with the
    StableHLO, the optimized HLO text, the compile time in seconds and the
    compiled executable.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(device)
    specs = [jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype), sharding=sharding) for _, shape, dtype in args]
    for entry in glob.glob(os.path.join(dump_dir, "*")):
        if os.path.isdir(entry):
            shutil.rmtree(entry, ignore_errors=True)
        else:
            os.remove(entry)
    start = time.perf_counter()
    lowered = jax.jit(fn).lower(*specs)
    try:
        compiled = lowered.compile(compiler_options=dict(compiler_options))
    except ValueError as exc:
        # JAX 0.8.2-0.8.3 fail *after* XLA compiled for a compile-only device (it has no
        # memory kinds, and JAX asks for the output's): the optimized HLO is already
        # dumped, so the compilation itself is usable; there is just no executable.
        if "Could not find memory addressable by device" not in str(exc):
            raise
        compiled = None
    seconds = time.perf_counter() - start
    return {
        "stablehlo": lowered.as_text(),
        "hlo": optimized_hlo(dump_dir),
        "seconds": seconds,
        "compiled": compiled,
    }


def optimized_hlo(dump_dir):
    """The optimized HLO of the last GPU module XLA dumped into `dump_dir`."""
    dumps = glob.glob(os.path.join(dump_dir, "*gpu_after_optimizations.txt"))
    if not dumps:
        raise RuntimeError("XLA wrote no '*gpu_after_optimizations.txt' into " + dump_dir)

    def module_number(path):
        name = os.path.basename(path)
        digits = name.split(".", 1)[0].replace("module_", "")
        return int(digits) if digits.isdigit() else -1

    with open(max(dumps, key=module_number)) as f:
        return f.read()
