"""`fp8-check gpu-session`: everything a short loan of one H100 should produce, in at most 8 minutes.

    bash scripts/gpu_session.sh [--out DIR] [--dry-run]      # no install needed: runs from the checkout

Steps, each a child process with its own time budget (killed when it runs over; the next step still
runs), each writing its files as it goes, so a partial run still leaves results ready to commit:

| step | budget | what it writes |
|---|---|---|
| `environment` | 20 s | `environment.json`: JAX, jaxlib, CUDA plugin, device, driver |
| `capture` | 20 s | `h100-captured.txtpb`: the device's GpuTargetConfig (`target capture`) |
| `autotune` | 100 s | `autotune/<target>/<jax>.txt`, `autotune.json`: the device's autotune results (`default`) for the library, decoder and FP8-first example cases |
| `kernels` | 90 s | `kernels.md`/`.json`: FP8/bf16 gemms 1k..16k timed by the profiler; the cost model re-fit |
| `calibrate` | 30 s | `calibration.md`/`.json`: estimated vs measured µs per case, fused vs op-by-op |
| `fidelity` | 140 s | `fidelity.md`/`.json`: deviceless vs device signatures (`default` replayed, `cublas`, `triton`) |
| `numerics` | 30 s | `numerics.json`: executed outputs vs the float64 reference (`run --numerics`) |
| `gpu-tests` | 50 s | `gpu-tests.log`: the GPU-only tests (`pytest -m gpu`) |

Total 480 s, under 8 minutes with start-up. `session.json` and `SESSION.md` list every step with its
budget, its status (ok, failed, timed out, not measured on the device) and its time; they are rewritten after
each step.

Before any step, the session checks that JAX sees the platform's GPU (gpu/_session_checks.py): if not,
it stops at once with one line and exit 3, writing nothing. A step of a device run is ok only when it exited 0
AND its files show it measured on the device (`session_checks.EVIDENCE`: an "Unknown backend 'gpu'" in every row, or every
GPU test skipped, is not ok). The files go to a fresh hidden folder next to `--out`; only a device run whose
every step is ok is moved into place (replacing `--out`). A failed session (a dry run too) leaves its fresh folder
(named in its last line) and never touches `--out`; a dry run must name an `--out` other than docs/gpu-session.
`--out` must be a new or empty folder, or one a session wrote (it holds the marker `.fp8-check-gpu-session`): never
'', '.', the checkout or a folder above it, or a folder with a user's files (exit 2 before any step, nothing
written). `--step` runs only inside a session (the folder the session made for its steps).

`--dry-run` executes every step deviceless on a CPU machine (CI runs it: tests/gpu/test_gpu_session.py):
the GPU-only tests skip with their reason, `capture` checks the shipped spec instead, `fidelity` builds
its table from a deviceless results file against itself, `numerics` executes the subset on JAX's CPU
backend against the same reference, `calibrate` times the CPU backend, `autotune` compiles deviceless and
records the keys XLA looked up, and `kernels` times small gemms on the CPU backend from the profiler's trace. Its numbers are the
machinery's, never a GPU's (every file says `dry run`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fp8_check import platforms
from fp8_check.core import OutputError, check_dir, checkout
from fp8_check.gpu._session_checks import (
    MARKER,
    SESSION_ENV,
    NoGpu,
    UnsafeOut,
    check_gpu,
    check_out,
    fresh_folder,
    is_session_folder,
    move_into_place,
    step_status,
)

# The subset the session compiles: small enough for the budgets on one H100, covering the seed cases, an
# epilogue, a bias, an output scale, a dequant dtype and an LLM-shaped layout.
SUBSET = "seed_,epi_relu,epi_bias_bf16,scale_out_divide_e4m3,dequant_f16_plain"
# Fidelity also over the gradient dtypes, an LLM-sized layout and a flax decoder block (which profile predicts
# the autotuned `default` for which case family; 14 cases took 23 s of its 130 s on an H200)
FIDELITY = SUBSET + ",dtype_,layout_llm,decoder_direct_fwd"
# The autotune capture: the fidelity cases and the flax decoder blocks (forward and train step), then the
# FP8-first example's train step (its own cases and module), each at the shapes it declares
AUTOTUNE = FIDELITY + ",decoder_direct_,decoder_qdq_fwd"
AUTOTUNE_EXAMPLES = ("docs/examples/fp8first",)  # under the checkout
CALIBRATE = "seed_plain_f32,seed_relu_bf16,epi_gelu_tanh,epi_bias_bf16,scale_out_divide_e4m3,layout_llm_8192"
PRODUCTION = (4096, 4096, 4096)  # where a calibrated case without price_at is timed (m, n, k)
GPU_TEST_FILES = ("tests/gpu/test_capture.py", "tests/gpu/test_fidelity.py", "tests/gpu/test_numerics.py", "tests/cost/test_cost.py")
TOTAL_S = 480
# the committed files of the last session (the session runs from a checkout; installed: ./docs/gpu-session)
DEFAULT_OUT = (checkout() or Path()).resolve() / "docs" / "gpu-session"


@dataclass(frozen=True)
class Step:
    name: str
    budget_s: float
    what: str


# Most valuable first (a session whose machine is taken back early still has them): the calibration the cost
# model has never had, then fidelity and numerics; the GPU-only tests last (they repeat those checks on seed cases).
STEPS = (
    Step("environment", 20, "JAX, jaxlib, CUDA plugin, the device and its driver"),
    Step("capture", 20, "the device's GpuTargetConfig (fp8-check target capture)"),
    # autotune replay (#49): the device's autotune results, then kernels timed by the profiler
    Step("autotune", 100, "the device's autotune results for the library, decoder and FP8-first example cases "
                          "(library and production shapes)"),
    Step("kernels", 90, "device-timed kernels (profiler) of FP8 and bf16 gemms 1k..16k, and the cost model re-fit"),
    Step("calibrate", 30, "estimated vs measured us per case; each fused case vs its op-by-op variant"),
    Step("fidelity", 140, "deviceless vs device signatures, profiles default (replaying the autotune step), "
                     + ", ".join(p.name for p in platforms.DEFAULT.profiles if p.deviceless)),
    Step("numerics", 30, "executed outputs vs the float64 reference (run --numerics)"),
    Step("gpu-tests", 50, "the GPU-only tests (pytest -m gpu)"),
)


def session_target(dry: bool) -> str:
    """The shipped target the session compares the device with: `FP8_CHECK_SESSION_TARGET` when set, else the
    shipped spec whose name the device's name contains (nvidia-smi: "NVIDIA H200" -> h200), else h100."""
    chosen = os.environ.get("FP8_CHECK_SESSION_TARGET")
    if chosen:
        return chosen
    if dry:
        return platforms.default_target()
    from fp8_check.targets import target_names

    name = platforms.DEFAULT.device_info().get("smi_name", "").lower()
    return next((t for t in sorted(target_names(), key=len, reverse=True) if t.isalnum() and t in name), platforms.default_target())


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "fp8_check.cli.main", *args]


