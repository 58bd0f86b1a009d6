"""Kernel times measured on the device: FP8 and bf16 gemms from 1k to 16k, timed by the profiler.

Each gemm is compiled for the local GPU with XLA's defaults (autotuned), run once to warm up, then run
`repeats` times under `jax.profiler.trace`; the time per call is the sum of the durations of the kernels the
GPU executed (the trace's device streams), divided by the calls: device time, without JAX's dispatch. The
rows feed the cost model's re-fit (fp8_check.cost._refit) and are written after every shape, so a step cut
short still leaves what it measured.

The dry run (a CPU, in CI) runs the same machinery at small shapes on the CPU backend, where the trace has
no device streams: it times the executable's host execution events instead, and says so.
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from fp8_check.cost import Timed, hardware, refit
from fp8_check.targets import load_target

# (m, n, k): squares 1k..16k and the rectangles of LLM layers (a short k, a long n, ...); 12 shapes x 2 classes.
# Ordered so that a step cut short has small and large shapes of both classes.
SHAPES: tuple[tuple[int, int, int], ...] = (
    (1024, 1024, 1024), (8192, 8192, 8192), (4096, 4096, 4096), (16384, 16384, 16384), (2048, 2048, 2048),
    (4096, 14336, 4096), (8192, 4096, 14336), (1024, 4096, 4096), (16384, 4096, 4096), (4096, 4096, 1024),
    (2048, 8192, 4096), (4096, 16384, 1024),
)
CLASSES = ("fp8", "bf16")
DRY_SHAPES = ((64, 64, 64), (128, 64, 256))
# Host events that stand for execution on the CPU backend (dry run only)
CPU_EXECUTION = "ThunkExecutor::Execute (wait for completion)"


@dataclass(frozen=True)
class KernelTime:
    m: int
    n: int
    k: int
    cls: str
    us_per_call: float  # device time per call (GPU); host execution events (dry run)
    calls: int
    kernels: tuple[str, ...]  # the kernels' names as the trace has them
    source: str  # "device streams" or "host execution events (dry run)"


def gemm_function(cls: str):
    """The timed function: FP8 operands with per-tensor scales, dequantized to f32 and multiplied, f32 out (the
    pattern XLA rewrites to one FP8 gemm); or a plain bf16 gemm. Deviceless for h100 (JAX 0.12.0.1) each is one
    kernel, cuBLASLt or Triton; the kernels' names in each row say what ran on the device."""
    import jax
    import jax.numpy as jnp

    nt = (((1,), (1,)), ((), ()))  # b is (n, k): the layout cuBLASLt's FP8 gemm takes without a transpose kernel

    if cls == "fp8":
        def fp8(a, b, sa, sb):  # the f32 dequant pattern (README); f32 out: one FP8 gemm on either engine
            return jax.lax.dot_general(a.astype(jnp.float32) * sa, b.astype(jnp.float32) * sb, nt,
                                       preferred_element_type=jnp.float32)
        return fp8

    def bf16(a, b):
        return jax.lax.dot_general(a, b, nt)
    return bf16


def make_inputs(cls: str, m: int, n: int, k: int, device):
    """Operands made on `device` (no host transfer of 16k arrays)."""
    import jax
    import jax.numpy as jnp

    dtype = jnp.float8_e4m3fn if cls == "fp8" else jnp.bfloat16

    @jax.jit
    def make(key):
        ka, kb = jax.random.split(key)
        a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
        b = jax.random.normal(kb, (n, k), jnp.float32).astype(dtype)
        return a, b

    with jax.default_device(device):
        a, b = make(jax.random.key(0))
        extra = (jnp.float32(1.0), jnp.float32(1.0)) if cls == "fp8" else ()
    return (a, b, *extra)


