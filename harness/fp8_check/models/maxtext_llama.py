"""MaxText's llama2-7b train step, FP8, as MaxText's own `train_compile` builds it, for `kind: python` cases.

The anchor: MaxText's GPU test `test_fp8_gemm_llama2_7b` (one train step of llama2-7b with
`quantization=fp8`, tensor parallelism 8, scanned layers) counts 21 `__cublas$lt$matmul$f8` in the
optimized HLO: the 7 projections of a decoder layer (q, k, v, out; wi_0, wi_1, wo), each forward and
in both backward passes. Here the same step is built from MaxText 0.2.5's own pieces
(`pyconfig`, `create_device_mesh`, `train_compile.get_shaped_inputs`,
`get_functional_train_with_signature`, `train.train_step`) and compiled deviceless for `h100x8`:

- the argument factory (`args: fp8_check.models.maxtext_llama:args_fp8`) returns the abstract train
  state and batch, each leaf a ShapeDtypeStruct carrying MaxText's sharding over a mesh built from
  `jax.devices()`, which fp8-check answers with the compile target's 8 devices while it traces (as
  `train_compile` does on TPU with `jax.experimental.topologies`);
- the function (`callable: ...:train_step_fp8`) is MaxText's `train_step` with its model and config
  bound, traced under MaxText's logical axis rules.

What differs from MaxText's test: `attention=dot_product` instead of `cudnn_flash_te`
(TransformerEngine's fused attention queries the CUDA driver while tracing, so it cannot compile
deviceless); attention's own matmuls stay bf16 either way and are not among the 21. The jit has no
out_shardings or donation (fp8-check compiles the function on its arguments), which moves
collectives and buffers, not which gemms run in FP8. MaxText's default `remat_policy: full` recomputes
forward matmuls inside the backward loop (27 FP8 gemms on jax 0.11.2-0.12.0.1: the 21 plus 6 recomputed);
`remat_policy=minimal` (`train_step_fp8_minimal_remat`) gives exactly the 21. Recipes: `fp8` (MaxText's AQT/flax FP8 dot), and
the qwix recipes `fp8_full`, `fp8_gpu`, `fp8_e4m3`, told apart by their operand dtypes.

Needs MaxText and what it imports (harness/fp8_check/models/maxtext-requirements.txt; docs/models.md):
`fp8-check matrix docs/examples/maxtext/cases.yaml --target h100x8 --with-requirements harness/fp8_check/models/maxtext-requirements.txt`.
"""

import os

import jax

from fp8_check import platforms

SHAPE = ("model_name=llama2-7b", "ici_tensor_parallelism=8", "per_device_batch_size=1", "max_target_length=2048",
         "attention=dot_product", "dataset_type=synthetic", "enable_checkpointing=false")
# MaxText's own test (tests/end_to_end/gpu/test_fp8_gemm_llama2_7b.sh): its overrides of base.yml, except
# attention=dot_product for cudnn_flash_te; remat_policy=minimal_with_context and scan_layers are set per case.
TEST = ("model_name=llama2-7b", "ici_tensor_parallelism=8", "ici_fsdp_parallelism=1", "per_device_batch_size=0.125",
        "max_target_length=4096", "use_iota_embed=true", "logits_dot_in_fp32=false", "attention=dot_product",
        "dataset_type=synthetic", "enable_checkpointing=false")
# On TPU targets (compile-only): llama2-7b's layer shapes with 2 decoder layers, so that its train state fits one
# v6e chip's 32 GB (libtpu refuses a program that does not fit HBM), fully sharded (FSDP) over whatever devices the
# target has: 1 on v6e, 8 on tpu7x-2x2x1.
TPU = ("model_name=llama2-7b", "override_model_config=true", "base_num_decoder_layers=2", "ici_fsdp_parallelism=-1",
       "per_device_batch_size=1",
       "max_target_length=2048", "attention=dot_product", "dataset_type=synthetic", "enable_checkpointing=false")
CONFIGS = {"shape": SHAPE, "test": TEST, "two_layers": TPU}


def hardware() -> str:
    """MaxText's `hardware` setting from the compile target: `tpu` when fp8-check answers jax.devices() with a TPU
    target's devices, else `gpu` (the builder never fixes it)."""
    devices = jax.devices()
    return platforms.TPU.jax_platform if devices and devices[0].platform == platforms.TPU.jax_platform else "gpu"

_BUILT: dict = {}


