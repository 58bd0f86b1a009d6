"""The command half of fp8_check.gpu._capture (the gpu stage): the subcommands it registers."""

from __future__ import annotations

from pathlib import Path

from fp8_check import platforms
from fp8_check.cli.target_check import add_check_parser, cmd_check
from fp8_check.compile import Compiler, WorkerError
from fp8_check.core import EXIT_OK
from fp8_check.gpu import CaptureError, capture, spec_text, write_spec
from fp8_check.run import BrokenEnvironment, UsageError
from fp8_check.targets import TARGET_DIR, gpu_present


def register(subparsers) -> dict:
    p = subparsers.add_parser("target", help="manage target specs (capture one from the local GPU)")
    tsub = p.add_subparsers(dest="target_command", required=True)
    c = tsub.add_parser("capture", help="write the GpuTargetConfig of the local GPU to harness/fp8_check/targets/NAME.txtpb")
    c.add_argument("name", help=f"target name, e.g. {platforms.default_target()} (the file harness/fp8_check/targets/NAME.txtpb)")
    c.add_argument("--dir", type=Path, default=TARGET_DIR, help="where to write the spec (default: the shipped specs)")
    c.add_argument("--force", action="store_true", help="replace an existing spec")
    c.add_argument("--stdout", action="store_true", help="print the spec instead of writing it")

    add_check_parser(tsub)
    return {"target": cmd_target}


def cmd_target(args) -> int:
    if args.target_command == "check":
        return cmd_check(args)
    if not gpu_present():
        raise UsageError("target capture needs a GPU: it reads the target config of the local device")
    with Compiler("device") as compiler:
        try:
            config, env = capture(compiler)
        except (WorkerError, CaptureError) as exc:
            raise BrokenEnvironment(f"cannot capture the target config of the local GPU: {exc}") from None
    text = spec_text(args.name, config, env)
    if args.stdout:
        print(text, end="")
        return EXIT_OK
    try:
        path = write_spec(args.name, text, args.dir, args.force)
    except (FileExistsError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}")
    return EXIT_OK
