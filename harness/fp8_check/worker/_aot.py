"""Ahead-of-time compilation of one JAX function for one GPU target, with or without a GPU.

This module is deliberately self-contained (standard library + JAX): the worker
imports it, and every rendered repro script carries a verbatim copy of it, so a
repro compiles exactly the way fp8-check does.

Deviceless compilation ("deviceless"): JAX's compile-only topology API builds a
device from a GpuTargetConfig text proto, and XLA compiles for it on a machine
without a GPU. `prepare_environment` must run before `import jax`. A multi-device target
(`h100x8`) states its topology in its config text (`topology_of`); its compile-only devices
then form the mesh a sharded case asks for (`make_mesh`, `shardings`).
"""

import glob
import os
import shutil
import time
from typing import Any

CODEGEN_THREADS_FLAG = "--xla_gpu_force_compilation_parallelism"


def prepare_environment(mode, dump_dir, codegen_threads=None, deviceless_env=None):
    """Set the process environment for `mode` ('deviceless' or 'device'); call before importing jax.

    `deviceless_env`: what the GPU plugins need to compile without their GPU (fp8_check.platforms says).

    `codegen_threads`: how many threads XLA compiles a module's LLVM IR on (its default is
    every core). A pool of several workers gives each its share of the cores, so that they do
    not compete; it changes how the PTX is produced, never the optimized HLO. A value the
    user put in XLA_FLAGS wins.
    """
    if mode == "deviceless":
        # Never touch a GPU: only the CPU backend is initialised, the GPU plugin
        # is used as a compiler.
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ.update(deviceless_env or {})
    # compiled.as_text() is empty for deviceless executables on JAX 0.6-0.8;
    # the optimized-HLO dump works on every version.
    flags = os.environ.get("XLA_FLAGS", "")
    if codegen_threads and CODEGEN_THREADS_FLAG not in flags:
        flags = "%s=%d %s" % (CODEGEN_THREADS_FLAG, codegen_threads, flags)
    os.environ["XLA_FLAGS"] = (flags + " --xla_dump_to=" + dump_dir + " --xla_dump_hlo_as_text").strip()


def case_file_name(case_id):
    """The file name a case's rendered source is compiled under (it reaches the HLO's metadata)."""
    return "fp8_case_%s.py" % case_id


# A multi-device target (harness/fp8_check/targets/__init__.py: `h100x8`, `h100x2x4`) states its topology in one
# comment line of its GpuTargetConfig text, which the text-proto parser ignores:
#   # fp8-check topology: 1x1x8      (slices x hosts x devices per host)
TOPOLOGY_LINE = "# fp8-check topology:"


def topology_of(target_config):
    """The topology a target config states ('1x1x1' when it states none)."""
    for line in (target_config or "").splitlines():
        if line.startswith(TOPOLOGY_LINE):
            return line[len(TOPOLOGY_LINE):].strip() or "1x1x1"
    return "1x1x1"


def device_count(topology):
    count = 1
    for part in topology.split("x"):
        count *= int(part)
    return count


def compile_device(mode, target_config, platform, topology_arguments=None):
    """What to compile for: one device (a compile-only device built from `target_config` for JAX's
    `platform`, or the local GPU), or, for a multi-device topology, a tuple of them. `topology_arguments`:
    get_topology_desc's keyword arguments where a platform differs (a TPU's `topology_name="v6e:1x1"`)."""
    import jax

    topology = topology_of(target_config)
    count = device_count(topology)
    if mode == "device":
        gpus = jax.devices("gpu")
        if len(gpus) < count:
            raise RuntimeError("the target's topology %s needs %d GPUs; this machine has %d" % (topology, count, len(gpus)))
        return gpus[0] if count == 1 else tuple(gpus[:count])
    from jax.experimental import topologies

    arguments = topology_arguments or {"target_config": target_config, "topology": topology}
    topo = topologies.get_topology_desc(platform=platform, **arguments)
    return topo.devices[0] if count == 1 else tuple(topo.devices)


def make_mesh(devices, mesh):
    """A jax.sharding.Mesh of `devices` shaped by `mesh` ([(axis, size), ...])."""
    import numpy as np
    from jax.sharding import Mesh

    devices = list(devices) if isinstance(devices, (list, tuple)) else [devices]
    names = tuple(name for name, _ in mesh)
    sizes = tuple(int(size) for _, size in mesh)
    count = 1
    for size in sizes:
        count *= size
    if count != len(devices):
        raise ValueError("the mesh %s has %d devices; the target has %d" % (dict(mesh), count, len(devices)))
    return Mesh(np.array(devices, dtype=object).reshape(sizes), names)


