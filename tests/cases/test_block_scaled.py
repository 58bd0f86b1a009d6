"""Block-scaled cases: schema, rendering, signature and numerics (executed on JAX's CPU backend)."""

from __future__ import annotations

import dataclasses
import types

import jax
import numpy as np
import pytest

from fp8_check.cases import Shape, _load as case_mod
from fp8_check.cases._load import CaseError
from fp8_check.compile import _render as render
from fp8_check.compile._service import Compiler
from fp8_check.gpu import _numerics as numerics
from fp8_check.run import _runner as runner
from fp8_check.signature import _extract as signature
from fp8_check.targets import PROFILES, load_target
from fp8_check.verdict._outcome import UNRESOLVED, UNSUPPORTED

from ..conftest import REPO, write_cases

BLOCK = [c for c in case_mod.load([REPO / "cases"]) if c.kind == "block_scaled"]
BY_ID = {c.id: c for c in BLOCK}


def test_library_has_at_least_16_block_cases_covering_the_apis_and_formats():
    assert len(BLOCK) >= 16
    assert {c.spec.block.api for c in BLOCK} == {"scaled_matmul", "scaled_dot_general", "lax_scaled_dot", "hand_written"}
    assert {(c.spec.a_dtype, c.spec.b_dtype) for c in BLOCK if c.spec.block.api != "scaled_dot_general"} >= {
        ("float8_e4m3fn", "float8_e4m3fn"), ("float8_e5m2", "float8_e4m3fn"), ("float4_e2m1fn", "float4_e2m1fn")}
    assert any(c.spec.block.global_scale and c.spec.block.api == "scaled_dot_general" for c in BLOCK)
    assert any(c.spec.out_dtype == "bfloat16" for c in BLOCK) and any(c.spec.shape.batch for c in BLOCK)
    assert any(not c.spec.transpose_b for c in BLOCK)
    assert any(c.spec.shape.k % c.spec.block.size for c in BLOCK)  # a ragged last block
    assert any(c.spec.shape.m % 128 or c.spec.shape.n % 128 for c in BLOCK)
    for c in BLOCK:
        if "h100" in (c.targets or ("h100",)) and c.spec.block.api in ("scaled_matmul", "scaled_dot_general"):
            assert "h100 decomposes" in c.description, c.id


def _load(tmp_path, body: str):
    return case_mod.load_file(write_cases(tmp_path / "cases" / "b.yaml", "cases:\n" + body))


@pytest.mark.parametrize("body,fld", [
    ("  - {id: x, kind: block_scaled, api: scaled_mm}\n", "api"),
    ("  - {id: x, kind: block_scaled, api: scaled_matmul, shape: {m: 64, n: 64, k: 100}}\n", "shape.k"),
    ("  - {id: x, kind: block_scaled, api: scaled_matmul, input_dtype: bfloat16}\n", "input_dtype"),
    ("  - {id: x, kind: block_scaled, api: scaled_dot_general, a_dtype: float8_e5m2}\n", "a_dtype"),
    ("  - {id: x, kind: block_scaled, api: scaled_dot_general, format: mxfp8, global_scale: true}\n", "global_scale"),
    ("  - {id: x, kind: block_scaled, api: scaled_matmul, scale_dtype: float32}\n", "scale_dtype"),
    ("  - {id: x, kind: block_scaled, api: hand_written, format: nvfp4, shape: {m: 8, n: 8, k: 33}}\n", "shape.k"),
    ("  - {id: x, kind: block_scaled, api: scaled_matmul, dequant: bfloat16}\n", "dequant"),
    ("  - {id: x, kind: block_scaled, epilogue: relu}\n", "epilogue"),
])
def test_bad_block_fields_are_one_line_errors(tmp_path, body, fld):
    with pytest.raises(CaseError) as e:
        _load(tmp_path, body)
    assert e.value.field == fld and "\n" not in str(e.value) and "b.yaml" in str(e.value)


