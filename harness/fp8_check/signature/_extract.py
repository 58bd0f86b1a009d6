"""Reduce optimized HLO to a normalized fusion `Signature`.

The signature ignores names, instruction ids, metadata, fingerprints, workspace
sizes, `selected_algorithm` and schedule order; it changes when the fusion
changes: which kernels ENTRY launches, every gemm (cuBLAS custom-call or Triton
gemm fusion) with its operand roles and dtypes, result, epilogue and amax, and
which pattern ops stayed outside the gemms as separate kernels.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from fp8_check import platforms
from fp8_check.core import FP4, SCALE, dtype_class, is_narrow
from fp8_check.signature import _attribution
from fp8_check.signature._collectives import extract_collectives
from fp8_check.signature._hlo import Computation, Instruction, Module, called_instructions, dtype_of, parse, rank_of, shape_of
from fp8_check.signature._provenance import callers, operand_metadata, operand_sources
from fp8_check.signature._triton import dims_attr, split_k

# The typed signature lives in signature_types.py; its names are re-exported here for every reader.
from fp8_check.signature._types import BlockScaling, Gemm, Signature

# Ops that launch no kernel of their own.
_NO_KERNEL = {
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
    "partition-id", "replica-id", "add-dependency", "opt-barrier", "domain",
}
# A collective's `*-done` only waits for its `*-start`: one launch, labelled without `-start` (collectives.py).
_COLLECTIVE_DONE = {op + "-done" for op in ("all-gather", "all-reduce", "collective-permute", "all-to-all",
                                            "reduce-scatter")}
# Wrappers whose called computations hold the real kernels (command buffers, async).
_WRAPPERS = {"call", "async-start", "async-update", "async-done", "while", "conditional"}
# The kernel-count convention for asynchronous ops (types.KERNEL_CONVENTION, docs/sharded.md, `check -v`): an async op counts once, at
# its start. A collective's `*-start`/`*-done` pair is one kernel, labelled without `-start`; an `async-start` /
# `async-update` / `async-done` triple counts the kernels of the computation it runs (through `call`s), once, at
# the `async-start` (the update and done only wait on it, whether or not XLA prints `calls=` on them); any other
# start/done pair (`copy-start`/`copy-done`: a DMA and its wait) is two.
_ASYNC_TAIL = {"async-update", "async-done"}

# The ops of an FP8 matmul pattern worth naming when they stay outside a gemm.
PATTERN_OPS = {
    "convert", "multiply", "divide", "clamp", "maximum", "minimum", "abs", "reduce",
    "add", "tanh", "erf", "exponential", "transpose", "copy", "dot", "scaled-dot",
}
# A platform's own matmul forms join them (a TPU matmul is a `convolution` in an output fusion): read from the
# registry when asked.
def _dot_ops() -> set[str]:
    return {"dot", "scaled-dot"} | platforms.matmul_ops()


def _platform_matmuls() -> frozenset[str]:
    return platforms.matmul_ops()


def block_scaled_targets() -> dict[str, str]:
    """Block-scaled library calls of every registered platform (cuDNN's blockScaledDot; the BLAS-Lt MX gemm hipBLASLt
    runs), and the op before any rewrite: the signature's `block_scaled.form`, with the scale dtypes at the kernel."""
    return {**{t: form for p in platforms.registered() for t, form in p.block_scaled_targets.items()},
            "__op$block_scaled_dot": "unrewritten"}


BLAS_LT = "blaslt"  # the form of a BLAS-Lt block-scaled gemm: read as a cuBLASLt/hipBLASLt gemm plus its scales


@functools.lru_cache(maxsize=4)
def _parse(text: str) -> Module:
    """A judged program is read twice, by `extract` and by `kernels` (the cost model): parsed once (both only read it)."""
    return parse(text)


def extract(text: str) -> Signature:
    module = _parse(text)
    kernels: list[tuple[Instruction, Computation]] = []
    _collect_kernels(module, module.entry, kernels, depth=0)
    gemms: list[Gemm] = []
    launches: list[str] = []
    unfused: set[str] = set()
    for instr, comp in kernels:
        gemm = _gemm(module, instr, comp)
        if gemm is not None:
            gemms.append(gemm)
            launches.append(f"gemm {gemm.target}")
            continue
        unfused.update(_ops_inside(module, instr))
        launches.append(_kernel_label(module, instr, comp))
    block = _block_scaling(module, kernels, gemms)
    _attribute(text, module, kernels, gemms)
    # (layer, pass) only break ties, so a model's gemms keep one order across versions; patterns have none
    gemms.sort(key=lambda g: (g.target, g.operand_dtypes, g.output, str(g.dims), g.layer or "", g.pass_ or ""))
    return Signature(len(kernels), sorted(launches), gemms, sorted(unfused), block, extract_collectives(module))


