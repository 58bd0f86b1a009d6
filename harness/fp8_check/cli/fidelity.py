"""The command half of fp8_check.gpu._fidelity (the gpu stage): the subcommands it registers."""

from __future__ import annotations

import time
from pathlib import Path

from fp8_check.compile import Compiler
from fp8_check.core import EXIT_FAIL, EXIT_OK
from fp8_check.gpu import (
    DEVICE_PROFILES,
    PINNED,
    agreement,
    autotune_results_for,
    build,
    collect,
    collect_replayed,
    from_results,
    write,
)
from fp8_check.run import ResultsError, UsageError, add_options, comma_list, load, load_cases, targets_from
from fp8_check.targets import gpu_present


def register(subparsers) -> dict:
    p = subparsers.add_parser("fidelity", help="compare deviceless signatures with signatures compiled on the local GPU")
    add_options(p)
    p.add_argument("--from", dest="from_results", nargs=2, type=Path, metavar=("DEVICELESS_JSON", "DEVICE_JSON"),
                   help="build the table from two `fp8-check run` results files instead of compiling (no GPU needed)")
    p.add_argument("--autotune-results", type=Path, metavar="PATH",
                   help="the autotune results deviceless `default` replays: a file, or a folder of <jax>.txt files "
                        "(default: goldens/<target>/autotune/<jax>.txt when it exists)")
    p.add_argument("--autotune-target", type=Path, metavar="SPEC",
                   help="the target spec deviceless `default` compiles for (default: --target): a spec captured on this "
                        "device describes it the way its autotune results are keyed (L2, bandwidth, cuDNN)")
    p.add_argument("--out", type=Path, default=Path("reports/fidelity.md"), help="Markdown table (default: reports/fidelity.md)")
    p.add_argument("--json", type=Path, default=Path("reports/fidelity.json"), help="JSON table (default: reports/fidelity.json)")
    return {"fidelity": cmd_fidelity}


def cmd_fidelity(args) -> int:
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.from_results:
        left_path, right_path = args.from_results
        try:
            left, right = load(left_path), load(right_path)
        except ResultsError as exc:
            raise UsageError(f"--from: {exc}") from None
        sigs = from_results(left, right)
        if args.filter:
            keep = {c for c, _ in sigs if any(p in c for p in comma_list(args.filter))}
            sigs = {k: v for k, v in sigs.items() if k[0] in keep}

        def describe(res, path):
            env = res.environment
            dev = (env.get("device") or {}).get("name")
            return f"{path} (mode {env.get('mode')}, targets {', '.join(env.get('targets') or [])}" + (f", device {dev}" if dev else "") + ")"

        meta = {"left": "deviceless side: " + describe(left, left_path), "right": "device side: " + describe(right, right_path),
                "jax": left.jax, "created": created}
    else:
        if args.autotune_results is not None:  # a file given is checked first: a bad one is exit 2 with or without a GPU
            from importlib.metadata import version

            autotune_results_for(args.autotune_results, "", version("jax"))
        if args.mode == "deviceless" or not gpu_present():
            raise UsageError(
                "fidelity compiles on the local GPU and needs one (--mode device); without a GPU, build the table "
                "from two results files: fp8-check fidelity --from DEVICELESS.json DEVICE.json"
            )
        cases = load_cases(args.paths, args.filter)
        target = targets_from(args.target)[0]
        sigs = {}
        with Compiler("deviceless") as deviceless:
            env = deviceless.environment()
            collect(deviceless, cases, target, PINNED, "deviceless", sigs)
        replay_target = targets_from(str(args.autotune_target), "--autotune-target")[0] if args.autotune_target else target
        replay_from = autotune_results_for(args.autotune_results, target.name, env.get("jax", ""))
        coverage = collect_replayed(cases, replay_target, replay_from, sigs)
        with Compiler("device") as device:
            dev_env = device.environment()
            collect(device, cases, target, DEVICE_PROFILES, "device", sigs)
        dev = dev_env.get("device") or {}
        meta = {"left": f"deviceless for target spec {target.name} ({target.description})",
                "right": f"device: {dev.get('name')} (compute capability {dev.get('compute_capability')}, "
                         f"{target.platform.device_line(dev)})",
                "target": target.name, "device": dev, "jax": env.get("jax"), "created": created,
                "autotune_results": (f"{replay_from}, replayed for target spec {replay_target.name}" if replay_from else
                                     "none for this target and release: XLA's deviceless defaults"),
                "autotune_coverage": coverage}
    cells = build(sigs)
    if meta.get("autotune_coverage") is not None:
        meta["replayed_agreement"] = agreement(cells, sigs)
    if not cells:
        raise UsageError("nothing to compare: no case has signatures on both sides")
    write(cells, meta, args.out, args.json)
    counts = {s: sum(c.status == s for c in cells) for s in ("agree", "differ", "error", "missing")}
    print("fidelity: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n))
    print(f"table: {args.out} ({args.json})")
    return EXIT_FAIL if counts["error"] else EXIT_OK
