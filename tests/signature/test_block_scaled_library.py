"""Block-scaled library calls are read as block-scaled on every platform (issue 52): hipBLASLt's MX gemm on
ROCm (JAX 0.10.0, mi350x) is one block-scaled kernel with its E8M0 scale dtypes, not a `decomposed` gemm, so
its move to a Triton gemm fusion at 0.10.1 (the same arrays loaded, the scales applied in the kernel) is a
neutral change, not "improvement: a block-scaled kernel again". Recorded HLO: tests/fixtures/hlo/block_scaled/.
"""

from __future__ import annotations

from pathlib import Path

from fp8_check.core import _dtypes as dtypes
from fp8_check.signature import _extract as extract
from fp8_check.verdict._classify import IMPROVEMENT, NEUTRAL, REGRESSION, classify

FIX = Path(__file__).parents[1] / "fixtures" / "hlo" / "block_scaled"


def _sig(version: str):
    return extract.extract((FIX / f"mx_sm_mxfp8_e4m3.jax-{version}.mi350x.triton.txt").read_text())


def test_the_hipblaslt_mx_gemm_is_a_block_scaled_kernel_with_its_scale_dtypes():
    sig = _sig("0.10.0")
    [g] = sig.gemms
    assert g.target.endswith("$mx")
    block = sig.block_scaled
    assert block is not None and block.form != "decomposed" and block.target == g.target
    assert block.data_dtypes == ["f8e4m3fn", "f8e4m3fn"]
    assert len(block.scale_dtypes) == 2 and all(dtypes.dtype_class(d) == dtypes.SCALE for d in block.scale_dtypes)
    # the gemm names the scales' roles, as every block-scaled gemm does (no anonymous aux operands)
    assert g.operands == {"a": "f8e4m3fn", "b": "f8e4m3fn", "a_scale": block.scale_dtypes[0],
                          "b_scale": block.scale_dtypes[1]}


def test_its_move_to_a_triton_block_scaled_fusion_is_neutral():
    before, after = _sig("0.10.0"), _sig("0.10.1")
    assert after.block_scaled is not None and after.block_scaled.form == "triton"
    assert after.block_scaled.scale_dtypes == before.block_scaled.scale_dtypes
    v = classify(before, after)
    assert v.cls == NEUTRAL, [(x.path, x.cls, x.why) for x in v.lines]
    assert not any(x.cls in (IMPROVEMENT, REGRESSION) for x in v.lines)
    assert any(x.path == "block_scaled.form" for x in v.lines)
    # and back: the reverse is neutral too (a kernel swap, not a loss)
    assert classify(after, before).cls == NEUTRAL