@dataclass(frozen=True)
class Kernel:
    """One kernel ENTRY launches, with the types the cost model prices it by (harness/fp8_check/cost/_model.py)."""

    label: str  # its line in `Signature.launches`
    opcode: str
    operand_types: tuple[str, ...]  # what it reads, as launched (e.g. "f8e4m3fn[4096,4096]{1,0}")
    result_types: tuple[str, ...]  # what it writes (a cuBLAS workspace included)
    gemm: Gemm | None = None
    dot_types: tuple[str, ...] = ()  # a gemm's lhs and rhs types: the custom-call's first two operands, or the dot's
    attrs: str = ""  # the raw attributes (a collective's replica_groups)


def kernels(text: str) -> list[Kernel]:
    """Every kernel ENTRY launches (as `extract` counts them), with its operand and result types."""
    module = _parse(text)
    found: list[tuple[Instruction, Computation]] = []
    out: list = []
    _collect_kernels(module, module.entry, found, depth=0)
    for instr, comp in found:
        gemm, operands = _gemm(module, instr, comp), tuple(t for _, t in _operand_types(module, comp, instr))
        dot = next(((i, c) for i, c in called_instructions(module, instr) if i.opcode in _dot_ops()), (instr, comp))
        dots = operands[:2] if instr.opcode == "custom-call" else tuple(t for _, t in _operand_types(module, dot[1], dot[0]))[:2]
        label = f"gemm {gemm.target}" if gemm else _kernel_label(module, instr, comp)
        out.append(Kernel(label, instr.opcode, operands, tuple(instr.result_types), gemm, dots if gemm else (), instr.attrs))
    return out


def _attribute(text: str, module: Module, kernels: list, gemms: list[Gemm]) -> None:
    """Each gemm's layer, pass, source line and FLOPs from its dot's metadata (harness/fp8_check/signature/_attribution.py)."""
    found = [(k, c) for k, c in kernels if _gemm(module, k, c) is not None]
    dots = [next(((i, ic) for i, ic in called_instructions(module, k) if i.opcode in _dot_ops()), (k, c))
            if k.opcode == "fusion" else (k, c) for k, c in found]
    called_by = callers(module)
    _attribution.annotate(text, gemms, [(d.attr("metadata") or k.attr("metadata"),
                                        [shape_of(t) for _, t in _operand_types(module, dc, d)[:2]])
                                       for (k, _), (d, dc) in zip(found, dots)],
                         [(operand_sources(module, dc, d, called_by), operand_metadata(module, dc, d))
                          for d, dc in dots])


def _kernel_label(module: Module, instr: Instruction, comp: Computation) -> str:
    """`gemm TARGET`, `fusion KIND [BACKEND] [pattern ops]`, `custom-call TARGET`, or the opcode."""
    gemm = _gemm(module, instr, comp)
    if gemm is not None:
        return f"gemm {gemm.target}"
    ops = sorted(_ops_inside(module, instr))
    if instr.opcode == "fusion":
        backend = _fusion_backend_kind(instr)
        label = f"fusion {instr.fusion_kind or '?'}" + (f" {backend}" if backend else "")
    elif instr.opcode == "custom-call":
        label = f"custom-call {instr.custom_call_target}"
    elif instr.opcode.endswith("-start") and instr.opcode[:-6] + "-done" in _COLLECTIVE_DONE:
        label = instr.opcode[:-6]
    else:
        label = instr.opcode
    return label + (f" [{', '.join(ops)}]" if ops else "")


def _callers(module: Module) -> dict[str, tuple[Instruction, Computation]]:
    """computation name -> the wrapper instruction (call, async) that calls it, and where that sits."""
    out: dict[str, tuple[Instruction, Computation]] = {}
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode in _WRAPPERS:
                for name in instr.called:
                    out.setdefault(name, (instr, comp))
    return out


def _origins(module, comp, name, callers, depth=0) -> set[str]:
    """The ENTRY parameters an operand `name` of `comp` comes from through bitcasts, GTEs and calls."""
    instr = comp.by_name().get(name)
    if instr is None or depth > 16:
        return set()
    if instr.opcode == "parameter":
        if comp is module.entry:
            return {instr.name}
        caller = callers.get(comp.name)
        try:
            index = int(instr.operand_text.strip())
        except ValueError:
            return set()
        if caller is None or index >= len(caller[0].operands):
            return set()
        return _origins(module, caller[1], caller[0].operands[index], callers, depth + 1)
    if instr.opcode in ("bitcast", "get-tuple-element", "copy", "reshape"):
        return set().union(*(_origins(module, comp, o, callers, depth + 1) for o in instr.operands)) if instr.operands else set()
    return set()


