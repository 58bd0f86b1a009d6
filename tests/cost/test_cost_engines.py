"""Kernels priced by what executes them (harness/fp8_check/cost/_engine.py), on real deviceless compiles, and the
per-part rate tables (harness/fp8_check/targets/rates/*.yaml) they are priced with."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from fp8_check.api import fusion_signature
from fp8_check.cost import _model as cost, _rates as cost_rates, _table as cost_table
from fp8_check.cost._engine import LOOP_DOT, gemm_engine
from fp8_check.platforms import Profile
from fp8_check.targets import PROFILES, load_target

from ..conftest import REPO

H100 = cost.hardware("h100")
# The same program with its dot kept out of the gemm library: XLA's rewriter leaves dots below this many
# elements to its own emitters, so a huge threshold makes XLA emit the dot itself (a kLoop fusion).
NO_LIBRARY = Profile("no-library", {**PROFILES["cublas"].compiler_options,
                                    "xla_gpu_gemm_rewrite_size_threshold": 1 << 40})


def matmul(a, b):
    return jnp.dot(a, b, preferred_element_type=jnp.bfloat16)


def spec(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)


def gemm_kernel(est: cost.Estimate) -> cost.KernelCost:
    [k] = [k for k in est.kernels if k.gemm]
    return k


@pytest.mark.slow
def test_a_dot_moved_from_the_library_to_a_loop_fusion_costs_more():
    args = (spec((1024, 1024), jnp.bfloat16), spec((1024, 1024), jnp.bfloat16))
    lib = fusion_signature(matmul, *args, profile="cublas")
    loop = fusion_signature(matmul, *args, profile=NO_LIBRARY)
    assert [g.target for g in lib.gemms] == ["__cublas$lt$matmul"]
    assert [g.target for g in loop.gemms] == ["fusion kLoop"]  # real: XLA emitted the dot itself
    before, after = cost.estimate(lib.hlo, H100), cost.estimate(loop.hlo, H100)
    g_lib, g_loop = gemm_kernel(before), gemm_kernel(after)
    assert g_lib.engine == "bf16 tensor cores" and g_loop.engine == LOOP_DOT
    assert g_lib.flops == g_loop.flops == 2 * 1024**3
    # the loop fusion runs on CUDA cores: 2*1024^3 / 66.9 TFLOP/s = 32.1 us, against 2.2 us on bf16 tensor cores
    assert g_loop.us == pytest.approx(2 * 1024**3 / H100.fp32 * 1e6 + H100.launch_us)
    delta = cost.between(before, after)
    assert delta.delta_us > 25
    # judged against a golden stating the library gemm: the baseline reprices the dot on tensor cores
    from_golden = cost.against_expected(lib.signature.to_dict(), loop.signature, after, H100)
    assert from_golden.delta_us == pytest.approx(delta.delta_us, abs=1e-6)


@pytest.mark.slow
def test_an_fp8_gemm_falling_back_to_bf16_at_production_shapes_costs_1_6_to_2_4_times():
    n = 4096
    fp8 = fusion_signature(matmul, spec((n, n), jnp.float8_e4m3fn), spec((n, n), jnp.float8_e4m3fn))
    bf16 = fusion_signature(matmul, spec((n, n), jnp.bfloat16), spec((n, n), jnp.bfloat16))
    assert fp8.gemms[0].fp8 and not bf16.gemms[0].fp8
    e8, e16 = cost.estimate(fp8.hlo, H100), cost.estimate(bf16.hlo, H100)
    g8, g16 = gemm_kernel(e8), gemm_kernel(e16)
    assert (g8.engine, g16.engine) == ("fp8 tensor cores", "bf16 tensor cores")
    assert g8.gemm == g16.gemm == (1, n, n, n)
    assert 1.6 <= g16.us / g8.us <= 2.4
    assert 1.6 <= e16.total_us / e8.total_us <= 2.4  # the whole program too (the FP8 one also transposes b)
    # against the FP8 golden, the bf16 program is a positive delta: the gemm repriced at FP8, and the golden's
    # transpose kernel (its shapes are not in a golden) a bare launch
    d = cost.against_expected(fp8.signature.to_dict(), bf16.signature, e16, H100)
    assert d.delta_us == pytest.approx(g16.us - g8.us - H100.launch_us, rel=1e-6) and d.delta_us > 60


def test_every_engine_has_a_rate_and_a_source_in_every_target_table():
    for name in cost_rates.priced_target_names():
        if cost.hardware(name).matmul_unit:  # a TPU roofline: its own rows (the TPU test below)
            continue
        rows = cost_rates.rate_table(name)
        keys = [r[0] for r in rows]
        assert {"fp8_tensor", "bf16_tensor", "tf32_tensor", "fp32_cuda", "hbm", "launch"} <= set(keys), name
        assert all(r[3].strip() for r in rows), name  # every rate states where it comes from
        if load_target(name).devices > 1:  # a multi-GPU target: its links too
            assert "nvlink" in keys
    assert "network" in [r[0] for r in cost_rates.rate_table("h100x2x4")]


def test_the_docs_hold_the_current_tables():
    text = (REPO / "docs" / "cost_model.md").read_text()
    for name in cost_rates.priced_target_names():
        assert cost_rates.rate_markdown(name) in text, f"docs/cost_model.md: regenerate the table of {name}"


def test_a_tpu_target_is_priced_by_its_generations_published_roofline():
    # the rates are the generation's published peaks with their pages (platforms/tpu/generations.py), never a GPU's
    from fp8_check.platforms.tpu.generations import GENERATIONS

    for name in ("v5e", "v5p", "v6e", "tpu7x", "tpu7x-2x2x1"):
        hw = cost.hardware(name)
        g = GENERATIONS[load_target(name).arch]
        assert hw.matmul_unit == "MXU" and hw.launch_us == 0 and hw.hbm == g.hbm_bytes_per_s, name
        assert hw.peak["bf16"] == g.bf16_flops and hw.peak["fp8"] == (g.fp8_flops or g.bf16_flops), name
        assert hw.link == g.ici_bytes_per_s / 2 and "TPU roofline" in hw.model, name
        rows = cost_rates.rate_table(name)
        assert {"bf16", "fp8", "hbm", "launch"} <= {r[0] for r in rows} and all(r[3].strip() for r in rows), name
    assert "ici" in [r[0] for r in cost_rates.rate_table("tpu7x-2x2x1")]
    # an FP8 matmul is twice as fast as bf16 only where an FP8 rate above bf16 is published (tpu7x)
    for name, ratio in (("tpu7x", 2.0), ("v6e", 1.0)):
        hw = cost.hardware(name)
        f8 = cost.price_gemm(1, 8192, 8192, 8192, "f8e4m3fn", "f8e4m3fn", "bf16", hw, target="fusion kOutput")
        bf = cost.price_gemm(1, 8192, 8192, 8192, "bf16", "bf16", "bf16", hw, target="fusion kOutput")
        assert f8.engine == "fp8 MXU" and bf.engine == "bf16 MXU" and f8.bound == bf.bound == "compute"
        assert bf.us / f8.us == pytest.approx(ratio), name


def test_a_new_part_is_one_data_file(tmp_path: Path):
    (tmp_path / "mi300x.yaml").write_text(
        "part: MI300X\nmatch: [mi300x]\ncompute_capability: [9, 4]\nsource: AMD Instinct MI300X data sheet\n"
        "rates:\n"
        "  fp8_tensor: {value: 2614.9, unit: TFLOP/s, source: 'data sheet: FP8 5229.8 TFLOPS with sparsity'}\n"
        "  bf16_tensor: {value: 1307.4, unit: TFLOP/s, source: 'data sheet: BF16 2614.9 TFLOPS with sparsity'}\n"
        "  hbm: {value: 5.3, unit: TB/s, source: 'data sheet: 5.3 TB/s'}\n"
        "  nvlink: {value: 896, unit: GB/s, source: 'data sheet: Infinity Fabric 896 GB/s'}\n")
    [part] = cost_table.load_parts(tmp_path)
    assert part.peak == {"fp8": 2614.9e12, "bf16": 1307.4e12}
    assert part.rates["hbm"].value == 5.3e12 and "data sheet" in part.rates["hbm"].source


@pytest.mark.parametrize("body, field", [
    ("rates: {fp9_tensor: {value: 1, unit: TFLOP/s, source: x}}", "rates.fp9_tensor"),
    ("rates: {bf16_tensor: {value: 1, unit: TFLOP/s}}", "rates.bf16_tensor"),
    ("rates: {bf16_tensor: {value: 1, unit: TFLOP/s, source: x}, hbm: {value: 1, unit: TB/s, source: x}}",
     "rates.nvlink"),
])
def test_a_bad_rate_table_names_its_file_and_field(tmp_path: Path, body, field):
    (tmp_path / "bad.yaml").write_text(f"part: X\nmatch: [x]\ncompute_capability: [9, 0]\n{body}\n")
    with pytest.raises(ValueError, match=rf"^bad\.yaml: {field}"):
        cost_table.load_parts(tmp_path)


def test_block_scaled_and_collectives_name_their_engines():
    # recorded real compiles (tests/fixtures/hlo): a cuDNN NVFP4 block-scaled dot on B200, an all-reduce over 8 H100s
    fixtures = Path(__file__).parents[1] / "fixtures" / "hlo"
    b200 = cost.hardware("b200")
    text = (fixtures / "jax-0.12.0.1" / "block_sm_nvfp4_global.b200.cublas.txt").read_text()
    [dot] = [k for k in cost.estimate(text, b200).kernels if k.gemm]
    assert dot.engine == "cuDNN block-scaled fp4" and dot.us == pytest.approx(
        max(dot.flops / 9e15, dot.bytes / b200.hbm) * 1e6 + b200.launch_us)
    # on H100 (no FP4 tensor cores) the same class runs at the FP8 rate
    assert gemm_engine("__cudnn$blockScaledDot", "fp4", H100) == ("cuDNN block-scaled fp8", 1979e12)
    text = (fixtures / "llm" / "collective" / "tp8_allreduce.h100.txt").read_text()
    est = cost.estimate(text, H100)
    assert {k.engine for k in est.kernels if k.label == "all-reduce"} == {"NVLink"}
    assert {k.engine for k in est.kernels if k.gemm} == {"bf16 tensor cores"}
    assert {k.engine for k in est.kernels if not k.gemm and k.label != "all-reduce"} <= {"CUDA cores", "NVLink"}
