"""The device-validity rule: a deviceless FP8 gemm the platform's library has no kernel for.

A deviceless compile never asks the gemm library whether it can run what XLA emitted. XLA's GEMM rewriter
turns E4M3 x E4M3 requantized to E5M2 into one `__cublas$lt$matmul$f8` call, and on an H200 that call fails
("Unexpected operand types for cublaslt matmul"): cuBLASLt has no such kernel. This rule reads the platform's
FP8 type table (`Platform.fp8_gemm_types`, plain data in fp8_check/platforms/) and gives one difference per gemm
outside it, `gemms[i].device`, classified a regression: the program compiles here and fails on the device.
"""

from __future__ import annotations

from fp8_check.platforms import GemmTypeTable, Platform
from fp8_check.signature import Gemm, Signature
from fp8_check.verdict._comparator import FieldDiff

FIELD = "device"  # gemms[i].device
WHY = "compiles deviceless; {library} has no kernel for it: fails on the device"


def problem(g: Gemm, table: GemmTypeTable) -> str | None:
    """Why the library cannot run `g` ('a x b -> d' and what it has instead), or None when it can (or `g` is not a
    call of that library, or its types are not all known)."""
    if not g.target.startswith(table.call_prefix) or len(g.operand_dtypes) != 2 or not g.output:
        return None
    a, b = g.operand_dtypes
    d = g.output
    outputs = table.outputs(a, b)
    if not outputs:
        return f"{a} x {b}: {table.library} has no FP8 kernel for these operand types"
    if d not in outputs:
        return f"{a} x {b} -> {d}: {table.library} writes only {', '.join(outputs)} from {a} x {b}"
    bias = g.operands.get("bias")
    allowed = table.biases(a, b, d)
    if bias and allowed and bias not in allowed:
        return f"{a} x {b} -> {d} with a {bias} bias: {table.library} takes only a {' or '.join(allowed)} bias there"
    return None


def diffs(sig: Signature, platform: Platform) -> list[FieldDiff]:
    """One `gemms[i].device` difference per gemm the platform's library cannot run (expected: that it runs)."""
    table = platform.fp8_gemm_types
    if table is None:
        return []
    out = []
    for i, g in enumerate(sig.gemms):
        why = problem(g, table)
        if why:
            out.append(FieldDiff(f"gemms[{i}].{FIELD}", f"a {table.library} kernel",
                                 f"none: {WHY.format(library=table.library)} ({why})"))
    return out


def is_device_field(path: str) -> bool:
    return path.startswith("gemms[") and path.endswith(f"].{FIELD}")


def reason(expected: object) -> str:
    """The verdict line's why for a `gemms[i].device` difference (its expected side names the library)."""
    text = str(expected)
    library = text[2:-len(" kernel")] if text.startswith("a ") and text.endswith(" kernel") else "the gemm library"
    return WHY.format(library=library)
