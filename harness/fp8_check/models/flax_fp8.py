"""flax FP8 layers as users run them, for `kind: python` cases.

Each function takes plain arrays (activations, weights and the FP8 meta state:
scales and amax histories) so that nothing is a compile-time constant, builds
the layer's variables from them and applies the real flax module. `*_grad`
functions differentiate a mean-squared-error loss with respect to the
activations and the weights: the two backward matmuls are where E5M2 x E4M3
FP8 gemms should appear.
"""

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax import traverse_util
from flax.linen import fp8_ops

META = ("input_scale", "kernel_scale", "output_grad_scale",
        "input_amax_history", "kernel_amax_history", "output_grad_amax_history")

def _variables(model, init_args, leaves):
    """The model's variable tree with every leaf taken from `leaves` (by name), not from an initializer."""
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), *init_args))
    flat = traverse_util.flatten_dict(jax.tree_util.tree_map(lambda s: s, shapes))
    return traverse_util.unflatten_dict({path: leaves[path[-1]] for path in flat})

def _apply_dense(op, x, kernel, meta):
    model = nn.Dense(features=kernel.shape[1], use_bias=False, dot_general_cls=op)
    variables = _variables(model, (x,), {"kernel": kernel, **dict(zip(META, meta))})
    return model.apply(variables, x)

def _apply_einsum(x, kernel, meta):
    model = fp8_ops.Fp8Einsum()
    variables = _variables(model, ("bk,kn->bn", x, kernel), dict(zip(META, meta)))
    return model.apply(variables, "bk,kn->bn", x, kernel)

def _mse_grad(forward):
    def loss(x, kernel, target, meta):
        return jnp.mean((forward(x, kernel, meta).astype(jnp.float32) - target) ** 2)

    def grad(x, kernel, target, *meta):
        return jax.grad(loss, argnums=(0, 1))(x, kernel, target, meta)

    return grad

# --- forward passes -----------------------------------------------------------

def dense_qdq_forward(x, kernel, *meta):
    """nn.Dense with the deprecated Fp8DotGeneralOp (quantize-dequantize around a bf16/f32 dot)."""
    return _apply_dense(fp8_ops.Fp8DotGeneralOp, x, kernel, meta)

def dense_direct_forward(x, kernel, *meta):
    """nn.Dense with Fp8DirectDotGeneralOp (quantize -> FP8 dot -> dequantize)."""
    return _apply_dense(fp8_ops.Fp8DirectDotGeneralOp, x, kernel, meta)

def fp8_dot_general_forward(x, kernel, *meta):
    """nn.Dense with fp8_ops.Fp8DotGeneral, flax's recommended non-deprecated name."""
    return _apply_dense(fp8_ops.Fp8DotGeneral, x, kernel, meta)

def einsum_forward(x, kernel, *meta):
    """fp8_ops.Fp8Einsum('bk,kn->bn')."""
    return _apply_einsum(x, kernel, meta)

# --- gradients (d loss / d x, d loss / d kernel) ---------------------------------

dense_qdq_grad = _mse_grad(lambda x, k, m: _apply_dense(fp8_ops.Fp8DotGeneralOp, x, k, m))
dense_direct_grad = _mse_grad(lambda x, k, m: _apply_dense(fp8_ops.Fp8DirectDotGeneralOp, x, k, m))
fp8_dot_general_grad = _mse_grad(lambda x, k, m: _apply_dense(fp8_ops.Fp8DotGeneral, x, k, m))
einsum_grad = _mse_grad(_apply_einsum)