def _block_scaling(module: Module, kernels: list, gemms: list[Gemm]) -> BlockScaling | None:
    entry_params = [i for i in module.entry.instructions if i.opcode == "parameter"]
    low = sorted(dtype_of(p.type) for p in entry_params if is_narrow(dtype_of(p.type)))
    block_kernel: tuple | None = None
    for instr, comp in kernels:
        if instr.opcode == "custom-call" and (instr.custom_call_target or "") in (scaled := block_scaled_targets()):
            block_kernel = (instr, comp, scaled[instr.custom_call_target], instr.custom_call_target, instr)
            break
        if instr.opcode == "scaled-dot":
            block_kernel = (instr, comp, "scaled-dot", "scaled-dot", instr)
            break
        if instr.opcode == "fusion":
            inner = [(i, c) for i, c in called_instructions(module, instr)
                     if i.opcode == "scaled-dot" or (i.opcode == "custom-call" and (i.custom_call_target or "") in block_scaled_targets())]
            if inner:
                backend = _fusion_backend_kind(instr) or f"fusion {instr.fusion_kind}"
                form = "cudnn-fusion" if "cudnn" in backend else "triton" if "triton" in backend else "fusion"
                block_kernel = (instr, comp, form, backend, inner[0][0], inner[0][1])
                break
    if block_kernel is None and not any(
        dtype_class(dtype_of(t)) in (SCALE, FP4)
        for comp in module.computations.values() for i in comp.instructions for t in i.result_types
    ):
        return None  # no block-scaled op, and no E8M0 / FP4 value anywhere (a JAX quantizer makes them too)
    out = BlockScaling(form="decomposed", target="", data_dtypes=[], inputs=low)
    block_instr = None
    if block_kernel is not None:
        block_instr, comp, out.form, out.target, op = block_kernel[:5]
        op_comp = block_kernel[5] if len(block_kernel) > 5 else comp
        types = [dtype_of(t) for _, t in _operand_types(module, op_comp, op)]
        out.data_dtypes, out.scale_dtypes = types[:2], types[2:4]
    elif gemms:
        out.target = gemms[0].target
        out.data_dtypes = list(gemms[0].operand_dtypes)
    scale_types = set(out.scale_dtypes) - set(out.data_dtypes)
    data_types = {d for d in out.data_dtypes if is_narrow(d)}
    callers = _callers(module)
    scalars = {p.name for p in entry_params if dtype_of(p.type) == "f32" and rank_of(p.type) <= 1
               and all(d.strip() in ("", "1") for d in p.type.split("[", 1)[1].split("]", 1)[0].split(","))}
    readers = []
    for instr, comp in kernels:
        results = {dtype_of(t) for t in instr.result_types}
        if instr is not block_instr and _gemm(module, instr, comp) is None:
            if results & scale_types:
                out.scale_kernels += 1
            elif results & data_types:
                out.data_kernels += 1
        if scalars:
            names = set()
            for o in instr.operands:
                names |= _origins(module, comp, o, callers)
            if names & scalars:
                readers.append(_kernel_label(module, instr, comp))
    out.global_scale = sorted(readers)
    return out


def _collect_kernels(module: Module, comp: Computation, out: list, depth: int) -> None:
    for instr in comp.instructions:
        if instr.opcode in _NO_KERNEL or instr.opcode in _COLLECTIVE_DONE or instr.opcode in _ASYNC_TAIL:
            continue
        if instr.opcode in _WRAPPERS and depth < 8:
            for name in instr.called:
                callee = module.computations.get(name)
                if callee is not None:
                    _collect_kernels(module, callee, out, depth + 1)
            continue
        out.append((instr, comp))


def _fusion_backend_kind(instr: Instruction) -> str | None:
    bc = instr.backend_config
    # Older XLA (quoted-string backend_config) printed FusionBackendConfig unwrapped.
    cfg = bc.get("fusion_backend_config") or (bc if "kind" in bc else {})
    kind = cfg.get("kind")
    return kind or None


def _ops_inside(module: Module, instr: Instruction) -> set[str]:
    if instr.opcode != "fusion":
        return {instr.opcode} & PATTERN_OPS
    return {inner.opcode for inner, _ in called_instructions(module, instr)} & PATTERN_OPS


