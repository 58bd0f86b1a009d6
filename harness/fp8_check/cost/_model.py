"""Price a compiled program: a roofline estimate in microseconds per kernel, gemm and collective.

Each kernel ENTRY launches (`signature.kernels`) costs max(FLOPs / rate of what executes it, bytes / HBM
bandwidth) + a launch: a gemm 2 * batch * m * n * k FLOPs on the engine that runs it (cost_engine.py: a library
gemm on the tensor cores of its operands' class, a dot XLA emitted as a loop fusion on CUDA cores), any other
kernel one FLOP per element per op on CUDA cores; bytes are what it reads and writes (a cuBLAS workspace is
not traffic); a collective moves `collective_bytes` per device over its link, its `-done` half only waits.
The program's estimate is the sum (one stream). Rates: the target spec and the part's table
(harness/fp8_check/targets/rates/*.yaml via cost_table.py), each with its source (cost_rates.rate_table).

A change is `CostDelta`: between two compiled programs (`between`: exact within the model), or against a
golden, which states a signature but no program (`against_expected`): kernels the golden does not list are
dropped, a kernel only the golden lists is priced as the compiled kernel with the same pattern ops or else
as a bare launch (its shapes are not known: the baseline is then a lower bound), and a gemm whose dtypes or
engine differ is repriced as the golden states it. Pure: no I/O, no JAX.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from fp8_check.core import is_narrow
from fp8_check.cost import _pairs
from fp8_check.cost._delta import AT_LEAST, AT_MOST, CostDelta
from fp8_check.cost._engine import CUDA_CORES, FP8_LIBRARY_GEMM, LIBRARY_GEMM, VECTOR_UNIT, gemm_engine, in_library, narrow
from fp8_check.cost._table import CLASS_ORDER, DTYPE_BYTES, DTYPE_CLASS, LAUNCH_US, NETWORK_PER_GPU, Part, part_for
from fp8_check.cost._tpu import tpu_hardware
from fp8_check.signature import Kernel, Signature, device_groups, kernels
from fp8_check.targets import load_target

_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
UNKNOWN = "unknown: a golden kernel whose shapes are not known (a bare launch)"
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
               "collective-broadcast", "ragged-all-to-all")


# ------------------------------------------------------------------ hardware


@dataclass(frozen=True)
class Hardware:
    """What a target can do, from its spec plus the published table."""

    name: str  # "H100 SXM"
    hbm: float  # bytes/s: the spec's memory_bandwidth
    fp32: float  # FLOP/s on CUDA cores: core_count x fpus_per_core x 2 x clock
    peak: dict[str, float]  # tensor-core class -> dense FLOP/s
    link: float  # bytes/s one way per GPU (NVLink: half the datasheet's both-directions figure)
    launch_us: float = LAUNCH_US
    notes: tuple[str, ...] = ()
    part: Part | None = None
    per_host: int = 0  # a multi-host target (h100x2x4): GPUs per host; a group across hosts runs over `network`
    network: float = 0.0  # bytes/s one way per GPU between hosts
    matmul_unit: str = ""  # `MXU`: a TPU, whose matmuls are fusions priced at the MXU's rate (not a library call)
    link_name: str = "NVLink"
    model: str = ""  # the roofline's name, said with every estimate (`TPU roofline: ...`)

    def class_used(self, cls: str) -> str:
        """The class a gemm of class `cls` runs at: its own where the part has tensor cores for it, else the next
        wider one it has ('fp32': CUDA cores)."""
        for c in CLASS_ORDER[CLASS_ORDER.index(cls):]:
            if c == "fp32" or c in self.peak:
                return c
        return "fp32"

    def peak_for(self, cls: str) -> float:
        """FLOP/s for a gemm of class `cls`: its tensor-core peak, else the next wider class the part has."""
        return self.peak.get(self.class_used(cls), self.fp32)


def _spec_number(text: str, key: str) -> float | None:
    m = re.search(rf"^\s*{key}\s*:\s*([0-9.eE+]+)", text, re.M)
    return float(m.group(1)) if m else None


def hardware(target) -> Hardware:
    """The `Hardware` of a `targets.Target` (or a shipped target's name)."""
    if isinstance(target, str):
        target = load_target(target)
    if target.platform.generation(target.arch) is not None:  # a generation's published roofline (cost/_tpu.py)
        return Hardware(**tpu_hardware(target))
    if target.platform.unpriced:  # a program the model cannot price stays unpriced, and says why
        raise ValueError(f"{target.name}: not priced: {target.platform.unpriced}")
    text = target.config_text
    m = re.search(r'device_description_str\s*:\s*"([^"]*)"', text)
    cc = target.compute_capability if target.platform.rates_by_capability else (0, 0)  # AMD tables state [0, 0]
    part, note = part_for(m.group(1) if m else target.description, target.name, cc)
    notes = [note] if note else []
    hbm = _spec_number(text, "memory_bandwidth")
    if not hbm:
        hbm = part.hbm
        notes.append(f"the spec states no memory_bandwidth: {part.name}'s datasheet {part.hbm / 1e12:g} TB/s")
    cores, fpus, clock = (_spec_number(text, k) for k in ("core_count", "fpus_per_core", "clock_rate_ghz"))
    fp32 = cores * fpus * 2 * clock * 1e9 if cores and fpus and clock else part.peak.get("tf32", 1e13) / 8
    if not (cores and fpus and clock):
        notes.append("the spec lacks core_count / fpus_per_core / clock_rate_ghz: FP32 rate guessed as TF32 / 8")
    hosts = [int(x) for x in getattr(target, "topology", "1x1x1").split("x")]
    per_host = hosts[2] if hosts[0] * hosts[1] > 1 else 0
    return Hardware(part.name, hbm, fp32, dict(part.peak), part.nvlink / 2, LAUNCH_US, tuple(notes), part,
                    per_host, NETWORK_PER_GPU / 2 if per_host else 0.0)


# ------------------------------------------------------------------ arrays


def arrays(type_text: str) -> list[tuple[str, tuple[int, ...]]]:
    """(dtype, dims) of every array in an HLO type (a tuple's elements too); scalars have dims ()."""
    out = []
    for dt, dims in _ARRAY.findall(type_text):
        out.append((dt, tuple(int(d) for d in re.findall(r"\d+", dims))))
    return out


def nbytes(type_text: str) -> float:
    return sum(math.prod(dims) * DTYPE_BYTES.get(dt, 4) for dt, dims in arrays(type_text))


def elements(type_text: str) -> int:
    return sum(math.prod(dims) for _, dims in arrays(type_text))


# ------------------------------------------------------------------ one kernel


@dataclass(frozen=True)
class KernelCost:
    label: str
    us: float
    flops: float
    bytes: float
    bound: str  # compute | memory | launch | link | wait
    gemm: tuple[int, int, int, int] | None = None  # batch, m, n, k
    dtypes: tuple[str, ...] = ()  # a gemm's a, b, output dtypes
    engine: str = ""  # what executes it (cost_engine.py): "fp8 tensor cores", "CUDA cores: dot in a loop fusion", ...

    def to_dict(self) -> dict:
        d = {"label": self.label, "us": round(self.us, 3), "flops": self.flops, "bytes": self.bytes, "bound": self.bound}
        if self.engine:
            d["engine"] = self.engine
        if self.gemm:
            d["gemm"] = list(self.gemm)
            d["dtypes"] = list(self.dtypes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "KernelCost":
        return cls(str(d["label"]), float(d["us"]), float(d.get("flops", 0)), float(d.get("bytes", 0)),
                   str(d.get("bound", "")), tuple(d["gemm"]) if d.get("gemm") else None, tuple(d.get("dtypes") or ()),
                   str(d.get("engine", "")))


def roofline(flops: float, nbytes_: float, peak: float, hw: Hardware) -> tuple[float, str]:
    """(microseconds, what bounds it): the larger of compute and memory time, plus a launch."""
    compute, memory = flops / peak * 1e6, nbytes_ / hw.hbm * 1e6
    work = max(compute, memory)
    bound = "launch" if work < hw.launch_us else ("compute" if compute > memory or (compute == memory and compute)
                                                   else "memory")
    return work + hw.launch_us, bound


def gemm_dims(dot_types: tuple[str, ...], dims: dict) -> tuple[int, int, int, int] | None:
    """(batch, m, n, k) of a gemm from its lhs/rhs types and dot dimension numbers."""
    if len(dot_types) < 2:
        return None
    (_, lhs), (_, rhs) = (arrays(t)[0] if arrays(t) else ("?", ()) for t in dot_types[:2])
    if not lhs or not rhs:
        return None
    if not any(dims.values()) and len(lhs) == len(rhs) == 3:  # cuDNN block-scaled dot: [B, M, K] x [B, N, K]
        dims = {"lhs_contracting": [2], "rhs_contracting": [2], "lhs_batch": [0], "rhs_batch": [0]}
    lc, lb = dims.get("lhs_contracting") or [len(lhs) - 1], dims.get("lhs_batch") or []
    rc, rb = dims.get("rhs_contracting") or [0], dims.get("rhs_batch") or []
    pick = lambda shape, idx: math.prod(shape[i] for i in idx if i < len(shape))  # noqa: E731
    free = lambda shape, used: math.prod(d for i, d in enumerate(shape) if i not in used)  # noqa: E731
    return pick(lhs, lb), free(lhs, set(lc) | set(lb)), free(rhs, set(rc) | set(rb)), pick(lhs, lc)


def gemm_class(a: str, b: str) -> str:
    classes = [DTYPE_CLASS.get(d, "fp32") for d in (a, b)]
    return max(classes, key=CLASS_ORDER.index)


def price_gemm(batch: int, m: int, n: int, k: int, a: str, b: str, out: str, hw: Hardware,
               other_bytes: float = 0.0, label: str = "gemm", target: str = LIBRARY_GEMM) -> KernelCost:
    """A gemm of these sizes and dtypes run by `target` (a library: tensor cores; a loop fusion: CUDA cores):
    2*batch*m*n*k FLOPs at that engine's rate; a, b, the output and `other_bytes` moved."""
    flops = 2.0 * batch * m * n * k
    moved = batch * (m * k * DTYPE_BYTES.get(a, 4) + k * n * DTYPE_BYTES.get(b, 4) + m * n * DTYPE_BYTES.get(out, 4))
    engine, rate = gemm_engine(target, gemm_class(a, b), hw)
    us, bound = roofline(flops, moved + other_bytes, rate, hw)
    return KernelCost(label, us, flops, moved + other_bytes, bound, (batch, m, n, k), (a, b, out), engine)


def collective_bytes(kind: str, size: float, devices: int) -> float:
    """Bytes each device sends for a collective over `size` bytes among `devices` (ring algorithms).

    `size`: the whole buffer — all-reduce: its operand; all-gather: its result; reduce-scatter: its
    operand; all-to-all: its operand; collective-permute / broadcast: what is sent.
    all-reduce 2(n-1)/n x size; all-gather, reduce-scatter, all-to-all (n-1)/n x size; permute 1 x size.
    """
    n = max(1, devices)
    kind = kind.removesuffix("-start")
    if n == 1 and kind != "collective-permute":
        return 0.0
    if kind == "all-reduce":
        return 2.0 * (n - 1) / n * size
    if kind in ("all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all"):
        return (n - 1) / n * size
    return float(size)


def collective_us(kind: str, size: float, devices: int, link_bytes_per_s: float) -> float:
    """The price of a collective, without its launch: bytes moved per device over the link bandwidth.

    The hook for topologies: `link_bytes_per_s` is one direction of one GPU's link (NVLink: half the
    datasheet's figure, `Hardware.link`; across nodes, the network's per-GPU bandwidth).
    """
    return collective_bytes(kind, size, devices) / link_bytes_per_s * 1e6 if link_bytes_per_s > 0 else 0.0


def group_size(attrs: str) -> int:
    """Devices per replica group (`replica_groups` in any printed form, read by harness/fp8_check/signature/_collectives.py);
    2 for a collective-permute's pairs; 1 when no groups are stated."""
    groups = device_groups(attrs)
    return len(groups[0]) if groups else 1


def link_for(attrs: str, hw: Hardware) -> float:
    """The bandwidth a collective runs over: NVLink, or on a multi-host target the network when a group (or
    a permute's pair) spans hosts (no groups stated: all devices, so across hosts)."""
    if not hw.per_host:
        return hw.link
    groups = device_groups(attrs)
    spans = groups is None or any(len({d // hw.per_host for d in g}) > 1 for g in groups)
    return hw.network if spans else hw.link


def _is_workspace(k: Kernel, type_text: str) -> bool:
    """A custom-call's scratch buffer (cuBLAS/cuDNN: a trailing s8/u8 vector in its result tuple): no traffic."""
    a = arrays(type_text)
    return k.opcode == "custom-call" and len(k.result_types) > 1 and len(a) == 1 and a[0][0] in ("s8", "u8") \
        and len(a[0][1]) == 1


def price_kernel(k: Kernel, hw: Hardware) -> KernelCost:
    results = [t for t in k.result_types if not _is_workspace(k, t)]
    moved = sum(nbytes(t) for t in k.operand_types) + sum(nbytes(t) for t in results)
    base = k.opcode.removesuffix("-start").removesuffix("-done")
    if base in COLLECTIVES:
        if k.opcode.endswith("-done"):
            return KernelCost(k.label, 0.0, 0.0, 0.0, "wait")
        size = sum(nbytes(t) for t in (results if base == "all-gather" else k.operand_types))
        link = link_for(k.attrs, hw)
        us = collective_us(base, size, group_size(k.attrs), link)
        return KernelCost(k.label, us + hw.launch_us, 0.0, moved, "link" if us > hw.launch_us else "launch",
                          engine="network" if hw.per_host and link == hw.network else hw.link_name)
    if k.gemm is not None:
        dims = gemm_dims(k.dot_types, k.gemm.dims)
        if dims:
            a, b = (k.gemm.operand_dtypes + ["f32", "f32"])[:2]
            batch, m, n, kk = dims
            flops = 2.0 * batch * m * n * kk
            engine, rate = gemm_engine(k.gemm.target, gemm_class(a, b), hw)
            us, bound = roofline(flops, moved, rate, hw)
            return KernelCost(k.label, us, flops, moved, bound, dims, (a, b, k.gemm.output), engine)
    ops = max(1, len(_label_ops(k.label)))
    flops = float(ops * max([elements(t) for t in (*k.operand_types, *results)] or [0]))
    us, bound = roofline(flops, moved, hw.fp32, hw)
    return KernelCost(k.label, us, flops, moved, bound,
                      engine=VECTOR_UNIT if hw.matmul_unit else CUDA_CORES)


def _label_ops(label: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]$", label)
    return [x.strip() for x in m.group(1).split(",") if x.strip()] if m else []


# ------------------------------------------------------------------ a program


@dataclass(frozen=True)
class Estimate:
    """The priced program: one `KernelCost` per kernel; `total_us` is their sum."""

    hardware: str
    kernels: tuple[KernelCost, ...]
    shape: str = ""  # where it was priced when not at the case's own shapes (`price_at`)
    notes: tuple[str, ...] = ()
    stored_us: float | None = None  # the total read back from a lean record (no per-kernel list)
    stored_fp8_us: float | None = None

    @property
    def fp8_us(self) -> float:
        """What its FP8/FP4 gemms take (tensor cores or cuDNN block-scaled): a model step's FP8 share."""
        if not self.kernels and self.stored_fp8_us is not None:
            return self.stored_fp8_us
        return math.fsum(k.us for k in self.kernels if narrow(k.engine))

    @property
    def total_us(self) -> float:
        if not self.kernels and self.stored_us is not None:
            return self.stored_us
        return math.fsum(k.us for k in self.kernels)  # exact: independent of the schedule order

    def to_dict(self, kernels: bool = True) -> dict:
        """`kernels=False`: the lean record (the matrix's per-version outcomes), totals only."""
        d = {"hardware": self.hardware, "us": round(self.total_us, 3)}
        if self.kernels or self.stored_fp8_us is not None:
            d["fp8_us"] = round(self.fp8_us, 3)
        if kernels:
            d["kernels"] = [k.to_dict() for k in self.kernels]
        if self.shape:
            d["shape"] = self.shape
        if self.notes:
            d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "Estimate | None":
        if not isinstance(d, dict) or not isinstance(d.get("kernels", []), list) or "us" not in d:
            return None
        return cls(str(d.get("hardware", "")), tuple(KernelCost.from_dict(k) for k in d.get("kernels", [])),
                   str(d.get("shape", "")), tuple(d.get("notes") or ()), float(d["us"]),
                   float(d["fp8_us"]) if isinstance(d.get("fp8_us"), (int, float)) else None)


def estimate(hlo_text: str, hw: Hardware, shape: str = "") -> Estimate:
    """Price every kernel of an optimized HLO module for `hw`."""
    return Estimate(hw.name, tuple(price_kernel(k, hw) for k in kernels(hlo_text)), shape, hw.notes)


# ------------------------------------------------------------------ a change


def between(before: Estimate, after: Estimate) -> CostDelta:
    """Two compiled programs (adjacent versions of a matrix row)."""
    return CostDelta(before.total_us, after.total_us, after.hardware, "compiled", after.shape)


def against_expected(expected: dict, sig: Signature, est: Estimate, hw: Hardware,
                     judged: Signature | None = None, must_fp8: tuple[int, ...] = ()) -> CostDelta:
    """The compiled program `est` (signature `sig`) against a golden's expected signature (see the module doc).

    `judged`: the signature judged against the golden when `est` was priced at other shapes (`price_at`); each
    golden gemm is paired with a judged gemm (by layer and pass, else by position) and priced at the dims of its
    twin in `est`. `must_fp8`: judged gemms a golden's layer rule wants in FP8 (a known issue's golden may record
    the loss itself). A gemm that lost FP8 (or left the gemm library) is never priced as cheaper than before: what
    it alone costs is the floor, stated "at least" when the rest nets below it or is not known (cost_delta.py)."""
    judged = judged or sig
    base = _baseline_kernels(expected, est)
    floor, kept_fp8 = 0.0, []
    twins = _pairs.twins(sig, est)
    wanted = [((list(eg.get("operand_dtypes") or jg.operand_dtypes) + ["f32", "f32"])[:2], str(eg.get("output") or jg.output),
               str(eg.get("target") or jg.target), jg, True) for eg, jg in _pairs.align(expected.get("gemms") or [], judged.gemms)]
    fp8 = ["f8e4m3fn", "f8e4m3fn"]
    wanted += [(fp8, g.output, FP8_LIBRARY_GEMM, g, False) for i, g in enumerate(judged.gemms)
               if i in must_fp8 and not g.fp8 and not any(w[3] is g and is_narrow(w[0][0]) for w in wanted)]
    for (a, b), out, runs, jg, golden in wanted:
        if [a, b, out] == [*jg.operand_dtypes[:2], jg.output] and in_library(runs) == in_library(jg.target):
            continue  # same dtypes on the same kind of engine (a renamed library call costs the same)
        pg = _pairs.same_gemm(jg, judged, sig)
        k = twins.get(id(pg)) if pg is not None else None
        if k is None or k.gemm is None:
            continue
        batch, m, n, kk = k.gemm
        own = batch * (m * kk * DTYPE_BYTES.get(k.dtypes[0], 4) + kk * n * DTYPE_BYTES.get(k.dtypes[1], 4)
                       + m * n * DTYPE_BYTES.get(k.dtypes[2], 4))
        golden_k = price_gemm(batch, m, n, kk, a, b, out, hw, max(0.0, k.bytes - own), k.label, runs)
        fa, fb = (list(jg.operand_dtypes) + ["f32", "f32"])[:2]
        found_k = price_gemm(batch, m, n, kk, fa, fb, jg.output, hw, max(0.0, k.bytes - own), k.label, jg.target)
        at = next((j for j, x in enumerate(base) if x is k), None)  # else its copy under the golden's label:
        at = at if at is not None else next((j for j, x in enumerate(base) if (x.gemm, x.dtypes, x.us) == (k.gemm, k.dtypes, k.us)), None)
        if at is not None and golden:  # a layer rule's FP8 is not the golden's baseline: it only sets the floor
            base[at] = golden_k if pg is jg else KernelCost(k.label, k.us + golden_k.us - found_k.us, k.flops, k.bytes, k.bound,
                                                           k.gemm, k.dtypes, k.engine)
        if (is_narrow(a) and is_narrow(b) and not jg.fp8) or (in_library(runs) and not in_library(jg.target)):
            floor += max(0.0, found_k.us - golden_k.us)
            if pg is not jg and pg is not None and pg.fp8:
                kept_fp8.append(jg.layer.split("/")[-2 if jg.layer.count("/") > 1 else -1] if jg.layer else "its gemm")
    _reprice_collectives(expected, sig, base, hw)
    before = math.fsum(k.us for k in base)
    unknown = sum(1 for k in base if k.engine == UNKNOWN)
    bound = AT_LEAST if floor > 0 and (est.total_us - before < floor or unknown or kept_fp8) else (AT_MOST if unknown else "")
    note = (f"at these shapes XLA keeps FP8 on {', '.join(dict.fromkeys(kept_fp8))}: the loss at the case's shapes is "
            "priced at their dims" if kept_fp8 else "")
    return CostDelta(before, est.total_us, est.hardware, "golden", est.shape, bound, floor, unknown, note)


def _reprice_collectives(expected: dict, sig: Signature, base: list[KernelCost], hw: Hardware) -> None:
    """A collective the golden states with other bytes (an FP8 all-gather where bf16 is found): its link time
    scaled by the bytes the golden says it moves (the time over the link is proportional to them)."""
    used: set[int] = set()
    for i, ec in enumerate(expected.get("collectives") or []):
        if not isinstance(ec, dict) or i >= len(sig.collectives) or ec.get("op") != sig.collectives[i].op:
            continue
        want, have = ec.get("bytes"), sig.collectives[i].bytes
        at = next((j for j, k in enumerate(base) if j not in used and k.label == sig.collectives[i].op), None)
        if at is None or not isinstance(want, (int, float)) or not have or want == have:
            continue
        used.add(at)
        k = base[at]
        link_us = max(0.0, k.us - hw.launch_us) * want / have
        base[at] = KernelCost(k.label, link_us + hw.launch_us, k.flops, k.bytes * want / have, k.bound, k.gemm, k.dtypes)


def _baseline_kernels(expected: dict, est: Estimate) -> list[KernelCost]:
    kernels = list(est.kernels)
    launches = expected.get("launches")
    if isinstance(launches, list):
        wanted = [str(x) for x in launches]
        kept, extra = [], []
        for k in kernels:
            if k.label in wanted:
                wanted.remove(k.label)
                kept.append(k)
            else:
                extra.append(k)
        for label in wanted:  # only the golden has it: priced as the compiled kernel it pairs with
            twin = _pair(label, extra)
            if twin is not None:
                extra.remove(twin)
                kept.append(KernelCost(label, twin.us, twin.flops, twin.bytes, twin.bound, twin.gemm, twin.dtypes,
                                       twin.engine))
            else:
                kept.append(KernelCost(label, LAUNCH_US, 0.0, 0.0, "launch", engine=UNKNOWN))
        return kept
    count = expected.get("kernels")
    if isinstance(count, int) and count != len(kernels):
        if count < len(kernels):  # fewer kernels expected: drop the cheapest non-gemm ones
            others = sorted((k for k in kernels if k.gemm is None), key=lambda k: k.us)
            for k in others[: len(kernels) - count]:
                kernels.remove(k)
        else:
            kernels += [KernelCost("kernel", LAUNCH_US, 0.0, 0.0, "launch", engine=UNKNOWN)] * (count - len(kernels))
    return kernels


def _pair(label: str, candidates: list[KernelCost]) -> KernelCost | None:
    """The compiled kernel a golden-only launch line stands for: a gemm of the same family, or a kernel with the
    same pattern ops (a renamed fusion kind). Anything else is not known in size: None (priced as a bare launch)."""
    if label.startswith("gemm "):
        return next((k for k in candidates if k.label.startswith("gemm ")), None)
    ops = set(_label_ops(label))
    return next((k for k in candidates if not k.label.startswith("gemm ") and set(_label_ops(k.label)) == ops), None)
