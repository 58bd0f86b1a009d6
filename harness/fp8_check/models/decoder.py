"""A transformer decoder block in flax, forward and as a full train step, with four FP8 recipes.

The block is what users train: RMSNorm -> attention (q/k/v/o projections, causal softmax
attention over 8 heads of 128) -> residual -> RMSNorm -> gated MLP (gate/up/down, 1024 -> 4096
-> 1024) -> residual, hidden size 1024, batch 2 x 128 tokens. The train step is
`jax.value_and_grad` of an MSE loss plus an `optax.adamw` update, returning the new
parameters, the new FP8 state and the optimizer state — as a flax FP8 training loop does.

Recipes (the projections and the MLP; attention's own two matmuls stay bf16 in every recipe):

- `direct`: q/k/v/o as `nn.Dense(dot_general_cls=fp8_ops.Fp8DirectDotGeneralOp)`, the MLP
  through `fp8_ops.Fp8Einsum` (FP8 dot_general, delayed scaling with amax histories);
- `qdq`: every projection with the deprecated `fp8_ops.Fp8DotGeneralOp` (quantize-dequantize
  around a wide dot; XLA must rewrite it into an FP8 gemm);
- `e5m2`: a hand-written current-scaling recipe, `CurrentScalingFp8`: E4M3 activations and
  weights forward, gradients quantized to E5M2 for both backward matmuls (`jax.custom_vjp`);
- `qwix`: `qwix.quantize_model` with a `QtRule` (E4M3 weights and activations, E5M2 gradients)
  on the projections — needs the `qwix` package (`requires: [flax, qwix]`).

Case functions take the trees a training loop holds (the variables, the optimizer state, the
batch) as arguments; their cases name an argument factory (`args: module:factory`) that
returns those trees' shapes as `jax.eval_shape` gives them: nothing is initialised, nothing is a
compile-time constant, and the structure is always the installed flax/optax's own (no
argument list to regenerate, no wrapper that flattens).
"""

import functools

import jax
import jax.numpy as jnp
from flax import linen as nn
from flax.linen import fp8_ops

BATCH, SEQ, HIDDEN, HEADS, FFN = 2, 128, 1024, 8, 4096
# Where the cases are priced (`price_at`): 8 sequences of 2048 tokens, 16384 tokens per step (compiled a second time)
PRICE_BATCH, PRICE_SEQ = 8, 2048
E4M3_MAX, E5M2_MAX = 448.0, 57344.0

# ------------------------------------------------------------------ the E5M2-gradient recipe


def _quantize(x, dtype, fmax):
    """Current (per-tensor) scaling: x / scale in FP8, and the scale."""
    amax = jnp.max(jnp.abs(x)).astype(jnp.float32)
    scale = jnp.maximum(amax, 1e-12) / fmax
    q = jnp.clip(x.astype(jnp.float32) / scale, -fmax, fmax).astype(dtype)
    return q, scale


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _fp8_dot(lhs, rhs, dimension_numbers):
    out, _ = _fp8_dot_fwd(lhs, rhs, dimension_numbers)
    return out


def _fp8_dot_fwd(lhs, rhs, dimension_numbers):
    lq, ls = _quantize(lhs, jnp.float8_e4m3fn, E4M3_MAX)
    rq, rs = _quantize(rhs, jnp.float8_e4m3fn, E4M3_MAX)
    out = jax.lax.dot_general(lq, rq, dimension_numbers, preferred_element_type=jnp.float32) * (ls * rs)
    return out.astype(lhs.dtype), (lq, ls, rq, rs)


def _fp8_dot_bwd(dimension_numbers, res, g):
    """2-D x [m, k] . w [k, n] (the projections of this block): dx = g . w^T, dw = x^T . g with g in E5M2."""
    lq, ls, rq, rs = res
    ((lc,), (rc,)), _ = dimension_numbers
    gq, gs = _quantize(g, jnp.float8_e5m2, E5M2_MAX)
    rows = tuple(range(g.ndim - 1))
    dx = jax.lax.dot_general(gq, rq, (((g.ndim - 1,), (1 - rc,)), ((), ())), preferred_element_type=jnp.float32)
    dw = jax.lax.dot_general(lq, gq, ((rows, rows), ((), ())), preferred_element_type=jnp.float32)
    if rc == 1:
        dw = dw.T
    return (dx * (gs * rs)).astype(jnp.bfloat16), (dw * (ls * gs)).astype(jnp.bfloat16)