def _type_of(module: Module, comp: Computation, name: str, index: int | None = None) -> str:
    instr = comp.by_name().get(name) or module.instruction(name)
    if instr is None:
        return "?"
    if index is not None and instr.type.lstrip().startswith("("):
        elements = instr.result_types
        return elements[index] if index < len(elements) else "?"
    return instr.type


def _operand_types(module: Module, comp: Computation, instr: Instruction) -> list[tuple[str, str]]:
    """(name, type) of each operand, resolving the `%x#i` tuple shorthand to element i's type."""
    idx = instr.operand_tuple_index or [None] * len(instr.operands)
    return [(n, _type_of(module, comp, n, i)) for n, i in zip(instr.operands, idx)]


def _is_constant_one(module: Module, comp: Computation, name: str) -> bool:
    instr = comp.by_name().get(name) or module.instruction(name)
    if instr is None:
        return False
    if instr.opcode == "constant":
        try:
            return float(instr.operand_text.strip()) == 1.0
        except ValueError:
            return False
    if instr.opcode == "fusion":  # a constant wrapped into its own fusion
        inner = [i for i, _ in called_instructions(module, instr) if i.opcode != "parameter"]
        if len(inner) == 1 and inner[0].opcode == "constant":
            try:
                return float(inner[0].operand_text.strip()) == 1.0
            except ValueError:
                return False
    return False


def _gemm(module: Module, instr: Instruction, comp: Computation) -> Gemm | None:
    if instr.opcode == "custom-call":
        target = instr.custom_call_target or ""
        if (scaled := block_scaled_targets()).get(target, BLAS_LT) != BLAS_LT:
            return _block_scaled_gemm(module, instr, comp, target)
        if "gemm" in target or "matmul" in target:  # a BLAS-Lt block-scaled call: its scales are a_/b_scale
            return _cublas_gemm(module, instr, comp, target, block_scaled=target in scaled)
        return None
    if instr.opcode == "fusion":
        dots = [(i, c) for i, c in called_instructions(module, instr) if i.opcode in _dot_ops()]
        if dots:
            return _fusion_gemm(module, instr, dots[0], comp=comp)
    if instr.opcode in _dot_ops():
        return _fusion_gemm(module, instr, (instr, comp), target=instr.opcode)
    return None


def _block_scaled_gemm(module: Module, instr: Instruction, comp: Computation, target: str) -> Gemm:
    """`__cudnn$blockScaledDot` / `__op$block_scaled_dot`: operands a, b, a_scale, b_scale."""
    types = [dtype_of(t) for _, t in _operand_types(module, comp, instr)]
    operands = dict(zip(("a", "b", "a_scale", "b_scale"), types))
    for i, t in enumerate(types[4:]):
        operands[f"aux{i}"] = t
    results = [t for t in instr.result_types if dtype_of(t) not in ("s8", "u8")]  # drop workspace
    return Gemm(target=target, operand_dtypes=types[:2], operands=operands,
                output=dtype_of(results[0]) if results else "?")


def _cublas_gemm(module: Module, instr: Instruction, comp: Computation, target: str,
                 block_scaled: bool = False) -> Gemm:
    bc = instr.backend_config
    # Older XLA (quoted-string backend_config) printed GemmBackendConfig unwrapped.
    cfg = bc.get("gemm_backend_config") or (bc if "dot_dimension_numbers" in bc else {})
    beta = float(cfg.get("beta", 0) or 0)
    types = _operand_types(module, comp, instr)
    operands: dict[str, str] = {}
    rest = list(types)
    for role in ("a", "b"):
        if rest:
            operands[role] = dtype_of(rest.pop(0)[1])
    if block_scaled:  # a BLAS-Lt MX gemm: a, b, a_scale, b_scale (per-block scale arrays)
        for role in ("a_scale", "b_scale"):
            if rest:
                operands[role] = dtype_of(rest.pop(0)[1])
    if beta != 0 and rest and rank_of(rest[0][1]) >= 2:
        operands["c"] = dtype_of(rest.pop(0)[1])
    scalars = [(n, t) for n, t in rest if rank_of(t) == 0]
    others = [(n, t) for n, t in rest if rank_of(t) != 0]
    scale_roles = {
        0: [], 1: ["a_scale"], 2: ["a_scale", "b_scale"], 3: ["a_scale", "b_scale", "d_scale"],
        4: ["a_scale", "b_scale", "c_scale", "d_scale"],
    }.get(len(scalars), [f"scale{i}" for i in range(len(scalars))])
    for role, (name, t) in zip(scale_roles, scalars):
        if not _is_constant_one(module, comp, name):  # a unit scale is no scale
            operands[role] = dtype_of(t)
    for i, (_name, t) in enumerate(others):
        operands["bias" if i == 0 and rank_of(t) == 1 else f"aux{i}"] = dtype_of(t)
    results = [t for t in instr.result_types if dtype_of(t) not in ("s8", "u8")]  # drop workspace
    output = dtype_of(results[0]) if results else "?"
    amax = any(rank_of(t) == 0 and dtype_of(t) == "f32" for t in results[1:])
    dnums = cfg.get("dot_dimension_numbers") or {}
    return Gemm(
        target=target,
        operand_dtypes=[operands.get("a", "?"), operands.get("b", "?")],
        operands=operands,
        output=output,
        amax=amax,
        epilogue=cfg.get("epilogue", "DEFAULT"),
        damax_output=bool(cfg.get("damax_output", False)),
        alpha_real=float(cfg.get("alpha_real", 1) or 0),
        beta=beta,
        dims={
            key.replace("_dimensions", ""): [int(x) for x in dnums.get(key, [])]
            for key in ("lhs_contracting_dimensions", "rhs_contracting_dimensions", "lhs_batch_dimensions", "rhs_batch_dimensions")
        },
    )