def test_format_sets_block_size_scale_and_data_dtypes(tmp_path):
    mx, nv = _load(tmp_path, "  - {id: m, kind: block_scaled, format: mxfp8}\n  - {id: n, kind: block_scaled, format: nvfp4}\n")
    assert (mx.spec.block.size, mx.spec.scale_dtype, mx.spec.a_dtype) == (32, "float8_e8m0fnu", "float8_e4m3fn")
    assert (nv.spec.block.size, nv.spec.scale_dtype, nv.spec.a_dtype) == (16, "float8_e4m3fn", "float4_e2m1fn")


def test_new_dtypes_are_accepted_where_dtypes_appear(tmp_path):
    p = write_cases(tmp_path / "cases" / "d.yaml", """cases:
  - {id: fp4_pattern, a_dtype: float4_e2m1fn, b_dtype: float4_e2m1fn, input_scales: both, scale_dtype: float8_e8m0fnu}
  - id: py
    kind: python
    callable: fp8_check.models.flax_fp8:dense
    args: [{name: s, shape: [4], dtype: float8_e8m0fnu}, {name: x, shape: [4, 4], dtype: float4_e2m1fn}]
""")
    pattern, py = case_mod.load_file(p)
    assert pattern.spec.a_dtype == "float4_e2m1fn" and pattern.spec.scale_dtype == "float8_e8m0fnu"
    assert [d for _, _, d in py.spec.args] == ["float8_e8m0fnu", "float4_e2m1fn"]


def _fn(source: str):
    module = types.ModuleType("rendered_block_case")
    exec(compile(source, "<rendered>", "exec"), module.__dict__)
    return module


@pytest.mark.parametrize("c", BLOCK, ids=[c.id for c in BLOCK])
def test_rendered_args_match_the_case(c):
    module = _fn(render.render(c).source)
    assert [tuple(a) for a in module.ARGS] == [(n, s, d) for n, s, d in render.arg_specs(c)]


# ------------------------------------------------------------ numerics on CPU

NUMERIC = [c for c in BLOCK if numerics.skip_reason(c) is None]


def run_cpu(c, source=None):
    fn = _fn(source or render.render(c).source).FN
    inputs = numerics.make_inputs(c)
    outs = jax.jit(fn)(*inputs.values())
    return inputs, [np.asarray(x) for x in jax.tree_util.tree_leaves(outs)]


@pytest.mark.parametrize("c", NUMERIC, ids=[c.id for c in NUMERIC])
def test_block_cases_match_the_float64_reference_on_cpu(c):
    inputs, outs = run_cpu(c)
    result = numerics.compare(c, inputs, outs)
    assert result.status == "pass", result.summary()


def test_inputs_use_per_block_scales_of_the_right_formats():
    c = BY_ID["bs_sm_mxfp8_e4m3"]
    ins = numerics.make_inputs(c)
    s = ins["a_scales"].astype(np.float64)
    assert np.all(np.log2(s) == np.round(np.log2(s))) and len(np.unique(s)) > 3  # E8M0: powers of two, varied
    nv = numerics.make_inputs(BY_ID["bs_sm_nvfp4_global"])
    assert set(np.unique(nv["a"].astype(np.float64))) <= {0, .5, 1, 1.5, 2, 3, 4, 6, -.5, -1, -1.5, -2, -3, -4, -6}
    assert len(np.unique(nv["a_scales"].astype(np.float64))) > 8  # E4M3 scales, not only powers of two
    assert float(nv["a_global"]) * float(nv["b_global"]) != 1.0


SOURCE_BUGS = [
    ("bs_hand_mxfp8", "jnp.repeat(a_scales.astype(jnp.float32), BLOCK, axis=-1)[..., :256]",
     "jnp.tile(a_scales.astype(jnp.float32), (1, BLOCK))[..., :256]", "scale applied to the wrong block"),
    ("bs_hand_nvfp4_global", "    c = c * (a_global * b_global).astype(c.dtype)\n", "", "global scale dropped"),
    ("bs_sm_nvfp4_global", "    c = c * (a_global * b_global).astype(c.dtype)\n", "    c = c * a_global.astype(c.dtype)\n",
     "one global scale dropped"),
    ("bs_sm_mxfp8_e4m3", "a, b, a_scales, b_scales = a[None], b[None], a_scales[None], b_scales[None]",
     "a, b, a_scales, b_scales = a[None], b[None], b_scales[None], a_scales[None]", "scales swapped between operands"),
]


