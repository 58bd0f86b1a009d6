"""Every signature field has a verdict rule or is neutral with a stated reason; every dtype class in every field.

The expected classes follow from the dtype vocabulary (harness/fp8_check/core/_dtypes.py) and docs/verdicts.md's
rule "a narrow type (FP8, FP4, an E8M0 scale) becoming a wider one, in any field, is a
regression", not from the classifier's output.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import pytest

from fp8_check.core import _dtypes as dtypes
from fp8_check.signature._collectives import Collective
from fp8_check.signature._extract import BlockScaling, Gemm, Signature
from fp8_check.verdict import _classify as verdict, _golden as golden, rules as verdict_rules
from fp8_check.verdict.rules.findings import Finding, Neutral, explained

from ..conftest import REPO

DL = ("--mode", "deviceless")


def uncovered(sig_cls=Signature, gemm_cls=Gemm, block_cls=BlockScaling, collective_cls=Collective) -> list[str]:
    """Signature fields with neither a rule nor a stated neutral reason."""
    out = []
    for f in dataclasses.fields(sig_cls):
        if f.name not in verdict_rules.FIELD_RULES:
            out.append(f.name)
    for record, cls, rules in (("gemms[]", gemm_cls, verdict_rules.gemm.GEMM_RULES), ("block_scaled", block_cls, verdict_rules.block.BLOCK_RULES),
                               ("collectives[]", collective_cls, verdict_rules.collectives.COLLECTIVE_RULES)):
        for f in dataclasses.fields(cls):
            rule = rules.get(f.name)
            if rule is None or (isinstance(rule, Neutral) and not rule.reason.strip()) or \
                    not (isinstance(rule, Neutral) or callable(rule)):
                out.append(f"{record}.{f.name}")
    return out


def test_every_signature_field_has_a_rule_or_a_stated_neutral_reason():
    assert uncovered() == []


def test_a_field_without_a_rule_is_found():
    # the check above must be able to fail: a new field nobody gave a rule
    @dataclasses.dataclass
    class GemmWithCollective(Gemm):
        collective_dtype: str = ""

    @dataclasses.dataclass
    class SignatureWithCost(Signature):
        cost: float = 0.0

    assert uncovered(SignatureWithCost, GemmWithCollective) == ["cost", "gemms[].collective_dtype"]


def test_neutral_reasons_are_stated():
    for rules in (verdict_rules.gemm.GEMM_RULES, verdict_rules.block.BLOCK_RULES, verdict_rules.collectives.COLLECTIVE_RULES):
        for name, rule in rules.items():
            if isinstance(rule, Neutral):
                assert len(rule.reason) > 20, name


# ------------------------------------------------------------------ the dtype vocabulary


@pytest.mark.parametrize("name, cls", [
    ("f8e4m3fn", dtypes.FP8), ("f8e5m2", dtypes.FP8), ("float8_e4m3fn", dtypes.FP8),
    ("f4e2m1fn", dtypes.FP4), ("float4_e2m1fn", dtypes.FP4),
    ("f8e8m0fnu", dtypes.SCALE), ("float8_e8m0fnu", dtypes.SCALE),
    ("bf16", dtypes.WIDE), ("f16", dtypes.WIDE), ("f32", dtypes.WIDE), ("float32", dtypes.WIDE),
    ("s8", dtypes.INT), ("pred", dtypes.OTHER), ("?", dtypes.OTHER),
])
def test_dtype_class(name, cls):
    assert dtypes.dtype_class(name) == cls
    assert dtypes.is_narrow(name) == (cls in (dtypes.FP8, dtypes.FP4, dtypes.SCALE))


def test_case_schema_dtypes_come_from_the_vocabulary():
    from fp8_check.cases.kinds import block_scaled as block_cases, pattern

    assert set(dtypes.DATA_DTYPES) == {d for d in dtypes.DATA_DTYPES if dtypes.dtype_class(d) in (dtypes.FP8, dtypes.FP4)}
    assert {dtypes.dtype_class(d) for d in block_cases.BLOCK_SCALE_DTYPES} == {dtypes.SCALE, dtypes.FP8}
    assert all(dtypes.dtype_class(d) == dtypes.WIDE for d in pattern.DEQUANT_DTYPES)


# ------------------------------------------------------------------ each dtype class in each field

NARROW = {dtypes.FP8: "f8e4m3fn", dtypes.FP4: "f4e2m1fn", dtypes.SCALE: "f8e8m0fnu"}


def _gemm(**fields) -> dict:
    g = {"target": "__cublas$lt$matmul$f8", "operand_dtypes": ["f8e4m3fn", "f8e4m3fn"],
         "operands": {"a": "f8e4m3fn", "b": "f8e4m3fn", "a_scale": "f32", "b_scale": "f32"}, "output": "f32",
         "amax": False, "inputs": ["f8e4m3fn", "f8e4m3fn"]}
    for key, value in fields.items():
        if "." in key:
            outer, inner = key.split(".")
            g[outer] = {**g[outer], inner: value}
        else:
            g[key] = value
    return g


def _block(**fields) -> dict:
    b = {"form": "cudnn", "target": "__cudnn$blockScaledDot", "data_dtypes": ["f4e2m1fn", "f4e2m1fn"],
         "scale_dtypes": ["f8e4m3fn", "f8e4m3fn"], "inputs": ["f4e2m1fn", "f4e2m1fn"], "scale_kernels": 0,
         "data_kernels": 0, "global_scale": []}
    return {**b, **fields}


def _sig(gemm: dict | None = None, block: dict | None = None) -> dict:
    d = {"kernels": 1, "launches": ["gemm x"], "gemms": [gemm or _gemm()], "unfused": []}
    if block is not None:
        d["block_scaled"] = block
    return d


# (path in the verdict, how to build a signature whose field holds `value`); a list field holds [value, value]
DTYPE_FIELDS = {
    "gemms[0].operand_dtypes": lambda v: _sig(_gemm(operand_dtypes=[v, v])),
    "gemms[0].operands.a": lambda v: _sig(_gemm(**{"operands.a": v})),
    "gemms[0].operands.b": lambda v: _sig(_gemm(**{"operands.b": v})),
    "gemms[0].operands.a_scale": lambda v: _sig(_gemm(**{"operands.a_scale": v})),
    "gemms[0].operands.b_scale": lambda v: _sig(_gemm(**{"operands.b_scale": v})),
    "gemms[0].operands.bias": lambda v: _sig(_gemm(**{"operands.bias": v})),
    "gemms[0].output": lambda v: _sig(_gemm(output=v)),
    "gemms[0].inputs": lambda v: _sig(_gemm(inputs=[v, v])),
    "block_scaled.data_dtypes": lambda v: _sig(block=_block(data_dtypes=[v, v])),
    "block_scaled.scale_dtypes": lambda v: _sig(block=_block(scale_dtypes=[v, v])),
    "block_scaled.inputs": lambda v: _sig(block=_block(inputs=[v, v])),
    "collectives[0].dtype": lambda v: {**_sig(), "collectives": [
        {"op": "all-gather", "dtype": v, "shape": [64, 64], "bytes": 4096, "groups": [[0, 1]], "asynchronous": True}]},
}


def _classes(before: dict, after: dict, path: str) -> set[str]:
    v = verdict.classify(before, after)
    return {x.cls for x in v.lines if x.path == path}


@pytest.mark.parametrize("cls", list(NARROW))
@pytest.mark.parametrize("path", list(DTYPE_FIELDS))
def test_a_narrow_type_becoming_wide_is_a_regression_in_every_field(path, cls):
    build = DTYPE_FIELDS[path]
    narrow, wide = build(NARROW[cls]), build("f32")
    assert _classes(narrow, wide, path) == {verdict.REGRESSION}
    assert _classes(wide, narrow, path) == {verdict.IMPROVEMENT}
    assert verdict.classify(narrow, wide).is_regression


@pytest.mark.parametrize("path", list(DTYPE_FIELDS))
def test_a_narrow_type_becoming_bf16_is_a_regression_too(path):
    build = DTYPE_FIELDS[path]
    for narrow in NARROW.values():
        assert _classes(build(narrow), build("bf16"), path) == {verdict.REGRESSION}, narrow


@pytest.mark.parametrize("path", list(DTYPE_FIELDS))
def test_narrow_to_narrow_is_not_an_upcast(path):
    build = DTYPE_FIELDS[path]
    assert verdict.REGRESSION not in _classes(build("f8e4m3fn"), build("f8e5m2"), path)


@pytest.mark.parametrize("path", list(DTYPE_FIELDS))
def test_wide_and_int_classes_are_never_an_fp8_loss(path):
    build = DTYPE_FIELDS[path]
    v = verdict.classify(build("bf16"), build("f32"))
    assert all("FP8" not in x.why and "FP4" not in x.why for x in v.lines)
    v = verdict.classify(build("s8"), build("s8"))
    assert v.lines == ()


def test_scalar_scale_dtype_between_wide_types_stays_neutral():
    # docs/verdicts.md: a (wide) scale's dtype costs nothing
    assert _classes(_sig(_gemm(**{"operands.a_scale": "f32"})), _sig(_gemm(**{"operands.a_scale": "bf16"})),
                    "gemms[0].operands.a_scale") == {verdict.NEUTRAL}


def test_fp4_operands_upcast_names_fp4():
    v = verdict.classify(_sig(_gemm(operand_dtypes=["f4e2m1fn", "f4e2m1fn"])), _sig(_gemm(operand_dtypes=["f32", "f32"])))
    assert [x.why for x in v.lines] == ["gemm operands upcast from FP4 (f4e2m1fnxf4e2m1fn -> f32xf32)"]


def test_partial_golden_stating_fp4_block_data_against_f32_is_a_regression():
    """The issue's example: a golden expecting FP4 block-scaled data where XLA upcasts to f32."""
    golden_sig = {"block_scaled": {"data_dtypes": ["f4e2m1fn", "f4e2m1fn"]}}
    found = _sig(block=_block(form="decomposed", data_dtypes=["f32", "f32"], scale_dtypes=[]))
    v = verdict.classify(golden_sig, found)
    assert v.cls == verdict.REGRESSION
    assert [(x.path, x.cls) for x in v.lines] == [("block_scaled.data_dtypes", verdict.REGRESSION)]