def _fusion_gemm(module, instr, dot_and_comp, target: str | None = None, comp: Computation | None = None) -> Gemm:
    dot, dot_comp = dot_and_comp
    dot_types = [dtype_of(t) for _, t in _operand_types(module, dot_comp, dot)]
    operand_dtypes = dot_types[:2]
    # A scaled-dot's third and fourth operands are the block scales.
    scales = dict(zip(("a_scale", "b_scale"), dot_types[2:4])) if dot.opcode == "scaled-dot" else {}
    results = instr.result_types
    inside = {i.opcode for i, _ in called_instructions(module, instr)} if instr.opcode == "fusion" else set()
    converts = _converts(module, instr) if dot.opcode in _platform_matmuls() else []
    kind = target or _fusion_backend_kind(instr) or f"fusion {instr.fusion_kind}"
    return Gemm(
        target=kind,
        operand_dtypes=operand_dtypes,
        operands=dict(zip(("a", "b"), operand_dtypes), **scales) if scales else {},
        output=dtype_of(results[0]),
        amax=any(rank_of(t) == 0 for t in results[1:]),
        dims=_convolution_dims(dot) if dot.opcode in _platform_matmuls() else {
            "lhs_contracting": dims_attr(dot, "lhs_contracting_dims"),
            "rhs_contracting": dims_attr(dot, "rhs_contracting_dims"),
            "lhs_batch": dims_attr(dot, "lhs_batch_dims"),
            "rhs_batch": dims_attr(dot, "rhs_batch_dims"),
        },
        fused_ops=sorted((inside & PATTERN_OPS) - _dot_ops()),
        converts=converts,
        matmul_op=dot.opcode if dot.opcode in _platform_matmuls() else None,
        inputs=sorted(
            dtype_of(t) for _, t in _operand_types(module, module.entry, instr) if rank_of(t) > 0
        ) if instr.opcode == "fusion" else [],
        split_k=split_k(module, instr, comp) if instr.opcode == "fusion" and "triton" in kind else None,
    )


def _convolution_dims(conv: Instruction) -> dict[str, list[int]]:
    """A matmul written as a convolution without spatial dimensions (`dim_labels=bf_io->bf`): its contracting
    dimensions are the input feature ones (`f` of the lhs, `i` of the rhs); {} for a real convolution."""
    labels = (conv.attr("dim_labels") or "").split("->")[0].split("_")
    if len(labels) != 2 or any(c.isdigit() for c in "".join(labels)) or "f" not in labels[0] or "i" not in labels[1]:
        return {}
    return {"lhs_contracting": [labels[0].index("f")], "rhs_contracting": [labels[1].index("i")],
            "lhs_batch": [], "rhs_batch": []}


def _converts(module: Module, instr: Instruction) -> list[str]:
    """The type conversions inside a platform matmul's fusion, `from->to` (`f8e4m3fn->bf16`), each once, sorted: where the dequantization sits and what type it computes in."""
    if instr.opcode != "fusion":
        return []
    found: list[str] = []
    for inner, comp in called_instructions(module, instr):
        if inner.opcode == "convert" and inner.operands:
            step = f"{dtype_of(_operand_types(module, comp, inner)[0][1])}->{dtype_of(inner.type)}"
            if step not in found:
                found.append(step)
    return sorted(found)
