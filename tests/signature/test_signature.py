"""Unit tests of the HLO parser (harness/hlo.py) and the fusion signature (harness/signature.py).

The fixtures under tests/fixtures/hlo/jax-<version>/ are real optimized HLO that
XLA printed for the cases in tests/fixtures/hlo/cases.yaml (regenerate them with
tests/fixtures/hlo/record.py). The assertions below are what must hold from
first principles (what cuBLASLt's FP8 path and the pattern imply), never values
copied from a fixture, so a new JAX version's fixtures can be dropped in as-is.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fp8_check.signature import _extract as signature, _hlo as hlo
from fp8_check.signature._types import FP8_TYPES

FIXTURES = Path(__file__).parents[1] / "fixtures" / "hlo"
VERSIONS = sorted(p.name.removeprefix("jax-") for p in FIXTURES.glob("jax-*") if p.is_dir())
FP8_LT = "__cublas$lt$matmul$f8"
CASES = ("plain", "scaled", "relu_amax", "scaled_bf16", "bias_bf16")
COMBOS = (("h100", "cublas"), ("h100", "triton"), ("a100", "cublas"))
ALL = [(v, c, t, p) for v in VERSIONS for c in CASES for t, p in COMBOS]


def fixture_text(version: str, case: str, target: str, profile: str) -> str:
    return (FIXTURES / f"jax-{version}" / f"{case}.{target}.{profile}.txt").read_text()


def sig(version: str, case: str, target: str = "h100", profile: str = "cublas") -> signature.Signature:
    return signature.extract(fixture_text(version, case, target, profile))


def _id(v):
    return "-".join(v) if isinstance(v, tuple) else str(v)


def test_three_versions_recorded():
    assert len(VERSIONS) >= 3, VERSIONS
    for v in VERSIONS:
        for case, target, profile in [(c, t, p) for c in CASES for t, p in COMBOS]:
            assert (FIXTURES / f"jax-{v}" / f"{case}.{target}.{profile}.txt").is_file()


# --------------------------------------------------------------------------- parser over fixtures


@pytest.mark.parametrize("version,case,target,profile", ALL, ids=["-".join(x) for x in ALL])
def test_parser_accounts_for_every_instruction(version, case, target, profile):
    text = fixture_text(version, case, target, profile)
    module = hlo.parse(text)
    assert module.entry.entry and module.entry.instructions
    assert module.entry.instructions[-1].root or any(i.root for i in module.entry.instructions)
    # Every `%name = ...` line inside a computation became an instruction.
    defined = re.findall(r"^\s*(?:ROOT\s+)?%([\w.\-]+)\s*=", text, re.M)
    parsed = [i.name for c in module.computations.values() for i in c.instructions]
    assert sorted(defined) == sorted(parsed)
    # Every operand and every called computation resolves.
    names = set(parsed)
    for comp in module.computations.values():
        for instr in comp.instructions:
            assert set(instr.operands) <= names, (instr.name, instr.operands)
            for callee in instr.called:
                assert callee in module.computations, (instr.name, callee)
            if instr.opcode not in ("parameter", "constant", "iota"):
                assert instr.operand_text.strip() == "" or instr.operands, instr.name


@pytest.mark.parametrize("version,case,target,profile", ALL, ids=["-".join(x) for x in ALL])
def test_signature_roundtrips_and_is_consistent(version, case, target, profile):
    s = sig(version, case, target, profile)
    assert signature.Signature.from_dict(json.loads(json.dumps(s.to_dict()))).to_dict() == s.to_dict()
    assert s.kernels == len(s.launches) >= 1
    assert sum(label.startswith("gemm ") for label in s.launches) == len(s.gemms)
    # Every pattern has exactly one matmul; it must end up in exactly one gemm kernel.
    assert len(s.gemms) == 1
    assert "dot" not in s.unfused and "scaled-dot" not in s.unfused
    # a: [m, k], b stored transposed [n, k]: both contract their dimension 1, no batch.
    g = s.gemms[0]
    assert g.dims == {"lhs_contracting": [1], "rhs_contracting": [1], "lhs_batch": [], "rhs_batch": []}


# --------------------------------------------------------------------------- h100 / cuBLAS: FP8 rewriter


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_is_one_fp8_cublaslt_gemm_with_unit_scales_dropped(version):
    text = fixture_text(version, "plain", "h100", "cublas")
    s = signature.extract(text)
    assert s.fp8_gemms == 1 and len(s.gemms) == 1
    g = s.gemms[0]
    assert g.target == FP8_LT
    assert g.operand_dtypes == ["f8e4m3fn", "f8e4m3fn"]
    assert g.output == "f32"
    assert not g.amax and g.epilogue == "DEFAULT"
    # The HLO passes scale operands, and they are the constant 1 (the case has no scales) ...
    call = next(i for i in hlo.parse(text).entry.instructions if i.custom_call_target == FP8_LT)
    module = hlo.parse(text)
    scalars = [n for n in call.operands[2:] if hlo.rank_of(module.instruction(n).type) == 0]
    assert scalars, "the FP8 custom-call should carry its (unit) scale operands"
    for n in scalars:
        const = module.instruction(n)
        assert const.opcode == "constant" and float(const.operand_text) == 1.0
    # ... which the signature drops: a unit scale is no scale.
    assert not {r for r in g.operands if r.endswith("_scale")}
    assert set(g.operands) == {"a", "b"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", ["scaled", "relu_amax", "scaled_bf16"])
def test_scaled_fp8_output_has_input_and_output_scales(version, case):
    s = sig(version, case)
    assert s.fp8_gemms == 1
    g = s.gemms[0]
    assert g.target == FP8_LT
    assert g.operands["a_scale"] and g.operands["b_scale"]
    # The result is requantized to e4m3 inside the gemm, so the output scale must be a d_scale.
    assert g.output == "f8e4m3fn"
    assert "d_scale" in g.operands
    # cuBLASLt scale factors are f32 whatever the dequant dtype of the pattern.
    assert all(g.operands[r] == "f32" for r in g.operands if r.endswith("_scale"))


@pytest.mark.parametrize("version", VERSIONS)
def test_relu_amax_fuses_relu_and_amax(version):
    g = sig(version, "relu_amax").gemms[0]
    assert g.epilogue == "RELU"
    assert g.amax is True and g.damax_output is True


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", ["plain", "scaled", "scaled_bf16", "bias_bf16"])
def test_no_amax_without_amax_in_the_pattern(version, case):
    g = sig(version, case).gemms[0]
    assert g.amax is False and not g.damax_output


@pytest.mark.parametrize("version", VERSIONS)
def test_bias_epilogue(version):
    s = sig(version, "bias_bf16")
    assert s.fp8_gemms == 1
    g = s.gemms[0]
    assert "BIAS" in g.epilogue
    assert g.operands.get("bias") == "bf16"
    assert g.output == "bf16"
    assert "a_scale" in g.operands and "b_scale" in g.operands
    assert "add" not in s.unfused  # the bias add went into the epilogue


# --------------------------------------------------------------------------- a100 and Triton


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_a100_never_has_an_fp8_gemm(version, case):
    s = sig(version, case, "a100", "cublas")
    assert s.fp8_gemms == 0
    for g in s.gemms:
        assert not g.target.endswith("$f8")
        assert not set(g.operand_dtypes) & FP8_TYPES
        assert not {r for r in g.operands if r.endswith("_scale")}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", CASES)
def test_triton_profile_has_one_triton_gemm_and_no_cublas(version, case):
    s = sig(version, case, "h100", "triton")
    assert len(s.gemms) == 1
    g = s.gemms[0]
    assert g.target.startswith("__triton")
    assert not any("cublas" in label for label in s.launches)
    # The dequantize (convert of the FP8 operands) happens inside the gemm fusion.
    assert "convert" in g.fused_ops


# --------------------------------------------------------------------------- invariance


def _fp8_fixtures():
    return [(v, c) for v in VERSIONS for c in CASES]


def _names(text: str) -> list[str]:
    """Every instruction and computation name defined in the text."""
    module = hlo.parse(text)
    names = set(module.computations)
    for comp in module.computations.values():
        names.update(i.name for i in comp.instructions)
    return sorted(names)


def rename(text: str, mapping: dict[str, str]) -> str:
    """Rename instructions/computations consistently (every `%name` token, in one pass)."""
    return re.sub(r"%([\w.\-]+)", lambda m: "%" + mapping.get(m.group(1), m.group(1)), text)


def strip_metadata(text: str) -> str:
    return re.sub(r',\s*metadata=\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\}', "", text)


_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,10}", fullmatch=True)
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("version,case", _fp8_fixtures(), ids=_id)
@pytest.mark.parametrize("target,profile", [("h100", "cublas"), ("h100", "triton")], ids=_id)
def test_rename_invariance(version, case, target, profile):
    text = fixture_text(version, case, target, profile)
    expected = signature.extract(text).to_dict()
    names = _names(text)

    @_SETTINGS
    @given(st.lists(_NAME, min_size=len(names), max_size=len(names), unique=True))
    def prop(new_names):
        mapping = dict(zip(names, new_names))
        renamed = rename(text, mapping)
        assert renamed != text or all(k == v for k, v in mapping.items())
        assert signature.extract(renamed).to_dict() == expected

    prop()


@pytest.mark.parametrize("version,case", _fp8_fixtures(), ids=_id)
@pytest.mark.parametrize("target,profile", COMBOS, ids=_id)
def test_metadata_is_ignored(version, case, target, profile):
    text = fixture_text(version, case, target, profile)
    stripped = strip_metadata(text)
    assert "metadata={" in text and "metadata={" not in stripped
    assert signature.extract(stripped) == signature.extract(text)


@pytest.mark.parametrize("version,case", _fp8_fixtures(), ids=_id)
def test_workspace_and_selected_algorithm_are_ignored(version, case):
    text = fixture_text(version, case, "h100", "cublas")
    assert re.search(r"s8\[\d+\]", text)
    edited = re.sub(r"s8\[(\d+)\]", lambda m: f"s8[{int(m.group(1)) * 2 + 128}]", text)
    if '"selected_algorithm"' in edited:
        edited = re.sub(r'"selected_algorithm":"-?\d+"', '"selected_algorithm":"42"', edited)
    else:  # older printers leave it out: add one
        edited = edited.replace('"gemm_backend_config":{', '"gemm_backend_config":{"selected_algorithm":"42",')
    assert edited != text
    assert signature.extract(edited) == signature.extract(text)


@pytest.mark.parametrize("version,case", _fp8_fixtures(), ids=_id)
@pytest.mark.parametrize("target,profile", COMBOS, ids=_id)
@given(seed=st.integers(0, 2**32 - 1))
@settings(max_examples=10, deadline=None)
def test_reordering_independent_entry_instructions(version, case, target, profile, seed):
    text = fixture_text(version, case, target, profile)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ENTRY "))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    body = lines[start + 1 : end]
    # A random topological order of the ENTRY instructions (ROOT stays last).
    instrs = {hlo._parse_instruction(line.strip()).name: line for line in body}
    deps = {n: set(hlo._parse_instruction(line.strip()).operands) & set(instrs) for n, line in instrs.items()}
    root = next(n for n, line in instrs.items() if line.lstrip().startswith("ROOT "))
    rng, order, done = random.Random(seed), [], set()
    while len(order) < len(instrs) - 1:
        ready = sorted(n for n in instrs if n not in done and n != root and deps[n] <= done)
        pick = rng.choice(ready)
        order.append(pick)
        done.add(pick)
    shuffled = lines[: start + 1] + [instrs[n] for n in order] + [instrs[root]] + lines[end:]
    assert signature.extract("\n".join(shuffled)) == signature.extract(text)


@pytest.mark.parametrize("version,case", [(v, c) for v in VERSIONS for c in ("plain", "relu_amax", "bias_bf16")], ids=_id)
def test_epilogue_edit_changes_the_signature(version, case):
    text = fixture_text(version, case, "h100", "cublas")
    before = signature.extract(text)
    old = before.gemms[0].epilogue
    new = "DEFAULT" if old != "DEFAULT" else "RELU"
    edited = text.replace(f'"epilogue":"{old}"', f'"epilogue":"{new}"')
    assert edited != text
    after = signature.extract(edited)
    assert after != before and after.gemms[0].epilogue == new


@pytest.mark.parametrize("version,case", _fp8_fixtures(), ids=_id)
def test_operand_dtype_edit_changes_the_signature_cublas(version, case):
    text = fixture_text(version, case, "h100", "cublas")
    before = signature.extract(text)
    # b becomes e5m2 everywhere (ENTRY parameter and any fusion parameter alike).
    edited = text.replace("f8e4m3fn[32,64]", "f8e5m2[32,64]")
    assert edited != text
    after = signature.extract(edited)
    assert after != before
    assert after.gemms[0].operand_dtypes == ["f8e4m3fn", "f8e5m2"]


@pytest.mark.parametrize("version,case", _fp8_fixtures(), ids=_id)
def test_operand_dtype_edit_changes_the_signature_triton(version, case):
    """A Triton gemm's operand dtypes are what its dot consumes: retype the dot's lhs."""
    text = fixture_text(version, case, "h100", "triton")
    before = signature.extract(text)
    module = hlo.parse(text)
    dot = next(i for c in module.computations.values() for i in c.instructions if i.opcode == "dot")
    lhs = module.instruction(dot.operands[0])
    old_dtype = hlo.dtype_of(lhs.type)
    new_dtype = "f16" if old_dtype != "f16" else "f32"
    pattern = rf"(%{re.escape(lhs.name)} = ){re.escape(old_dtype)}\["
    edited = re.sub(pattern, rf"\g<1>{new_dtype}[", text)
    assert edited != text
    after = signature.extract(edited)
    assert after != before
    assert after.gemms[0].operand_dtypes[0] == new_dtype


@pytest.mark.parametrize("version", VERSIONS)
def test_scale_edit_changes_roles(version):
    """Replacing the unit-scale constant by 2 makes it a real scale again."""
    text = fixture_text(version, "plain", "h100", "cublas")
    module = hlo.parse(text)
    call = next(i for i in module.entry.instructions if i.custom_call_target == FP8_LT)
    const = module.instruction(call.operands[2])
    edited = re.sub(rf"(%{re.escape(const.name)} = f32\[\] constant\()1(\))", r"\g<1>2\2", text)
    assert edited != text
    g = signature.extract(edited).gemms[0]
    assert g.operands["a_scale"] == "f32" and g.operands["b_scale"] == "f32"


# --------------------------------------------------------------------------- hlo.py corner cases


OLD_FORMAT = r"""HloModule old, entry_computation_layout={(f8e4m3fn[16,32]{1,0}, f8e4m3fn[16,32]{1,0})->f32[16,16]{1,0}}

