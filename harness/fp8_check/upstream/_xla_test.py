"""Export a regression as an XLA-style test: the HLO before optimizations plus FileCheck lines.

The test is shaped like XLA's `xla/service/gpu/transforms/gemm_rewriter_fp8_test.cc`:
an `HloModule` as a raw string and `MatchOptimizedHlo(hlo_text, pattern)`, which
runs XLA's GPU pipeline and FileChecks the optimized module. The FileCheck lines are
derived from the *good* version's signature, in two patterns:
- the gemms: per cuBLAS gemm its custom-call target, result type and, order-free
  (`CHECK-DAG`), its epilogue and damax flag; per Triton gemm fusion its kind;
- the kernels ENTRY launches: exactly `kernels` fusions and custom-calls
  (`CHECK-COUNT-N` then `CHECK-NOT`), which catches a split into more kernels.
`verify` runs both with the locked `filecheck` package against the good and the bad
version's optimized HLO: the export is only useful when it passes on good and fails
on bad.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fp8_check import platforms
from fp8_check.signature import Signature, run_filecheck

_KERNEL = r"{{ (fusion|custom-call)\(}}"


def gemm_checks(sig: Signature) -> str:
    lines = ["; CHECK-LABEL: ENTRY"]
    for g in sig.gemms:
        engine = platforms.engine_of(g.target)
        if engine is not None and engine.blas:
            out = g.output
            lines.append(f'; CHECK-DAG: custom_call_target="{g.target}"')
            if out:
                lines.append(f"; CHECK-DAG: = ({out}[{{{{[0-9,]*}}}}]{{{{[^ ]*}}}}, {{{{.*}}}}) custom-call(")
            if g.epilogue:
                lines.append(f'; CHECK-DAG: "epilogue":"{g.epilogue}"')
            if g.damax_output is not None:
                lines.append(f'; CHECK-DAG: "damax_output":{"true" if g.damax_output else "false"}')
        else:
            lines.append(f'; CHECK-DAG: "kind":"{g.target}"')
    return "\n".join(lines) + "\n"


def kernel_checks(sig: Signature) -> str:
    return "\n".join([
        "; CHECK-LABEL: ENTRY",
        f"; CHECK-COUNT-{sig.kernels}: {_KERNEL}",
        f"; CHECK-NOT: {_KERNEL}",
    ]) + "\n"


def strip_metadata(hlo_text: str) -> str:
    """The module without `metadata={...}`, frontend attributes and origins (braces inside quotes are skipped)."""
    return re.sub(r',\s*(metadata|frontend_attributes|origin)=\{(?:[^{}"]|"[^"]*")*\}', "", hlo_text).rstrip() + "\n"


def _test_name(case_id: str) -> str:
    return "Fp8Check" + "".join(p.capitalize() for p in re.split(r"[^A-Za-z0-9]+", case_id) if p)


def export(case_id: str, before_hlo: str, good: Signature, good_version: str, bad_version: str,
           target: str, profile_options: dict) -> str:
    """C++ source of one test for gemm_rewriter_fp8_test.cc."""
    hlo = strip_metadata(before_hlo)
    options = ", ".join(f"{k}={v}" for k, v in profile_options.items()) or "XLA's defaults"
    return (
        f"// Exported by fp8-check from case {case_id} ({' '.join(target.split())}; {options}).\n"
        f"// Passes with the XLA of jax {good_version}, fails with the XLA of jax {bad_version}.\n"
        f"TEST_P(ParameterizedFp8GemmRewriteTest, {_test_name(case_id)}) {{\n"
        f'  const char* hlo_text = R"(\n{hlo})";\n\n'
        f"  // The fused FP8 gemm(s).\n"
        f'  MatchOptimizedHlo(hlo_text, R"(\n{gemm_checks(good)})");\n'
        f"  // Kernels launched by ENTRY: exactly {good.kernels}.\n"
        f'  MatchOptimizedHlo(hlo_text, R"(\n{kernel_checks(good)})");\n'
        "}\n"
    )


@dataclass
class Verification:
    good_errors: list[str]  # FileCheck errors on the good version's optimized HLO (empty: passes)
    bad_errors: list[str]

    @property
    def ok(self) -> bool:
        """Passes on good and fails on bad."""
        return not self.good_errors and bool(self.bad_errors)

    def text(self) -> str:
        good = "passes" if not self.good_errors else "FAILS (" + "; ".join(self.good_errors) + ")"
        bad = "fails (" + "; ".join(self.bad_errors) + ")" if self.bad_errors else "PASSES (it does not catch the regression)"
        return f"FileCheck on the good version's optimized HLO: {good}; on the bad version's: {bad}"


def verify(good_sig: Signature, good_hlo: str, bad_hlo: str) -> Verification:
    def errors(text: str) -> list[str]:
        found = (run_filecheck(p, text) for p in (gemm_checks(good_sig), kernel_checks(good_sig)))
        return [re.sub(r"^\S+\.check:", "check line ", e) for e in found if e]

    return Verification(errors(good_hlo), errors(bad_hlo))