def test_block_form_decomposed_is_a_regression():
    assert _classes(_sig(block=_block()), _sig(block=_block(form="decomposed")), "block_scaled.form") == {verdict.REGRESSION}
    assert _classes(_sig(block=_block(form="decomposed")), _sig(block=_block()), "block_scaled.form") == {verdict.IMPROVEMENT}


def test_block_scale_kernels_count():
    assert _classes(_sig(block=_block()), _sig(block=_block(scale_kernels=2)), "block_scaled.scale_kernels") == {verdict.REGRESSION}


def test_an_unknown_dtype_valued_field_still_catches_an_upcast():
    # a field added later (collectives, say) with no rule of its own: the narrow -> wide rule applies
    v = verdict.classify({"kernels": 1, "collective_dtype": "f8e4m3fn"}, {"kernels": 1, "collective_dtype": "bf16"})
    assert [(x.path, x.cls) for x in v.lines] == [("collective_dtype", verdict.REGRESSION)]


# ------------------------------------------------------------------ through the CLI


@pytest.mark.slow
def test_fp4_upcast_golden_fails_as_a_regression_through_the_cli(workspace, run_cli):
    shutil.copy(REPO / "cases" / "block_scaled.yaml", workspace / "cases" / "block_scaled.yaml")
    path = golden.path_for(workspace / "goldens", "bs_sm_nvfp4", "h100", "cublas", "deviceless")
    text = path.read_text()
    assert "data_dtypes: [f32, f32]" in text  # XLA upcasts the FP4 data on H100
    path.write_text(text.replace("data_dtypes: [f32, f32]", "data_dtypes: [f4e2m1fn, f4e2m1fn]"))
    args = ("run", *DL, "-k", "bs_sm_nvfp4", "--profile", "cublas", "--json", workspace / "r.json")
    code, out, _ = run_cli(*args, "--fail-on", "regression", cwd=workspace)
    assert code == 1, out
    assert re.search(r"FAIL\s+h100/cublas\s+bs_sm_nvfp4 .*\[regression\]", out)
    assert "block_scaled.data_dtypes: expected [f4e2m1fn, f4e2m1fn], found [f32, f32]  [regression: " in out
    doc = json.loads((workspace / "r.json").read_text())
    r = {(x["case"], x["profile"]): x for x in doc["results"]}[("bs_sm_nvfp4", "cublas")]
    assert r["outcome"] == "FAIL" and r["verdict"]["class"] == "regression"


