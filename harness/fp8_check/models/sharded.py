"""FP8 matmuls as sharded training code writes them (cases/sharded.yaml): plain JAX, no flax.

Each function takes arrays and returns arrays; the case file gives the mesh and every
argument's partition spec, and fp8-check compiles the function for a multi-device target
(`h100x8`, `b200x4`). Scopes (`jax.named_scope`) name the layers, so the signature's
collectives say which layer they serve.

Quantization as in flax's FP8 ops: QDQ (`x / scale`, clamp to E4M3's range, convert to
E4M3 and back, times the scale: XLA's FP8 rewriter folds the pair into an FP8 gemm) and
direct (quantize, then the gemm runs on the FP8 arrays and the scales multiply the result).
A replicated scale is one scalar for the whole (sharded) tensor; a per-shard scale is one
scale per FSDP shard (an array sharded like the weight's rows).
"""


import jax
import jax.numpy as jnp

E4M3 = jnp.float8_e4m3fn
E4M3_MAX = 448.0
BF16 = jnp.bfloat16


def quantize(x, scale):
    """x / scale, saturated to E4M3's range, as E4M3."""
    return jnp.clip(x / scale.astype(x.dtype), -E4M3_MAX, E4M3_MAX).astype(E4M3)


def qdq(x, scale):
    """Quantize-dequantize (the pattern XLA turns into an FP8 gemm operand)."""
    return quantize(x, scale).astype(x.dtype) * scale.astype(x.dtype)


def _per_shard(w, scales, fn):
    """Apply `fn(block, scale)` to each of the len(scales) row blocks of `w` (one block per FSDP shard)."""
    shards = scales.shape[0]
    blocks = w.reshape((shards, w.shape[0] // shards) + w.shape[1:])
    return fn(blocks, scales.reshape((shards,) + (1,) * (w.ndim))).reshape(w.shape)


def _dot(a, b):
    return jnp.dot(a, b, preferred_element_type=BF16)


# ---- FSDP: the weight's rows are sharded over `fsdp` and all-gathered before the gemm


def fsdp_qdq_replicated(x, w, x_scale, w_scale):
    """QDQ with one replicated scale per tensor: XLA can quantize before the all-gather (FP8 all-gather)."""
    with jax.named_scope("fsdp_dense"):
        return _dot(qdq(x, x_scale), qdq(w, w_scale))


def fsdp_qdq_per_shard(x, w, x_scale, w_scales):
    """QDQ with one scale per FSDP shard of the weight: the dequantized weight differs per shard."""
    with jax.named_scope("fsdp_dense"):
        wq = _per_shard(w, w_scales, qdq)
        return _dot(qdq(x, x_scale), wq)


def fsdp_direct_replicated(x, w, x_scale, w_scale):
    """Direct quantization: the gemm runs on the E4M3 arrays and the scales multiply its result."""
    with jax.named_scope("fsdp_dense"):
        y = _dot(quantize(x, x_scale), quantize(w, w_scale))
        return y * (x_scale * w_scale).astype(BF16)


def fsdp_direct_per_shard(x, w, x_scale, w_scales):
    """Direct quantization with one scale per FSDP shard: the E4M3 weight must be dequantized per shard."""
    with jax.named_scope("fsdp_dense"):
        wq = _per_shard(w, w_scales, quantize)
        w_deq = _per_shard(wq.astype(BF16), w_scales, lambda b, s: b * s.astype(BF16))
        return _dot(qdq(x, x_scale), w_deq)


# ---- tensor and sequence parallelism


def tp_column(x, w, x_scale, w_scale):
    """Column-parallel: x replicated, w's columns sharded over `tp`: no collective in the forward pass."""
    with jax.named_scope("tp_column"):
        return _dot(qdq(x, x_scale), qdq(w, w_scale))


def tp_row(x, w, x_scale, w_scale):
    """Row-parallel: x's columns and w's rows sharded over `tp`: partial sums, then an all-reduce."""
    with jax.named_scope("tp_row"):
        return _dot(qdq(x, x_scale), qdq(w, w_scale))


def sequence_parallel_mlp(x, w_in, w_out, x_scale, w_in_scale, h_scale, w_out_scale):
    """Megatron-style sequence parallelism: x sharded over the sequence, all-gathered into a column-parallel
    gemm, then a row-parallel gemm whose result is reduce-scattered back over the sequence."""
    with jax.named_scope("mlp_in"):
        h = jax.nn.relu(_dot(qdq(x, x_scale), qdq(w_in, w_in_scale)))
    with jax.named_scope("mlp_out"):
        return _dot(qdq(h, h_scale), qdq(w_out, w_out_scale))


def moe_dispatch(x, w, x_scale, w_scale):
    """MoE expert parallelism: tokens [experts, tokens, d] arrive sharded by token, are quantized to E4M3 and
    dispatched to their expert's device (an all-to-all), then each expert runs an FP8 gemm."""
    with jax.named_scope("moe_dispatch"):
        xq = jax.lax.with_sharding_constraint(quantize(x, x_scale), jax.sharding.PartitionSpec("ep", None, None))
    with jax.named_scope("moe_experts"):
        y = jnp.einsum("etd,edf->etf", xq, quantize(w, w_scale), preferred_element_type=BF16)
        return y * (x_scale * w_scale).astype(BF16)


def collective_matmul(x, w, x_scale, w_scale):
    """All-gather + matmul (x sharded over the sequence, w over columns): with XLA's windowed-einsum flags the
    all-gather is decomposed into collective-permutes overlapping the gemm steps."""
    with jax.named_scope("ag_matmul"):
        return _dot(qdq(x, x_scale), qdq(w, w_scale))


def block_scaled_row_parallel(a, b, a_scales, b_scales):
    """MXFP8 `jax.nn.scaled_matmul` with k sharded (row-parallel): cuDNN block-scaled gemms on each shard."""
    with jax.named_scope("mx_dense"):
        return jax.nn.scaled_matmul(a, b, a_scales, b_scales, preferred_element_type=BF16)


# ---- a sharded train step: pre-norm MLP block with FP8 (QDQ) dense layers, FSDP x TP


def _mlp_block(params, scales, x):
    with jax.named_scope("norm"):
        mean = jnp.mean(x.astype(jnp.float32) ** 2, axis=-1, keepdims=True)
        h = (x.astype(jnp.float32) * jax.lax.rsqrt(mean + 1e-6)).astype(BF16) * params["norm"]
    with jax.named_scope("up"):
        h = jax.nn.gelu(jnp.einsum("bsd,df->bsf", qdq(h, scales[0]), qdq(params["w_up"], scales[1]),
                                   preferred_element_type=BF16))
    with jax.named_scope("down"):
        y = jnp.einsum("bsf,fd->bsd", qdq(h, scales[2]), qdq(params["w_down"], scales[3]),
                       preferred_element_type=BF16)
    return x + y


def train_step(norm, w_up, w_down, scales, x, target):
    """One SGD step of an MLP block on bf16 weights with FP8 (QDQ) gemms: forward, backward (E4M3 x E4M3 and
    gradient gemms), update; returns the new weights and the loss."""
    params = {"norm": norm, "w_up": w_up, "w_down": w_down}

    def loss_fn(p):
        y = _mlp_block(p, scales, x)
        return jnp.mean((y.astype(jnp.float32) - target.astype(jnp.float32)) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    lr = jnp.asarray(1e-3, BF16)
    new = {k: (params[k] - lr * grads[k].astype(BF16)) for k in ("norm", "w_up", "w_down")}
    return new["norm"], new["w_up"], new["w_down"], loss
