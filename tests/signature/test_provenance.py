"""Pass attribution by operand provenance (issue 45): forward, backward-input and backward-weight told apart by
which operand of a matmul comes from the layer's weight (a parameter of the program), on real deviceless compiles.

- docs/examples/fp8first: flax's FP8 gemm of `adapter/down` requantizes its output for `adapter/up`, and XLA gave
  the fused gemm the metadata of that requantization: the gemm is still `adapter/down` forward.
- a square MLP (batch x sequence == hidden == every width): sizes cannot tell the two gradients apart; the
  operands can.
"""

from __future__ import annotations

import sys

import pytest

from fp8_check.api import fusion_signature
from fp8_check.signature import _attribution as attribution
from fp8_check.signature._attribution import BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, Attribution
from tests.conftest import REPO

EXAMPLE = REPO / "docs" / "examples" / "fp8first"
PASSES = {FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT}


def _passes(sig) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for g in sig.gemms:
        out.setdefault(g.layer, []).append(g.pass_)
    return {k: sorted(v) for k, v in out.items()}


def test_backward_gradients_are_told_apart_by_the_operand_from_the_weight():
    fwd = Attribution("L", "dot_general", FORWARD)
    dx, dw = Attribution("L", "dot_general", "backward"), Attribution("L", "transpose", "backward")
    assert attribution.pass_by_provenance([(fwd, (None, "w")), (dx, (None, "w")), (dw, (None, None))]) == \
        [None, BACKWARD_INPUT, BACKWARD_WEIGHT]
    # the first layer: the batch is a parameter too; its one gradient is the weight's
    assert attribution.pass_by_provenance([(fwd, ("x", "w")), (dw, ("x", None))]) == [None, BACKWARD_WEIGHT]
    # both gradients with two parameter operands in the forward: undecided (sizes may still tell)
    assert attribution.pass_by_provenance([(fwd, ("x", "w")), (dx, (None, "w")), (dw, ("x", None))]) == [None, None, None]


def test_a_gemm_with_a_fused_requantizations_metadata_keeps_its_own_layer():
    fused = Attribution("M/adapter/up/Fp8DotGeneralOp_0", "convert_element_type", FORWARD)
    producers = [Attribution("M/adapter/down/Fp8DotGeneralOp_0", "reduce_max"),
                 Attribution("M/adapter/down/Fp8DotGeneralOp_0", "convert_element_type")]
    assert attribution.own_layer(fused, producers).layer == "M/adapter/down/Fp8DotGeneralOp_0"
    plain = Attribution("M/adapter/up/Fp8DotGeneralOp_0", "dot_general", FORWARD)
    assert attribution.own_layer(plain, producers) is plain  # a matmul's own metadata is trusted


@pytest.fixture
def example(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    monkeypatch.delitem(sys.modules, "model", raising=False)
    import model  # the example's module, from its folder

    yield model
    sys.modules.pop("model", None)


@pytest.mark.slow
def test_the_fp8first_train_step_has_each_fp8_layer_forward_and_backward(example):
    sig = fusion_signature(example.train_step, *example.train_args(), target="h100", profile="cublas")
    passes = _passes(sig)
    both = sorted(PASSES)
    for layer in ("block0/down", "block1/up", "block1/down", "adapter/up", "adapter/down"):
        assert passes[f"Model/{layer}/Fp8DotGeneralOp_0"] == both, passes
    # the first layer's input is the batch: no input gradient, so one forward and its weight gradient
    assert passes["Model/block0/up/Fp8DotGeneralOp_0"] == [BACKWARD_WEIGHT, FORWARD], passes
    assert passes["Model/head"] == both, passes
    [requantized] = [g for g in sig.gemms if g.output == "f8e4m3fn"]  # down's output, quantized for up
    assert (requantized.layer, requantized.pass_) == ("Model/adapter/down/Fp8DotGeneralOp_0", FORWARD)


def _square_mlp():
    import jax
    import jax.numpy as jnp
    from flax import linen as nn
    from flax.linen import fp8_ops

    batch, seq, hidden = 4, 32, 128  # batch x seq == hidden: every matmul of the step is 128 x 128 x 128

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            for i in range(3):
                x = nn.Dense(hidden, dtype=jnp.bfloat16, dot_general_cls=fp8_ops.Fp8DotGeneralOp, name=f"d{i}")(x)
            return x

    model = MLP()
    x = jax.ShapeDtypeStruct((batch, seq, hidden), jnp.bfloat16)
    variables = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros(x.shape, x.dtype)))

    def grads(variables, x):
        return jax.grad(lambda v: jnp.square(model.apply(v, x).astype(jnp.float32)).mean())(variables)  # needs y: d2 forward

    return grads, variables, x


@pytest.mark.slow
def test_square_shapes_are_told_apart_by_the_operands_not_the_sizes():
    grads, variables, x = _square_mlp()
    sig = fusion_signature(grads, variables, x, target="h100", profile="cublas")
    sizes = {(g.flops) for g in sig.gemms}
    assert sizes == {2 * 128 * 128 * 128}, sizes  # one size everywhere: sizes alone cannot pair them
    passes = _passes(sig)
    for i in (1, 2):
        assert passes[f"MLP/d{i}/Fp8DotGeneralOp_0"] == sorted(PASSES), passes
    assert passes["MLP/d0/Fp8DotGeneralOp_0"] == [BACKWARD_WEIGHT, FORWARD], passes
    assert all(g.target == "__cublas$lt$matmul$f8" for g in sig.gemms), [g.target for g in sig.gemms]