@pytest.mark.parametrize("cid,old,new,what", SOURCE_BUGS, ids=[b[3] for b in SOURCE_BUGS])
def test_injected_bug_in_rendered_source_fails(cid, old, new, what):
    c = BY_ID[cid]
    source = render.render(c).source
    assert source.count(old) == 1, f"the template changed; update this test: {old!r}"
    if cid == "bs_sm_mxfp8_e4m3":  # swapping needs equal scale shapes: a square variant
        c = dataclasses.replace(c, spec=dataclasses.replace(c.spec, shape=Shape(128, 128, 256)))
        source = render.render(c).source
    inputs, outs = run_cpu(c, source.replace(old, new))
    result = numerics.compare(c, inputs, outs)
    assert result.status == "fail", f"{what} went unnoticed: {result.summary()}"


def test_injected_bug_in_reference_fails(monkeypatch):
    from fp8_check.gpu import _block_numerics as block_numerics

    c = BY_ID["bs_sm_nvfp4_global"]
    inputs, outs = run_cpu(c)
    assert numerics.compare(c, inputs, outs).status == "pass"
    shifted = dict(inputs, a_scales=np.roll(inputs["a_scales"], 1, axis=-1))  # reference reads the neighbour's scale
    assert numerics.compare(c, shifted, outs).status == "fail"
    no_global = {k: v for k, v in inputs.items() if k not in ("a_global", "b_global")}
    assert numerics.compare(c, no_global, outs).status == "fail"
    wrong_block = dataclasses.replace(c, spec=dataclasses.replace(c.spec, block=dataclasses.replace(c.spec.block, size=32)))  # NVFP4 blocks are 16: reference with the MX block size
    assert block_numerics.reference(wrong_block, dict(inputs, a_scales=inputs["a_scales"][..., ::2],
                                                      b_scales=inputs["b_scales"][..., ::2])).out.shape == outs[0].shape
    assert numerics.compare(wrong_block, dict(inputs, a_scales=inputs["a_scales"][..., ::2],
                                              b_scales=inputs["b_scales"][..., ::2]), outs).status == "fail"


def test_scaled_dot_general_numerics_are_skipped_with_a_reason():
    assert "quantizes" in numerics.skip_reason(BY_ID["bs_sdg_mxfp8"])


# ------------------------------------------------------------ signature (recorded HLO) and real compiles

FIX = REPO / "tests" / "fixtures" / "hlo" / "jax-0.12.0.1"


def test_signature_of_cudnn_block_scaled_dot_inside_a_call():
    sig = signature.extract((FIX / "block_sm_nvfp4_global.b200.cublas.txt").read_text())
    g = [g for g in sig.gemms if g.target == "__cudnn$blockScaledDot"]
    assert len(g) == 1 and g[0].operands == {"a": "f4e2m1fn", "b": "f4e2m1fn", "a_scale": "f8e4m3fn", "b_scale": "f8e4m3fn"}
    assert g[0].fp8  # low-precision operands
    b = sig.block_scaled
    assert b.form == "cudnn" and b.scale_dtypes == ["f8e4m3fn", "f8e4m3fn"] and b.scale_kernels == 2
    assert b.global_scale == ["fusion kLoop [multiply]"]  # the global scale is a separate multiply kernel


def test_signature_of_scaled_dot_in_a_triton_fusion_and_of_the_decomposed_form():
    tri = signature.extract((FIX / "block_lax_mxfp8.h100.triton.txt").read_text())
    assert tri.kernels == 1 and tri.block_scaled.form == "triton"
    assert tri.gemms[0].operands == {"a": "f8e4m3fn", "b": "f8e4m3fn", "a_scale": "f8e8m0fnu", "b_scale": "f8e8m0fnu"}
    dec = signature.extract((FIX / "block_sm_mxfp8.h100.cublas.txt").read_text())
    assert dec.block_scaled.form == "decomposed" and dec.block_scaled.data_dtypes == ["f32", "f32"]
    assert "f8e8m0fnu" in dec.block_scaled.inputs and not any(g.target.startswith("__cudnn") for g in dec.gemms)
    assert "block_scaled" not in signature.extract((FIX / "plain.h100.cublas.txt").read_text()).to_dict()


