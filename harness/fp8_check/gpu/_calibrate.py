"""Calibration: the cost model's estimates (harness/fp8_check/cost/_model.py) next to measured times on a real GPU.

    fp8-check calibrate [PATHS] [-k FILTER] [--target h100] [--profile cublas] [--repeats 50]

For each pattern or block-scaled case (at its `price_at` shapes when it states them) it compiles the
case on the local GPU, prices the compiled program's optimized HLO for the target, runs it
`--repeats` times on zero inputs after a warm-up, and prints the estimate next to the median
measured time and their ratio. The measured time is the wall time of one call including JAX's
dispatch (tens of µs): at the library's small default shapes that dominates, so calibrate at
production shapes. `kind: python` cases are left out (their callables are user code: the
fp8-check process only runs them in the compile worker).

Without a GPU it refuses with exit 3 and says why (`--backend cpu` times JAX's CPU backend
instead: the machinery's own check, not a calibration of GPU estimates).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from fp8_check.cases import Case
from fp8_check.compile import render
from fp8_check.cost import estimate, hardware
from fp8_check.platforms import Profile
from fp8_check.targets import Target


@dataclass(frozen=True)
class Row:
    case: str
    profile: str
    shape: str
    estimated_us: float
    measured_us: float
    kernels: int

    @property
    def ratio(self) -> float:
        """measured / estimated: > 1 the model is optimistic, < 1 pessimistic."""
        return self.measured_us / self.estimated_us if self.estimated_us else float("inf")


def _timed(case: Case) -> Case:
    at = case.timed_at()  # at its production shapes (`price_at`)
    if at is None:
        raise ValueError(f"case '{case.id}' is kind: {case.kind}; calibrate times self-contained cases only")
    return at


def measure(case: Case, target: Target, profile: Profile, repeats: int = 50, backend: str = "gpu") -> Row:
    """Compile `case` (at its `price_at` shapes) on the local `backend`, price its optimized HLO for `target`,
    and time `repeats` calls after a warm-up (median)."""
    import jax
    import numpy as np

    at = _timed(case)
    ns: dict = {}
    exec(compile(render(at).source, f"<fp8-check case {case.id}>", "exec"), ns)  # our own template's output
    device = jax.devices(backend)[0]
    inputs = [jax.device_put(np.zeros(shape, dtype=jax.numpy.dtype(dtype)), device) for _, shape, dtype in ns["ARGS"]]
    options = dict(profile.compiler_options) if backend == "gpu" else {}
    compiled = jax.jit(ns["FN"]).lower(*inputs).compile(compiler_options=options)
    est = estimate(compiled.as_text() or "", hardware(target))
    for _ in range(3):
        jax.block_until_ready(compiled(*inputs))
    times = []
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*inputs))
        times.append(time.perf_counter() - start)
    return Row(case.id, profile.name, at.spec.shape_text(), est.total_us, statistics.median(times) * 1e6, len(est.kernels))


def measure_unfused(case: Case, repeats: int = 10, backend: str = "gpu") -> float:
    """Median µs per call of `case` (at its `price_at` shapes) run op by op (jax.disable_jit: one kernel per op,
    nothing fused): the unfused variant a fused case is timed against."""
    import jax
    import numpy as np

    at = _timed(case)
    ns: dict = {}
    exec(compile(render(at).source, f"<fp8-check case {case.id}>", "exec"), ns)  # our own template's output
    device = jax.devices(backend)[0]
    inputs = [jax.device_put(np.zeros(shape, dtype=jax.numpy.dtype(dtype)), device) for _, shape, dtype in ns["ARGS"]]
    times = []
    with jax.disable_jit():
        jax.block_until_ready(ns["FN"](*inputs))
        for _ in range(max(1, repeats)):
            start = time.perf_counter()
            jax.block_until_ready(ns["FN"](*inputs))
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


NO_GPU = ("needs an NVIDIA GPU: it times the compiled cases on the local device; this machine has none "
          "(--backend cpu checks the machinery on JAX's CPU backend)")


def table(rows: list[Row]) -> str:
    head = f"{'case':<34} {'profile':<8} {'kernels':>7} {'estimated µs':>13} {'measured µs':>12} {'measured/est.':>13}"
    lines = [head]
    for r in rows:
        lines.append(f"{r.case:<34} {r.profile:<8} {r.kernels:>7} {r.estimated_us:>13.1f} {r.measured_us:>12.1f} {r.ratio:>13.2f}")
    if rows:
        ratios = sorted(r.ratio for r in rows)
        lines.append(f"median measured/estimated: {statistics.median(ratios):.2f} over {len(rows)} case(s)")
    return "\n".join(lines)
