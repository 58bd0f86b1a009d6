"""run, bless and check share one plan -> canary -> compile -> judge path: they classify alike.

Before, `bless` counted every compile failure as UNRESOLVED where `run` said UNSUPPORTED,
and `check` results carried no verdict class.
"""

from __future__ import annotations

import json

import pytest

from fp8_check.run._results import outcome_to_json
from fp8_check.verdict._classify import classify
from fp8_check.verdict._comparator import FieldDiff
from fp8_check.verdict._outcome import FAIL, Outcome

from ..conftest import write_cases

CASES = """\
defaults:
  kind: python
  profiles: [cublas]
  args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
cases:
  - id: declared_optional_missing
    callable: user_fns:plain
    requires: [no_such_dep_abc]
  - id: failing_import_inside
    callable: user_broken:plain
  - id: compiles
    callable: user_fns:plain
"""


@pytest.mark.slow
def test_bless_classifies_a_compile_failure_as_run_does(tmp_path, run_cli):
    write_cases(tmp_path / "cases" / "py.yaml", CASES)
    (tmp_path / "user_broken.py").write_text("import no_such_dep_abc\n\ndef plain(a, b):\n    return a\n")
    (tmp_path / "user_fns.py").write_text(
        "import jax.numpy as jnp\n\n\ndef plain(a, b):\n    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))\n")
    dl = ("--mode", "deviceless", "-j", "1")
    code, out, err = run_cli("run", *dl, "--json", tmp_path / "r.json", cwd=tmp_path)
    ran = {r["case"]: r["outcome"] for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert ran == {"declared_optional_missing": "UNSUPPORTED", "failing_import_inside": "UNRESOLVED", "compiles": "NEW"}
    code, out, err = run_cli("bless", *dl, cwd=tmp_path)
    assert code == 1, out + err  # the UNRESOLVED case, as in run
    assert "UNSUPPORTED h100/cublas declared_optional_missing: missing optional dependency 'no_such_dep_abc'" in out
    assert "UNRESOLVED h100/cublas failing_import_inside: " in out
    assert "blessed: 1 golden(s) changed, 1 case(s) did not compile or have a broken golden" in out
    assert (tmp_path / "goldens" / "h100" / "cublas" / "deviceless" / "compiles.yaml").is_file()
    assert not (tmp_path / "goldens" / "h100" / "cublas" / "deviceless" / "declared_optional_missing.yaml").exists()


def test_check_results_carry_the_verdict_class():
    before = {"kernels": 1, "launches": ["gemm __cublas$lt$matmul$f8"], "unfused": [],
              "gemms": [{"target": "__cublas$lt$matmul$f8", "operand_dtypes": ["f8e4m3fn", "f8e4m3fn"]}]}
    after = {**before, "gemms": [{"target": "__cublas$lt$matmul", "operand_dtypes": ["f32", "f32"]}]}
    # check's results are the one result record (Outcome) with structured diffs, in the standard results file
    res = Outcome("fn", "h100", "cublas", "deviceless", "0.9.0", FAIL, diffs=[FieldDiff("kernels", 1, 2)],
                  verdict=classify(before, after))
    d = outcome_to_json(res)
    assert d["outcome"] == "FAIL" and d["verdict"]["class"] == "regression"
    assert d["diffs"] == [{"path": "kernels", "expected": 1, "found": 2}]
    assert "verdict" not in outcome_to_json(Outcome("fn", "h100", "cublas", "deviceless", "", FAIL))
