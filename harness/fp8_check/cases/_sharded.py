"""Sharded cases: a device mesh and a partition spec per argument (and optionally per output).

A `kind: python` case becomes sharded with

    mesh: {fsdp: 4, tp: 2}                       # named axes and their sizes, in order
    targets: [h100x8]                            # required: targets with exactly that many GPUs
    args:
      - {name: x, shape: [256, 512], dtype: bfloat16, sharding: [fsdp, null]}
      - {name: w, shape: [512, 1024], dtype: bfloat16, sharding: [null, tp]}
      - {name: s, shape: [], dtype: float32}                 # no sharding: replicated
    out_shardings: [[fsdp, tp]]                  # optional: one spec for every output, or one per output
    xla_options: {xla_gpu_threshold_for_windowed_einsum_mib: 0}   # optional, any python case: XLA flags

A spec has one entry per leading dimension: an axis name, a list of axis names (that
dimension split over several axes), or null (not split). The compile worker builds the
mesh from the target's compile-only devices (harness/fp8_check/worker/_aot.py). Validation
follows cases.py: a one-line `CaseError` naming file, line, case and field.
"""

from __future__ import annotations

import re

from fp8_check.targets import load_target

Spec = tuple  # per dimension: None, an axis name, or a tuple of axis names


def validate_mesh(path, line, cid, value, error) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict) or not value:
        raise error(path, line, cid, "mesh", f"expected a mapping of axis names to sizes such as {{fsdp: 8}}, got {value!r}")
    out = []
    for name, size in value.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise error(path, line, cid, "mesh", f"axis name {name!r} is not an identifier")
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 4096:
            raise error(path, line, cid, f"mesh.{name}", f"expected a positive axis size, got {size!r}")
        out.append((name, size))
    return tuple(out)


def mesh_devices(mesh: tuple[tuple[str, int], ...]) -> int:
    count = 1
    for _, size in mesh:
        count *= size
    return count


def validate_spec(path, line, cid, fld, value, mesh, shape, error) -> Spec:
    """One partition spec, checked against the mesh axes and (when given) the argument's shape."""
    axes = dict(mesh)
    if not isinstance(value, list):
        raise error(path, line, cid, fld, f"expected a list with one entry per dimension (an axis name, a list of "
                                          f"axis names, or null), got {value!r}")
    if shape is not None and len(value) > len(shape):
        raise error(path, line, cid, fld, f"{len(value)} entries for an argument of rank {len(shape)}")
    used: list[str] = []
    out = []
    for i, entry in enumerate(value):
        names = entry if isinstance(entry, list) else [] if entry is None else [entry]
        if not all(isinstance(n, str) for n in names) or (isinstance(entry, list) and not entry):
            raise error(path, line, cid, fld, f"entry {i}: expected an axis name, a non-empty list of axis names or "
                                              f"null, got {entry!r}")
        for n in names:
            if n not in axes:
                raise error(path, line, cid, fld, f"unknown mesh axis {n!r}; the mesh has {', '.join(axes)}")
            if n in used:
                raise error(path, line, cid, fld, f"mesh axis {n!r} used twice")
            used.append(n)
        parts = 1
        for n in names:
            parts *= axes[n]
        if shape is not None and shape[i] % parts:
            raise error(path, line, cid, fld, f"dimension {i} (size {shape[i]}) does not split into {parts} equal "
                                              f"shards over {', '.join(names)}")
        out.append(None if entry is None else tuple(names) if isinstance(entry, list) else entry)
    return tuple(out)


def validate_sharded(path, line, cid, merged: dict, raw_args: list, args: tuple, targets: tuple, error) -> dict:
    """The sharding fields of a python case (`mesh`, `args[i].sharding`, `out_shardings`) as Case keywords."""
    options = _xla_options(path, line, cid, merged["xla_options"], error) if "xla_options" in merged else ()
    specs_given = [isinstance(a, dict) and "sharding" in a for a in raw_args]
    if "mesh" not in merged:
        if any(specs_given):
            raise error(path, line, cid, f"args[{specs_given.index(True)}].sharding", "set, but the case has no mesh")
        if "out_shardings" in merged:
            raise error(path, line, cid, "out_shardings", "set, but the case has no mesh")
        return {"xla_options": options} if options else {}
    mesh = validate_mesh(path, line, cid, merged["mesh"], error)
    count = mesh_devices(mesh)
    if not targets:
        raise error(path, line, cid, "targets", f"missing; a sharded case lists its targets (a mesh of {count} "
                                                f"devices needs targets with {count} GPUs, e.g. h100x{count})")
    for name in targets:
        devices = load_target(name).devices
        if devices != count:
            raise error(path, line, cid, "targets", f"target '{name}' has {devices} GPU(s); the mesh needs {count}")
    shardings = tuple(
        validate_spec(path, line, cid, f"args[{i}].sharding", raw["sharding"], mesh, shape, error)
        if isinstance(raw, dict) and "sharding" in raw else ()
        for i, (raw, (_, shape, _)) in enumerate(zip(raw_args, args))
    )
    out: dict = {"mesh": mesh, "shardings": shardings, "xla_options": options}
    if "out_shardings" in merged:
        value = merged["out_shardings"]
        if not isinstance(value, list) or not value:
            raise error(path, line, cid, "out_shardings", f"expected a non-empty list of partition specs, got {value!r}")
        out["out_shardings"] = tuple(validate_spec(path, line, cid, f"out_shardings[{i}]", v, mesh, None, error)
                                     for i, v in enumerate(value))
    return out


def jsonable(spec: Spec) -> list:
    """A spec as rendered into a case's source and sent to the worker: lists, strings and None."""
    return [list(e) if isinstance(e, tuple) else e for e in spec]


def _xla_options(path, line, cid, value, error) -> tuple[tuple[str, object], ...]:
    """XLA debug options the case sets on top of its profile (only where the installed XLA has them, else
    UNSUPPORTED), e.g. {xla_gpu_threshold_for_windowed_einsum_mib: 0}."""
    if not isinstance(value, dict) or not value:
        raise error(path, line, cid, "xla_options", f"expected a mapping of XLA flags to values, got {value!r}")
    for name, v in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"xla_[a-z0-9_]+", name):
            raise error(path, line, cid, "xla_options", f"{name!r} is not an XLA flag name (xla_...)")
        if not isinstance(v, (bool, int, str)) or (isinstance(v, int) and not isinstance(v, bool) and not -2**62 < v < 2**62):
            raise error(path, line, cid, f"xla_options.{name}", f"expected true/false, an integer or a string, got {v!r}")
    return tuple(value.items())
