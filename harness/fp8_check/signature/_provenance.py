"""Where a matmul's operands come from: traced back through the optimized HLO to the ENTRY parameters.

A matmul operand that is a program argument reached only through value-preserving steps — layout
(`bitcast`, `copy`, `reshape`, `transpose`), conversion, an all-gather of its shards, and elementwise scaling
by a scalar (the per-tensor quantization `convert(clamp(x / scale))`), inside fusions and calls too — *comes
from that parameter*. In a train step the layer's weight is such a parameter; the activations (but for the
first layer's input, the batch) and the gradients are computed. `attribution.pass_by_provenance` reads the
passes from it where the sizes cannot (square shapes):

- forward `y = x . w`: the layer's weight `w` is one operand;
- backward-input `dx = dy . w^T`: the same weight is an operand;
- backward-weight `dw = x^T . dy`: the weight is not.

Pure: an `_hlo.Module` in, names out. `operand_sources` is called once per gemm by `signature.extract`.
"""

from __future__ import annotations

import re

from fp8_check.signature import _hlo

# Ops that pass their (first) operand's values on, rearranged, converted or gathered from its shards (an FSDP
# weight is all-gathered before its matmul: still the parameter).
_LAYOUT = {"bitcast", "copy", "reshape", "transpose", "convert", "bitcast-convert", "negate", "abs", "all-gather",
           "all-gather-start", "all-gather-done", "copy-start", "copy-done"}
# Elementwise ops that scale one full-size operand by scalars (a per-tensor quantization: a broadcast scalar or a
# constant); a broadcast vector (a normalization's per-row factor) makes the value computed, not the parameter.
_SCALE = {"multiply", "divide", "clamp", "maximum", "minimum", "add", "subtract", "select", "round-nearest-even",
          "round-nearest-afz"}
_MAX_DEPTH = 64


def callers(module: _hlo.Module) -> dict[str, tuple[_hlo.Instruction, _hlo.Computation]]:
    """computation name -> the instruction that calls it (a fusion, call, async wrapper) and where that sits."""
    out: dict[str, tuple[_hlo.Instruction, _hlo.Computation]] = {}
    for comp in module.computations.values():
        for instr in comp.instructions:
            for name in instr.called:
                out.setdefault(name, (instr, comp))
    return out


def _elements(type_text: str) -> int | None:
    if type_text.lstrip().startswith("("):
        return None
    n = 1
    for d in _hlo.shape_of(type_text):
        n *= d
    return n


def _result_type(comp: _hlo.Computation, name: str, index: int | None) -> str:
    instr = comp.by_name().get(name)
    if instr is None:
        return "?"
    if index is not None and instr.type.lstrip().startswith("("):
        types = instr.result_types
        return types[index] if index < len(types) else "?"
    return instr.type


def source(module: _hlo.Module, comp: _hlo.Computation, name: str, index: int | None,
           called_by: dict[str, tuple[_hlo.Instruction, _hlo.Computation]], depth: int = 0) -> str | None:
    """The ENTRY parameter the value `name` (element `index` of a tuple) of `comp` comes from, or None when it is
    computed (a matmul, a reduction, a sum of two full-size values) or comes from a constant."""
    instr = comp.by_name().get(name)
    if instr is None or depth > _MAX_DEPTH:
        return None
    op, nxt = instr.opcode, depth + 1
    if op == "parameter":
        if comp is module.entry:
            return instr.name if index is None else None
        caller = called_by.get(comp.name)
        try:
            number = int(instr.operand_text.strip())
        except ValueError:
            return None
        if caller is None or caller[0].opcode in ("while", "conditional") or number >= len(caller[0].operands):
            return None
        call, where = caller
        refs = call.operand_tuple_index or [None] * len(call.operands)
        if index is not None:
            return None  # a tuple-shaped parameter: not followed
        return source(module, where, call.operands[number], refs[number], called_by, nxt)
    if op == "get-tuple-element":
        m = re.search(r"\bindex=(\d+)", instr.attrs)
        if not m or not instr.operands or index is not None:
            return None
        return source(module, comp, instr.operands[0], int(m.group(1)), called_by, nxt)
    if op == "tuple":
        if index is None or index >= len(instr.operands):
            return None
        refs = instr.operand_tuple_index or [None] * len(instr.operands)
        return source(module, comp, instr.operands[index], refs[index], called_by, nxt)
    if op in ("fusion", "call"):
        inner = module.computations.get(instr.called[0]) if instr.called else None
        root = next((i for i in inner.instructions if i.root), None) if inner else None
        if inner is None or root is None:
            return None
        return source(module, inner, root.name, index, called_by, nxt)
    if index is not None:
        return None
    refs = instr.operand_tuple_index or [None] * len(instr.operands)
    if op in _LAYOUT and instr.operands:
        return source(module, comp, instr.operands[0], refs[0], called_by, nxt)
    if op in _SCALE:
        size = _elements(instr.type)
        full = [(n, i) for n, i in zip(instr.operands, refs) if not _scalar_like(comp, n)]
        if len(full) == 1 and _elements(_result_type(comp, full[0][0], full[0][1])) == size:
            return source(module, comp, full[0][0], full[0][1], called_by, nxt)
    return None


def _scalar_like(comp: _hlo.Computation, name: str) -> bool:
    """A scalar, a constant or a broadcast of a scalar: a scale or a bound, never the value scaled."""
    instr = comp.by_name().get(name)
    if instr is None:
        return False
    if instr.opcode == "constant" or _elements(instr.type) == 1:
        return True
    if instr.opcode == "broadcast" and instr.operands:
        inner = comp.by_name().get(instr.operands[0])
        return inner is not None and _elements(inner.type) == 1
    return False


def operand_sources(module: _hlo.Module, comp: _hlo.Computation, dot: _hlo.Instruction,
                    called_by: dict[str, tuple[_hlo.Instruction, _hlo.Computation]]) -> tuple[str | None, str | None]:
    """(lhs, rhs): the ENTRY parameter each matrix operand of a matmul (a dot, or a gemm custom-call's first two
    operands) comes from, None where it is computed."""
    refs = dot.operand_tuple_index or [None] * len(dot.operands)
    found = [source(module, comp, n, i, called_by) for n, i in list(zip(dot.operands, refs))[:2]]
    found += [None] * (2 - len(found))
    return found[0], found[1]


def operand_metadata(module: _hlo.Module, comp: _hlo.Computation, dot: _hlo.Instruction) -> list[str]:
    """The raw metadata of what produced each matrix operand of `dot` (its quantization, for an FP8 gemm):
    what names the gemm's own layer where XLA gave the gemm the metadata of an op it fused (a requantization
    for the next layer)."""
    out = []
    for name in dot.operands[:2]:
        instr = comp.by_name().get(name)
        while instr is not None and instr.opcode in ("bitcast", "get-tuple-element", "copy") and instr.operands:
            instr = comp.by_name().get(instr.operands[0])
        if instr is not None and instr.opcode == "parameter" and comp is not module.entry:
            continue
        raw = instr.attr("metadata") if instr is not None else None
        if raw:
            out.append(raw)
    return out