def command(step: str, out: Path, dry: bool) -> list[str]:
    """The child process of `step` (writing under `out`)."""
    if step == "gpu-tests":
        plugin = [] if _plugin_installed() else ["-p", "fp8_check.cli.pytest_plugin"]
        return [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider", *plugin,
                *GPU_TEST_FILES]
    target = session_target(dry)
    if step == "capture":
        return _cli("target", "check", target) if dry else \
            _cli("target", "capture", f"{target}-captured", "--dir", str(out), "--force")
    if step == "fidelity" and not dry:
        # deviceless `default` replays the `autotune` step's results, compiled for the spec the `capture` step
        # wrote when there is one: its description of the device (L2, bandwidth, cuDNN) is what the results key on
        captured = out / f"{target}-captured.txtpb"
        return _cli("fidelity", "-k", FIDELITY, "--target", target, "--mode", "device",
                    "--autotune-results", str(out / "autotune" / target),
                    *(["--autotune-target", str(captured)] if captured.is_file() else []),
                    "--out", str(out / "fidelity.md"), "--json", str(out / "fidelity.json"))
    if step == "numerics" and not dry:
        return _cli("run", "-k", SUBSET, "--target", target, "--mode", "device", "--numerics", "--profile", platforms.default_profile(),
                    "--json", str(out / "numerics.json"), "--html", str(out / "numerics.html"))
    return [sys.executable, "-m", "fp8_check.gpu.session", "--step", step, "--out", str(out)] + (["--dry-run"] if dry else [])


def _plugin_installed() -> bool:
    from importlib import metadata

    return any(ep.name == "fp8_check" for ep in metadata.entry_points(group="pytest11"))


# ------------------------------------------------------------------ the steps that run in this module