%fused_computation (param_0: f32[16,16]) -> f32[16,16] {
  %param_0 = f32[16,16]{1,0} parameter(0)
  ROOT %negate.1 = f32[16,16]{1,0} negate(f32[16,16]{1,0} %param_0)
}

ENTRY %main.10 (Arg_0.1: f8e4m3fn[16,32], Arg_1.2: f8e4m3fn[16,32]) -> f32[16,16] {
  %Arg_0.1 = f8e4m3fn[16,32]{1,0} parameter(0)
  %Arg_1.2 = f8e4m3fn[16,32]{1,0} parameter(1)
  %constant_1 = f32[] constant(1)
  %c.1 = f32[] constant(1)
  %cublas-gemm.1 = (f32[16,16]{1,0}, s8[4194304]{0}) custom-call(f8e4m3fn[16,32]{1,0} %Arg_0.1, f8e4m3fn[16,32]{1,0} %Arg_1.2, f32[] %constant_1, f32[] %c.1), custom_call_target="__cublas$lt$matmul$f8", metadata={op_name="jit(f)/dot_general" source_file="x.py" source_line=3}, backend_config="{\"alpha_real\":1,\"alpha_imag\":0,\"beta\":0,\"dot_dimension_numbers\":{\"lhs_contracting_dimensions\":[\"1\"],\"rhs_contracting_dimensions\":[\"1\"],\"lhs_batch_dimensions\":[],\"rhs_batch_dimensions\":[]},\"precision_config\":{\"operand_precision\":[\"DEFAULT\",\"DEFAULT\"]},\"epilogue\":\"RELU\",\"damax_output\":false,\"selected_algorithm\":\"3\"}"
  %get-tuple-element = f32[16,16]{1,0} get-tuple-element((f32[16,16]{1,0}, s8[4194304]{0}) %cublas-gemm.1), index=0
  ROOT %fusion = f32[16,16]{1,0} fusion(%cublas-gemm.1#0), kind=kLoop, calls=%fused_computation
}
"""


def test_backend_config_as_quoted_string():
    module = hlo.parse(OLD_FORMAT)
    call = module.instruction("cublas-gemm.1")
    cfg = call.backend_config
    assert cfg["epilogue"] == "RELU"
    assert cfg["dot_dimension_numbers"]["lhs_contracting_dimensions"] == ["1"]
    assert call.custom_call_target == "__cublas$lt$matmul$f8"
    assert call.attr("metadata").startswith("{") and call.attr("metadata").endswith("}")


def test_old_format_gemm_config_is_read_unwrapped():
    """Old printers put GemmBackendConfig at the top of a quoted backend_config (no gemm_backend_config)."""
    g = signature.extract(OLD_FORMAT).gemms[0]
    assert g.epilogue == "RELU"
    assert g.dims["lhs_contracting"] == [1] and g.dims["rhs_contracting"] == [1]
    assert g.operand_dtypes == ["f8e4m3fn", "f8e4m3fn"] and set(g.operands) == {"a", "b"}


def test_typed_operands_and_tuple_shorthand():
    module = hlo.parse(OLD_FORMAT)
    call = module.instruction("cublas-gemm.1")
    assert call.operands == ["Arg_0.1", "Arg_1.2", "constant_1", "c.1"]
    assert module.instruction("get-tuple-element").operands == ["cublas-gemm.1"]  # a typed tuple operand
    fusion = module.instruction("fusion")
    assert fusion.operands == ["cublas-gemm.1"]  # `%x#0` shorthand
    assert fusion.called == ["fused_computation"] and fusion.fusion_kind == "kLoop"
    assert module.instruction("negate.1").operands == ["param_0"]
    assert call.result_types == ["f32[16,16]{1,0}", "s8[4194304]{0}"]


def test_untyped_bare_operands_and_attr_parsing():
    line = 'ROOT x.1 = f32[2]{0} add(a, b.2#1), metadata={op_name="a, b={c}" source_line=1}, backend_config={"k":"v, w"}'
    instr = hlo._parse_instruction(line)
    assert instr.root and instr.name == "x.1" and instr.opcode == "add"
    assert instr.operands == ["a", "b.2"]
    assert instr.attr("metadata") == '{op_name="a, b={c}" source_line=1}'
    assert instr.backend_config == {"k": "v, w"}
    assert instr.attr("missing") is None


def test_dtype_and_rank():
    assert hlo.dtype_of("f8e4m3fn[64,32]{1,0}") == "f8e4m3fn"
    assert hlo.rank_of("f8e4m3fn[64,32]{1,0}") == 2
    assert hlo.dtype_of("f32[]") == "f32" and hlo.rank_of("f32[]") == 0
    assert hlo.rank_of("bf16[32]{0}") == 1


def test_parse_requires_entry():
    with pytest.raises(ValueError):
        hlo.parse("HloModule m\n\n%c (p: f32[]) -> f32[] {\n  ROOT %p = f32[] parameter(0)\n}\n")


def test_new_format_preamble_is_skipped():
    """JAX 0.12 dumps start with FileNames/FunctionNames/FileLocations/StackFrames tables."""
    version = VERSIONS[-1]
    text = fixture_text(version, "plain", "h100", "cublas")
    module = hlo.parse(text)
    assert all(not name.isdigit() for name in module.computations)
    assert module.entry.name in module.computations


def test_old_format_triton_fusion_kind_is_read_unwrapped():
    text = r"""HloModule t

%triton_gemm_dot (p0: f8e4m3fn[16,32], p1: f8e4m3fn[16,32]) -> f32[16,16] {
  %p0 = f8e4m3fn[16,32]{1,0} parameter(0)
  %c0 = f32[16,32]{1,0} convert(f8e4m3fn[16,32]{1,0} %p0)
  %p1 = f8e4m3fn[16,32]{1,0} parameter(1)
  %c1 = f32[16,32]{1,0} convert(f8e4m3fn[16,32]{1,0} %p1)
  ROOT %dot = f32[16,16]{1,0} dot(f32[16,32]{1,0} %c0, f32[16,32]{1,0} %c1), lhs_contracting_dims={1}, rhs_contracting_dims={1}
}

ENTRY %e (a: f8e4m3fn[16,32], b: f8e4m3fn[16,32]) -> f32[16,16] {
  %a = f8e4m3fn[16,32]{1,0} parameter(0)
  %b = f8e4m3fn[16,32]{1,0} parameter(1)
  ROOT %f = f32[16,16]{1,0} fusion(f8e4m3fn[16,32]{1,0} %a, f8e4m3fn[16,32]{1,0} %b), kind=kCustom, calls=%triton_gemm_dot, backend_config="{\"kind\":\"__triton_gemm\",\"triton_gemm_config\":{\"block_m\":\"16\"}}"
}
"""
    s = signature.extract(text)
    assert s.launches == ["gemm __triton_gemm"]
    g = s.gemms[0]
    assert g.target == "__triton_gemm" and g.operand_dtypes == ["f32", "f32"] and g.fused_ops == ["convert"]