def shardings(concrete, specs):
    """NamedShardings over the mesh `concrete`, one per spec: a list whose items are an axis name, a list of
    axis names, or None (one per dimension; [] replicates)."""
    from jax.sharding import NamedSharding, PartitionSpec

    def one(spec):
        parts = [tuple(p) if isinstance(p, (list, tuple)) else p for p in (spec or [])]
        return NamedSharding(concrete, PartitionSpec(*parts))

    return [one(spec) for spec in specs]


def mesh_context(concrete):
    """Make `concrete` the context mesh while tracing (with_sharding_constraint with bare PartitionSpecs)."""
    import contextlib

    import jax

    setter = getattr(jax, "set_mesh", None) or getattr(jax.sharding, "use_mesh", None)
    if setter is not None:
        return setter(concrete)
    return concrete if hasattr(concrete, "__enter__") else contextlib.nullcontext()


try:  # the target's view of the device while user code is traced (a repro carries device_view's source before this)
    from fp8_check.worker._device_view import target_view
    from fp8_check.worker._out_specs import check_out_specs
except ImportError:
    pass


def compile_for(fn, args, device, compiler_options, dump_dir, mesh=None, out_specs=None):
    """Lower and compile `fn` for `device` (one device, or a tuple of them for a multi-device target).

    `args` is a list of (name, shape, dtype-name) or, for a sharded case, (name, shape, dtype-name,
    partition spec) over `mesh` ([(axis, size), ...]); `out_specs`, optional, the outputs' partition
    specs (one spec: every output). Without a mesh everything sits on the first device. Returns a dict with
    the StableHLO, the optimized HLO text, the compile time in seconds and the compiled executable."""
    import contextlib

    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    first = device[0] if isinstance(device, (list, tuple)) else device
    jit_options: dict[str, Any] = {}
    context = contextlib.nullcontext()
    if mesh:
        concrete = make_mesh(device, mesh)
        context = mesh_context(concrete)
        in_shardings = shardings(concrete, [a[3] if len(a) > 3 else [] for a in args])
        if out_specs is not None:
            outs = shardings(concrete, out_specs)
            jit_options["out_shardings"] = outs[0] if len(outs) == 1 else tuple(outs)
    else:
        in_shardings = [SingleDeviceSharding(first)] * len(args)
    specs = [jax.ShapeDtypeStruct(tuple(a[1]), jnp.dtype(a[2]), sharding=s) for a, s in zip(args, in_shardings)]
    _clear(dump_dir)
    start = time.perf_counter()
    with context, target_view(device):
        check_out_specs(fn, specs, out_specs if mesh else None)  # names the field where JAX's error would not
        lowered = jax.jit(fn, **jit_options).lower(*specs)
    return _finish(lowered, compiler_options, dump_dir, start, device)