_fp8_dot.defvjp(_fp8_dot_fwd, _fp8_dot_bwd)


class CurrentScalingFp8(nn.Module):
    """A `dot_general_cls` for nn.Dense: E4M3 x E4M3 forward, E5M2 gradients backward, per-tensor current scaling."""

    @nn.compact
    def __call__(self, lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
        return _fp8_dot(lhs, rhs.astype(lhs.dtype), dimension_numbers)


# ------------------------------------------------------------------ the block


class Fp8EinsumDense(nn.Module):
    """A projection through flax's Fp8Einsum (the kernel is this module's parameter)."""

    features: int

    @nn.compact
    def __call__(self, x):
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (x.shape[-1], self.features), jnp.float32)
        return fp8_ops.Fp8Einsum(name="einsum")("btd,df->btf", x, kernel.astype(x.dtype))


def _projection(recipe: str, features: int, name: str, mlp: bool = False):
    if recipe == "direct" and mlp:
        return Fp8EinsumDense(features, name=name)
    op = {"direct": fp8_ops.Fp8DirectDotGeneralOp, "qdq": fp8_ops.Fp8DotGeneralOp,
          "e5m2": CurrentScalingFp8}.get(recipe)
    kwargs: dict = {"dot_general_cls": op} if op is not None else {}  # (annotated: mypy infers dict[str, type])
    return nn.Dense(features, use_bias=False, dtype=jnp.bfloat16, name=name, **kwargs)


class Attention(nn.Module):
    recipe: str

    @nn.compact
    def __call__(self, x):
        b, t, _ = x.shape
        head = HIDDEN // HEADS
        q, k, v = (_projection(self.recipe, HIDDEN, n)(x).reshape(b, t, HEADS, head) for n in ("q_proj", "k_proj", "v_proj"))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(jnp.float32(head)).astype(q.dtype)
        mask = jnp.tril(jnp.ones((t, t), bool))
        probs = jax.nn.softmax(jnp.where(mask, scores.astype(jnp.float32), -1e30), axis=-1).astype(v.dtype)
        out = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, t, HIDDEN)
        return _projection(self.recipe, HIDDEN, "o_proj")(out)


class Mlp(nn.Module):
    recipe: str

    @nn.compact
    def __call__(self, x):
        gate = _projection(self.recipe, FFN, "gate", mlp=True)(x)
        up = _projection(self.recipe, FFN, "up", mlp=True)(x)
        return _projection(self.recipe, HIDDEN, "down", mlp=True)(nn.silu(gate) * up)


class DecoderBlock(nn.Module):
    recipe: str = "direct"  # direct | qdq | e5m2 | none (the model qwix quantizes)

    @nn.compact
    def __call__(self, x):
        x = x + Attention(self.recipe, name="attn")(nn.RMSNorm(dtype=jnp.bfloat16, name="attn_norm")(x))
        return x + Mlp(self.recipe, name="mlp")(nn.RMSNorm(dtype=jnp.bfloat16, name="mlp_norm")(x))


def model(recipe: str):
    if recipe != "qwix":
        return DecoderBlock(recipe)
    import qwix

    rule = qwix.QtRule(module_path=r".*(q_proj|k_proj|v_proj|o_proj|gate|up|down).*",
                       weight_qtype=jnp.float8_e4m3fn, act_qtype=jnp.float8_e4m3fn, bwd_qtype=jnp.float8_e5m2)
    return qwix.quantize_model(DecoderBlock("none"), qwix.QtProvider([rule]))


def optimizer():
    import optax

    return optax.adamw(1e-4)


# ------------------------------------------------------------------ the functions and their arguments


def _batch(batch: int = BATCH, seq: int = SEQ):
    return jax.ShapeDtypeStruct((batch, seq, HIDDEN), jnp.bfloat16)


def _structure(kind: str, recipe: str, batch: int = BATCH, seq: int = SEQ):
    """The shapes (no values) of what the function takes: (variables, x) or (variables, opt_state, x, target);
    `batch` x `seq` tokens (the parameters do not depend on them)."""
    m = model(recipe)
    variables = jax.eval_shape(lambda: m.init(jax.random.PRNGKey(0), jnp.zeros((BATCH, SEQ, HIDDEN), jnp.bfloat16)))
    if kind == "forward":
        return (variables, _batch(batch, seq))
    opt_state = jax.eval_shape(optimizer().init, variables["params"])
    return (variables, opt_state, _batch(batch, seq), _batch(batch, seq))