def step_environment(out: Path, dry: bool) -> None:
    import jax

    from fp8_check.core import installed, version_line
    from fp8_check.targets import gpu_present

    devices = [{"kind": d.device_kind, "platform": d.platform} for d in jax.devices()]
    import fp8_check

    doc = {"fp8_check": version_line(), "imported_from": str(Path(fp8_check.__file__).parent),
           "jax": jax.__version__, "devices": devices, "gpu": gpu_present(),
           "dry_run": dry, "python": sys.version.split()[0]}
    for name in ("jaxlib", *platforms.DEFAULT.plugin_distributions, "flax", "ml_dtypes"):
        doc[name] = installed(name)
    if gpu_present():
        doc["device_info"] = platforms.DEFAULT.device_info()  # driver, runtime, cuBLAS, cuDNN; nvidia-smi's view
    _write_json(out / "environment.json", doc)


def step_fidelity_dry(out: Path) -> None:
    """Deviceless results of the subset, then the fidelity table built from them against themselves."""
    results = out / "deviceless.json"
    _run(_cli("run", "-k", FIDELITY, "--target", platforms.default_target(), "--mode", "deviceless", "--profile", f"{platforms.default_profile()},triton",
              "--json", str(results), "--html", str(out / "deviceless.html")), ok=(0, 1))
    _run(_cli("fidelity", "--from", str(results), str(results), "--out", str(out / "fidelity.md"),
              "--json", str(out / "fidelity.json")))


def step_numerics_dry(out: Path) -> None:
    """The subset executed on JAX's CPU backend against the float64 reference: the machinery of `run --numerics`."""
    import jax
    import numpy as np

    from fp8_check.compile import render
    from fp8_check.gpu import _numerics
    from fp8_check.run import load_cases

    rows = []
    for case in load_cases([], SUBSET):
        skip = _numerics.skip_reason(case)
        if skip:
            rows.append({"case": case.id, "status": "skipped", "reason": skip})
            continue
        ns: dict = {}
        exec(compile(render(case).source, f"<fp8-check case {case.id}>", "exec"), ns)  # our own template
        inputs = _numerics.make_inputs(case)
        outs = jax.jit(ns["FN"])(*[jax.device_put(inputs[name], jax.devices("cpu")[0]) for name, _, _ in ns["ARGS"]])
        outs = outs if isinstance(outs, (tuple, list)) else [outs]
        res = _numerics.compare(case, inputs, [np.asarray(o) for o in outs])
        rows.append({"case": case.id, "status": res.status, "reason": res.reason})
        _write_json(out / "numerics.json", {"dry_run": True, "backend": "cpu", "cases": rows})
    _write_json(out / "numerics.json", {"dry_run": True, "backend": "cpu", "cases": rows})


def step_calibrate(out: Path, dry: bool) -> None:
    """Estimated vs measured µs per case at production shapes, and the fused case vs its op-by-op variant (the same
    function run with jax.disable_jit: one kernel per op, nothing fused). Written after every case."""
    from fp8_check.cases import Shape
    from fp8_check.gpu._calibrate import measure, measure_unfused
    from fp8_check.run import load_cases
    from fp8_check.targets import PROFILES, load_target

    backend = "cpu" if dry else "gpu"
    target = load_target(session_target(dry))
    rows: list[dict] = []
    wanted = CALIBRATE.split(",")
    for case in sorted((c for c in load_cases([], CALIBRATE) if c.id in wanted), key=lambda c: wanted.index(c.id)):
        # at its production shapes (`price_at`), else at PRODUCTION; CPU: the machinery only, at small shapes
        at = case.timed_at(Shape(64, 32, 64) if dry else None if case.priced_elsewhere else Shape(*PRODUCTION)) or case
        row: dict = {"case": case.id, "profile": platforms.default_profile()}
        try:
            fused = measure(at, target, PROFILES[platforms.default_profile()], repeats=5 if dry else 20, backend=backend)
            row.update(shape=fused.shape, kernels=fused.kernels, estimated_us=round(fused.estimated_us, 2),
                       measured_us=round(fused.measured_us, 2), ratio=round(fused.ratio, 3))
            unfused = measure_unfused(at, repeats=3 if dry else 10, backend=backend)
            row.update(unfused_us=round(unfused, 2), fusion_speedup=round(unfused / fused.measured_us, 3))
        except Exception as exc:  # one case that does not compile or run never stops the others
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        rows.append(row)
        _write_calibration(out, rows, backend, dry)
    _write_calibration(out, rows, backend, dry)


