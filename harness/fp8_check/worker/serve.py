"""The compile worker: a long-lived subprocess that compiles rendered cases.

Run as `python -m fp8_check.worker.serve MODE`. It reads one JSON request per line on
stdin and answers one JSON line on its protocol stream. It imports only the
standard library, `fp8_check.worker._aot` (and the stdlib-only `worker_guard`) and JAX, so it also runs inside the per-version
environments of `fp8-check matrix`. An XLA abort kills only this process; the
parent reports the case UNRESOLVED and starts a new worker.
"""

import base64
import functools
import json
import os
import platform
import sys
import tempfile
import traceback
import types

from fp8_check import platforms
from fp8_check.worker._aot import (
    case_file_name,
    compile_device,
    compile_for,
    compile_tree,
    dnn_field_read,
    prepare_environment,
    target_config_for,
    topology_of,
    xla_has_flag,
)
from fp8_check.worker._device_view import target_view
from fp8_check.worker._guard import die_with_parent, error_text, forget_project_modules, private_stdin

# Environment variables that change what XLA/JAX compile, as the parent set them (read
# before `aot.prepare_environment` adds the dump flags): part of the compile-cache key.
COMPILE_ENV_PREFIXES = ("XLA_", "JAX_", "TF_XLA", "CUDA_", "NVIDIA_", "LIBTPU")
# Set identically by `aot.prepare_environment` in deviceless mode, whatever the parent had.
_FORCED_DEVICELESS = ("JAX_PLATFORMS", *platforms.deviceless_environment())
_PARENT_ENV: dict = {}


def _distribution_version(dist):
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def _jaxlib_git_hash_without_import():
    """jaxlib's git hash read from jaxlib/version.py (importing jaxlib would cost a second or two)."""
    import importlib.util
    import re

    try:
        spec = importlib.util.find_spec("jaxlib")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        try:
            with open(os.path.join(location, "version.py")) as f:
                m = re.search(r"^_git_hash\s*(?::\s*str)?\s*=\s*['\"]([0-9a-fA-F]+)['\"]", f.read(), re.M)
        except OSError:
            continue
        return m.group(1) if m else None
    return None


@functools.lru_cache(maxsize=None)  # asked at every compile; the interpreter's directories do not change
def _site_dirs():
    import site
    import sysconfig

    dirs = set()
    for getter in (site.getsitepackages,):
        try:
            dirs.update(getter())
        except AttributeError:
            pass
    for key in ("purelib", "platlib", "stdlib", "platstdlib"):
        try:
            dirs.add(sysconfig.get_paths()[key])
        except KeyError:
            pass
    return tuple(os.path.realpath(d) for d in dirs if d)


@functools.lru_cache(maxsize=None)  # each probe asks; scanning every installed distribution takes ~0.1 s
def _packages_distributions():
    import importlib.metadata as md

    return md.packages_distributions()


def resolve_imports(names):
    """How each top-level module name resolves in this interpreter, without importing it.

    'stdlib'; 'dist:NAME==VERSION,…' (an installed distribution, inside site-packages);
    'missing' (not importable); 'local:PATH' (anything else: the checkout, PYTHONPATH,
    an editable install) — the compile cache never caches sources that import those.
    """
    import importlib.util

    packages = _packages_distributions()
    sites = _site_dirs()
    out = {}
    for name in names:
        if name in sys.stdlib_module_names:
            out[name] = "stdlib"
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            out[name] = "missing"
            continue
        origin = spec.origin if spec.origin not in (None, "namespace") else None
        if origin is None and spec.submodule_search_locations:
            origin = list(spec.submodule_search_locations)[0]
        real = os.path.realpath(origin) if origin else ""
        dists = sorted(set(packages.get(name, [])))
        if dists and real and any(real.startswith(site + os.sep) for site in sites):
            out[name] = "dist:" + ",".join("%s==%s" % (d, _distribution_version(d)) for d in dists)
        else:
            out[name] = "local:" + (real or "?")
    return out


