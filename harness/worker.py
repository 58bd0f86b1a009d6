"""The compile worker: a long-lived subprocess that compiles rendered cases.

Run as `python -m harness.worker MODE`. It reads one JSON request per line on
stdin and answers one JSON line on its protocol stream. It imports only the
standard library, `harness.aot` and JAX, so it also runs inside the per-version
environments of `fp8-check matrix`. An XLA abort kills only this process; the
parent reports the case UNRESOLVED and starts a new worker.
"""

import json
import os
import platform
import sys
import tempfile
import traceback
import types

from harness import aot


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
        "cuda_plugin": version("jax-cuda12-plugin") or version("jax-cuda13-plugin"),
        "cuda_pjrt": version("jax-cuda12-pjrt") or version("jax-cuda13-pjrt"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    if mode == "device":
        dev = jax.devices("gpu")[0]
        env["device"] = {
            "name": getattr(dev, "device_kind", str(dev)),
            "compute_capability": getattr(dev, "compute_capability", None),
        }
    return env


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "deviceless"
    dump_dir = tempfile.mkdtemp(prefix="fp8-check-dump-")
    aot.prepare_environment(mode, dump_dir)
    # The protocol gets its own copy of stdout; fd 1 then points at stderr so
    # that anything JAX, XLA or a case prints cannot corrupt the protocol.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    devices = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "environment":
                reply = {"ok": True, "environment": environment(mode)}
            elif request["op"] == "compile":
                key = request["target_config"]
                if key not in devices:
                    devices[key] = aot.compile_device(mode, key)
                module = types.ModuleType("fp8_case_" + request["case_id"].replace("-", "_").replace(".", "_"))
                path = os.path.join(dump_dir, "..", "fp8_case_%s.py" % request["case_id"])
                code = compile(request["source"], os.path.abspath(path), "exec")
                exec(code, module.__dict__)
                result = aot.compile_for(module.FN, module.ARGS, devices[key], request["compiler_options"], dump_dir)
                reply = {
                    "ok": True,
                    "hlo": result["hlo"],
                    "stablehlo": result["stablehlo"],
                    "seconds": result["seconds"],
                }
            else:
                reply = {"ok": False, "error": "unknown op %r" % request["op"]}
        except Exception as exc:  # reported as UNRESOLVED with the error text
            reply = {"ok": False, "error": "%s: %s" % (type(exc).__name__, exc), "traceback": traceback.format_exc()}
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