def _forward(recipe: str, variables, x):
    return model(recipe).apply(variables, x)


def _train_step(recipe: str, variables, opt_state, x, target):
    import optax

    m = model(recipe)
    params = variables["params"]
    state = {k: v for k, v in variables.items() if k != "params"}  # flax FP8 meta: scales, amax histories

    def loss_fn(params, state):
        out = m.apply({"params": params, **state}, x)
        return jnp.mean((out.astype(jnp.float32) - target.astype(jnp.float32)) ** 2)

    loss, (grads, new_state) = jax.value_and_grad(loss_fn, argnums=(0, 1))(params, state)
    updates, opt_state = optimizer().update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    # flax's FP8 ops return the updated scales and amax histories as the gradient of their state
    return {"params": params, **new_state}, opt_state, loss


def forward_direct(variables, x):
    """Decoder block forward, Fp8DirectDotGeneralOp projections and an Fp8Einsum MLP."""
    return _forward("direct", variables, x)


def forward_qdq(variables, x):
    """Decoder block forward, deprecated Fp8DotGeneralOp (quantize-dequantize) everywhere."""
    return _forward("qdq", variables, x)


def forward_e5m2(variables, x):
    """Decoder block forward, current-scaling E4M3 recipe (E5M2 gradients)."""
    return _forward("e5m2", variables, x)


def forward_qwix(variables, x):
    """Decoder block forward, quantized by qwix (QtRule: E4M3 weights and activations)."""
    return _forward("qwix", variables, x)


def train_step_direct(variables, opt_state, x, target):
    """Decoder block train step (value_and_grad + optax.adamw), Fp8DirectDotGeneralOp + Fp8Einsum."""
    return _train_step("direct", variables, opt_state, x, target)


def train_step_qdq(variables, opt_state, x, target):
    """Decoder block train step, deprecated Fp8DotGeneralOp."""
    return _train_step("qdq", variables, opt_state, x, target)


def train_step_e5m2(variables, opt_state, x, target):
    """Decoder block train step, current-scaling E4M3 forward and E5M2 gradients."""
    return _train_step("e5m2", variables, opt_state, x, target)


def train_step_qwix(variables, opt_state, x, target):
    """Decoder block train step, qwix QT (E4M3 forward, E5M2 gradients)."""
    return _train_step("qwix", variables, opt_state, x, target)


# The argument factories (`args: module:factory`): the shapes jax.eval_shape gives, nothing initialised.

def args_forward_direct():
    return _structure("forward", "direct")


def args_forward_qdq():
    return _structure("forward", "qdq")


def args_forward_e5m2():
    return _structure("forward", "e5m2")


def args_forward_qwix():
    return _structure("forward", "qwix")


def args_train_direct():
    return _structure("train", "direct")


def args_train_qdq():
    return _structure("train", "qdq")


def args_train_e5m2():
    return _structure("train", "e5m2")


def args_train_qwix():
    return _structure("train", "qwix")


# Where each case is priced (`price_at: {args: module:factory}`): the same arguments at PRICE_BATCH x PRICE_SEQ tokens.

def price_forward_direct():
    return _structure("forward", "direct", PRICE_BATCH, PRICE_SEQ)


def price_forward_qdq():
    return _structure("forward", "qdq", PRICE_BATCH, PRICE_SEQ)


def price_forward_e5m2():
    return _structure("forward", "e5m2", PRICE_BATCH, PRICE_SEQ)


def price_forward_qwix():
    return _structure("forward", "qwix", PRICE_BATCH, PRICE_SEQ)


def price_train_direct():
    return _structure("train", "direct", PRICE_BATCH, PRICE_SEQ)


def price_train_qdq():
    return _structure("train", "qdq", PRICE_BATCH, PRICE_SEQ)


def price_train_e5m2():
    return _structure("train", "e5m2", PRICE_BATCH, PRICE_SEQ)


def price_train_qwix():
    return _structure("train", "qwix", PRICE_BATCH, PRICE_SEQ)