def probe(mode, names=()):
    """What the compile cache keys on, found without importing JAX: versions, installed
    distributions, compile-relevant environment variables, and how `names` resolve."""
    import hashlib
    import importlib.metadata as md

    dists = sorted({"%s==%s" % ((d.metadata["Name"] or "?").lower(), d.version) for d in md.distributions()})
    env_vars = dict(_PARENT_ENV)
    if mode == "deviceless":
        for name in _FORCED_DEVICELESS:
            env_vars.pop(name, None)
    return {
        "environment": {
            "jax": _distribution_version("jax"),
            "jaxlib": _distribution_version("jaxlib"),
            "jaxlib_git_hash": _jaxlib_git_hash_without_import(),
            **platforms.plugin_versions(_distribution_version),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "xla_flags": _PARENT_ENV.get("XLA_FLAGS", ""),
        },
        "env_vars": env_vars,
        "distributions": hashlib.sha256("\n".join(dists).encode()).hexdigest(),
        "imports": resolve_imports(names),
    }


def environment(mode):
    import importlib.metadata as md

    import jax
    import jaxlib

    def version(dist):
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return None

    try:
        from jaxlib import version as jaxlib_version

        git_hash = getattr(jaxlib_version, "_git_hash", None)
    except ImportError:
        git_hash = None
    env = {
        "jax": jax.__version__,
        "jaxlib": getattr(jaxlib, "__version__", None) or version("jaxlib"),
        "jaxlib_git_hash": git_hash,
        **platforms.plugin_versions(version),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    if mode == "device":
        dev = jax.devices("gpu")[0]
        env["device"] = {
            "name": getattr(dev, "device_kind", str(dev)),
            "compute_capability": getattr(dev, "compute_capability", None),
            "count": len(jax.devices("gpu")),
        }
        env["device"].update(platforms.DEFAULT.device_info())
    return env


def _encode(array):
    import numpy as np

    array = np.asarray(array)  # tobytes() is C order; ascontiguousarray would make a 0-d array 1-d
    return {"dtype": str(array.dtype), "shape": list(array.shape), "data": base64.b64encode(array.tobytes()).decode()}


def _decode(item):
    import jax.numpy as jnp
    import numpy as np

    return np.frombuffer(base64.b64decode(item["data"]), dtype=jnp.dtype(item["dtype"])).reshape(item["shape"])


def execute(compiled, inputs, device):
    """Run `compiled` on `inputs` (encoded arrays, in ARGS order) on `device`; the outputs, encoded, in order."""
    import jax

    args = [jax.device_put(_decode(item), device) for item in inputs]
    outputs = compiled(*args)
    return [_encode(x) for x in jax.tree_util.tree_leaves(outputs)]


def topology(mode, target_config):
    """The serialized PJRT topology (PjRtTopologyDescriptionProto) of the local GPU, base64.

    In deviceless mode it is the compile-only topology built from `target_config`
    (what the tests decode on CPU); in device mode, the attached GPU's.
    """
    from jax.experimental import topologies

    if mode == "device":
        topo = topologies.get_attached_topology("gpu")
        topo = topologies.TopologyDescription(topo.devices[:1])
    else:
        topo = topologies.get_topology_desc(platform=platforms.of_spec(target_config).jax_platform,
                                            target_config=target_config, topology="1x1x1")
    return base64.b64encode(topo.serialize()).decode()


MISSING_OPTIONAL = "missing optional dependency %r"  # how an UNSUPPORTED reason names a module the case requires


def missing_module(reason):
    """The module an UNSUPPORTED reason says is missing (`missing_optional`, an import of a required module), or None."""
    import re

    m = re.match(r"missing optional dependency '([A-Za-z_][A-Za-z0-9_.]*)'", reason or "")
    return m.group(1) if m else None


def missing_optional(requires):
    """Why the case cannot run here ('' if it can): the first optional dependency it lists that is not installed."""
    import importlib.util

    for name in requires:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (MISSING_OPTIONAL + " (requires: %s): no module named %r is installed") % (
                name, ", ".join(requires), name)
    return ""


# The `name` of the ImportError a rendered block-scaled case raises when this JAX lacks its API
# (harness/fp8_check/templates/block.py.j2): the case is UNSUPPORTED here, not broken.
MISSING_API = "fp8_check.missing_api"


def _jax_version():
    import jax

    return jax.__version__


def effective_config(request):
    """The target config of `request` with its versions written where this JAX's XLA reads them."""
    if not request.get("target_versions"):
        return request["target_config"]
    import jax

    versions = request["target_versions"]
    return target_config_for(request["target_config"], versions, versions.get("write_for_jax") or jax.__version__)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "deviceless"
    option = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    # --dump-dir DIR: XLA's dumps (the parent made it, and removes it once this worker is gone);
    # --codegen-threads N: this worker's share of the cores (one of several; aot.prepare_environment)
    dump_dir = option.get("--dump-dir") or tempfile.mkdtemp(prefix="fp8-check-dump-")
    threads = int(option["--codegen-threads"]) if "--codegen-threads" in option else None
    die_with_parent(dump_dir)

    _PARENT_ENV.update({k: v for k, v in os.environ.items() if k.startswith(COMPILE_ENV_PREFIXES)})
    prepare_environment(mode, dump_dir, codegen_threads=threads, deviceless_env=platforms.deviceless_environment())
    if mode == "deviceless":
        platforms.prepare_deviceless()
    # The protocol gets its own copy of stdout; fd 1 then points at stderr so
    # that anything JAX, XLA or a case prints cannot corrupt the protocol.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    requests = private_stdin()  # fd 0 is /dev/null: input() in a case fails at once
    devices: dict[str, object] = {}  # target spec -> its device(s)
    try:
        serve(mode, dump_dir, proto, devices, requests)
    finally:
        import shutil

        shutil.rmtree(dump_dir, ignore_errors=True)
    # Requests ended, replies written, dumps gone: skip Python's and XLA's teardown (~0.4 s the parent waited)
    for stream in (proto, sys.stdout, sys.stderr):
        stream.flush()
    os._exit(0)


def _compile_device(mode, config):
    platform = platforms.of_spec(config)
    own = platform.compile_devices(config, _jax_version()) if mode == "deviceless" else None
    if own is not None:
        return own
    arguments = platform.topology_arguments(config, topology_of(config), _jax_version()) if mode == "deviceless" else None
    return compile_device(mode, config, platform.jax_platform, arguments)


def serve(mode, dump_dir, proto, devices, requests=None):
    for line in requests or sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "environment":
                reply = {"ok": True, "environment": environment(mode)}
            elif request["op"] == "prepare":
                # Import JAX and build the device for a target: a fresh worker's start-up, timed apart
                # from the per-case timeout. A malformed target spec fails here.
                key = request["target_config"]
                if key not in devices:
                    devices[key] = _compile_device(mode, key)
                reply = {"ok": True}
            elif request["op"] == "compile":
                key = effective_config(request)
                if key not in devices:
                    devices[key] = _compile_device(mode, key)
                missing = missing_optional(request.get("requires") or ())
                if missing:
                    proto.write(json.dumps({"ok": False, "unsupported": missing}) + "\n")
                    continue
                forget_project_modules(_site_dirs())
                module = types.ModuleType("fp8_case_" + request["case_id"].replace("-", "_").replace(".", "_"))
                path = os.path.join(dump_dir, "..", case_file_name(request["case_id"]))
                code = compile(request["source"], os.path.abspath(path), "exec")
                try:
                    with target_view(devices[key]) as view:  # what the module asks of JAX at import: the target's
                        exec(code, module.__dict__)
                except ImportError as exc:
                    # A dependency the case declares optional is UNSUPPORTED, and so is a JAX API this JAX lacks
                    # (the block template raises MISSING_API; a user's module an ImportError from jax); anything
                    # else (a typo in the module, a missing function, a failing import) is an error.
                    if getattr(exc, "name", None) == MISSING_API:
                        proto.write(json.dumps({"ok": False, "unsupported": "the case's API is missing: %s" % exc}) + "\n")
                        continue
                    name = (getattr(exc, "name", None) or "").split(".")[0]
                    if name in ("jax", "jaxlib") or (name and name in (request.get("requires") or ())):
                        why = ("this JAX (%s) lacks an API the case imports" % _jax_version() if name in ("jax", "jaxlib")
                               else (MISSING_OPTIONAL + " (requires: %s)") % (name, ", ".join(request["requires"])))
                        proto.write(json.dumps({"ok": False, "unsupported": "%s: %s: %s" % (why, type(exc).__name__, exc)}) + "\n")
                        continue
                    raise
                options = dict(request["compiler_options"])
                missing = [n for n in (request.get("optional_options") or {}) if not xla_has_flag(n, platforms.of_spec(key).plugin_modules)]
                if missing:  # setting a flag this XLA does not define would abort it
                    proto.write(json.dumps({"ok": False, "unsupported": "this XLA (jax %s) has no flag %s"
                                            % (_jax_version(), ", ".join(missing))}) + "\n")
                    continue
                options.update(request.get("optional_options") or {})
                result = (compile_tree if hasattr(module, "ARGS_FACTORY") else compile_for)(
                    module.FN, getattr(module, "ARGS_FACTORY", None) or module.ARGS, devices[key], options, dump_dir,
                    mesh=getattr(module, "MESH", None), out_specs=getattr(module, "OUT_SPECS", None))
                reply = {"ok": True, "hlo": result["hlo"], "stablehlo": result["stablehlo"], "seconds": result["seconds"]}
                if view.local:  # a backend cached at import: this machine answered, not the target (never cached)
                    reply["asked_locally"] = view.local
                if request.get("inputs") is not None:
                    # Numerics: run the executable just compiled on the parent's inputs.
                    # An execution error is the case's numerics result, not a compile failure.
                    if mode != "device":
                        reply["execute_error"] = "executing a case needs a GPU: --mode device (this worker compiles deviceless)"
                    else:
                        try:
                            reply["outputs"] = execute(result["compiled"], request["inputs"], devices[key])
                        except Exception as exc:
                            reply["execute_error"] = "%s: %s" % (type(exc).__name__, exc)
            elif request["op"] == "compile_exported":
                # A user's callable, exported with jax.export in the caller's process (fp8_check.api):
                # deserialize it and compile it for the target like a rendered case.
                from jax import export

                key = effective_config(request)
                if key not in devices:
                    devices[key] = _compile_device(mode, key)
                exported = export.deserialize(bytearray(base64.b64decode(request["exported"])))
                args: list[tuple] = [("arg%d" % i, tuple(a.shape), str(a.dtype)) for i, a in enumerate(exported.in_avals)]
                sharded = request.get("sharding")  # {mesh: [[axis, size]...], in_specs: [...]} (fp8_check.compile._export)
                if sharded:
                    args = [a + (spec,) for a, spec in zip(args, sharded["in_specs"])]
                result = compile_for(exported.call, args, devices[key], request["compiler_options"], dump_dir,
                                         mesh=sharded["mesh"] if sharded else None,
                                         out_specs=sharded.get("out_specs") if sharded else None)
                reply = {"ok": True, "hlo": result["hlo"], "stablehlo": exported.mlir_module(),
                         "seconds": result["seconds"]}

            elif request["op"] == "probe":
                reply = {"ok": True, "probe": probe(mode, request.get("names") or [])}
            elif request["op"] == "topology":
                config = effective_config(request) if request.get("target_config") else None
                reply = {"ok": True, "topology": topology(mode, config)}
            elif request["op"] == "target_config":
                # The spec exactly as this worker's XLA gets it, and the field it reads cuDNN from.
                import jax

                reply = {"ok": True, "config": effective_config(request), "jax": jax.__version__,
                         "dnn_field": dnn_field_read(jax.__version__)}
            else:
                reply = {"ok": False, "error": "unknown op %r" % request["op"]}
        except Exception as exc:  # reported as UNRESOLVED with the error text
            reply = {"ok": False, "error": error_text(exc), "traceback": traceback.format_exc()}
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
