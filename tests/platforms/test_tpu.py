"""Google TPU, compile-only: real libtpu (the `jax[tpu]` pin of the newest release, in its cached TPU environment,
built on first use) compiles for TPU generations and topologies on this CPU-only machine (docs/tpu.md)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec as P

from fp8_check import api, platforms
from fp8_check.run import _runner as runner
from fp8_check.targets import PROFILES, load_target

E4M3, E5M2, BF16 = jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.bfloat16


def fp8_dot(a, b):
    return jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def dequant_dot(a, b, a_scale, b_scale):
    return (a.astype(BF16) * a_scale) @ (b.astype(BF16) * b_scale)


def fsdp_dot(x, w):
    return jax.lax.dot_general(x, w, (((1,), (0,)), ((), ())), preferred_element_type=BF16)


def _s(shape, dtype, sharding=None):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["v5e", "v6e", "tpu7x"])
@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_a_dot_on_fp8_operands_stays_an_fp8_matmul(target, dtype):
    report = api.fusion_signature(fp8_dot, _s((256, 512), dtype), _s((512, 256), dtype), target=target)
    assert report.profile == "tpu" and report.jax == platforms.TPU.default_release  # the TPU environment's JAX
    (g,) = report.signature.gemms
    f8 = jnp.dtype(dtype).name.replace("float8_", "f8")
    assert g.operand_dtypes == [f8, f8] and g.fp8 and g.output == "f32" and g.converts == []
    assert g.dims["lhs_contracting"] == [1] and g.dims["rhs_contracting"] == [0] and g.flops == 2 * 256 * 512 * 256
    assert "convert" not in report.signature.unfused
    assert report.layer_table().splitlines()[-1].startswith("coverage: 1 matmul, 1 FP8/FP4 (1 TPU matmul FP8)")


@pytest.mark.slow
def test_the_dequantize_then_dot_pattern_is_a_bf16_matmul_with_the_converts_inside():
    args = (_s((256, 512), E4M3), _s((512, 256), E4M3), _s((), BF16), _s((), BF16))
    v6e = api.fusion_signature(dequant_dot, *args, target="v6e").signature.gemms
    tpu7x = api.fusion_signature(dequant_dot, *args, target="tpu7x").signature.gemms
    assert [g.operand_dtypes for g in v6e] == [["bf16", "bf16"]] and not v6e[0].fp8
    assert v6e[0].inputs == ["f8e4m3fn", "f8e4m3fn"] and {"convert", "multiply"} <= set(v6e[0].fused_ops)
    # the per-generation difference the HLO shows (JAX >= 0.10.1): v6e multiplies in f32, tpu7x in bf16
    assert v6e[0].converts == ["bf16->f32", "f32->bf16", "f8e4m3fn->bf16"]
    assert tpu7x[0].converts == ["f8e4m3fn->bf16"]


@pytest.mark.slow
def test_fp8_weights_sharded_on_k_are_all_gathered_as_fp8():
    rows = NamedSharding(AbstractMesh((8,), ("fsdp",)), P("fsdp", None))
    report = api.fusion_signature(fsdp_dot, _s((4096, 1024), E4M3, rows), _s((1024, 1024), E4M3, rows),
                                  target="tpu7x-2x2x1")
    (c,) = report.signature.collectives
    assert c.op == "all-gather" and c.dtype == "f8e4m3fn" and c.shape == "f8e4m3fn[1024,1024]" and c.bytes == 1024 * 1024
    assert [g.operand_dtypes for g in report.signature.gemms] == [["f8e4m3fn", "f8e4m3fn"]]


def test_a_gpu_profile_is_refused_for_a_tpu_target():
    with pytest.raises(ValueError, match="profile: 'cublas' is no profile of Google TPU targets"):
        api.Checker("deviceless").signature(fp8_dot, _s((64, 64), E4M3), _s((64, 64), E4M3), target="v6e",
                                            profile="cublas")


def test_a_release_without_the_chip_is_unsupported_with_the_reason():
    tpu7x, v6e = load_target("tpu7x"), load_target("v6e")
    assert runner.unsupported_reason(PROFILES["tpu"], "deviceless", "0.8.0", v6e) is None
    assert "tpu7x exists from JAX 0.8.1" in runner.unsupported_reason(PROFILES["tpu"], "deviceless", "0.8.0", tpu7x)
    assert runner.supported([tpu7x, v6e], "0.7.2") == [v6e] and runner.supported([tpu7x, v6e], "0.8.1") == [tpu7x, v6e]


def test_every_tpu_case_has_goldens_for_each_of_its_targets():
    from fp8_check.cases import _load as cases
    from fp8_check.verdict import _golden as golden

    from ..conftest import REPO

    library = [c for c in cases.load([REPO / "cases"]) if "tpu" in c.profiles]
    assert {c.id for c in library} >= {"tpu_fp8_dot_e4m3", "tpu_fp8_dot_e5m2", "tpu_dequant_bf16", "tpu_fsdp_fp8_weights_k"}
    for case in library:
        assert case.targets and all(load_target(t).platform is platforms.TPU for t in case.targets), case.id
        for target in case.targets:
            assert golden.path_for(REPO / "goldens", case.id, target, "tpu", "deviceless").exists(), (case.id, target)