def trace_events(trace_dir: Path) -> tuple[list[dict], dict[int, str], dict[tuple[int, int], str]]:
    """(complete events, process names, thread names) of the Perfetto trace `jax.profiler.trace` wrote."""
    found = sorted(trace_dir.glob("**/*perfetto_trace.json.gz"))
    if not found:
        raise RuntimeError(f"the profiler wrote no perfetto trace under {trace_dir}")
    with gzip.open(found[-1], "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    pids = {e["pid"]: e.get("args", {}).get("name", "") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    tids = {(e["pid"], e["tid"]): e.get("args", {}).get("name", "") for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [e for e in events if e.get("ph") == "X"], pids, tids


def device_time(events: list[dict], pids: dict[int, str], tids: dict[tuple[int, int], str], backend: str
                ) -> tuple[float, tuple[str, ...], str]:
    """(total µs, kernel names, source): the kernels on the GPU's streams, or the CPU's execution events."""
    if backend == "gpu":
        gpu = {p for p, name in pids.items() if name.startswith("/device:GPU")}
        # the kernels themselves are on the stream threads ("Stream #N(...)"); other threads of the device
        # process ("XLA Ops", "XLA Modules") repeat them as spans: counting those too would count twice
        mine = [e for e in events if e["pid"] in gpu and tids.get((e["pid"], e.get("tid", -1)), "").startswith("Stream")]
        source = "device streams"
        if not mine:  # say what the trace has instead, for the next session to fix
            seen = sorted({tids.get((e["pid"], e.get("tid", -1)), "?") for e in events if e["pid"] in gpu})
            raise RuntimeError(f"the trace has no GPU stream threads (GPU processes {sorted(pids[p] for p in gpu)}, "
                               f"their threads {seen[:8]})")
    else:
        mine = [e for e in events if e.get("name") == CPU_EXECUTION]
        source = "host execution events (dry run)"
    if not mine:
        raise RuntimeError(f"the trace has no {source}")
    return sum(float(e.get("dur", 0.0)) for e in mine), tuple(sorted({str(e.get("name")) for e in mine})), source


def time_gemm(cls: str, m: int, n: int, k: int, calls: int, backend: str) -> KernelTime:
    import jax

    device = jax.devices(backend)[0]
    args = make_inputs(cls, m, n, k, device)
    fn = jax.jit(gemm_function(cls))
    fn(*args).block_until_ready()  # compile (autotuning on a GPU) and warm up outside the trace
    trace_dir = Path(tempfile.mkdtemp(prefix="fp8-check-trace-"))
    try:
        with jax.profiler.trace(str(trace_dir), create_perfetto_trace=True):
            for _ in range(calls):
                out = fn(*args)
            out.block_until_ready()
        total, names, source = device_time(*trace_events(trace_dir), backend)
    finally:
        shutil.rmtree(trace_dir, ignore_errors=True)
    return KernelTime(m, n, k, cls, total / calls, calls, names, source)


def run(out: Path, dry: bool, target_name: str) -> list[dict]:
    """Every shape and class, written to `kernels.json` and `kernels.md` after each; one that fails is a row with
    its error and the next one runs."""
    hw = hardware(load_target(target_name))
    backend = "cpu" if dry else "gpu"
    rows: list[dict] = []
    shapes = DRY_SHAPES if dry else SHAPES
    for m, n, k in shapes:
        for cls in CLASSES:
            try:
                timed = time_gemm(cls, m, n, k, calls=3 if dry else 10, backend=backend)
                rows.append(asdict(timed))
            except Exception as exc:  # one shape that does not compile or run never stops the others
                rows.append({"m": m, "n": n, "k": k, "cls": cls, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"})
            timed_rows = [Timed(r["m"], r["n"], r["k"], r["cls"], r["us_per_call"]) for r in rows if "us_per_call" in r]
            fitted = None
            if all(sum(t.cls == c for t in timed_rows) >= 2 for c in {t.cls for t in timed_rows}) and timed_rows:
                fitted = refit(timed_rows, hw)
            _write(out, rows, backend, dry, target_name, fitted)
    return rows


def _write(out: Path, rows: list[dict], backend: str, dry: bool, target: str, fitted) -> None:
    doc = {"schema": "fp8-check/kernels/1", "dry_run": dry, "backend": backend, "target": target, "rows": rows}
    if fitted is not None:
        doc["refit"] = {cls: asdict(c) for cls, c in fitted.curves.items()}
        doc["refit_median_before_after"] = [round(fitted.before[0], 3), round(fitted.after[0], 3)]
        doc["refit_worst_before_after"] = [round(fitted.before[1], 3), round(fitted.after[1], 3)]
    (out / "kernels.json").write_text(json.dumps(doc, indent=1) + "\n")
    note = ("**Dry run on a CPU**: host execution events at small shapes, the machinery's numbers, not a "
            "calibration.\n\n" if dry else "")
    errors = [r for r in rows if "error" in r]
    body = ["| class | m | n | k | µs per call | calls | kernels |", "|---|---|---|---|---|---|---|"]
    body += [f"| {r['cls']} | {r['m']} | {r['n']} | {r['k']} | {r['us_per_call']:.2f} | {r['calls']} | "
             f"{', '.join(r['kernels'])[:120].replace('|', '/')} |" for r in rows if "us_per_call" in r]
    body += [f"| {r['cls']} | {r['m']} | {r['n']} | {r['k']} | error | | {r['error'].replace('|', '/')} |" for r in errors]
    med = statistics.median([r["us_per_call"] for r in rows if "us_per_call" in r]) if len(rows) > len(errors) else 0
    (out / "kernels.md").write_text(
        f"# Kernel times ({backend}, target {target})\n\n{note}Time per call: the kernels on the device's streams in a "
        f"profiler trace (jax.profiler), summed and divided by the calls; no dispatch. Median {med:.2f} µs.\n\n"
        + "\n".join(body) + "\n\n" + (fitted.markdown() if fitted is not None else ""))
