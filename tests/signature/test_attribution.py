"""Attribution (HLO metadata -> layer, pass, source), coverage, layer rules, and `--with` requirements.

The fixtures under tests/fixtures/hlo/attribution/ are real optimized HLO of the library case
`flax_dense_qdq_grad` (nn.Dense + Fp8DotGeneralOp, gradient of an MSE loss with respect to the
input and the kernel), recorded by `fp8-check matrix --with flax` on JAX 0.6.2 (metadata with
`source_file`/`source_line`) and 0.12.0.1 (metadata with `stack_frame_id` and the stack-frame tables).
What is asserted follows from the program: one forward matmul and its two gradients, in the one layer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fp8_check.core._files import atomic_write
from fp8_check.signature import _attribution as attribution, _coverage as coverage
from fp8_check.signature._attribution import Attribution, MatmulSizes
from fp8_check.signature._extract import Gemm, Signature, extract
from fp8_check.verdict import _classify as verdict, _golden as golden
from fp8_check.verdict.rules import layers as layer_rules

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo" / "attribution"
QDQ = {v: FIXTURES / f"flax_dense_qdq_grad.jax-{v}.h100.cublas.txt" for v in ("0.6.2", "0.12.0.1")}


# ------------------------------------------------------------------ name stacks


@pytest.mark.parametrize("op_name,layer,op,backward", [
    ("jit(call)/call_exported/jit(flat)/jvp(MLP)/Dense_0/Fp8DirectDotGeneralOp_0/dot_general",
     "MLP/Dense_0/Fp8DirectDotGeneralOp_0", "dot_general", False),
    ("jit(call)/call_exported/jit(flat)/transpose(jvp(MLP))/Dense_1/Fp8DotGeneralOp_0/transpose",
     "MLP/Dense_1/Fp8DotGeneralOp_0", "transpose", True),
    ("jit(grad)/jit(main)/jvp(Dense)/Fp8DotGeneralOp_0/dot_general", "Dense/Fp8DotGeneralOp_0", "dot_general", False),
    ("pjit(train_step)/transpose(jvp(Decoder))/attn/q_proj/dot_general[dimension_numbers=(([1], [0]), ([], []))]",
     "Decoder/attn/q_proj", "dot_general", True),
    ("jit(f)/dot_general", None, "dot_general", False),
    ("", None, None, False),
])
def test_layer_of_removes_wrappers(op_name, layer, op, backward):
    assert attribution.layer_of(op_name) == (layer, op, backward)


def test_metadata_is_parsed_with_quotes_and_escapes():
    md = attribution.parse_metadata('{op_name="jit(f)/a/b" source_file="/x/y z.py" source_line=12 stack_frame_id=3}')
    assert md == {"op_name": "jit(f)/a/b", "source_file": "/x/y z.py", "source_line": "12", "stack_frame_id": "3"}


# ------------------------------------------------------------------ real HLO, old and new metadata


@pytest.mark.parametrize("version", sorted(QDQ))
def test_a_dense_gradient_is_one_forward_and_two_backward_matmuls_of_its_layer(version):
    sig = extract(QDQ[version].read_text())
    assert sig.fp8_gemms == 3 and len(sig.gemms) == 3
    assert {g.layer for g in sig.gemms} == {"Dense/Fp8DotGeneralOp_0"}
    assert sorted(g.pass_ for g in sig.gemms) == ["backward-input", "backward-weight", "forward"]
    by = {g.pass_: g for g in sig.gemms}
    # forward E4M3 x E4M3; both gradients take the E5M2 output gradient
    assert by["forward"].operand_dtypes == ["f8e4m3fn", "f8e4m3fn"]
    assert all("f8e5m2" in by[p].operand_dtypes for p in ("backward-input", "backward-weight"))
    # x[64,128] . kernel[128,256]: every matmul has 2*64*128*256 FLOPs
    assert {g.flops for g in sig.gemms} == {2 * 64 * 128 * 256}
    assert all(g.source and ":" in g.source for g in sig.gemms)


def test_source_comes_from_the_stack_frame_table_on_new_jax():
    text = QDQ["0.12.0.1"].read_text()
    table = attribution.stack_table(text)
    assert table.files and table.frames
    sig = extract(text)
    # the innermost frame outside jax/flax/fp8-check: the case's own module (rendered into a file)
    assert all("fp8_case_flax_dense_qdq_grad" in g.source for g in sig.gemms)


def test_old_jax_records_the_source_directly():
    sig = extract(QDQ["0.6.2"].read_text())
    assert all(g.source.startswith("flax/linen/fp8_ops.py:") for g in sig.gemms)  # site-packages shortened


def test_layers_and_passes_are_the_same_on_old_and_new_jax():
    old, new = (extract(QDQ[v].read_text()) for v in ("0.6.2", "0.12.0.1"))
    assert sorted((g.layer, g.pass_) for g in old.gemms) == sorted((g.layer, g.pass_) for g in new.gemms)


def test_pairing_by_sizes():
    fwd = (Attribution("M/Dense", "dot_general", "forward"), MatmulSizes(1, 64, 256, 128))
    dx = (Attribution("M/Dense", "dot_general", "backward"), MatmulSizes(1, 64, 128, 256))   # contracts n
    dw = (Attribution("M/Dense", "transpose", "backward"), MatmulSizes(1, 128, 256, 64))   # contracts m
    other = (Attribution("M/Other", "dot_general", "backward"), MatmulSizes(1, 64, 128, 256))  # no forward there
    out = attribution.pair_passes([fwd, dx, dw, other])
    assert [a.pass_ for a in out] == ["forward", "backward-input", "backward-weight", "backward"]
    square = attribution.pair_passes([(fwd[0], MatmulSizes(1, 64, 64, 64)), (dx[0], MatmulSizes(1, 64, 64, 64))])
    assert square[1].pass_ == "backward"  # cannot be told apart


# ------------------------------------------------------------------ the signature: compared fields and annotations


def test_source_and_flops_are_annotations_never_compared():
    sig = extract(QDQ["0.12.0.1"].read_text())
    plain, full = sig.to_dict(), sig.to_dict(annotations=True)
    assert all("layer" in g and "pass" in g for g in plain["gemms"])
    assert not any("source" in g or "flops" in g for g in plain["gemms"])
    assert all("source" in g and g["flops"] > 0 for g in full["gemms"])
    again = Signature.from_dict(full)
    assert [(g.layer, g.pass_, g.source, g.flops) for g in again.gemms] == [
        (g.layer, g.pass_, g.source, g.flops) for g in sig.gemms]


def test_a_pattern_without_layers_has_no_new_fields():
    text = (Path(__file__).parents[1] / "fixtures" / "hlo" / "jax-0.12.0.1" / "relu_amax.h100.cublas.txt").read_text()
    d = extract(text).to_dict()
    assert not any("layer" in g or "pass" in g for g in d["gemms"])


# ------------------------------------------------------------------ coverage


def _g(dtypes, target, layer, pass_, flops):
    return Gemm(target=target, operand_dtypes=dtypes, output="f32", layer=layer, pass_=pass_, flops=flops)


def _mlp_sig() -> Signature:
    fp8 = "__cublas$lt$matmul$f8"
    return Signature(9, [], [
        _g(["f8e4m3fn", "f8e4m3fn"], fp8, "M/Dense_0", "forward", 100),
        _g(["f8e5m2", "f8e4m3fn"], fp8, "M/Dense_0", "backward-input", 100),
        _g(["f8e4m3fn", "f8e5m2"], fp8, "M/Dense_0", "backward-weight", 100),
        _g(["f8e4m3fn", "f8e4m3fn"], "__triton_gemm", "M/Dense_1", "forward", 100),
        _g(["bf16", "bf16"], "__cublas$lt$matmul", "M/Dense_2", "forward", 200),
    ], [])


def test_coverage_counts_engines_and_weights_flops():
    cov = coverage.coverage(_mlp_sig())
    assert (cov.matmuls, cov.low_precision) == (5, 4)
    assert cov.engines == {"cuBLASLt FP8": 3, "Triton FP8": 1, "cuBLAS bf16": 1}
    assert cov.flop_fraction == pytest.approx(400 / 600)
    assert cov.line() == ("coverage: 5 matmuls, 4 FP8/FP4 (3 cuBLASLt FP8, 1 Triton FP8), 1 wider (1 cuBLAS bf16); "
                          "66.7 % of matmul FLOPs in FP8/FP4")
    table = coverage.layer_table(_mlp_sig())
    assert table[0].startswith("layer") and len(table) == 6
    assert table[2].split()[:3] == ["M/Dense_0", "backward-input", "cuBLASLt"]


# ------------------------------------------------------------------ layer rules


def test_layer_rules_find_fallbacks_and_classify_them():
    sig = _mlp_sig()
    rules = [layer_rules.parse("*/Dense_[01]/*=fp8"), layer_rules.parse("*/Dense_2/*=wide")]
    assert layer_rules.check_layers(rules, sig) == []
    sig.gemms[1].operand_dtypes = ["bf16", "bf16"]  # Dense_0's input gradient fell back
    sig.gemms[1].target = "__cublas$lt$matmul"
    diffs = layer_rules.check_layers(rules, sig)
    assert [d.path for d in diffs] == ["layers[*/Dense_[01]/*].gemms[1]"]
    assert "M/Dense_0 (backward-input)" in str(diffs[0].found)
    v = verdict.classify_extra(verdict.Verdict("neutral", ()), diffs[0].path, diffs[0].expected, diffs[0].found)
    assert v.cls == "regression"
    # Dense_2 newly in FP8: an improvement
    sig.gemms[4].operand_dtypes = ["f8e4m3fn", "f8e4m3fn"]
    d2 = layer_rules.check_layers([rules[1]], sig)[0]
    assert verdict.classify_extra(verdict.Verdict("neutral", ()), d2.path, d2.expected, d2.found).cls == "improvement"


def test_layer_rules_by_pass_and_unmatched():
    sig = _mlp_sig()
    assert layer_rules.check_layers([layer_rules.parse("*/Dense_0*@backward=fp8")], sig) == []
    assert layer_rules.check_layers([layer_rules.parse("*/Dense_0*@backward-weight=fp8")], sig) == []
    miss = layer_rules.check_layers([layer_rules.parse("*/Dense_9/*=fp8")], sig)
    assert len(miss) == 1 and str(miss[0].found).startswith("no matmul matches")


@pytest.mark.parametrize("bad", ["*/Dense_0/*", "*/Dense_0/*=fast", "=fp8", "*@sideways=fp8"])
def test_layer_rule_syntax_errors(bad):
    with pytest.raises(layer_rules.LayerRuleError):
        layer_rules.parse(bad)


def test_golden_layers_are_loaded_checked_and_kept_by_bless(tmp_path):
    sig = extract(QDQ["0.12.0.1"].read_text())
    golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", sig.to_dict())
    path = golden.path_for(tmp_path, "c", "h100", "cublas", "deviceless")
    g = golden.load(path)
    g.layers = [{"layer": "Dense/*", "fp8": True}]
    atomic_write(path, g.to_yaml())
    golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", sig.to_dict())  # re-bless keeps them
    assert golden.load(path).layers == [{"layer": "Dense/*", "fp8": True}]
    path.write_text(path.read_text() + "layers: 3\n")
    with pytest.raises(golden.GoldenError, match="layers"):
        golden.load(path)


# ------------------------------------------------------------------ --with requirements


def test_with_requirements_name_their_own_environments(tmp_path):
    from fp8_check.versions import _envs as envs, _requirements as requirements

    plain = envs.Manager(tmp_path, python="python3")
    plain._tag = "py3.12"
    a = envs.Manager(tmp_path, python="python3", extras=["optax", "flax>=0.10"])
    b = envs.Manager(tmp_path, python="python3", extras=["flax>=0.10", "optax", "flax>=0.10"])
    a._tag = b._tag = "py3.12"
    assert plain.name("0.8.0") == "jax-0.8.0-slim-py3.12"  # the slim deviceless set (versions/_wheels.py)
    assert a.name("0.8.0") == b.name("0.8.0") != plain.name("0.8.0")
    assert a.name("0.8.0").startswith("jax-0.8.0-slim-py3.12-with-")
    with pytest.raises(ValueError, match="chosen per version"):
        requirements.check_requirement("jax==0.7.0")
    with pytest.raises(ValueError, match="not a requirement"):
        requirements.check_requirement("flax>>1")
    req = tmp_path / "req.txt"
    req.write_text("# models\nflax>=0.10  # the layers\n\noptax\n")
    assert requirements.read_requirements(req) == ["flax>=0.10", "optax"]
    req.write_text("-e .\n")
    with pytest.raises(ValueError, match="req.txt:1"):
        requirements.read_requirements(req)


def test_large_constants_are_found():
    from fp8_check.signature._constants import large_constants

    text = ("HloModule m\n\nENTRY %main () -> f32[128,64] {\n"
            "  %c = f32[128,64]{1,0} constant({...})\n  %s = f32[] constant(1)\n"
            "  ROOT %n = f32[128,64]{1,0} negate(%c)\n}\n")
    assert large_constants(text) == ["f32[128,64]"]
    assert large_constants(text, min_elements=10_000) == []
    from fp8_check.signature._constants import baked_in

    shlo = '%0 = stablehlo.constant dense<"0x0000803F0000803F"> : tensor<128x64xf32>\n%k = stablehlo.constant dense<0> : tensor<2xui32>'
    assert baked_in("", shlo) == ["1 large array(s) are constants baked into the program (f32[128,64])"]
    assert "random numbers" in baked_in("", "%1 = call @_threefry_split(%0)")[0]
    assert baked_in(text.replace("128,64", "2,2"), "") == []


def test_fp8_checks_own_frames_are_never_a_source_line():
    """Issue 44: `fusion_signature(jnp.matmul, a, b)` traced inside fp8-check's export; its frame was the gemm's
    source (`fp8_check/compile/_export.py:85`). The package's own frames are left out (found from where the
    package lives, so a moved or installed package is still recognised); the caller's line remains."""
    import inspect

    import jax.numpy as jnp

    from fp8_check import api

    a = jnp.ones((64, 128), jnp.float8_e4m3fn)
    b = jnp.ones((128, 256), jnp.float8_e4m3fn)
    line = inspect.currentframe().f_lineno + 1
    report = api.fusion_signature(jnp.matmul, a, b)
    package = Path(attribution.__file__).parents[1]
    assert report.signature.gemms
    for g in report.signature.gemms:
        assert g.source is None or not attribution.own_frame(g.source.rsplit(":", 1)[0]), g.source
        assert g.source is None or str(package) not in g.source and "fp8_check/" not in g.source, g.source
    # a JAX that records the stack (every supported one with a stack-frame table) names this very line
    if any(g.source for g in report.signature.gemms):
        assert {g.source for g in report.signature.gemms} == {f"{__file__}:{line}"}


def test_own_frames_are_the_package_but_not_its_model_code():
    package = Path(attribution.__file__).parents[1]
    assert attribution.own_frame(str(package / "compile" / "_export.py"))
    assert attribution.own_frame(str(package / "api.py"))
    assert not attribution.own_frame(str(package / "models" / "decoder.py"))  # the program under test
    assert not attribution.own_frame("/home/me/harness/api.py")  # someone else's harness/ is theirs
    assert not attribution.own_frame("/usr/lib/python3/site-packages/jax/_src/numpy/lax_numpy.py")
