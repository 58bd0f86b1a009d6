"""Triton gemm fusions' own attributes: a dot's dimension lists and a split along K (signature/_extract.py reads
them into a `Gemm`)."""

from __future__ import annotations

from fp8_check.signature._hlo import Computation, Instruction, Module, called_instructions, shape_of


def dims_attr(dot: Instruction, key: str) -> list[int]:
    raw = dot.attr(key)
    if not raw:
        return []
    return [int(x) for x in raw.strip("{}").split(",") if x.strip()]


def split_k(module: Module, instr: Instruction, comp: Computation | None) -> int | None:
    """A Triton gemm fusion split along K: its `triton_gemm_config.split_k`, or (nested gemm fusions) a result with
    one dimension more than the reduce kernel consuming it, whose size is the split; None when not split."""
    cfg = (instr.backend_config or {}).get("fusion_backend_config") or {}
    try:
        k = int((cfg.get("triton_gemm_config") or {}).get("split_k") or 1)
    except (TypeError, ValueError):
        k = 1
    if k > 1:
        return k
    if comp is None or not instr.result_types:
        return None
    shape = shape_of(instr.result_types[0])
    for user in comp.instructions:
        if instr.name not in user.operands or user.opcode != "fusion" or not user.result_types:
            continue
        if not any(i.opcode == "reduce" for i, _ in called_instructions(module, user)):
            continue
        reduced = shape_of(user.result_types[0])
        split = [n for i, n in enumerate(shape) if shape[:i] + shape[i + 1:] == reduced]
        if split and split[0] > 1:
            return split[0]
    return None
