"""A flax train step for TPU targets whose FP8 layers use flax's `Fp8DirectDotGeneralOp`, one of them the older
`Fp8DotGeneralOp`, as a model half-migrated between the two looks.

`Fp8DirectDotGeneralOp` quantizes and hands the FP8 operands to the dot: XLA's TPU compiler keeps them (an f8
convolution). `Fp8DotGeneralOp` quantizes, dequantizes and dots the dequantized values: the GPU rewriters fold
that pattern into an FP8 gemm, the TPU compiler does not (a bf16 matmul). `QDQ` names the projections that use
`Fp8DotGeneralOp` (`block1/up` as shipped), `PLAIN` those that are a plain `nn.Dense` (empty as shipped: the docs
and tests make one plain to show how fp8-check names the layer that lost FP8 on TPU).
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.linen import fp8_ops

BATCH, FEATURES, HIDDEN, CLASSES = 128, 512, 1024, 16
QDQ: tuple[str, ...] = ("block1/up",)
PLAIN: tuple[str, ...] = ()


def dense(features, name):
    """An FP8 projection: Fp8DirectDotGeneralOp, Fp8DotGeneralOp where `name` is in QDQ, plain where in PLAIN."""
    op = None if name in PLAIN else fp8_ops.Fp8DotGeneralOp if name in QDQ else fp8_ops.Fp8DirectDotGeneralOp
    return nn.Dense(features, dtype=jnp.bfloat16, dot_general_cls=op, name=name.rsplit("/", 1)[-1])


class Block(nn.Module):
    index: int

    @nn.compact
    def __call__(self, x):
        h = nn.gelu(dense(HIDDEN, f"block{self.index}/up")(x))
        return x + dense(FEATURES, f"block{self.index}/down")(h)


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Block(0, name="block0")(x)
        x = Block(1, name="block1")(x)
        return nn.Dense(CLASSES, dtype=jnp.bfloat16, name="head")(x)  # plain by design


model = Model()
tx = optax.adamw(3e-4)


def train_step(variables, opt_state, batch):
    params = variables["params"]
    fp8_state = {k: v for k, v in variables.items() if k != "params"}

    def loss_fn(params, fp8_state):
        logits = model.apply({"params": params, **fp8_state}, batch["x"])
        return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), batch["y"]).mean()

    loss, (grads, new_fp8_state) = jax.value_and_grad(loss_fn, argnums=(0, 1))(params, fp8_state)
    updates, opt_state = tx.update(grads, opt_state, params)
    return {"params": optax.apply_updates(params, updates), **new_fp8_state}, opt_state, loss


def train_args():
    batch = {"x": jax.ShapeDtypeStruct((BATCH, FEATURES), jnp.bfloat16),
             "y": jax.ShapeDtypeStruct((BATCH,), jnp.int32)}
    variables = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((BATCH, FEATURES), jnp.bfloat16)))
    return variables, jax.eval_shape(tx.init, variables["params"]), batch
