"""Multi-device targets, sharded cases and collectives in the signature (no compile: see test_sharded_compile.py)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from fp8_check.cases import _load as cases
from fp8_check.cases._load import CaseError
from fp8_check.compile._render import render
from fp8_check.signature import _attribution as attribution, _collectives as collectives, _hlo as hlo
from fp8_check.signature._extract import Signature, extract
from fp8_check.targets import load_target
from fp8_check.verdict import _classify as verdict
from fp8_check.worker import _aot as aot

from ..conftest import REPO, write_cases

# ---------------------------------------------------------------- targets


@pytest.mark.parametrize("name, topology, devices", [("h100x8", "1x1x8", 8), ("b200x4", "1x1x4", 4),
                                                      ("h100x2x4", "1x2x4", 8), ("a100x2", "1x1x2", 2)])
def test_multi_device_targets(name, topology, devices):
    t = load_target(name)
    base = load_target(name[:4])
    assert (t.name, t.topology, t.devices) == (name, topology, devices)
    # the GPU spec is the single-GPU spec's; the topology is one comment line the worker reads
    assert t.config_text.endswith(base.config_text) and aot.topology_of(t.config_text) == topology
    assert t.versions == base.versions and t.compute_capability == base.compute_capability
    assert base.devices == 1 and aot.topology_of(base.config_text) == "1x1x1"


@pytest.mark.parametrize("name", ["h100x1", "h100x0", "v100x8", "h100x8x", "h100x100"])
def test_unknown_multi_device_targets(name):
    with pytest.raises(KeyError, match="GPUxN or GPUxHOSTSxN"):
        load_target(name)


# ---------------------------------------------------------------- cases

SHARDED = """\
cases:
  - id: s1
    kind: python
    callable: fp8_check.models.sharded:tp_row
    targets: [h100x8]
    mesh: {tp: 8}
    args:
      - {name: x, shape: [64, 256], dtype: bfloat16, sharding: [null, tp]}
      - {name: w, shape: [256, 128], dtype: bfloat16, sharding: [tp]}
      - {name: x_scale, shape: [], dtype: float32}
      - {name: w_scale, shape: [], dtype: float32}
    out_shardings: [[]]
