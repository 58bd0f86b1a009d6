"""A 3-layer flax MLP for `fp8-check check`: real variables as inputs, shapes only.

    fp8-check check flax_mlp:grad --args flax_mlp:grad_args --json -          # (PYTHONPATH=docs/examples)
    fp8-check check flax_mlp:train_step --args flax_mlp:train_args

Dense_0 uses flax's Fp8DirectDotGeneralOp, Dense_1 the deprecated Fp8DotGeneralOp (QDQ),
Dense_2 is a plain nn.Dense. Nothing is initialised on the CPU: `jax.eval_shape` gives the
shapes of the variables and of the optimizer state, and fp8-check compiles the function
with those as inputs, so XLA cannot fold parameters or FP8 scales into constants.
"""

import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from flax.linen import fp8_ops


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Dense(256, dot_general_cls=fp8_ops.Fp8DirectDotGeneralOp)(x))
        x = nn.relu(nn.Dense(256, dot_general_cls=fp8_ops.Fp8DotGeneralOp)(x))
        return nn.Dense(128)(x)


model = MLP()
tx = optax.adamw(1e-3)
X = jax.ShapeDtypeStruct((64, 128), jnp.bfloat16)


def variables_shape():
    return jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.zeros(X.shape, X.dtype)))


def loss(variables, x):
    return jnp.mean(model.apply(variables, x).astype(jnp.float32) ** 2)


# jax.grad with respect to the variables (parameters and FP8 state) and the input
grad = jax.grad(loss, argnums=(0, 1))


def grad_args():
    return variables_shape(), X


def train_step(variables, opt_state, x):
    """value_and_grad + optax update; flax's FP8 state takes its 'gradient' (the new scales and amax histories)."""
    params, state = variables["params"], {k: v for k, v in variables.items() if k != "params"}
    value, (g_params, new_state) = jax.value_and_grad(lambda p, s: loss({"params": p, **s}, x), argnums=(0, 1))(params, state)
    updates, opt_state = tx.update(g_params, opt_state, params)
    return {"params": optax.apply_updates(params, updates), **new_state}, opt_state, value


def train_args():
    v = variables_shape()
    return v, jax.eval_shape(tx.init, v["params"]), X