def _is_array(leaf):
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def tree_arguments(made, device, concrete=None):
    """The (args, kwargs) a pytree argument factory returned, as ShapeDtypeStructs placed on the target.

    `made` is a tuple (or list) of positional arguments or a dict of keyword arguments; its
    leaves are arrays or ShapeDtypeStructs (anything with a shape and a dtype) or Python values,
    which stay static. A leaf with a NamedSharding keeps it: over the target's own devices as it
    is; over other devices (the CPU's, an AbstractMesh) its mesh is rebuilt, same axes, from the
    target's devices. Any other leaf sits on the first device, or is replicated over `concrete`
    (the case's mesh) when there is one.
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

    if isinstance(made, dict):
        args, kwargs = (), dict(made)
    elif isinstance(made, (tuple, list)):
        args, kwargs = tuple(made), {}
    else:
        raise TypeError("the args factory returned %s; expected a tuple of arguments or a dict of keyword arguments"
                        % type(made).__name__)
    devices = list(device) if isinstance(device, (list, tuple)) else [device]
    meshes = {}

    def place(leaf):
        if not _is_array(leaf):
            return leaf
        sharding = getattr(leaf, "sharding", None)
        if isinstance(sharding, NamedSharding):
            mesh = sharding.mesh
            try:
                own = set(mesh.devices.flat) <= set(devices)
            except Exception:  # an AbstractMesh: no devices
                own = False
            if not own:
                axes = tuple(dict(mesh.shape).items())
                if axes not in meshes:
                    meshes[axes] = make_mesh(devices, axes)
                mesh = meshes[axes]
            placed: jax.sharding.Sharding = NamedSharding(mesh, sharding.spec)  # (not evaluated: a local annotation)
        elif concrete is not None:
            placed = NamedSharding(concrete, PartitionSpec())
        else:
            placed = SingleDeviceSharding(devices[0])
        return jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype, sharding=placed)

    return jax.tree_util.tree_map(place, (args, kwargs))


def compile_tree(fn, factory, device, compiler_options, dump_dir, mesh=None, out_specs=None):
    """Lower and compile `fn` on the pytree of arguments `factory()` returns (see `tree_arguments`);
    the result as `compile_for` returns it. The factory runs here, with the case's mesh (if any) as
    the context mesh. Python values among the leaves are static: `fn` sees them as they are."""
    import contextlib

    import jax

    jit_options: dict[str, Any] = {}
    context = contextlib.nullcontext()
    concrete = None
    if mesh:
        concrete = make_mesh(device, mesh)
        context = mesh_context(concrete)
        if out_specs is not None:
            outs = shardings(concrete, out_specs)
            jit_options["out_shardings"] = outs[0] if len(outs) == 1 else tuple(outs)
    _clear(dump_dir)
    with context, target_view(device):
        args, kwargs = tree_arguments(factory(), device, concrete)
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    traced = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
    if not mesh:  # the mesh the arguments are sharded over (one): the context mesh while tracing, as in a train loop
        meshes = {m: m for m in (getattr(getattr(leaves[i], "sharding", None), "mesh", None) for i in traced)
                  if m is not None and hasattr(m, "devices")}
        if len(meshes) == 1:
            context = mesh_context(next(iter(meshes.values())))
    target = fn
    if len(traced) != len(leaves):  # Python values: baked in, only the arrays are inputs

        def target(*arrays):
            full = list(leaves)
            for i, x in zip(traced, arrays):
                full[i] = x
            a, k = jax.tree_util.tree_unflatten(treedef, full)
            return fn(*a, **k)

        target.__name__ = target.__qualname__ = getattr(fn, "__name__", "fn")
        args, kwargs = tuple(leaves[i] for i in traced), {}
    start = time.perf_counter()
    with context, target_view(device):
        lowered = jax.jit(target, **jit_options).lower(*args, **kwargs)
    return _finish(lowered, compiler_options, dump_dir, start, device)


def _clear(dump_dir):
    for entry in glob.glob(os.path.join(dump_dir, "*")):
        if os.path.isdir(entry):
            shutil.rmtree(entry, ignore_errors=True)
        else:
            os.remove(entry)


def _finish(lowered, compiler_options, dump_dir, start, device=None):
    first = device[0] if isinstance(device, (list, tuple)) else device
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
        "hlo": optimized_hlo(dump_dir, host=getattr(first, "platform", "") == "cpu"),
        "seconds": seconds,
        "compiled": compiled,
    }


def optimized_hlo(dump_dir, host=False):
    """The optimized HLO of the last accelerator module XLA dumped into `dump_dir`: a GPU module's
    `*gpu_after_optimizations.txt`, else (a TPU compiler names no backend) any `*after_optimizations.txt` but a
    CPU module's. With `host` (a platform that compiles for the host's own device: Platform.compile_devices), the
    last CPU module's."""
    dumps = glob.glob(os.path.join(dump_dir, "*cpu_after_optimizations.txt")) if host else glob.glob(os.path.join(
        dump_dir, "*gpu_after_optimizations.txt")) or [p for p in glob.glob(os.path.join(dump_dir, "*.after_optimizations.txt"))
                                                        if not p.endswith("cpu_after_optimizations.txt")]
    if not dumps:
        raise RuntimeError("XLA wrote no '*after_optimizations.txt' of an accelerator module into " + dump_dir)

    def module_number(path):
        name = os.path.basename(path)
        digits = name.split(".", 1)[0].replace("module_", "")
        return int(digits) if digits.isdigit() else -1

    with open(max(dumps, key=module_number)) as f:
        return f.read()


# ---- target specs: write the CUDA runtime and cuDNN versions where this XLA reads them
#
# Measured (see docs/targets.md, "Target specs"): the top-level
# `dnn_version_info {major minor patch}` is read up to JAX 0.11.0 and silently
# ignored from 0.11.1; `gpu_device_info { dnn_version: "X.Y.Z" }` is a parse error
# before 0.10.0, parsed but ignored on 0.10.0-0.11.0, and the only one read from
# 0.11.1. Both parse together from 0.10.0. The top-level `runtime_version` is read
# on every version fp8-check supports deviceless (0.6.1 on).