"""


def _load(tmp_path: Path, text: str):
    return cases.load([write_cases(tmp_path / "c.yaml", text)])


def test_sharded_case_loads_and_renders(tmp_path):
    (case,) = _load(tmp_path, SHARDED)
    assert case.spec.mesh == (("tp", 8),) and case.spec.shardings == ((None, "tp"), ("tp",), (), ())
    assert case.spec.out_shardings == ((),)
    source = render(case).source
    namespace: dict = {}
    exec(compile(source, "case.py", "exec"), namespace)  # the rendered module, as the worker runs it
    assert namespace["MESH"] == [["tp", 8]] and namespace["OUT_SPECS"] == [[]]
    assert [a[3] for a in namespace["ARGS"]] == [[None, "tp"], ["tp"], [], []]


@pytest.mark.parametrize("old, new, field, needle", [
    ("mesh: {tp: 8}", "mesh: {tp: 0}", "mesh.tp", "positive axis size"),
    ("mesh: {tp: 8}", "mesh: [tp]", "mesh", "mapping of axis names"),
    ("mesh: {tp: 8}", "mesh: {tp: 4}", "targets", "'h100x8' has 8 GPU(s); the mesh needs 4"),
    ("    targets: [h100x8]\n", "", "targets", "a sharded case lists its targets"),
    ("sharding: [null, tp]}", "sharding: [null, dp]}", "args[0].sharding", "unknown mesh axis 'dp'"),
    ("sharding: [null, tp]}", "sharding: [tp, tp]}", "args[0].sharding", "used twice"),
    ("sharding: [null, tp]}", "sharding: [null, null, tp]}", "args[0].sharding", "3 entries for an argument of rank 2"),
    ("shape: [64, 256], dtype: bfloat16, sharding: [null, tp]}", "shape: [64, 250], dtype: bfloat16, sharding: [null, tp]}",
     "args[0].sharding", "size 250) does not split into 8"),
    ("sharding: [null, tp]}", "sharding: tp}", "args[0].sharding", "one entry per dimension"),
    ("sharding: [null, tp]}", "sharding: [null, []]}", "args[0].sharding", "entry 1"),
    ("out_shardings: [[]]", "out_shardings: [[fsdp]]", "out_shardings[0]", "unknown mesh axis 'fsdp'"),
    ("out_shardings: [[]]", "out_shardings: []", "out_shardings", "non-empty list"),
    ("    mesh: {tp: 8}\n", "    xla_options: {gpu_flag: 1}\n    mesh: {tp: 8}\n", "xla_options", "not an XLA flag name"),
    ("    mesh: {tp: 8}\n", "    xla_options: {xla_x: [1]}\n    mesh: {tp: 8}\n", "xla_options.xla_x", "true/false"),
    ("    targets: [h100x8]\n", "    targets: [h100x99]\n", "targets", "allowed:"),
])
def test_sharded_case_errors_are_one_line(tmp_path, old, new, field, needle):
    assert old in SHARDED
    with pytest.raises(CaseError) as info:
        _load(tmp_path, SHARDED.replace(old, new))
    err = info.value
    assert "\n" not in str(err) and str(tmp_path / "c.yaml") in str(err) and "case 's1'" in str(err)
    assert err.field == field and needle in str(err), str(err)


def test_sharding_without_a_mesh_is_refused(tmp_path):
    text = SHARDED.replace("    mesh: {tp: 8}\n", "").replace("    out_shardings: [[]]\n", "")
    with pytest.raises(CaseError, match=r"field 'args\[0\].sharding': set, but the case has no mesh"):
        _load(tmp_path, text)


def test_bad_sharded_case_through_the_cli(tmp_path, run_cli):
    write_cases(tmp_path / "cases" / "c.yaml", SHARDED.replace("sharding: [tp]}", "sharding: [ep]}"))
    code, out, err = run_cli("list", tmp_path / "cases")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "case 's1'" in err and "field 'args[1].sharding'" in err


def test_the_shipped_sharded_cases_load():
    loaded = cases.load([REPO / "cases" / "sharded.yaml"])
    assert len(loaded) >= 11
    for case in loaded:
        count = 1
        for _, size in case.spec.mesh:
            count *= size
        assert case.targets and all(load_target(t).devices == count for t in case.targets), case.id


# ---------------------------------------------------------------- collectives from HLO text

# The three ways XLA prints an asynchronous all-gather across the supported versions (shapes as on
# 8 devices: a 128 x 1024 shard gathered into 1024 x 1024), and the replica-group forms.
ASYNC_WRAPPED = """\
HloModule m

%async_computation (param_0: f8e4m3fn[128,1024]) -> f8e4m3fn[1024,1024] {
  %param_0 = f8e4m3fn[128,1024]{1,0} parameter(0)
  ROOT %all-gather.1 = f8e4m3fn[1024,1024]{1,0} all-gather(%param_0), channel_id=1, replica_groups=mesh['fsdp'=8] {'fsdp'}, dimensions={0}, metadata={op_name="jit(f)/fsdp_dense/mul"}
}, execution_thread="parallel"

ENTRY %main (p: f8e4m3fn[128,1024]) -> f8e4m3fn[1024,1024] {
  %p = f8e4m3fn[128,1024]{1,0} parameter(0)
  %ags = ((f8e4m3fn[128,1024]{1,0}), f8e4m3fn[1024,1024]{1,0}) async-start(%p), calls=%async_computation, metadata={op_name="jit(f)/fsdp_dense/mul"}
  ROOT %agd = f8e4m3fn[1024,1024]{1,0} async-done(%ags)
}
"""
START_DONE = """\
HloModule m