# ------------------------------------------------------------------ the table dispatches


def _paths_of(key: str, entry) -> dict[str, object]:
    """Every path an entry of FIELD_RULES judges (one per rule it holds), built from the table itself."""
    if not isinstance(entry, verdict_rules.Record):
        return {key: None}
    whole = entry.label.replace("[i]", "[0]") if entry.label else key
    return {whole: None, **{f"{whole}.{sub}": sub for sub in entry.rules}}


def test_every_entry_of_the_table_is_reachable(monkeypatch):
    """Each entry (and each rule a record holds) is what runs for its path: a spy in its place sees the call."""
    for key, entry in list(verdict_rules.FIELD_RULES.items()):
        for path, sub in _paths_of(key, entry).items():
            seen: list[str] = []

            def spy(*args, _path=path, _seen=seen):
                _seen.append(_path)
                return [Finding(verdict.NEUTRAL, f"spy for {_path}")]

            with monkeypatch.context() as m:
                if sub is None and isinstance(entry, verdict_rules.Record):
                    m.setitem(verdict_rules.FIELD_RULES, key, dataclasses.replace(entry, judge=spy))
                elif sub is None:
                    m.setitem(verdict_rules.FIELD_RULES, key, spy)
                else:
                    m.setitem(entry.rules, sub, spy)  # type: ignore[union-attr]
                lines = verdict.classify_field(path, "x", "y", {}, {})
            assert seen == [path], (key, path, [x.why for x in lines])
            assert [x.why for x in lines] == [f"spy for {path}"]


