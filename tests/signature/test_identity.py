"""Gemms and collectives are matched between a golden and a signature by identity, never by list index.

The signatures are real: optimized HLO recorded from deviceless compiles (tests/fixtures/hlo/).
"""

from __future__ import annotations

import copy
from pathlib import Path

from fp8_check.signature import _extract as signature, _identity as identity
from fp8_check.verdict import _classify as verdict, _comparator as comparator

HLO = Path(__file__).parents[1] / "fixtures" / "hlo"


def _grad_sig() -> dict:
    text = (HLO / "attribution" / "flax_dense_qdq_grad.jax-0.12.0.1.h100.cublas.txt").read_text()
    return signature.extract(text).to_dict()


def test_a_reordering_alone_is_no_difference_and_no_verdict_line():
    sig = _grad_sig()
    assert len(sig["gemms"]) >= 3 and len({identity.gemm_identity(g) for g in sig["gemms"]}) >= 3
    shuffled = copy.deepcopy(sig)
    shuffled["gemms"] = list(reversed(shuffled["gemms"]))
    assert comparator.compare(sig, shuffled) == []
    assert verdict.classify(sig, shuffled).lines == ()


def test_a_changed_gemm_is_compared_with_its_own_self_after_a_reordering():
    sig = _grad_sig()
    fp8 = next(i for i, g in enumerate(sig["gemms"]) if g["target"].startswith("__cublas$lt$matmul$f8"))
    after = copy.deepcopy(sig)
    after["gemms"][fp8]["operand_dtypes"] = ["bf16", "bf16"]
    after["gemms"][fp8]["target"] = "__cublas$lt$matmul"
    after["gemms"] = list(reversed(after["gemms"]))
    diffs = comparator.compare(sig, after)
    assert {d.path for d in diffs} == {f"gemms[{fp8}].operand_dtypes", f"gemms[{fp8}].target"}
    v = verdict.classify(sig, after)
    assert v.cls == verdict.REGRESSION
    assert {x.path for x in v.regressions} >= {f"gemms[{fp8}].operand_dtypes", f"gemms[{fp8}].target"}


def test_equal_identities_pair_in_stable_order_then_by_place_then_by_position():
    g = lambda layer, dims, t="x": {"layer": layer, "pass": "forward", "dims": {"lhs_contracting": dims}, "target": t}  # noqa: E731
    expected = [g("L/a", [1]), g("L/a", [1], "y"), g("L/b", [1]), g("L/c", [2])]
    # L/a twice (a repeated layer): first with first; L/b's layout changed: paired by layer and pass;
    # L/c and L/d are different layers: paired by position among the leftovers; one more found gemm is new
    found = [g("L/d", [2]), g("L/b", [0]), g("L/a", [1], "y2"), g("L/a", [1]), g("L/e", [3])]
    assert identity.pairs("gemms", expected, found) == [(0, 0, 2), (1, 1, 3), (2, 2, 1), (3, 3, 0), (4, None, 4)]
    paths = [d.path for d in comparator.compare({"gemms": expected}, {"gemms": found})]
    assert "gemms[0].target" in paths and "gemms[2].dims.lhs_contracting" in paths and "gemms[4]" in paths


def test_collectives_are_matched_by_layer_op_and_shape():
    c = lambda op, shape, dtype="f8e4m3fn": {"op": op, "dtype": dtype, "shape": shape, "bytes": 1, "groups": "1x8",  # noqa: E731
                                             "layer": "M/Dense_0"}
    expected = {"collectives": [c("all-gather", "f8e4m3fn[8,8]"), c("reduce-scatter", "bf16[8,8]", "bf16")]}
    found = {"collectives": list(reversed(expected["collectives"]))}
    assert comparator.compare(expected, found) == []
    found["collectives"][1] = c("all-gather", "bf16[8,8]", "bf16")  # the FP8 all-gather now moves bf16
    v = verdict.classify(expected, found)
    assert v.cls == verdict.REGRESSION
    assert any(x.path == "collectives[0].dtype" for x in v.regressions)