DNN_IN_DEVICE_INFO_FROM = (0, 10, 0)  # gpu_device_info.dnn_version parses from here
DNN_TOP_LEVEL_READ_UNTIL = (0, 11, 0)  # top-level dnn_version_info is read up to here


def _version_tuple(text):
    parts = []
    for piece in str(text).split("."):
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        parts.append(int(digits or 0))
    return tuple((parts + [0, 0, 0])[:3])


def dnn_field_read(jax_version):
    """The spec field the XLA of `jax_version` reads the cuDNN version from."""
    if _version_tuple(jax_version) <= DNN_TOP_LEVEL_READ_UNTIL:
        return "dnn_version_info"
    return "gpu_device_info.dnn_version"


def dnn_fields_written(jax_version):
    """The cuDNN fields `target_config_for` writes for `jax_version`."""
    if _version_tuple(jax_version) >= DNN_IN_DEVICE_INFO_FROM:
        return ["dnn_version_info", "gpu_device_info.dnn_version"]
    return ["dnn_version_info"]


def _strip_block(text, name):
    """Remove every top-level-or-nested `name { ... }` block (no nested braces inside it)."""
    import re

    return re.sub(r"^[ \t]*" + re.escape(name) + r"\s*\{[^{}]*\}[ \t]*\n?", "", text, flags=re.M)


def strip_version_fields(config_text):
    """`config_text` without its CUDA runtime and cuDNN version fields (and their comment lines)."""
    import re

    text = _strip_block(config_text, "dnn_version_info")
    text = _strip_block(text, "runtime_version")
    text = re.sub(r"^[ \t]*dnn_version\s*:\s*\"[^\"]*\"[ \t]*\n?", "", text, flags=re.M)
    return text


def target_config_for(config_text, versions, jax_version):
    """`config_text` with the versions of `versions` written where the XLA of `jax_version` reads them.

    `versions` is a dict with `runtime` (the CUDA or ROCm runtime) and `dnn` (cuDNN) ([major, minor, patch] or
    None). Version fields already in `config_text` are replaced, so that each
    version is stated once and written once.
    """
    out = [strip_version_fields(config_text).rstrip("\n")]
    runtime = versions.get("runtime")
    if runtime:
        out.append("runtime_version {\n  major: %d\n  minor: %d\n  patch: %d\n}" % tuple(runtime))
    cudnn = versions.get("dnn")
    if cudnn:
        # The top-level field parses on every version; older XLA reads it.
        out.append("dnn_version_info {\n  major: %d\n  minor: %d\n  patch: %d\n}" % tuple(cudnn))
        if _version_tuple(jax_version) >= DNN_IN_DEVICE_INFO_FROM:
            # gpu_device_info is the first block; add the field before its closing brace.
            body = out[0]
            start = body.find("gpu_device_info")
            if start < 0:
                raise ValueError("the target config has no gpu_device_info block")
            depth, i = 0, body.index("{", start)
            while i < len(body):
                if body[i] == "{":
                    depth += 1
                elif body[i] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                i += 1
            out[0] = body[:i] + '  dnn_version: "%d.%d.%d"\n' % tuple(cudnn) + body[i:]
    return "\n".join(out) + "\n"


# ---- optional XLA flags: set only where the installed XLA has them
#
# An unknown flag in the compile options aborts the whole process at the first
# compile on versions that lack it, so a flag that only some versions have is
# looked up first, by name, in the XLA that compiles for the GPU (the GPU plugin's modules).

_FLAG_CACHE: dict = {}


def _xla_libraries(plugin_modules):
    import importlib.util

    paths = []
    for module in tuple(plugin_modules) + ("jaxlib",):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        for base in (spec.submodule_search_locations or []) if spec else []:
            for path in glob.glob(os.path.join(base, "*.so")):
                if "xla" in os.path.basename(path) or "pjrt" in os.path.basename(path):
                    paths.append(path)
        if paths and module.startswith("jax_plugins"):
            break
    return paths


def xla_has_flag(name, plugin_modules):
    """True when the XLA this process compiles with (in `plugin_modules`, else jaxlib) defines the
    DebugOptions flag `name`."""
    import mmap

    key = (name, tuple(plugin_modules))
    if key not in _FLAG_CACHE:
        needle = name.encode()
        found = False
        for path in _xla_libraries(plugin_modules):
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                if m.find(needle) >= 0:
                    found = True
                    break
        _FLAG_CACHE[key] = found
    return _FLAG_CACHE[key]