def test_a_rule_added_to_the_table_runs_with_no_other_edit(monkeypatch):
    """A new signature field's rule: one entry in FIELD_RULES, and classify judges with it."""
    @explained("more bytes through the host", "fewer")
    def host_bytes(before, after):
        return [(verdict.REGRESSION if after > before else verdict.IMPROVEMENT, f"host bytes {before} -> {after}")]

    before, after = {"kernels": 1, "host_bytes": 10}, {"kernels": 1, "host_bytes": 20}
    assert [x.why for x in verdict.classify(before, after).lines] == ["host_bytes changed (no cost rule for this field)"]
    monkeypatch.setitem(verdict_rules.FIELD_RULES, "host_bytes", host_bytes)
    v = verdict.classify(before, after)
    assert (v.cls, [x.why for x in v.lines]) == (verdict.REGRESSION, ["host bytes 10 -> 20"])
    assert verdict.classify(after, before).cls == verdict.IMPROVEMENT


def test_a_record_field_rule_added_to_its_table_runs(monkeypatch):
    monkeypatch.setitem(verdict_rules.gemm.GEMM_RULES, "workspace", lambda before, after, gb, ga, sub: [(verdict.REGRESSION, "more workspace")])
    v = verdict.classify(_sig(_gemm(workspace=0)), _sig(_gemm(workspace=1)))
    assert [(x.path, x.cls, x.why) for x in v.lines] == [("gemms[0].workspace", verdict.REGRESSION, "more workspace")]


def test_a_deciding_finding_decides_by_its_data_not_its_words(monkeypatch):
    """A rule that decides the verdict says so (Finding.decides); the same words without it decide nothing."""
    before = _sig(_gemm(output="f32", fused_ops=["a", "b"]))
    after = _sig(_gemm(output="f8e4m3fn", fused_ops=["a"]))  # an improvement (FP8 output) and a regression (an op left)
    assert verdict.classify(before, after).cls == verdict.MIXED
    words = "cuBLASLt FP8 gemm -> x"
    monkeypatch.setitem(verdict_rules.gemm.GEMM_RULES, "fused_ops", lambda b, a, gb, ga, sub: [(verdict.REGRESSION, words)])
    assert verdict.classify(before, after).cls == verdict.MIXED  # the wording alone decides nothing
    monkeypatch.setitem(verdict_rules.gemm.GEMM_RULES, "fused_ops",
                        lambda b, a, gb, ga, sub: [Finding(verdict.REGRESSION, "an op left", decides=True)])
    v = verdict.classify(before, after)
    assert v.cls == verdict.REGRESSION and [x.decides for x in v.lines if x.path.endswith("fused_ops")] == [True]


def test_the_lost_cublas_fp8_gemm_decides():
    before = _sig(_gemm(output="f32"))
    after = _sig(_gemm(target="__cublas$gemm", output="f8e4m3fn"))  # an FP8 output gained, the FP8 gemm lost
    v = verdict.classify(before, after)
    assert v.cls == verdict.REGRESSION
    assert [(x.path, x.decides) for x in v.lines if x.decides] == [("gemms[0].target", True)]
