"""A contract's schema, checked when its golden is loaded (hardening round 5, issue 43): types and ranges of every
field, one line naming file, field and value (GoldenError: exit 2). `cost_us: 0` or below turned cost judging off
in silence; NaN, inf, `operands: 5`, `pass: [forward]`, `amax: "false"` (read as true), both `contract:` and
`signature:`, and duplicate keys were all taken; a 0 % tolerance could never pass (bless rounds cost_us to 0.1)."""

from __future__ import annotations

import pytest

from fp8_check.signature._extract import Signature
from fp8_check.verdict import _contract as contract, _golden as golden
from fp8_check.verdict._contract_schema import ContractError, options_from

ROW = "{layer: 'Dense_0/*', pass: forward, engine: cuBLASLt FP8, operands: f8e4m3fn x f8e4m3fn}"
GOLDEN = """case: m
target: h100
profile: cublas
mode: deviceless
expect:
- blessed_with: jax 0.12.0.1
  contract:
%s
"""


def _load(tmp_path, body: str):
    path = tmp_path / "m.yaml"
    path.write_text(GOLDEN % body)
    return golden.load(path)


def test_a_good_contract_loads(tmp_path):
    g = _load(tmp_path, f"    matmuls: [{ROW}]\n    fp8_flops: 99.5\n    cost_us: 12.3\n    kernels: 7")
    assert g.expect[0].contract["cost_us"] == 12.3


@pytest.mark.parametrize("body, field", [
    ("    cost_us: 0", "expect[0].contract.cost_us: expected an estimated cost in µs above 0, got '0'"),
    ("    cost_us: -5.0", "contract.cost_us: expected an estimated cost in µs above 0, got '-5.0'"),
    ("    cost_us: .nan", "contract.cost_us: expected an estimated cost in µs above 0, got 'nan'"),
    ("    cost_us: .inf", "contract.cost_us: expected an estimated cost in µs above 0, got 'inf'"),
    ("    cost_us: true", "contract.cost_us: expected an estimated cost"),
    ("    fp8_flops: .nan", "contract.fp8_flops: expected a percentage from 0 to 100, got 'nan'"),
    ("    fp8_flops: 140", "contract.fp8_flops: expected a percentage from 0 to 100, got '140'"),
    ("    kernels: -1", "contract.kernels: expected a count (an integer >= 0), got '-1'"),
    ("    kernels: true", "contract.kernels: expected a count"),
    ("    matmuls: [{layer: a, engine: e, operands: 5}]", "contract.matmuls[0].operands: expected a string, got '5'"),
    ("    matmuls: [{layer: a, engine: e, pass: [forward]}]", "contract.matmuls[0].pass: expected a string"),
    ("    matmuls: [{layer: a, engine: e, pass: forwards}]", "contract.matmuls[0].pass: expected one of forward"),
    ("    matmuls: [{layer: a, engine: e, amax: 'false'}]", "contract.matmuls[0].amax: expected true or false, got 'false'"),
    ("    matmuls: {layer: a}", "contract.matmuls: expected a list"),
    ("    collectives: [{op: all-gather, dtype: 8}]", "contract.collectives[0].dtype: expected a string, got '8'"),
    ("    cost_us: 1.0\n    cost_us: 2.0", "duplicate key 'cost_us'"),
])
def test_a_bad_contract_is_one_line_naming_file_field_and_value(tmp_path, body, field):
    with pytest.raises(golden.GoldenError) as info:
        _load(tmp_path, body)
    message = str(info.value)
    assert str(tmp_path / "m.yaml") in message and field in message and "\n" not in message, message


def test_an_expectation_with_both_a_signature_and_a_contract_is_refused(tmp_path):
    with pytest.raises(golden.GoldenError, match=r"expect\[0\]': both a signature and a contract"):
        _load(tmp_path, "    cost_us: 1.0\n  signature: {kernels: 1}")


def test_a_duplicate_key_anywhere_in_a_golden_is_refused(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text((GOLDEN % "    cost_us: 1.0").replace("profile: cublas\n", "profile: cublas\nprofile: triton\n"))
    with pytest.raises(golden.GoldenError, match="duplicate key 'profile'"):
        golden.load(path)


@pytest.mark.parametrize("tolerance", ["nan", "inf", "-1%", "1e9%", "true", "[1]"])
def test_a_bad_tolerance_names_the_field(tolerance):
    with pytest.raises(ContractError, match="contract_options.cost_tolerance: expected a percentage from 0"):
        options_from({"cost_tolerance": {"true": True, "[1]": [1]}.get(tolerance, tolerance)})


def test_a_zero_tolerance_passes_the_cost_it_was_blessed_with():
    """bless writes cost_us rounded to 0.1 µs: at 0 % the same cost passes, a moved one does not."""
    sig = Signature(kernels=1, launches=(), gemms=(), unfused=())
    zero = options_from({"cost_tolerance": "0%"})
    blessed = contract.facts(sig, 812.4372, zero)
    assert blessed["cost_us"] == 812.4
    assert not contract.check(blessed, sig, 812.4372, zero).changes
    [change] = contract.check(blessed, sig, 812.52, zero).changes
    assert change.path == "cost_us" and change.cls == contract.REGRESSION
