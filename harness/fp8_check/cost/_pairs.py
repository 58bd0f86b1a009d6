"""Which gemm is which, when a change is priced against a golden (harness/fp8_check/cost/_model.py `against_expected`).

A golden states gemms (with their layer and pass when attributed), the judged program has its own, and the
program the estimate was priced from (`price_at`: another compile, at production shapes) has its own kernels:
`align` pairs golden gemms with judged ones, `same_gemm` finds a judged gemm in the priced program, `twins`
finds each gemm's priced kernel.
"""

from __future__ import annotations

from fp8_check.signature import Signature


def align(expected: list, gemms: list) -> list:
    """(golden gemm dict, gemm) pairs: by layer and pass where both state them, else by position."""
    eg = [g for g in expected if isinstance(g, dict)]
    if eg and all(g.get("layer") for g in eg) and all(g.layer for g in gemms):
        free = list(gemms)
        out = []
        for g in eg:
            hit = next((x for x in free if x.layer == g["layer"] and x.pass_ == g.get("pass")), None)
            if hit is not None:
                free.remove(hit)
                out.append((g, hit))
        return out
    return list(zip(eg, gemms))


def same_gemm(g, judged: Signature, sig: Signature):
    """`g` of `judged` in `sig` (the same program, or the one priced at other shapes): by layer and pass, else position."""
    if judged is sig:
        return g
    if g.layer:
        return next((x for x in sig.gemms if x.layer == g.layer and x.pass_ == g.pass_), None)
    i = judged.gemms.index(g)
    return sig.gemms[i] if i < len(sig.gemms) else None


def twins(sig: Signature, est) -> dict:
    """id(gemm of `sig`) -> its priced kernel in `est` (same target, dtypes and, where known, FLOPs)."""
    free = [k for k in est.kernels if k.gemm]
    out = {}
    for g in sig.gemms:
        k = next((k for k in free if k.label == f"gemm {g.target}" and list(k.dtypes) == [*g.operand_dtypes[:2], g.output]
                  and (g.flops is None or k.flops == g.flops)), None)
        if k is not None:
            free.remove(k)
            out[id(g)] = k
    return out