ENTRY %main (p: bf16[128,1024]) -> bf16[1024,1024] {
  %p = bf16[128,1024]{1,0} parameter(0)
  %ags = (bf16[128,1024]{1,0}, bf16[1024,1024]{1,0}) all-gather-start(%p), channel_id=1, replica_groups=[1,8]<=[8], dimensions={0}, metadata={op_name="jit(f)/jit(main)/transpose(jvp(Block))/dense/dot_general"}
  ROOT %agd = bf16[1024,1024]{1,0} all-gather-done(%ags)
}
"""
SYNC = """\
HloModule m

%add (a: bf16[], b: bf16[]) -> bf16[] {
  %a = bf16[] parameter(0)
  %b = bf16[] parameter(1)
  ROOT %s = bf16[] add(%a, %b)
}

ENTRY %main (p: bf16[256,1024], q: bf16[64,64]) -> (bf16[256,1024], bf16[8,64], bf16[64,64]) {
  %p = bf16[256,1024]{1,0} parameter(0)
  %q = bf16[64,64]{1,0} parameter(1)
  %ar = bf16[256,1024]{1,0} all-reduce(%p), channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%add
  %rs = bf16[8,64]{1,0} reduce-scatter(%q), channel_id=3, replica_groups=[2,4]<=[4,2]T(1,0), dimensions={0}, to_apply=%add
  %cp = bf16[64,64]{1,0} collective-permute(%q), channel_id=4, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT %t = (bf16[256,1024]{1,0}, bf16[8,64]{1,0}, bf16[64,64]{1,0}) tuple(%ar, %rs, %cp)
}
"""


# XLA's TPU compiler (libtpu of JAX 0.12.0.1, tpu7x-2x2x1) offloading an FSDP all-gather to the SparseCore: an
# async-start on thread "sparsecore" whose computation `call`s the one holding the all-gather, operands given
# through an async-update (reduced from the measured HLO of tpu_fsdp_fp8_weights_k; JAX 0.8.2 passes them to the
# start instead).
SPARSECORE = """\
HloModule m

%called_computation (param_0.3: f8e4m3fn[128,1024]) -> f8e4m3fn[1024,1024] {
  %param_0.3 = f8e4m3fn[128,1024]{1,0:T(32,128)(4,1)} parameter(0)
  ROOT %all-gather.3 = f8e4m3fn[1024,1024]{1,0:T(32,128)(4,1)} all-gather(%param_0.3), channel_id=2, replica_groups=mesh['axis_0'=8] {'axis_0'}, dimensions={0}, use_global_device_ids=true, metadata={op_name="jit(f)/fsdp_dense/dot_general"}
}, execution_thread="sparsecore"

%async_computation (param_0.4: f8e4m3fn[128,1024]) -> f8e4m3fn[1024,1024] {
  %param_0.4 = f8e4m3fn[128,1024]{1,0:T(32,128)(4,1)} parameter(0)
  ROOT %all-gather.4.cloned.1 = f8e4m3fn[1024,1024]{1,0:T(32,128)(4,1)} call(%param_0.4), to_apply=%called_computation
}, execution_thread="sparsecore"