def test_signature_round_trips_through_a_dict():
    sig = signature.extract((FIX / "block_sm_nvfp4_global.b200.cublas.txt").read_text())
    assert signature.Signature.from_dict(sig.to_dict()).to_dict() == sig.to_dict()


@pytest.mark.slow
def test_scaled_matmul_reaches_cudnn_on_b200_and_never_on_h100():
    with Compiler("deviceless") as compiler:
        for cid in ("bs_sm_mxfp8_e4m3", "bs_sm_nvfp4"):
            c = BY_ID[cid]
            b200 = compiler.compile(render.render(c), load_target("b200"), PROFILES["cublas"])
            h100 = compiler.compile(render.render(c), load_target("h100"), PROFILES["cublas"])
            assert "__cudnn$blockScaledDot" in [g.target for g in signature.extract(b200.hlo).gemms], cid
            assert signature.extract(h100.hlo).block_scaled.form == "decomposed", cid


@pytest.mark.slow
def test_unknown_flag_is_unsupported_for_that_case_not_an_abort(tmp_path):
    c = dataclasses.replace(BY_ID["bs_lax_mxfp8"], id="flag")
    with Compiler("deviceless") as compiler:
        comp = compiler.compile(render.render(c), load_target("h100"), PROFILES["triton"],
                                optional_options={"xla_gpu_no_such_flag_fp8_check": True})
        out = runner.judge(c, comp, compiler.environment()["jax"], tmp_path)
        assert out.code == UNSUPPORTED and "xla_gpu_no_such_flag_fp8_check" in out.reason
        # The worker survived: the next compile with the real flag works.
        comp = compiler.compile(render.render(c), load_target("h100"), PROFILES["triton"],
                                optional_options=runner.case_options(BY_ID["bs_lax_mxfp8_triton_flag"]))
        assert comp.ok and signature.extract(comp.hlo).block_scaled.form == "triton"


@pytest.mark.slow
def test_lax_scaled_dot_without_triton_is_unresolved_for_that_case_only(tmp_path):
    c = dataclasses.replace(BY_ID["bs_lax_mxfp8"], id="lax_cublas")
    with Compiler("deviceless") as compiler:
        comp = compiler.compile(render.render(c), load_target("b200"), PROFILES["cublas"])
        out = runner.judge(c, comp, compiler.environment()["jax"], tmp_path)
        assert out.code == UNRESOLVED and "scaled-dot" in out.reason
        ok = compiler.compile(render.render(BY_ID["bs_sm_mxfp8_e4m3"]), load_target("b200"), PROFILES["cublas"])
        assert ok.ok


# Hand-written HLO in the optimized-HLO format, for the forms the locked JAX does not emit deviceless.
CUDNN_FUSION_HLO = """HloModule m, entry_computation_layout={(f8e4m3fn[128,256]{1,0}, f8e4m3fn[256,256]{1,0}, f8e8m0fnu[128,8]{1,0}, f8e8m0fnu[256,8]{1,0})->bf16[128,256]{1,0}}

%fused_sd (p0: f8e4m3fn[128,256], p1: f8e4m3fn[256,256], p2: f8e8m0fnu[128,8], p3: f8e8m0fnu[256,8]) -> bf16[128,256] {
  %p0 = f8e4m3fn[128,256]{1,0} parameter(0)
  %p1 = f8e4m3fn[256,256]{1,0} parameter(1)
  %p2 = f8e8m0fnu[128,8]{1,0} parameter(2)
  %p3 = f8e8m0fnu[256,8]{1,0} parameter(3)
  ROOT %sd = bf16[128,256]{1,0} scaled-dot(%p0, %p1, %p2, %p3), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}

ENTRY %main (a: f8e4m3fn[128,256], b: f8e4m3fn[256,256], sa: f8e8m0fnu[128,8], sb: f8e8m0fnu[256,8]) -> bf16[128,256] {
  %a = f8e4m3fn[128,256]{1,0} parameter(0)
  %b = f8e4m3fn[256,256]{1,0} parameter(1)
  %sa = f8e8m0fnu[128,8]{1,0} parameter(2)
  %sb = f8e8m0fnu[256,8]{1,0} parameter(3)
  ROOT %f = bf16[128,256]{1,0} fusion(%a, %b, %sa, %sb), kind=kCustom, calls=%fused_sd, backend_config={"fusion_backend_config":{"kind":"__cudnn$fusion"}}
}
"""