def _write_calibration(out: Path, rows: list[dict], backend: str, dry: bool) -> None:
    _write_json(out / "calibration.json", {"dry_run": dry, "backend": backend, "target": session_target(dry),
                                           "rows": rows})
    head = ("| case | profile | shape | kernels | estimated µs | measured µs | measured/est. | op-by-op µs | "
            "fusion speed-up |\n|---|---|---|---|---|---|---|---|---|\n")
    body = "".join(f"| {r['case']} | {r['profile']} | {r.get('shape', '')} | {r.get('kernels', '')} | "
                   f"{r.get('estimated_us', '')} | {r.get('measured_us', '')} | {r.get('ratio', '')} | "
                   f"{r.get('unfused_us', '')} | {r.get('fusion_speedup', '')} |"
                   + (f" {r['error']}" if "error" in r else "") + "\n" for r in rows)
    note = ("**Dry run on a CPU**: the machinery's numbers, not a calibration.\n\n" if dry else "")
    (out / "calibration.md").write_text(f"# Calibration ({backend})\n\n{note}Measured: median wall time per call "
                                        f"including JAX's dispatch; op-by-op: the same function under "
                                        f"jax.disable_jit.\n\n{head}{body}")


# ------------------------------------------------------------------ autotune replay (#49): capture and kernel times


def step_autotune_replay(step: str, out: Path, dry: bool) -> None:
    """`autotune`: the device's autotune results (fp8_check.gpu._autotune_capture); `kernels`: gemm kernels timed by
    the profiler and the cost model re-fit from them (fp8_check.gpu._kernel_timing)."""
    if step == "autotune":
        from fp8_check.gpu._autotune_capture import capture

        root = checkout() or Path()
        examples = [root / e for e in AUTOTUNE_EXAMPLES if (root / e / "cases").is_dir()]
        capture(out, SUBSET + ",decoder_direct_fwd" if dry else AUTOTUNE, session_target(dry), dry,
                                 examples)
    else:
        from fp8_check.gpu._kernel_timing import run

        run(out, dry, session_target(dry))


# ------------------------------------------------------------------ the session


def _run(argv: list[str], ok=(0,), timeout: float | None = None) -> None:
    proc = subprocess.run(argv, timeout=timeout)
    if proc.returncode not in ok:
        raise SystemExit(proc.returncode)


def _write_json(path: Path, doc: dict) -> None:
    path.write_text(json.dumps(doc, indent=1) + "\n")


