"""A small flax model trained with optax, as its users write it: three FP8 layers and a train step.

Nothing here is written for fp8-check: `train_step` is the function a training loop jits, and
`train_args` gives the shapes of what it takes (the variables with their FP8 scales and amax
histories, the optax state, a batch) as `jax.eval_shape` returns them. The case file names the
two (`callable: model:train_step`, `args: model:train_args`); fp8-check compiles the step for
the target with those trees as its inputs, nothing flattened.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.linen import fp8_ops

BATCH, FEATURES, HIDDEN = 64, 256, 512


class Model(nn.Module):
    """up -> gelu -> mid -> gelu -> down: three projections, each through one of flax's FP8 ops."""

    @nn.compact
    def __call__(self, x):
        x = nn.gelu(nn.Dense(HIDDEN, dtype=jnp.bfloat16, dot_general_cls=fp8_ops.Fp8DirectDotGeneralOp, name="up")(x))
        x = nn.gelu(nn.Dense(HIDDEN, dtype=jnp.bfloat16, dot_general_cls=fp8_ops.Fp8DirectDotGeneralOp, name="mid")(x))
        return nn.Dense(FEATURES, dtype=jnp.bfloat16, dot_general_cls=fp8_ops.Fp8DotGeneralOp, name="down")(x)


model = Model()
tx = optax.adamw(3e-4)


def train_step(variables, opt_state, batch):
    """One step: value_and_grad of the loss, an optax update; flax's FP8 state takes its new scales and histories."""
    params = variables["params"]
    fp8_state = {k: v for k, v in variables.items() if k != "params"}

    def loss_fn(params, fp8_state):
        out = model.apply({"params": params, **fp8_state}, batch["x"])
        return jnp.mean((out.astype(jnp.float32) - batch["y"].astype(jnp.float32)) ** 2)

    loss, (grads, new_fp8_state) = jax.value_and_grad(loss_fn, argnums=(0, 1))(params, fp8_state)
    updates, opt_state = tx.update(grads, opt_state, params)
    return {"params": optax.apply_updates(params, updates), **new_fp8_state}, opt_state, loss


def train_args():
    """The shapes of train_step's arguments: nothing is initialised."""
    batch = {"x": jax.ShapeDtypeStruct((BATCH, FEATURES), jnp.bfloat16),
             "y": jax.ShapeDtypeStruct((BATCH, FEATURES), jnp.bfloat16)}
    variables = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros((BATCH, FEATURES), jnp.bfloat16)))
    return variables, jax.eval_shape(tx.init, variables["params"]), batch
