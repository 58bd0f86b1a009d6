"""The published numbers the cost model (harness/pipeline/cost.py) prices kernels with, each with its source.

Tensor-core peaks are **dense** (NVIDIA's datasheets print most of them "with sparsity",
i.e. 2:4 structured sparsity, which doubles them; a footnote says the dense figure is half).
FLOP/s per data-type class of a gemm's operands:

| part | fp4 | fp8 | bf16 / f16 | tf32 | fp64 (tensor) | HBM | NVLink (per GPU, both directions) |
|---|---|---|---|---|---|---|---|
| H100 SXM | — | 1979 T | 989.5 T | 494.5 T | 67 T | 3.35 TB/s | 900 GB/s |
| H200 SXM | — | 1979 T | 989.5 T | 494.5 T | 67 T | 4.8 TB/s | 900 GB/s |
| B200 (HGX) | 9 P | 4.5 P | 2.25 P | 1.1 P | 37 T | 8 TB/s | 1.8 TB/s |
| A100 SXM 80GB | — | — | 312 T | 156 T | 19.5 T | 2.039 TB/s | 600 GB/s |

What the model reads from the **target spec** instead (harness/targets/*.txtpb): the HBM
bandwidth (`memory_bandwidth`; the table's figure is kept to check the spec against) and
the CUDA-core FP32 rate for non-gemm kernels, core_count x fpus_per_core x 2 (an FMA) x
clock_rate_ghz (H100: 132 x 128 x 2 x 1.98 GHz = 66.9 TFLOP/s; datasheet: 67).

A part without a tensor-core path for a class (FP8 on A100, FP4 before Blackwell) prices
such a gemm at the next wider class it has (XLA upcasts there anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fp8_check import dtypes

T, P, G = 1e12, 1e15, 1e9

# The fixed cost of one kernel: launch and the start/finish of a grid. Not a datasheet figure:
# NVIDIA's technical blog "Getting Started with CUDA Graphs" (A. Gray, 2019) measures launch
# overheads of a few microseconds per short kernel issued back to back from a stream, less in a
# graph (XLA's command buffers). 2 us is the model's value; `fp8-check calibrate` on a GPU checks it.
LAUNCH_US = 2.0
LAUNCH_SOURCE = ("model constant: a few us per short kernel (NVIDIA Technical Blog, 'Getting Started with CUDA "
                 "Graphs', 2019); calibrate on a GPU")

# Bytes per element. FP4 packs two values a byte.
# The widths come from the dtype vocabulary (harness/dtypes.py); pred and complex types are added here.
DTYPE_BYTES: dict[str, float] = {**{d: b / 8 for d, b in dtypes.BITS.items()}, "pred": 1, "c64": 8, "c128": 16}

# A gemm's operand dtype -> its peak class (the wider operand of the two decides).
DTYPE_CLASS = {
    **{d: "fp4" for d in dtypes.FP4_TYPES},
    **{d: "fp8" for d in dtypes.FP8_TYPES},
    "s8": "fp8", "u8": "fp8",
    "bf16": "bf16", "f16": "bf16",
    "f32": "tf32",  # XLA's DEFAULT precision lets cuBLAS/Triton use TF32 for f32 (HIGHEST: fp32 on CUDA cores)
    "f64": "fp64",
}
CLASS_ORDER = ("fp4", "fp8", "bf16", "tf32", "fp32", "fp64")


@dataclass(frozen=True)
class Part:
    name: str
    match: tuple[str, ...]  # substrings of the target's device_description_str (or name), lower case
    compute_capability: tuple[int, int]
    peak: dict[str, float]  # peak class -> dense FLOP/s (tensor cores)
    hbm: float  # bytes/s, datasheet
    nvlink: float  # bytes/s per GPU, both directions together, datasheet
    source: str
    notes: tuple[str, ...] = field(default_factory=tuple)


PARTS = (
    Part("H100 SXM", ("h100",), (9, 0),
         {"fp8": 1979 * T, "bf16": 989.5 * T, "tf32": 494.5 * T, "fp64": 67 * T},
         3.35e12, 900 * G,
         "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: FP8 3,958 / BF16 and FP16 1,979 / TF32 989 "
         "TFLOPS with sparsity (dense: half), FP64 Tensor Core 67 TFLOPS, GPU memory bandwidth 3.35 TB/s, "
         "NVLink 900 GB/s"),
    Part("H200 SXM", ("h200",), (9, 0),
         {"fp8": 1979 * T, "bf16": 989.5 * T, "tf32": 494.5 * T, "fp64": 67 * T},
         4.8e12, 900 * G,
         "NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: FP8 3,958 / BF16 and FP16 1,979 / TF32 989 "
         "TFLOPS with sparsity (dense: half), FP64 Tensor Core 67 TFLOPS, GPU memory bandwidth 4.8 TB/s, "
         "NVLink 900 GB/s"),
    Part("B200", ("b200",), (10, 0),
         {"fp4": 9 * P, "fp8": 4.5 * P, "bf16": 2.25 * P, "tf32": 1.1 * P, "fp64": 37 * T},
         8e12, 1800 * G,
         "NVIDIA HGX B200 datasheet, per GPU (one eighth of the 8-GPU figures): FP4 18 / FP8 9 / FP16 and BF16 "
         "4.5 / TF32 2.2 PFLOPS with sparsity (dense: half), FP64 37 TFLOPS, HBM3e 8 TB/s, fifth-generation NVLink "
         "1.8 TB/s"),
    Part("A100 SXM 80GB", ("a100",), (8, 0),
         {"bf16": 312 * T, "tf32": 156 * T, "fp64": 19.5 * T},
         2.039e12, 600 * G,
         "NVIDIA A100 Tensor Core GPU datasheet, A100 80GB SXM column: BF16 and FP16 Tensor Core 312 / TF32 156 "
         "TFLOPS dense (624 / 312 with sparsity), FP64 Tensor Core 19.5 TFLOPS, GPU memory bandwidth 2,039 GB/s, "
         "NVLink 600 GB/s; no FP8 tensor cores"),
)


# Between hosts (multi-host targets such as h100x2x4): one 400 Gb/s NIC per GPU, both directions together
# here as for NVLink. Source: NVIDIA DGX H100 and DGX B200 datasheets, "8x single-port NVIDIA ConnectX-7 VPI,
# up to 400 Gb/s InfiniBand/Ethernet" for 8 GPUs.
NETWORK_PER_GPU = 2 * 400e9 / 8


def part_for(description: str, name: str, compute_capability: tuple[int, int]) -> tuple[Part, str]:
    """The table's part for a target, and a note when it was only guessed from the compute capability."""
    text = f"{description} {name}".lower()
    for part in PARTS:
        if any(m in text for m in part.match):
            return part, ""
    same = [p for p in PARTS if p.compute_capability[0] == compute_capability[0]] or [PARTS[0]]
    return same[0], (f"no published peaks for '{description or name}': priced with {same[0].name}'s tensor-core "
                     f"peaks (same compute capability major {compute_capability[0]})" if same[0].compute_capability[0]
                     == compute_capability[0] else f"no published peaks for '{description or name}': priced with "
                     f"{same[0].name}'s")
