"""The TPU generations fp8-check compiles for, and the libtpu each JAX release pins: plain data.

Peaks are Google's published per-chip figures, dense, per chip, each with the page it comes from (`source`): the
Cloud TPU documentation's "TPU v5e", "TPU v5p", "TPU v6e" and "TPU7x (Ironwood)" pages (docs.cloud.google.com/tpu/
docs/<generation>). `fp8` is None where the generation publishes no FP8 rate above its bf16 one: the TPU7x page's
comparison table lists v5p and v6e at "FP8 459 / 918 TFLOP/s", their bf16 figures (FP8 operands run at the bf16
rate), v5e at none. `ici` is the bidirectional inter-chip interconnect bandwidth per chip as published; the cost
model prices a collective over half of it (one direction, as NVLink). Where the pages disagree (v6e's ICI was
published as 3200 Gbps, 3584 Gbps and later 800 GB/s bidirectional; its HBM as 1600, 1638 and 1640 GB/s) the value
taken is named in `source`. The cost model's TPU roofline (fp8_check.cost._model) reads these and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

OCP_FP8 = ("float8_e4m3fn", "float8_e5m2")


@dataclass(frozen=True)
class Generation:
    name: str  # fp8-check's target name and libtpu's topology prefix: `v6e`
    product: str  # what Google calls it
    single_chip: str  # libtpu's one-chip topology layout (`1x1` for the 2-D generations)
    since: str  # the first JAX release whose libtpu knows it (measured)
    cores_per_chip: int = 1  # JAX devices per chip (tpu7x: one per TensorCore)
    native_fp8: tuple[str, ...] = ()
    bf16_flops: float = 0.0  # dense FLOP/s per chip
    int8_ops: float = 0.0
    fp8_flops: float | None = None
    hbm_bytes_per_s: float = 0.0
    source: str = ""
    ici_bytes_per_s: float = 0.0  # bidirectional, per chip, as published
    fp8_source: str = ""  # where its FP8 figure (or the absence of one) is published


GENERATIONS: dict[str, Generation] = {g.name: g for g in (
    Generation("v5e", "TPU v5e", "1x1", "0.6.1", bf16_flops=197e12, int8_ops=394e12, hbm_bytes_per_s=819e9,
               ici_bytes_per_s=200e9,
               source="Cloud TPU docs, TPU v5e: 197 TFLOP/s bf16, 394 TOPS int8, 819 GB/s HBM, 1600 Gbps ICI",
               fp8_source="Cloud TPU docs, TPU v5e: no FP8 figure published"),
    Generation("v5p", "TPU v5p", "1x1x1", "0.6.1", bf16_flops=459e12, int8_ops=918e12, hbm_bytes_per_s=2765e9,
               ici_bytes_per_s=1200e9,
               source="Cloud TPU docs, TPU v5p: 459 TFLOP/s bf16, 918 TOPS int8, 2765 GB/s HBM, "
                      "1200 GB/s bidirectional ICI (earlier: 4800 Gbps)",
               fp8_source="Cloud TPU docs, TPU v5p and TPU7x pages: FP8 459 TFLOP/s, its bf16 rate"),
    Generation("v6e", "TPU v6e Trillium", "1x1", "0.6.1", bf16_flops=918e12, int8_ops=1836e12, hbm_bytes_per_s=1640e9,
               ici_bytes_per_s=800e9,
               source="Cloud TPU docs, TPU v6e: 918 TFLOP/s bf16, 1836 TOPS int8, 1640 GB/s HBM; TPU7x page: 800 GB/s "
                      "bidirectional ICI (the v6e page has said 3200 and 3584 Gbps)",
               fp8_source="Cloud TPU docs, TPU7x page: v6e FP8 918 TFLOP/s, its bf16 rate"),
    Generation("tpu7x", "TPU7x Ironwood", "1x1x1", "0.8.1", cores_per_chip=2, native_fp8=OCP_FP8, bf16_flops=2307e12,
               fp8_flops=4614e12, hbm_bytes_per_s=7380e9, ici_bytes_per_s=1200e9,
               source="Cloud TPU docs, TPU7x (Ironwood): 4614 TFLOP/s FP8, 2307 TFLOP/s bf16, 7380 GB/s HBM, "
                      "1200 GB/s bidirectional ICI",
               fp8_source="Cloud TPU docs, TPU7x (Ironwood): 4614 TFLOP/s FP8, twice its bf16 rate"),
)}

# Multi-chip targets the case library and goldens use; any `<generation>-<topology>` up to 256 chips is accepted.
MULTI_CHIP = ("v5e-2x2", "v6e-2x2", "tpu7x-2x2x1")

# JAX release -> the libtpu its `jax[tpu]` extra pins (PyPI, measured with uv for every release 0.6.1 .. 0.12.0.1).
LIBTPU_PINS: dict[str, str] = {
    "0.6.1": "0.0.15", "0.6.2": "0.0.17.1", "0.7.0": "0.0.19.1", "0.7.1": "0.0.20", "0.7.2": "0.0.23",
    "0.8.0": "0.0.24", "0.8.1": "0.0.30", "0.8.2": "0.0.32.1", "0.8.3": "0.0.32.1", "0.9.0": "0.0.34",
    "0.9.0.1": "0.0.34", "0.9.1": "0.0.35", "0.9.2": "0.0.37", "0.10.0": "0.0.40", "0.10.1": "0.0.41",
    "0.10.2": "0.0.42.1", "0.11.0": "0.0.44.1", "0.11.1": "0.0.46.3", "0.11.2": "0.0.48.1", "0.12.0": "0.0.50.1",
    "0.12.0.1": "0.0.50.1",
}


def chips(layout: str) -> int:
    return math.prod(int(x) for x in layout.split("x"))