def run_session(out: Path, dry: bool, steps: tuple[Step, ...] = STEPS, scale: float = 1.0) -> list[dict]:
    """Every step as a child process under its budget (x `scale`: the dry run on a shared CI machine), writing
    into `out`; the record is rewritten after each step."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ[SESSION_ENV] = str(Path(os.path.abspath(out)))  # the one folder its steps (`--step`) may write
    os.environ["FP8_CHECK_SESSION_TARGET"] = target = session_target(dry)  # every step compares with the same target
    print(f"gpu-session: target {target}", flush=True)
    record: list[dict] = [dict(asdict(s), status="pending", seconds=0.0) for s in steps]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for i, step in enumerate(steps):
        argv = command(step.name, out, dry)
        budget = step.budget_s * scale
        record[i].update(status="running", command=" ".join(argv[1:]))
        print(f"gpu-session: {step.name} (budget {budget:.0f} s): {step.what}", flush=True)
        t0 = time.monotonic()
        with open(out / f"{step.name}.log", "w") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                status = step_status(step.name, proc.wait(timeout=budget), out, dry)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
                status = "timed out"
        record[i].update(status=status, seconds=round(time.monotonic() - t0, 1))
        print(f"gpu-session: {step.name}: {status} in {record[i]['seconds']} s", flush=True)
        _write_record(out, record, dry, started)
    return record


def _write_record(out: Path, record: list[dict], dry: bool, started: str) -> None:
    _write_json(out / "session.json", {"schema": "fp8-check/gpu-session/1", "dry_run": dry, "started": started,
                                       "budget_s": sum(r["budget_s"] for r in record), "steps": record})
    lines = [f"# GPU session{' (dry run on a CPU: no GPU numbers)' if dry else ''}", "", f"Started {started}.", "",
             "| step | budget s | status | seconds | what |", "|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['budget_s']} | {r['status']} | {r['seconds']} | {r['what']} |" for r in record]
    (out / "SESSION.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fp8-check gpu-session", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="where the files go (default: docs/gpu-session; a dry run needs its own)")
    p.add_argument("--dry-run", action="store_true", help="every step deviceless on a CPU machine")
    p.add_argument("--list", action="store_true", help="list the steps and their budgets, run nothing")
    p.add_argument("--step", choices=[s.name for s in STEPS], help=argparse.SUPPRESS)  # one step, in this process
    p.add_argument("--budget-scale", type=float, default=1.0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.list:
        for s in STEPS:
            print(f"{s.name:<12} {s.budget_s:>4} s  {s.what}")
        print(f"{'total':<12} {sum(s.budget_s for s in STEPS):>4} s  (at most {TOTAL_S} s)")
        return 0
    if args.dry_run:
        os.environ["JAX_PLATFORMS"] = "cpu"
    if args.step:  # a step writes into the session's own fresh folder, which the session names for its steps
        inside = os.environ.get(SESSION_ENV)
        if not inside or args.out is None or Path(os.path.abspath(args.out)) != Path(inside) \
                or not is_session_folder(Path(inside)):
            print(f"gpu-session: --step {args.step} runs only inside a session (its own folder, marked {MARKER}); "
                  "run scripts/gpu_session.sh", file=sys.stderr)
            return 2
        if args.step == "environment":
            step_environment(args.out, args.dry_run)
        elif args.step == "fidelity":
            step_fidelity_dry(args.out)
        elif args.step == "numerics":
            step_numerics_dry(args.out)
        elif args.step == "calibrate":
            step_calibrate(args.out, args.dry_run)
        elif args.step in ("autotune", "kernels"):
            step_autotune_replay(args.step, args.out, args.dry_run)
        return 0
    if args.dry_run and args.out is None:
        print(f"gpu-session: a dry run never writes the committed {DEFAULT_OUT.name}; give --out", file=sys.stderr)
        return 2
    return session(args.out or DEFAULT_OUT, args.dry_run, args.budget_scale,
                   given=argv_out(argv if argv is not None else sys.argv[1:]))


def argv_out(argv: list[str]) -> str | None:
    """`--out` as typed (argparse's Path makes '' into '.'), or None when not given."""
    for i, a in enumerate(argv):
        if a == "--out" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--out="):
            return a[len("--out="):]
    return None


def session(out: Path, dry: bool, scale: float = 1.0, steps: tuple[Step, ...] = STEPS, given: str | None = None) -> int:
    """The whole session: the GPU check (a device run), every step in a fresh folder, then the move into place
    (a device run whose every step is ok). Exit 0 only then; 2 for an unusable `--out`, 3 without a GPU, 1 when
    a step is not ok."""
    try:
        if dry and Path(os.path.abspath(out)) == DEFAULT_OUT:
            raise OutputError(f"--out {out}: a dry run never writes the committed {DEFAULT_OUT.name}; give another "
                              "folder")
        out = check_out(out, checkout(), given)
        check_dir(out, "--out")
    except (OutputError, UnsafeOut) as exc:
        print(f"gpu-session: {exc}", file=sys.stderr)
        return 2
    if not dry:
        try:
            kinds = check_gpu()
        except NoGpu as exc:
            print(f"gpu-session: {exc}; stopped before any step, nothing written", file=sys.stderr)
            return 3
        print(f"gpu-session: JAX sees {', '.join(kinds)}", flush=True)
    try:
        fresh = fresh_folder(out)
    except OSError as exc:
        print(f"gpu-session: --out {out}: cannot create a folder next to it: {exc.strerror or exc}", file=sys.stderr)
        return 2
    record = run_session(fresh, dry, steps=steps, scale=scale)
    failed = [r["name"] for r in record if r["status"] != "ok"]
    summary = f"gpu-session: {len(record) - len(failed)} of {len(record)} steps ok" + (
        f"; not ok: {', '.join(failed)}" if failed else "")
    if failed:  # a failed session (a dry run too) never replaces what is there
        print(f"{summary}; {out} left as it was, this session's files in {fresh}")
        return 1
    try:
        move_into_place(fresh, out)
    except (UnsafeOut, OSError) as exc:
        print(f"gpu-session: {exc}", file=sys.stderr)
        return 2
    print(f"{summary}; files in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
