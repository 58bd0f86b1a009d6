"""The typed result of the signature stage: `Signature` (kernels, gemms, unfused ops, block scaling, collectives).

`signature.py` extracts it from optimized HLO; goldens, verdicts, costs and reports read it.
The dicts of `to_dict` are what goldens store and diffs compare (JSON/YAML only at file boundaries).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fp8_check import core
from fp8_check.core import record
from fp8_check.signature._collectives import Collective

# The dtype classes live in harness/fp8_check/core/_dtypes.py; these names stay for importers.
FP8_TYPES = core.FP8_TYPES | core.SCALE_TYPES
FP4_TYPES = core.FP4_TYPES
LOW_PRECISION = core.NARROW_TYPES
# Custom-call targets of a block-scaled dot: XLA's cuDNN call after rewriting, and JAX's op before it.

# How `Signature.kernels` counts asynchronous ops (extract._collect_kernels; docs/sharded.md; printed by `check -v`).
KERNEL_CONVENTION = ("an async op counts once, at its start: a collective's -start/-done pair is one kernel, an "
                     "async-start/update/done triple the kernels of the computation it runs, once; copy-start/copy-done two")


@dataclass
class Gemm:
    target: str  # custom-call target or Triton fusion backend kind
    operand_dtypes: list[str]  # dtypes the matmul itself runs on (a, b)
    operands: dict[str, str] = field(default_factory=dict)  # role -> dtype (a, b, c, bias, *_scale)
    output: str = ""
    amax: bool = False
    epilogue: str | None = None
    damax_output: bool | None = None
    alpha_real: float | None = None
    beta: float | None = None
    dims: dict[str, list[int]] = field(default_factory=dict)
    fused_ops: list[str] = field(default_factory=list)  # pattern ops inside a gemm fusion
    inputs: list[str] = field(default_factory=list)  # dtypes of a gemm fusion's array inputs (what it loads)
    # A platform matmul's (TPU) type conversions inside its fusion, `from->to`: where a dequantization sits and
    # what type its multiply runs in (empty elsewhere).
    converts: list[str] = field(default_factory=list)
    matmul_op: str | None = None  # a platform matmul's opcode (`convolution` on TPU); None for gemm calls and dots
    # A Triton gemm split along K (the partial sums reduced by a kernel of their own); None: not split. Where
    # autotuning is off (deviceless) XLA's default configuration decides it; a GPU autotunes it.
    split_k: int | None = None
    # Where it comes from (attribution.py); layer and pass compared where a golden states them.
    layer: str | None = None  # layer path from the HLO metadata, e.g. "Decoder/mlp/Dense_0"
    pass_: str | None = None  # forward | backward | backward-input | backward-weight ("pass" in dicts)
    source: str | None = field(default=None, compare=False)  # "model.py:42": annotations, never in goldens
    flops: int | None = field(default=None, compare=False)  # 2*batch*m*n*k

    @property
    def fp8(self) -> bool:
        """Low-precision (FP8, or block-scaled FP4) operands."""
        return len(self.operand_dtypes) == 2 and all(core.is_narrow(d) for d in self.operand_dtypes)


@dataclass
class BlockScaling:
    """How a block-scaled matmul was compiled (present only when the module has one)."""

    form: str  # cudnn | cudnn-fusion | blaslt (hipBLASLt MX) | triton | scaled-dot | unrewritten | decomposed
    target: str  # the kernel doing the math: custom-call target, fusion kind, or the decomposed gemm's target
    data_dtypes: list[str]  # a, b as the block-scaled kernel reads them (decomposed: the dot's operand dtypes)
    scale_dtypes: list[str] = field(default_factory=list)  # a_scale, b_scale at the block-scaled kernel (not decomposed)
    inputs: list[str] = field(default_factory=list)  # low-precision ENTRY parameter dtypes (what the user passed in)
    scale_kernels: int = 0  # kernels outside the gemm that write scale-typed arrays (swizzle / pad of the scales)
    data_kernels: int = 0  # kernels outside the gemm that write data-typed arrays (pad / transpose of the operands)
    global_scale: list[str] = field(default_factory=list)  # the kernels reading a scalar f32 input (where a global scale is applied)


@dataclass
class Signature:
    kernels: int
    launches: list[str]
    gemms: list[Gemm]
    unfused: list[str]  # pattern ops left in non-gemm kernels
    block_scaled: BlockScaling | None = None
    collectives: list[Collective] = field(default_factory=list)  # sharded compiles only (harness/fp8_check/signature/_collectives.py)

    def to_dict(self, annotations: bool = False) -> dict:
        """The comparable dict (goldens, diffs); `annotations=True` adds each gemm's source and FLOPs (results, JSON)."""
        d = asdict(self)
        d["collectives"] = [c.to_dict() for c in self.collectives]
        if not d["collectives"]:
            del d["collectives"]
        for g in d["gemms"]:
            g["pass"] = g.pop("pass_")
            for key in [k for k, v in g.items() if v is None or v == [] or v == {}
                        or (not annotations and k in ("source", "flops"))]:
                del g[key]
        if d["block_scaled"] is None:
            del d["block_scaled"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Signature":
        d = record(cls, d, "signature")  # a wrong-typed field read back from a file: ValueError naming it
        gemms = [Gemm(**record(Gemm, {("pass_" if k == "pass" else k): v for k, v in g.items()} if isinstance(g, dict)
                               else g, f"signature.gemms[{i}]")) for i, g in enumerate(d.get("gemms", []))]
        block = BlockScaling(**record(BlockScaling, d["block_scaled"], "signature.block_scaled")) if d.get("block_scaled") else None
        collectives = [Collective.from_dict(c) for c in d.get("collectives", [])]
        return cls(d["kernels"], list(d.get("launches", [])), gemms, list(d.get("unfused", [])), block, collectives)

    @property
    def fp8_gemms(self) -> int:
        return sum(g.fp8 for g in self.gemms)
