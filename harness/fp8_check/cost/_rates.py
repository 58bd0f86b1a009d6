"""One target's rate table, with sources: what the cost model (harness/fp8_check/cost/_model.py) prices each engine at.

`python -m fp8_check.cost._rates` prints the tables of every shipped target (docs/cost_model.md holds
them; tests/cost/test_cost_engines.py keeps that file current).
"""

from __future__ import annotations

from fp8_check.cost import _model
from fp8_check.cost._table import LAUNCH_SOURCE, NETWORK_SOURCE, TENSOR_RATES
from fp8_check.targets import all_target_names, load_target


def rate_table(target) -> list[tuple[str, str, str, str]]:
    """(rate, what it executes, value, source) rows for a `targets.Target`: the part's table, the spec's figures, the
    links of a multi-GPU target and the launch overhead."""
    target = load_target(target) if isinstance(target, str) else target
    hw = _model.hardware(target)
    if hw.matmul_unit:
        return _tpu_rows(target, hw)
    part = hw.part
    assert part is not None
    rows = []
    executes = {"fp4": "FP4 gemms", "fp8": "FP8 gemms (cuBLASLt, Triton, cuDNN block-scaled MXFP8)",
                "bf16": "BF16/FP16 gemms", "tf32": "f32 gemms at XLA's DEFAULT precision", "fp64": "f64 gemms"}
    for key, cls in TENSOR_RATES.items():
        r = part.rates.get(key)
        if r is not None:
            rows.append((key, executes[cls] + " on tensor cores", r.text(), r.source))
        elif cls in ("fp8", "fp4"):
            rows.append((key, f"{executes[cls]}: no tensor-core path on {part.name}",
                         f"priced as {hw.class_used(cls)}", "the table states no rate for this class"))
    spec = f"{hw.fp32 / 1e12:.1f} TFLOP/s"
    check = part.rates.get("fp32_cuda")
    rows.append(("fp32_cuda", "dots in loop/reduction fusions and every other kernel, on CUDA cores", spec,
                 "target spec: core_count x fpus_per_core x 2 x clock_rate_ghz"
                 + (f"; {check.source}" if check else "")))
    rows.append(("hbm", "bytes every kernel reads and writes", f"{hw.hbm / 1e12:.3f} TB/s",
                 "target spec: memory_bandwidth" + (f"; {part.rates['hbm'].source}" if "hbm" in part.rates else "")))
    if target.devices > 1:
        rows.append(("nvlink", "collectives among GPUs of one host (one direction: half the figure)",
                     f"{hw.link / 1e9:g} GB/s one way", part.rates["nvlink"].source if "nvlink" in part.rates else ""))
    if hw.per_host:
        rows.append(("network", "collectives whose group spans hosts", f"{hw.network / 1e9:g} GB/s one way",
                     NETWORK_SOURCE))
    rows.append(("launch", "every kernel", f"{hw.launch_us:g} µs", LAUNCH_SOURCE))
    return rows


def _tpu_rows(target, hw) -> list[tuple[str, str, str, str]]:
    """A TPU generation's roofline rows (fp8_check.platforms.tpu.generations: the published peaks and their pages)."""
    g = target.platform.generation(target.arch)
    rows = [("bf16", "bf16 (and f32: a lower bound) matmul fusions on the MXU", f"{g.bf16_flops / 1e12:g} TFLOP/s", g.source),
            ("fp8", "FP8 matmul fusions on the MXU",
             f"{g.fp8_flops / 1e12:g} TFLOP/s" if g.fp8_flops else f"priced as bf16 ({g.bf16_flops / 1e12:g} TFLOP/s)",
             g.fp8_source),
            ("hbm", "bytes every fusion reads and writes (non-matmul fusions: their only cost)",
             f"{hw.hbm / 1e12:.3f} TB/s", g.source)]
    if target.devices > 1:
        rows.append(("ici", "collectives (one direction: half the bidirectional figure)", f"{hw.link / 1e9:g} GB/s one way",
                     g.source))
    rows.append(("launch", "every fusion", "0 µs", "one TPU program: no per-kernel launch is modelled"))
    return rows


def rate_markdown(target) -> str:
    """A target's `rate_table` as a Markdown table."""
    target = load_target(target) if isinstance(target, str) else target
    hw = _model.hardware(target)
    unit = "devices" if hw.matmul_unit else "GPUs"
    lines = [f"### `{target.name}`: {hw.name}" + (f", {target.devices} {unit} ({target.topology})"
                                                   if target.devices > 1 else ""), "",
             "| rate | executes | value | source |", "|---|---|---|---|"]
    for row in rate_table(target):
        lines.append("| " + " | ".join(c.replace("|", "/") for c in row) + " |")
    return "\n".join(lines) + "\n"


def priced_target_names() -> tuple[str, ...]:
    """The shipped targets the cost model prices (a platform may not be: fp8_check.platforms, `unpriced`)."""
    return tuple(n for n in all_target_names() if not load_target(n).platform.unpriced)


def main() -> None:
    print("\n".join(rate_markdown(name) for name in priced_target_names()), end="")


if __name__ == "__main__":
    main()
