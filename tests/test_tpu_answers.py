"""TPU answers as sharp as the GPU's (issue 56): the no-FP8 reason per platform and cause, the FP8 layers that are
not FP8 on a TPU named with the cause and the fix, the per-generation FP8 wording from the platform's data.

The unit tests read typed signatures; the slow test compiles docs/examples/tpu_train (a flax train step with
Fp8DirectDotGeneralOp layers and one Fp8DotGeneralOp layer) deviceless through libtpu.
"""

from __future__ import annotations

import pytest

from fp8_check.platforms.tpu import TPU
from fp8_check.platforms.tpu.generations import GENERATIONS
from fp8_check.signature.extract import Gemm, Signature
from fp8_check.targets import load_target
from fp8_check.verdict.fp8_answer import Fp8Answer, lost_layers, reason


def _tpu(layer: str, pass_: str, fp8: bool) -> Gemm:
    return Gemm(target="fusion kOutput", operand_dtypes=["f8e4m3fn"] * 2 if fp8 else ["bf16"] * 2, output="bf16",
                matmul_op="convolution", converts=[] if fp8 else ["f8e4m3fn->bf16"], layer=layer, pass_=pass_)


DEQUANT = Signature(3, [], [_tpu("m/dense", "forward", False)], [])


@pytest.mark.parametrize("target", ["v5e", "v5p", "v6e", "tpu7x"])
def test_a_tpu_matmul_fed_by_a_dequantize_pattern_says_the_compiler_does_not_fold_it_and_how_to_keep_fp8(target):
    text = reason(DEQUANT, ("f8e4m3fn",), load_target(target))
    assert "XLA's TPU compiler does not fold dequantize -> dot" in text, text
    assert "Fp8DirectDotGeneralOp" in text and "qwix.PtqProvider" in text
    # never the GPU wording, on any generation
    assert "tensor cores" not in text and "expected on this GPU" not in text and "did not match" not in text
    g = GENERATIONS[target]
    if g.fp8_flops:  # tpu7x: its published FP8 rate, with the source
        assert f"{g.fp8_flops / 1e12:.0f} TFLOP/s FP8" in text and g.source in text
    else:  # v5e, v5p, v6e: no FP8 rate, their int8 and bf16 rates, the widening caveat
        assert "publishes no FP8 rate" in text and f"{g.int8_ops / 1e12:.0f} TOPS int8" in text
        assert "widened inside the MXU" in text and g.source in text


def test_the_gpu_reasons_are_unchanged():
    gpu = Signature(3, [], [Gemm(target="__cublas$gemm", operand_dtypes=["bf16", "bf16"], output="bf16")], [])
    assert "has no FP8 tensor cores" in reason(gpu, ("f8e4m3fn",), load_target("a100"))
    assert "a pattern it did not match" in reason(gpu, ("f8e4m3fn",), load_target("h100"))
    assert TPU.fp8_capability("nope") == ""


def test_an_fp8_layer_not_fp8_on_tpu_is_named_with_its_passes_cause_and_fix():
    sig = Signature(6, [], [
        _tpu("Model/block0/up/Fp8DirectDotGeneralOp_0", "forward", True),
        _tpu("Model/block1/up/Fp8DotGeneralOp_0", "forward", False),
        _tpu("Model/block1/up/Fp8DotGeneralOp_0", "backward-weight", False),
        _tpu("Model/head", "forward", False),  # plain by design: no FP8 op, no FP8 pass
        _tpu("Model/mixed", "forward", True), _tpu("Model/mixed", "backward-input", False),
    ], [])
    lost = lost_layers(sig, ("f8e4m3fn", "f8e5m2"), load_target("v6e"))
    assert len(lost) == 2, lost
    assert lost[0].startswith("Model/block1/up/Fp8DotGeneralOp_0 (forward, backward-weight): fed by a dequantize")
    assert "does not fold" in lost[0] and "Fp8DirectDotGeneralOp" in lost[0]
    assert lost[1].startswith("Model/mixed (backward-input)")
    a = Fp8Answer(6, 2, 0.5, ("f8e4m3fn",), "", False, lost)
    assert a.warns and a.line().startswith("not FP8 in 2 FP8 layers: Model/block1/up/Fp8DotGeneralOp_0")
    assert not Fp8Answer(6, 2, 0.5, ("f8e4m3fn",), "", False, lost, layers_by_design=True).warns
    # on a GPU the same layer is named with XLA's missed rewrite
    gpu = lost_layers(sig, ("f8e4m3fn",), load_target("h100"))
    assert gpu and "rewrote its matmul into no FP8 gemm" in gpu[0]
    assert lost_layers(sig, (), load_target("v6e")) == ()  # no FP8 in the program: nothing asked for
