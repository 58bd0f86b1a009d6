"""FP8 matmuls as TPU code writes them (cases/tpu.yaml): plain JAX.

On a TPU, XLA has no FP8 rewriter that folds a dequantization into the matmul: whether FP8 reaches the matrix
unit is decided by the program itself. `fp8_dot` hands the matmul its FP8 operands (XLA keeps them: an f8
convolution); the `dequant_*` functions dequantize first (XLA keeps the converts and multiplies in front of a
bf16 or f32 matmul). These are patterns, judged by their exact signature (no layer scopes); the FSDP one names
its layer (`jax.named_scope`), so its golden is a contract and its collective says which layer it serves.
"""


import jax
import jax.numpy as jnp

BF16 = jnp.bfloat16
F32 = jnp.float32


def _dot(a, b, out=F32):
    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=out)


def fp8_dot(a, b):
    """The matmul on the FP8 operands themselves, accumulated in f32."""
    return _dot(a, b)


def fp8_dot_scaled(a, b, a_scale, b_scale):
    """Direct quantization: the FP8 matmul, then both scales on its f32 result, returned as bf16."""
    return (_dot(a, b) * (a_scale * b_scale)).astype(BF16)


def dequant_bf16_dot(a, b, a_scale, b_scale):
    """Dequantize to bf16 (`a.astype(bf16) * scale`), then the matmul: the pattern GPU rewriters fold."""
    return (a.astype(BF16) * a_scale) @ (b.astype(BF16) * b_scale)


def dequant_f32_dot(a, b, a_scale, b_scale):
    """Dequantize to f32, then the matmul in f32."""
    return (a.astype(F32) * a_scale) @ (b.astype(F32) * b_scale)


def fsdp_fp8_weights(x, w):
    """FSDP with FP8 weights: `w` sharded on its contracting dimension (K) is all-gathered for the matmul."""
    with jax.named_scope("fsdp_fp8_dense"):
        return _dot(x, w, BF16)


# ---- qwix (the `qwix` requirement set): post-training quantization of a flax MLP to E4M3 weights and activations


def _qwix_mlp():
    import qwix
    from flax import linen as nn

    class Mlp(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(512, name="down")(jax.nn.relu(nn.Dense(1024, name="up")(x)))

    rules = [qwix.QtRule(module_path=".*", weight_qtype=jnp.float8_e4m3fn, act_qtype=jnp.float8_e4m3fn)]
    return qwix.quantize_model(Mlp(), qwix.PtqProvider(rules))


def qwix_ptq_mlp(variables, x):
    """A flax MLP (512 -> 1024 -> 512) quantized by qwix's PtqProvider (E4M3 weights and activations), forward."""
    return _qwix_mlp().apply(variables, x)


def args_qwix_ptq_mlp():
    x = jax.ShapeDtypeStruct((256, 512), BF16)
    return jax.eval_shape(_qwix_mlp().init, jax.random.key(0), x), x