ENTRY %main (p: f8e4m3fn[128,1024]) -> f8e4m3fn[1024,1024] {
  %p = f8e4m3fn[128,1024]{1,0} parameter(0)
  %s = ((), (), (s32[1]{0:T(128)S(2)})) async-start(), async_execution_thread="sparsecore", calls=%async_computation
  %u = ((f8e4m3fn[128,1024]{1,0}), f8e4m3fn[1024,1024]{1,0}) async-update(%s, %p)
  ROOT %d = f8e4m3fn[1024,1024]{1,0} async-done(%u), calls=%async_computation
}
"""


def test_a_collective_an_async_start_reaches_through_calls_is_asynchronous_on_its_core():
    sig = extract(SPARSECORE)
    (c,) = sig.collectives
    assert (c.op, c.dtype, c.groups, c.asynchronous, c.core, c.layer) == (
        "all-gather", "f8e4m3fn", "1x8", True, "sparsecore", "fsdp_dense")
    assert "async on the SparseCore" in c.text()
    # the triple is one launch, though the done names the computation again (the kernel-count convention)
    assert sig.kernels == 1 and sig.launches == ["all-gather"]
    # the same all-gather on the main thread: synchronous, no core
    (plain,) = extract(SPARSECORE.replace('execution_thread="sparsecore"', 'execution_thread="parallel"')
                       .replace("async-start()", "call()")).collectives
    assert plain.core == "" and "core" not in plain.to_dict()


def test_a_move_between_tensorcore_and_sparsecore_is_a_classed_change():
    before, after = _sig(AG_F8), _sig(dict(AG_F8, asynchronous=True, core="sparsecore"))
    to_sc = verdict.classify(before, after)
    assert to_sc.cls == "improvement" and any("SparseCore" in x.why for x in to_sc.lines), to_sc.lines
    back = verdict.classify(after, before)
    assert back.cls == "regression" and any("back on the TensorCore" in x.why for x in back.lines), back.lines


def test_a_contract_states_the_sparsecore_and_judges_a_move_off_it():
    from fp8_check.verdict import _contract as contract

    offloaded = extract(SPARSECORE)
    on_tc = extract(SPARSECORE.replace('execution_thread="sparsecore"', 'execution_thread="parallel"')
                    .replace("async-start()", "call()"))
    facts = contract.facts(offloaded, None)
    assert facts["collectives"] == [{"layer": "fsdp_dense", "op": "all-gather", "dtype": "f8e4m3fn", "core": "sparsecore"}]
    assert "core" not in contract.facts(on_tc, None)["collectives"][0]  # the TensorCore: no key (GPU contracts unchanged)
    back = contract.check(facts, on_tc, None)
    assert [c.cls for c in back.changes] == ["regression"] and "back on the TensorCore" in back.changes[0].why
    there = contract.check(contract.facts(on_tc, None), offloaded, None)
    assert [c.cls for c in there.changes] == ["improvement"] and "SparseCore" in there.changes[0].why
    assert not contract.check(facts, offloaded, None).changes


def test_async_wrapped_all_gather():
    (c,) = extract(ASYNC_WRAPPED).collectives
    assert (c.op, c.dtype, c.shape, c.groups, c.asynchronous, c.layer) == (
        "all-gather", "f8e4m3fn", "f8e4m3fn[1024,1024]", "1x8", True, "fsdp_dense")
    assert c.bytes == 1024 * 1024 * 1  # the gathered weight, one byte per E4M3 element


def test_start_done_all_gather_counted_once():
    (c,) = extract(START_DONE).collectives
    assert (c.op, c.dtype, c.groups, c.asynchronous, c.layer) == ("all-gather", "bf16", "1x8", True, "Block/dense")
    assert c.bytes == 1024 * 1024 * 2  # bf16: twice the bytes of the E4M3 gather above


def test_sync_collectives_and_group_forms():
    got = {c.op: c for c in extract(SYNC).collectives}
    assert set(got) == {"all-reduce", "reduce-scatter", "collective-permute"}
    assert (got["all-reduce"].groups, got["all-reduce"].bytes) == ("2x4", 256 * 1024 * 2)
    assert (got["reduce-scatter"].groups, got["reduce-scatter"].shape) == ("2x4", "bf16[8,64]")
    assert got["reduce-scatter"].bytes == 64 * 64 * 2  # what it reads: the whole unreduced array
    assert got["collective-permute"].groups == "4 pairs"
    assert not any(c.asynchronous for c in got.values())


def test_signature_without_collectives_is_unchanged():
    """One-device signatures (every existing golden) have no `collectives` key at all."""
    sig = extract(SYNC.replace("all-reduce(%p), channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=%add",
                               "add(%p, %p)"))
    assert "collectives" in Signature.to_dict(extract(SYNC))
    plain = extract("HloModule m\n\nENTRY %main (p: f32[4]) -> f32[4] {\n  ROOT %p = f32[4]{0} parameter(0)\n}\n")
    assert "collectives" not in plain.to_dict()
    again = Signature.from_dict(extract(SYNC).to_dict())
    assert again.to_dict() == extract(SYNC).to_dict() and len(sig.collectives) == 2


@pytest.mark.parametrize("op_name, layer", [
    ("jit(step)/transpose(jvp(Block))/mlp/dense/dot_general", "Block/mlp/dense"),
    ("jit(step)/jit(main)/up/bsd,df->bsf/dot_general", "up"),
    ("jit(step)/(jvp(up)/mul:jvp(down)/mul:jvp(up)/mul)", "up+down"),
    ("jit(call)/call_exported/jit(f)/mul", ""),
    ("jit(f)/mul", ""),
    # the gemms' reading of the name stack (attribution.layer_of): a function boundary is no layer
    ("pjit(train_step)/transpose(jvp(Decoder))/attn/q_proj/bqhd,bkhd->bhqk/dot_general", "Decoder/attn/q_proj"),
])
def test_group_of(op_name, layer):
    assert attribution.group_of(op_name) == layer
    if "->" not in op_name and ":" not in op_name:  # no einsum spec, no merged op: the gemms' layer
        assert layer == (attribution.layer_of(op_name)[0] or "")


def test_a_computation_closed_with_execution_thread_ends_there():
    module = hlo.parse(ASYNC_WRAPPED)
    assert set(module.computations) == {"async_computation", "main"}


# ---------------------------------------------------------------- verdict rules

AG_F8 = {"op": "all-gather", "dtype": "f8e4m3fn", "shape": "f8e4m3fn[1024,1024]", "bytes": 1048576, "groups": "1x8",
         "asynchronous": True, "layer": "fsdp_dense"}
AG_BF16 = dict(AG_F8, dtype="bf16", shape="bf16[1024,1024]", bytes=2097152)


def _sig(*colls):
    return {"kernels": 5, "launches": [], "gemms": [], "unfused": [], "collectives": list(colls)}


def test_fp8_collective_moving_bf16_is_a_regression():
    v = verdict.classify(_sig(AG_F8), _sig(AG_BF16))
    assert v.cls == "regression"
    dtype = v.for_path("collectives[0].dtype")[0]
    assert dtype.cls == "regression" and "bytes" not in dtype.why  # a width is not a volume: no "(bytes x2)"
    by = v.for_path("collectives[0].bytes")[0]
    assert by.cls == "regression" and by.why.endswith("(1048576 -> 2097152, x2)")  # computed from the real bytes
    # the case: the same bytes, the gather moved from the f8 input to the bf16 output: no "x2" anywhere
    same = verdict.classify(_sig(AG_F8), _sig(dict(AG_BF16, shape="bf16[512,1024]", bytes=1048576)))
    assert not any("x2" in x.why for x in same.lines) and not same.for_path("collectives[0].bytes")
    assert v.for_path("collectives[0].shape")[0].cls == "neutral"
    assert verdict.classify(_sig(AG_BF16), _sig(AG_F8)).cls == "improvement"


def test_a_variadic_collective_names_every_operand_dtype():
    """FP8 data gathered with its E8M0 scales in one variadic all-gather: both dtypes, not the last operand's."""
    from fp8_check.signature import _collectives as collectives, _hlo as hlo

    text = """HloModule m, entry_computation_layout={(f8e4m3fn[128,256]{1,0}, f8e8m0fnu[128,8]{1,0})->f8e4m3fn[1024,256]{1,0}}

ENTRY %main (a: f8e4m3fn[128,256], s: f8e8m0fnu[128,8]) -> f8e4m3fn[1024,256] {
  %a = f8e4m3fn[128,256]{1,0} parameter(0)
  %s = f8e8m0fnu[128,8]{1,0} parameter(1)
  %ag = (f8e4m3fn[1024,256]{1,0}, f8e8m0fnu[1024,8]{1,0}) all-gather(%a, %s), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}
  ROOT %g = f8e4m3fn[1024,256]{1,0} get-tuple-element(%ag), index=0
}
"""
    [c] = collectives.extract_collectives(hlo.parse(text))
    assert c.dtype == "f8e4m3fn+f8e8m0fnu" and c.bytes == 1024 * 256 + 1024 * 8
    # the shape names the FP8 data too, not only the last operand (the scales): issue 44
    assert c.shape == "f8e4m3fn[1024,256]+f8e8m0fnu[1024,8]"
    v = verdict.classify(_sig(dict(AG_F8, dtype=c.dtype)), _sig(dict(AG_F8, dtype="bf16+f8e8m0fnu")))
    assert v.for_path("collectives[0].dtype")[0].why == "FP8 collective now moves bf16+f8e8m0fnu instead of f8e4m3fn+f8e8m0fnu"


