"""A difference that only XLA's deviceless default configuration decides (Triton tiles and split-K when autotuning
is off) is classed as such: neutral with that reason, never a regression with a price (issue 52). Recorded HLO of
one 256^3 FP8 dot under the triton profile: one gemm on JAX 0.9.2, a split-K gemm and its reduce on 0.10.1
(tests/fixtures/hlo/split_k/)."""

from __future__ import annotations

from pathlib import Path

from fp8_check.signature import _extract as extract
from fp8_check.verdict._classify import NEUTRAL, REGRESSION, classify

FIX = Path(__file__).parents[1] / "fixtures" / "hlo" / "split_k"


def _sig(version: str):
    return extract.extract((FIX / f"sk_256.jax-{version}.h100.triton.txt").read_text())


def test_the_split_is_read_from_the_triton_gemm():
    before, after = _sig("0.9.2"), _sig("0.10.1")
    assert [g.split_k for g in before.gemms] == [None] and before.kernels == 1
    [g] = after.gemms
    assert g.split_k and g.split_k > 1 and g.output == "f32" and after.kernels == 2  # partial sums, then a reduce
    assert "split_k" not in before.to_dict()["gemms"][0]  # absent where not split: goldens without it are unchanged


def test_split_k_from_the_default_configuration_is_neutral_with_its_reason():
    v = classify(_sig("0.9.2"), _sig("0.10.1"))
    assert v.cls == NEUTRAL and not v.is_regression, [(x.path, x.cls, x.why) for x in v.lines]
    output = [x for x in v.lines if x.path == "gemms[0].output"]
    assert output and output[0].cls == NEUTRAL and "gemm output wider (bf16 -> f32)" in output[0].why
    # the reason is told (once), in the verdict's summary too
    assert sum("deviceless default configuration" in x.why and "autotunes" in x.why for x in v.lines) == 1
    assert "deviceless default configuration" in v.summary()
    assert not any(x.cls == REGRESSION for x in v.lines)
    # against a golden stating the unsplit gemm (only some fields), the same: neutral, not a regression
    golden = {"kernels": 1, "gemms": [{"target": _sig("0.9.2").gemms[0].target, "output": "bf16"}]}
    assert classify(golden, _sig("0.10.1")).cls == NEUTRAL


def test_a_wider_output_without_a_split_stays_a_regression():
    import dataclasses

    before = _sig("0.9.2")
    wider = dataclasses.replace(before, gemms=[dataclasses.replace(before.gemms[0], output="f32")])
    assert classify(before, wider).cls == REGRESSION
