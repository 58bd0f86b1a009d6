"""The rates the cost model (harness/fp8_check/cost/_model.py) prices kernels with, each with its source.

One table per part, as data: `harness/fp8_check/targets/rates/<part>.yaml` (a new part, an AMD GPU for
instance, is one new file; nothing here changes). Each rate names what executes a kernel and
where the number comes from:

| rate | executes | source |
|---|---|---|
| `fp4_tensor`, `fp8_tensor`, `bf16_tensor`, `tf32_tensor`, `fp64_tensor` | a gemm in a library (cuBLAS, cuBLASLt, Triton's gemm fusions, cuDNN's block-scaled dot) on tensor cores, by its operands' class | datasheet, **dense** (most print "with sparsity", twice the dense figure) |
| CUDA-core FP32 | a dot XLA emitted as a loop or reduction fusion (no gemm library), and every other kernel | the target spec: core_count x fpus_per_core x 2 (an FMA) x clock_rate_ghz; `fp32_cuda` in the table is the datasheet figure it is checked against |
| `hbm` | every kernel's bytes | the target spec's `memory_bandwidth`; the table's datasheet figure when the spec has none |
| `nvlink`, `NETWORK_PER_GPU` | collectives within a host / across hosts | datasheet |
| `LAUNCH_US` | every kernel | model constant (below); `fp8-check calibrate` measures it |

`rate_table(target)` prints a target's table (multi-GPU targets add their links); docs/cost_model.md
holds the shipped targets' tables (tests/cost/test_cost_engines.py keeps it current).
A part without a tensor-core path for a class (FP8 on A100, FP4 before Blackwell) prices such a gemm at
the next wider class it has (XLA upcasts there anyway).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fp8_check.core import BITS, FP4_TYPES, FP8_TYPES, package_path

T, P, G = 1e12, 1e15, 1e9

# The fixed cost of one kernel: launch and the start/finish of a grid. Not a datasheet figure:
# NVIDIA's technical blog "Getting Started with CUDA Graphs" (A. Gray, 2019) measures launch
# overheads of a few microseconds per short kernel issued back to back from a stream, less in a
# graph (XLA's command buffers). 2 us is the model's value; `fp8-check calibrate` on a GPU checks it.
LAUNCH_US = 2.0
LAUNCH_SOURCE = ("model constant: a few us per short kernel (NVIDIA Technical Blog, 'Getting Started with CUDA "
                 "Graphs', 2019); calibrate on a GPU")

# Bytes per element. FP4 packs two values a byte.
# The widths come from the dtype vocabulary (harness/fp8_check/core/_dtypes.py); pred and complex types are added here.
DTYPE_BYTES: dict[str, float] = {**{d: b / 8 for d, b in BITS.items()}, "pred": 1, "c64": 8, "c128": 16}

# A gemm's operand dtype -> its peak class (the wider operand of the two decides).
DTYPE_CLASS = {
    **{d: "fp4" for d in FP4_TYPES},
    **{d: "fp8" for d in FP8_TYPES},
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
    rates: dict = field(default_factory=dict)  # rate name -> Rate (value, unit, source)


RATES_DIR = package_path("targets", "rates")
UNITS = {"PFLOP/s": 1e15, "TFLOP/s": 1e12, "GFLOP/s": 1e9, "TB/s": 1e12, "GB/s": 1e9}
TENSOR_RATES = {"fp4_tensor": "fp4", "fp8_tensor": "fp8", "bf16_tensor": "bf16", "tf32_tensor": "tf32",
                "fp64_tensor": "fp64"}
RATE_NAMES = (*TENSOR_RATES, "fp32_cuda", "hbm", "nvlink")


@dataclass(frozen=True)
class Rate:
    value: float  # FLOP/s or bytes/s
    unit: str  # as the table states it
    source: str

    def text(self) -> str:
        return f"{self.value / UNITS[self.unit]:g} {self.unit}"


def load_part(path: Path) -> Part:
    """One rate table (harness/fp8_check/targets/rates/*.yaml) -> Part; ValueError naming the file and field."""
    import yaml

    where = path.name
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{where}: not YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rates"), dict):
        raise ValueError(f"{where}: expected a mapping with part, match, compute_capability, source and rates")
    rates: dict[str, Rate] = {}
    for key, r in doc["rates"].items():
        if key not in RATE_NAMES:
            raise ValueError(f"{where}: rates.{key}: unknown rate; allowed: {', '.join(RATE_NAMES)}")
        if not isinstance(r, dict) or r.get("unit") not in UNITS or not isinstance(r.get("value"), (int, float)) \
                or not str(r.get("source") or "").strip():
            raise ValueError(f"{where}: rates.{key}: expected {{value: NUMBER, unit: {'|'.join(UNITS)}, source: TEXT}}")
        rates[key] = Rate(float(r["value"]) * UNITS[r["unit"]], str(r["unit"]), str(r["source"]))
    for key in ("bf16_tensor", "hbm", "nvlink"):
        if key not in rates:
            raise ValueError(f"{where}: rates.{key}: missing")
    cc = doc.get("compute_capability")
    if not (isinstance(cc, list) and len(cc) == 2 and all(isinstance(x, int) for x in cc)):
        raise ValueError(f"{where}: compute_capability: expected [major, minor]")
    match = doc.get("match")
    if not (isinstance(match, list) and match and all(isinstance(m, str) for m in match)):
        raise ValueError(f"{where}: match: expected a list of lower-case substrings of the device description")
    return Part(str(doc.get("part") or path.stem), tuple(m.lower() for m in match), (cc[0], cc[1]),
                {cls: rates[k].value for k, cls in TENSOR_RATES.items() if k in rates},
                rates["hbm"].value, rates["nvlink"].value, str(doc.get("source") or ""), rates=rates)


def load_parts(directory: Path = RATES_DIR) -> tuple[Part, ...]:
    return tuple(load_part(p) for p in sorted(directory.glob("*.yaml")))


PARTS = load_parts()
PARTS = tuple(sorted(PARTS, key=lambda p: p.name != "H100 SXM"))  # H100 first: the fallback of last resort


# Between hosts (multi-host targets such as h100x2x4): one 400 Gb/s NIC per GPU, both directions together
# here as for NVLink. Source: NVIDIA DGX H100 and DGX B200 datasheets, "8x single-port NVIDIA ConnectX-7 VPI,
# up to 400 Gb/s InfiniBand/Ethernet" for 8 GPUs.
NETWORK_PER_GPU = 2 * 400e9 / 8
NETWORK_SOURCE = ("NVIDIA DGX H100 / DGX B200 datasheets: 8x single-port ConnectX-7, up to 400 Gb/s each, for 8 GPUs "
                  "(one 400 Gb/s NIC per GPU)")


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