def test_collectives_gained_lost_and_loops():
    assert verdict.classify(_sig(AG_F8), _sig(AG_F8, AG_F8)).cls == "regression"
    assert verdict.classify(_sig(AG_F8, AG_F8), _sig(AG_F8)).cls == "improvement"
    looped = dict(AG_F8, loop="windowed-einsum")
    assert verdict.classify(_sig(looped), _sig(AG_F8)).cls == "regression"
    assert verdict.classify(_sig(AG_F8), _sig(dict(AG_F8, asynchronous=False))).cls == "regression"
    assert verdict.classify(_sig(AG_F8), _sig(dict(AG_F8, layer="other"))).cls == "neutral"
    # a golden with no collectives at all, against a sharded compile that has one
    whole = verdict.classify({"kernels": 5, "launches": [], "gemms": [], "unfused": []}, _sig(AG_F8))
    assert whole.cls == "regression" and "more collectives" in whole.lines[0].why


@pytest.mark.parametrize("name", [f.name for f in fields(collectives.Collective)])
def test_every_collective_field_has_a_rule_or_a_stated_neutral_reason(name):
    changed = {"op": "all-to-all", "dtype": "f8e5m2", "shape": "f8e4m3fn[8,128,1024]", "bytes": 2,
               "groups": "2x4", "asynchronous": False, "layer": "x", "loop": "windowed-einsum", "core": "sparsecore"}[name]
    lines = verdict.classify(_sig(AG_F8), _sig(dict(AG_F8, **{name: changed}))).lines
    assert lines and all("no cost rule" not in x.why for x in lines), lines


