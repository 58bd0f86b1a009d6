"""How a user's callable reaches the compile worker: `jax.export` in the caller's process.

`export_callable(fn, args, kwargs)` traces and lowers `fn` for the `cuda` platform here (no
GPU needed) and returns the serialized `jax.export.Exported` (StableHLO bytecode plus its
calling convention); `Compiler.compile_exported` sends it to the worker, which deserializes
and compiles it for the target like a rendered case. See `fp8_check.api` for why.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from fp8_check import platforms
from fp8_check.core import is_fp8
from fp8_check.targets import gpu_present
from fp8_check.worker import compile_device, target_config_for, target_view


def _is_array(leaf: Any) -> bool:
    """Traced: arrays and jax.ShapeDtypeStructs (anything with a shape and a dtype). Everything else is static."""
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def cpu_only_without_gpu() -> None:
    """Public name of the hook: the pytest plugin calls it at configure time, and `import fp8_check.api` at import,
    so a CPU-only test session or script that uses JAX before calling fp8-check does not meet the CUDA plugin's
    cuInit traceback. (Without fp8-check imported first: set JAX_PLATFORMS=cpu.)"""
    _cpu_only_without_gpu()


def _cpu_only_without_gpu() -> None:
    """Without a GPU, make this process's JAX use the CPU backend quietly.

    Tracing needs some backend; on a machine without a GPU the CUDA plugin would fail to
    initialise (logging an error) and JAX fall back to the CPU anyway. Nothing changes
    when a GPU is present, JAX_PLATFORMS is set, or JAX's backends are already up.
    """
    import os

    if os.environ.get("JAX_PLATFORMS") or gpu_present():
        return
    if "jax" not in sys.modules:
        os.environ["JAX_PLATFORMS"] = "cpu"
        return
    try:
        from jax._src import xla_bridge

        if not xla_bridge.backends_are_initialized():
            import jax

            jax.config.update("jax_platforms", "cpu")
    except Exception:  # a private helper that moved: JAX falls back to the CPU by itself
        pass


def export_callable(fn: Callable, args: tuple, kwargs: dict, platform: str = platforms.DEFAULT.jax_platform,
                    devices: Any = None, asked: list | None = None) -> bytes:
    """Trace and lower `fn(*args, **kwargs)` for JAX's `platform` here; the serialized `jax.export.Exported`.

    `devices`: the compile target's devices; while `fn` is traced, `jax.devices()` and the like answer with
    them (`fp8_check.worker._device_view.target_view`). The questions the traced code asked are appended to `asked`."""
    _cpu_only_without_gpu()
    import jax
    from jax import export

    leaves, treedef = jax.tree_util.tree_flatten((tuple(args), dict(kwargs)))
    traced = [i for i, leaf in enumerate(leaves) if _is_array(leaf)]
    # A NamedSharding (over an AbstractMesh: no devices here) is kept: the export is then sharded, and the
    # worker compiles it over the target's devices (`sharding_of` says how).
    specs = [jax.ShapeDtypeStruct(tuple(leaves[i].shape), leaves[i].dtype,
                                  **({"sharding": leaves[i].sharding} if _named(leaves[i]) else {})) for i in traced]
    # Non-array leaves (Python bools, numbers, strings: `training=False`, `mode="fp8"`) are static,
    # baked into the traced function as with functools.partial; only the arrays become inputs.
    static = [None if i in set(traced) else leaf for i, leaf in enumerate(leaves)]

    def flat(*xs):
        full = list(static)
        for i, x in zip(traced, xs):
            full[i] = x
        a, k = jax.tree_util.tree_unflatten(treedef, full)
        # the outputs as a flat list: a train step returns optimizer states (optax NamedTuples),
        # which jax.export cannot serialize as a pytree; the compiled program is the same
        return jax.tree_util.tree_leaves(fn(*a, **k))

    import re

    disabled: list = []
    with target_view(devices) as view:
        while True:
            try:
                exported = export.export(jax.jit(flat), platforms=[platform], disabled_checks=disabled)(*specs)
                break
            except ValueError as exc:
                # A GPU path with custom calls that carry no compatibility guarantee (qwix's MXFP8 dot:
                # __op$block_scaled_dot): the worker deserializes with the same JAX, so none is needed
                names = set(re.findall(r"custom_call @([\w$.]+)\(", str(exc))) if "Cannot serialize code with custom calls" in str(exc) else set()
                names -= {getattr(c, "_impl", c) for c in disabled}
                if not names:
                    raise
                disabled += [export.DisabledSafetyCheck.custom_call(n) for n in sorted(names)]
    if asked is not None:
        asked.extend(view.asked)
    return bytes(exported.serialize())


def _named(leaf: Any) -> bool:
    sharding = getattr(leaf, "sharding", None)
    return type(sharding).__name__ == "NamedSharding"


def sharding_of(args: tuple, kwargs: dict) -> dict | None:
    """The mesh and per-input partition specs of the traced inputs (None when none carries a NamedSharding).

    `{"mesh": [[axis, size], ...], "in_specs": [[entry, ...], ...]}`, as JSON: an entry is an axis name,
    a list of axis names, or None; an input without a NamedSharding is replicated ([]). Raises
    ValueError when the inputs name different meshes.
    """
    import jax

    leaves = [leaf for leaf in jax.tree_util.tree_leaves((tuple(args), dict(kwargs))) if _is_array(leaf)]
    named = [leaf.sharding for leaf in leaves if _named(leaf)]
    if not named:
        return None
    meshes = {tuple(dict(s.mesh.shape).items()) for s in named}
    if len(meshes) > 1:
        raise ValueError(f"the inputs' shardings use different meshes: {sorted(meshes)}")
    mesh = [[name, int(size)] for name, size in meshes.pop()]

    def spec(leaf: Any) -> list:
        if not _named(leaf):
            return []
        return [list(e) if isinstance(e, tuple) else e for e in leaf.sharding.spec]

    return {"mesh": mesh, "in_specs": [spec(leaf) for leaf in leaves]}


def non_native_fp8(target, args: tuple = (), kwargs: dict | None = None) -> tuple[str, ...]:
    """A warning per FP8 dtype among the arguments that `target`'s gemm library does not run: XLA compiles it
    without complaint and upcasts its gemms (OCP E4M3 on MI300X/gfx942, fnuz on MI350X/gfx950)."""
    import jax

    native = target.native_fp8
    if not native:
        return ()
    seen = sorted({str(leaf.dtype) for leaf in jax.tree_util.tree_leaves((args, kwargs or {}))
                   if hasattr(leaf, "dtype") and is_fp8(str(leaf.dtype))} - set(native))
    return tuple(f"{d} is not native on {target.name} ({target.arch} runs {', '.join(native)} in FP8 gemms): "
                 f"XLA upcasts gemms on {d} operands to a wider type" for d in seen)


_DEVICES: dict[str, Any] = {}


def target_devices(target, versions: dict) -> Any:
    """The compile-only devices of `target` (a targets.Target), built in this process for tracing deviceless; None
    where this process's JAX cannot build them (then code that asks for the device is reported as not
    representative, not answered)."""
    if target.config_text not in _DEVICES:
        try:
            import jax

            _DEVICES[target.config_text] = compile_device(
                "deviceless", target_config_for(target.config_text, versions, jax.__version__), target.platform.jax_platform)
        except Exception:  # no plugin for this platform here: the worker compiles, this process only traces
            _DEVICES[target.config_text] = None
    return _DEVICES[target.config_text]
