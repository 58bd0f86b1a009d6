"""A user's module that imports a JAX API this JAX lacks is UNSUPPORTED on this version (as the project's own
block-scaled template is), not UNRESOLVED; a failing import of anything else stays an error. Through the real
compile worker (deviceless)."""

from __future__ import annotations

import json

import pytest

from ..conftest import write_cases

CASES = """\
defaults:
  kind: python
  profiles: [cublas]
  args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
cases:
  - id: needs_a_newer_jax
    callable: user_newer:plain
  - id: needs_a_missing_jax_module
    callable: user_newer_module:plain
  - id: broken_import
    callable: user_broken36:plain
"""
PLAIN = "\n\ndef plain(a, b):\n    return a\n"


@pytest.mark.slow
def test_a_missing_jax_api_in_a_user_module_is_unsupported(tmp_path, run_cli):
    write_cases(tmp_path / "cases" / "py.yaml", CASES)
    (tmp_path / "user_newer.py").write_text("from jax.nn import scaled_matmul_of_the_future" + PLAIN)
    (tmp_path / "user_newer_module.py").write_text("import jax.experimental.module_of_the_future" + PLAIN)
    (tmp_path / "user_broken36.py").write_text("import no_such_dep_xyz" + PLAIN)
    code, out, err = run_cli("run", "--mode", "deviceless", "--json", tmp_path / "r.json", cwd=tmp_path)
    got = {r["case"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    for case, missing in (("needs_a_newer_jax", "scaled_matmul_of_the_future"),
                          ("needs_a_missing_jax_module", "module_of_the_future")):
        assert got[case]["outcome"] == "UNSUPPORTED", got[case]
        assert "lacks an API the case imports" in got[case]["reason"] and missing in got[case]["reason"]
    assert got["broken_import"]["outcome"] == "UNRESOLVED" and "no_such_dep_xyz" in got["broken_import"]["reason"]