def test_a_start_done_pair_is_one_launch_and_is_sync_is_not_asynchronous():
    sig = extract(START_DONE)
    assert sig.kernels == 1 and sig.launches == ["all-gather"]
    wrapped = extract(ASYNC_WRAPPED)
    assert wrapped.kernels == 1 and wrapped.launches == ["all-gather"]  # the same launch, however XLA prints it
    sync = START_DONE.replace("dimensions={0},", 'dimensions={0}, backend_config={"collective_backend_config":{"is_sync":true}},')
    (c,) = extract(sync).collectives
    assert c.asynchronous is False


WINDOWED = """\
HloModule m

%body (p: (bf16[64,128], bf16[128,64], u32[])) -> (bf16[64,128], bf16[128,64], u32[]) {
  %p = (bf16[64,128]{1,0}, bf16[128,64]{1,0}, u32[]) parameter(0)
  %x = bf16[64,128]{1,0} get-tuple-element(%p), index=0
  %w = bf16[128,64]{1,0} get-tuple-element(%p), index=1
  %i = u32[] get-tuple-element(%p), index=2
  %cps = (bf16[64,128]{1,0}, bf16[64,128]{1,0}) collective-permute-start(%x), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}, metadata={op_name="jit(f)/ag_matmul/dot_general"}
  %g = (bf16[64,64]{1,0}, s8[1024]{0}) custom-call(%x, %w), custom_call_target="__cublas$gemm"
  %cpd = bf16[64,128]{1,0} collective-permute-done(%cps)
  ROOT %t = (bf16[64,128]{1,0}, bf16[128,64]{1,0}, u32[]) tuple(%cpd, %w, %i)
}

%cond (p: (bf16[64,128], bf16[128,64], u32[])) -> pred[] {
  %p = (bf16[64,128]{1,0}, bf16[128,64]{1,0}, u32[]) parameter(0)
  ROOT %c = pred[] constant(false)
}

ENTRY %main (a: bf16[64,128], b: bf16[128,64]) -> (bf16[64,128], bf16[128,64], u32[]) {
  %a = bf16[64,128]{1,0} parameter(0)
  %b = bf16[128,64]{1,0} parameter(1)
  %z = u32[] constant(0)
  %t = (bf16[64,128]{1,0}, bf16[128,64]{1,0}, u32[]) tuple(%a, %b, %z)
  ROOT %loop = (bf16[64,128]{1,0}, bf16[128,64]{1,0}, u32[]) while(%t), condition=%cond, body=%body
}
"""