def _build(recipe: str, scan: bool = True, remat: str = "full", config_name: str = "shape"):
    """MaxText's config, mesh, abstract state and bound train step for `recipe`, built once per process."""
    key = (recipe, scan, remat, config_name)
    if key in _BUILT:
        return _BUILT[key]
    import tempfile

    import maxtext
    from jax.sharding import AxisType, Mesh
    from maxtext.configs import pyconfig
    from maxtext.trainers.pre_train import train, train_compile
    from maxtext.utils import maxtext_utils, sharding

    base = os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml")
    out = tempfile.mkdtemp(prefix="fp8-check-maxtext-")
    qwix = [] if recipe == "fp8" else ["use_qwix_quantization=true"]  # fp8_full, fp8_gpu, fp8_e4m3 are qwix recipes
    argv = ["fp8-check", base, *CONFIGS[config_name], f"hardware={hardware()}", *qwix, f"quantization={recipe}",
            f"scan_layers={str(scan).lower()}",
            f"remat_policy={remat}", f"base_output_directory={out}", "run_name=fp8-check"]
    config = pyconfig.initialize(argv)
    devices = jax.devices()  # the compile target's devices while fp8-check compiles (its view of the device)
    mesh = Mesh(maxtext_utils.create_device_mesh(config, devices), config.mesh_axes,
                axis_types=(AxisType.Auto,) * len(config.mesh_axes))
    (state, batch), _, state_shardings, _, model = train_compile.get_shaped_inputs(mesh, config)
    params_shardings, state_shardings = sharding.maybe_update_params_sharding_with_opt(config, state_shardings)
    in_state = sharding.build_zero1_input_state_mesh_shardings(config, state_shardings, params_shardings)
    data = sharding.get_input_data_sharding(config, mesh)
    step, (state_in, batch_in), _, _, _ = maxtext_utils.get_functional_train_with_signature(
        train.train_step, data, in_state, model, config, params_shardings)

    def placed(tree, shardings):
        return jax.tree_util.tree_map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), tree, shardings)

    built = {"config": config, "step": step,
             "args": (placed(state, state_in), jax.tree_util.tree_map(
                 lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=data), batch))}
    _BUILT[key] = built
    return built


def _train_step(recipe: str, scan: bool, state, batch, remat: str = "full", config_name: str = "shape"):
    from flax.core.spmd import logical_axis_rules

    built = _build(recipe, scan, remat, config_name)
    with logical_axis_rules(built["config"].logical_axis_rules):
        return built["step"](state, batch)


# MaxText's test: its config (TEST), remat_policy=minimal_with_context, scanned: the 21 FP8 gemms.
_T = ("minimal_with_context", "test")  # remat_policy, config


def train_step_fp8(state, batch):
    """llama2-7b train step as MaxText's test_fp8_gemm_llama2_7b: quantization=fp8, scanned, minimal_with_context."""
    return _train_step("fp8", True, state, batch, *_T)


def args_fp8():
    return _build("fp8", True, *_T)["args"]


def train_step_fp8_unscanned(state, batch):
    """The same with every layer unrolled (scan_layers=false)."""
    return _train_step("fp8", False, state, batch, *_T)


def args_fp8_unscanned():
    return _build("fp8", False, *_T)["args"]


def train_step_fp8_full_remat(state, batch):
    """llama2-7b (batch 8 x 2048), quantization=fp8, scanned, MaxText's default remat_policy=full."""
    return _train_step("fp8", True, state, batch)


def args_fp8_full_remat():
    return _build("fp8", True)["args"]


def train_step_fp8_full_remat_unscanned(state, batch):
    """The same as train_step_fp8_full_remat with every layer unrolled (scan_layers=false)."""
    return _train_step("fp8", False, state, batch)


def args_fp8_full_remat_unscanned():
    return _build("fp8", False)["args"]


def train_step_fp8_minimal_remat(state, batch):
    """llama2-7b (batch 8 x 2048), quantization=fp8, scanned, remat_policy=minimal (no forward matmul recomputed)."""
    return _train_step("fp8", True, state, batch, "minimal")


def args_fp8_minimal_remat():
    return _build("fp8", True, "minimal")["args"]


def train_step_fp8_full(state, batch):
    """MaxText's test config with the qwix recipe fp8_full."""
    return _train_step("fp8_full", True, state, batch, *_T)


def args_fp8_full():
    return _build("fp8_full", True, *_T)["args"]


def train_step_fp8_gpu(state, batch):
    """MaxText's test config with the qwix recipe fp8_gpu."""
    return _train_step("fp8_gpu", True, state, batch, *_T)


def args_fp8_gpu():
    return _build("fp8_gpu", True, *_T)["args"]


def train_step_fp8_e4m3(state, batch):
    """MaxText's test config with the qwix recipe fp8_e4m3."""
    return _train_step("fp8_e4m3", True, state, batch, *_T)


def args_fp8_e4m3():
    return _build("fp8_e4m3", True, *_T)["args"]


# ---- TPU targets, compile-only (config TPU): MaxText's quantization settings that apply to TPU
def train_step_tpu_fp8(state, batch):
    """quantization=fp8 on a TPU target: MaxText's NNX bridge runs flax's Fp8DirectDotGeneralOp, FP8 operands that
    XLA's TPU compiler keeps (21 FP8 matmuls of 32 on v6e; docs/models.md)."""
    return _train_step("fp8", True, state, batch, "minimal", "two_layers")


def args_tpu_fp8():
    return _build("fp8", True, "minimal", "two_layers")["args"]


def train_step_tpu_fp8_full(state, batch):
    """quantization=fp8_full (qwix, quantization-aware training) on a TPU target."""
    return _train_step("fp8_full", True, state, batch, "minimal", "two_layers")


def args_tpu_fp8_full():
    return _build("fp8_full", True, "minimal", "two_layers")["args"]
