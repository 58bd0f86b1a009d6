"""What a compiled program holds that should be its inputs: large constants (given, or made by XLA's folding)
and random numbers generated inside (`fp8-check check` warns about both)."""

from __future__ import annotations

import re

from fp8_check.signature._hlo import parse, rank_of


def large_constants(hlo_text: str, min_elements: int = 4096) -> list[str]:
    """`f32[1024,1024]` for each constant of the optimized HLO with at least `min_elements` elements."""
    try:
        module = parse(hlo_text or "")
    except ValueError:
        return []
    out = []
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode != "constant" or rank_of(instr.type) == 0:
                continue
            dims = instr.type.split("[", 1)[1].split("]", 1)[0].split(",")
            n = 1
            for d in dims:
                n *= int(d) if d.strip().isdigit() else 1
            if n >= min_elements:
                out.append(instr.type.split("{", 1)[0])
    return out


_STABLEHLO_CONST = re.compile(r'stablehlo\.constant dense<"0x[0-9A-Fa-f]*">\s*:\s*tensor<([0-9x]+)x(\w+)>')
_HLO_DTYPE = {"f32": "f32", "bf16": "bf16", "f16": "f16", "f64": "f64", "i32": "s32", "i8": "s8", "ui32": "u32",
              "f8E4M3FN": "f8e4m3fn", "f8E5M2": "f8e5m2"}
_RNG = re.compile(r"threefry|rng_bit_generator|stablehlo\.rng\b")


def baked_in(hlo_text: str, stablehlo_text: str, min_elements: int = 4096) -> list[str]:
    """Why the compiled program may hold what should be inputs: large constants, or random numbers made inside."""
    out, given = [], []
    for m in _STABLEHLO_CONST.finditer(stablehlo_text or ""):
        n = 1
        for d in m.group(1).split("x"):
            n *= int(d)
        if n >= min_elements:
            given.append(f"{_HLO_DTYPE.get(m.group(2), m.group(2))}[{m.group(1).replace('x', ',')}]")
    folded = [] if given else large_constants(hlo_text, min_elements)  # made constant by XLA's folding
    big = given or folded
    if big:
        out.append(f"{len(big)} large array(s) are constants {'baked into the program' if given else 'after XLA folded them'} "
                   f"({'; '.join(sorted(set(big))[:3])})")
    if _RNG.search(stablehlo_text or ""):
        out.append("random numbers are generated inside the function (a model initialised inside it? its parameters "
                   "are then not inputs)")
    return out