def test_a_collective_in_a_loop_with_a_gemm_is_a_windowed_einsum():
    sig = extract(WINDOWED)
    (c,) = sig.collectives
    assert (c.op, c.groups, c.loop, c.layer) == ("collective-permute", "4 pairs", "windowed-einsum", "ag_matmul")
    assert c.bytes == 64 * 128 * 2
    assert [g.target for g in sig.gemms] == ["__cublas$gemm"]
    # the same collective outside any loop
    (plain,) = [x for x in extract(SYNC).collectives if x.op == "collective-permute"]
    assert plain.loop == ""


def test_replica_groups_as_device_ids():
    assert collectives.device_groups("replica_groups=[2,4]<=[4,2]T(1,0), x=1") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert collectives.device_groups("replica_groups=mesh['fsdp'=4,'tp'=2] {'fsdp'}") == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert collectives.device_groups("replica_groups=mesh['fsdp'=4,'tp'=2] {'tp'}") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert collectives.device_groups("replica_groups={{0,1},{2,3}}") == [[0, 1], [2, 3]]
    assert collectives.device_groups("replica_groups={}") is None


def test_a_group_across_hosts_is_priced_over_the_network():
    """h100x2x4: a collective among GPUs of one host runs over NVLink, one across the two hosts over the NICs."""
    from fp8_check.cost import _model as cost

    one_host, two_hosts = cost.hardware("h100x8"), cost.hardware("h100x2x4")
    assert (one_host.per_host, two_hosts.per_host) == (0, 4) and two_hosts.network < two_hosts.link
    within = "replica_groups={{0,1,2,3},{4,5,6,7}}"
    across = "replica_groups=[2,4]<=[4,2]T(1,0)"  # {0,2,4,6}: GPUs 0 and 2 on host 0, 4 and 6 on host 1
    assert cost.link_for(within, two_hosts) == two_hosts.link == one_host.link
    assert cost.link_for(across, two_hosts) == two_hosts.network and cost.link_for(across, one_host) == one_host.link
    assert cost.group_size(across) == 4 and cost.group_size("source_target_pairs={{0,1},{1,2}}") == 2
    module = hlo.parse(SYNC)
    rs = next(i for i in module.entry.instructions if i.opcode == "reduce-scatter")
    assert collectives.groups_of(rs) == "2x4"
