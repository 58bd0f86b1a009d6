"""`fp8-check target check [NAME|PATH]`: a target's effective versions, and the canaries that prove them.

Registered under `fp8-check target` by `harness/fp8_check/gpu/_capture.py`; the checks live in
`harness/fp8_check/run/_target_check.py` (which the runner also uses, once per target and JAX version).
"""

from __future__ import annotations

import sys

from fp8_check import platforms
from fp8_check.compile import Compiler, WorkerError
from fp8_check.run import BrokenEnvironment, UsageError, check_target_spec, effective, environment_entry, shipped
from fp8_check.targets import TargetSpecError, load_target, target_names
from fp8_check.verdict import CanaryError, CudnnCanaryError, check_canary, check_cudnn
from fp8_check.versions import InstallError, python_for
from fp8_check.worker import dnn_field_read


def add_check_parser(tsub) -> None:
    c = tsub.add_parser("check", help="print a target's effective compute capability, CUDA runtime and cuDNN version "
                                      "and prove the cuDNN version takes effect in the installed XLA")
    c.add_argument("spec", nargs="?", default=None, help="a shipped target name or the path of a *.txtpb spec "
                                                          "(default: every shipped target)")
    c.add_argument("--print-spec", action="store_true", help="also print the spec exactly as the installed XLA gets it")


def cmd_check(args) -> int:
    """Exit 0 when every target checks out, 3 when a spec is refused or its cuDNN version does not take effect."""
    names = [args.spec] if args.spec else list(target_names())
    if not args.spec:  # the targets this environment compiles for; another platform's are checked by name
        elsewhere = [n for n in names if load_target(n).platform not in (platforms.DEFAULT,) and not load_target(n).platform.installed()]
        names = [n for n in names if n not in elsewhere]
        if elsewhere:
            print(f"fp8-check target check: {', '.join(elsewhere)} compile in another environment; check each by name "
                  f"(fp8-check target check {elsewhere[0]})")
    targets = []
    for name in names:
        try:
            targets.append(load_target(name))
        except KeyError as exc:
            raise UsageError(str(exc.args[0])) from None
        except TargetSpecError as exc:
            print(f"fp8-check: refused: {exc}", file=sys.stderr)
            return 3
    try:
        compiler = Compiler("deviceless", python=python_for(targets))
    except (ValueError, InstallError) as exc:
        raise BrokenEnvironment(f"cannot build the environment for {', '.join(names)}: {exc}") from None
    failed = 0
    with compiler:
        try:
            env = compiler.environment()
        except WorkerError as exc:
            raise BrokenEnvironment(f"cannot start the compile worker: {exc}") from None
        jax_version = env["jax"]
        for t in targets:  # a spec XLA cannot parse is bad input (exit 2), named by its field, before any canary
            if not shipped(t):
                check_target_spec(compiler, t)
        print(f"fp8-check target check: jax {jax_version} (cuDNN read from {_field(jax_version)})")
        for t in targets:
            e = environment_entry(t, jax_version)
            if t.platform is platforms.DEFAULT:
                print(f"{t.name}: compute capability {e['compute_capability']}, CUDA runtime {e['cuda_runtime']}, "
                      f"cuDNN {e['cudnn']} (written to runtime_version and {e['cudnn_field']})")
            else:
                print(f"{t.name}: {t.platform.vendor} {t.arch}, {t.platform.runtime_header.replace('_', ' ')} "
                      f"{e['cuda_runtime']} (written to runtime_version), native FP8: {', '.join(t.native_fp8)}")
            for note in t.notes:
                print(f"  fixed: {note}")
            if args.print_spec:
                print(effective(compiler, t)["config"])
            try:
                sig = check_canary(compiler, t, cudnn=False)
                print(f"  FP8 canary: {sig.fp8_gemms if sig else 0} FP8 gemm(s)" if t.fp8_capable
                      else "  FP8 canary: not FP8-capable")
                result = check_cudnn(compiler, t, jax_version)
                print(f"  cuDNN canary: {result.note}")
            except (CanaryError, CudnnCanaryError) as exc:
                print(f"  FAILED: {exc}")
                failed += 1
    return 3 if failed else 0


def _field(jax_version: str) -> str:
    return dnn_field_read(jax_version)
