"""A flax model whose train step quantizes to FP8 inside itself, as flax users write it.

Two blocks (up -> gelu -> down, each through flax's `Fp8DotGeneralOp`), a small FP8 adapter and a
plain bf16 head, trained with optax. The arguments carry no FP8 dtype: the FP8 types appear only
inside the step (flax quantizes there), so only the compiled program says whether FP8 gemms run.

`PLAIN` names the projections that run as a plain `nn.Dense` instead (empty as shipped): the docs
and tests make one layer plain to show how fp8-check names the layer that lost FP8.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.linen import fp8_ops

BATCH, FEATURES, HIDDEN, ADAPTER, CLASSES = 128, 512, 1024, 64, 16
PLAIN: tuple[str, ...] = ()


def dense(features, name):
    """An FP8 projection (flax's Fp8DotGeneralOp), or a plain bf16 one where `name` is listed in PLAIN."""
    op = None if name in PLAIN else fp8_ops.Fp8DotGeneralOp
    return nn.Dense(features, dtype=jnp.bfloat16, dot_general_cls=op, name=name.rsplit("/", 1)[-1])


class Block(nn.Module):
    index: int

    @nn.compact
    def __call__(self, x):
        h = nn.gelu(dense(HIDDEN, f"block{self.index}/up")(x))
        return x + dense(FEATURES, f"block{self.index}/down")(h)


class Adapter(nn.Module):
    """A small low-rank adapter (LoRA-like): FP8 too, a sliver of the FLOPs."""

    @nn.compact
    def __call__(self, x):
        return x + dense(FEATURES, "adapter/up")(dense(ADAPTER, "adapter/down")(x))


class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Block(0, name="block0")(x)
        x = Block(1, name="block1")(x)
        x = Adapter(name="adapter")(x)
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