UNREWRITTEN_HLO = """HloModule m

ENTRY %main (a: f4e2m1fn[1,64,128], b: f4e2m1fn[1,64,128], sa: f8e4m3fn[1,64,8], sb: f8e4m3fn[1,64,8]) -> f32[1,64,64] {
  %a = f4e2m1fn[1,64,128]{2,1,0} parameter(0)
  %b = f4e2m1fn[1,64,128]{2,1,0} parameter(1)
  %sa = f8e4m3fn[1,64,8]{2,1,0} parameter(2)
  %sb = f8e4m3fn[1,64,8]{2,1,0} parameter(3)
  ROOT %cc = f32[1,64,64]{2,1,0} custom-call(%a, %b, %sa, %sb), custom_call_target="__op$block_scaled_dot"
}
"""


def test_signature_of_a_cudnn_fusion_with_a_scaled_dot_and_of_an_unrewritten_block_scaled_dot():
    fused = signature.extract(CUDNN_FUSION_HLO)
    assert fused.kernels == 1 and fused.block_scaled.form == "cudnn-fusion"
    assert fused.block_scaled.scale_dtypes == ["f8e8m0fnu", "f8e8m0fnu"]
    assert fused.gemms[0].target == "__cudnn$fusion" and fused.gemms[0].operands["b_scale"] == "f8e8m0fnu"
    assert fused.gemms[0].output == "bf16"
    raw = signature.extract(UNREWRITTEN_HLO)
    assert raw.block_scaled.form == "unrewritten" and raw.block_scaled.data_dtypes == ["f4e2m1fn", "f4e2m1fn"]
    assert raw.gemms[0].operands == {"a": "f4e2m1fn", "b": "f4e2m1fn", "a_scale": "f8e4m3fn", "b_scale": "f8e4m3fn"}


def test_pattern_case_with_fp4_data_and_e8m0_scales_matches_the_reference_on_cpu():
    c = case_mod.Case(id="fp4_pattern", file="<test>", line=0, spec=case_mod.PatternSpec(
        a_dtype="float4_e2m1fn", b_dtype="float4_e2m1fn", input_scales="both", scale_dtype="float8_e8m0fnu",
        shape=Shape(32, 16, 64)))
    fn = _fn(render.render(c).source).FN
    inputs = numerics.make_inputs(c)
    assert inputs["a"].dtype.name == "float4_e2m1fn" and inputs["a_scale"].dtype.name == "float8_e8m0fnu"
    outs = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(fn)(*inputs.values()))]
    assert numerics.compare(c, inputs, outs).status == "pass"
    source = render.render(c).source.replace(" * b_scale.astype(jnp.float32)", "")
    outs = [np.asarray(x) for x in jax.tree_util.tree_leaves(jax.jit(_fn(source).FN)(*inputs.values()))]
    assert numerics.compare(c, inputs, outs).status == "fail"


@pytest.mark.parametrize("kind_fields", ["kind: block_scaled", "kind: pattern"])
def test_a_description_cannot_become_code(tmp_path, kind_fields):
    (c,) = _load(tmp_path, f"  - id: evil\n    {kind_fields}\n"
                           "    description: 'x \"\"\" + str(__import__(\"sys\").exit(7)) + \"\"\" y'\n")
    module = _fn(render.render(c).source)  # executing the rendered module must not run the description
    assert "__import__" in module.__doc__ and module.FN.__name__
