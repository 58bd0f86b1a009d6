"""A `price_at` whose shapes cannot compile is an error of the case (UNRESOLVED, naming price_at and XLA's first
line), never an estimate silently taken at the case's test shapes. Compiled deviceless through the real plugin."""

from __future__ import annotations

import json

import pytest

CASE = """cases:
  - id: pa_overflow
    dequant: float32
    input_scales: both
    output_scale: none
    clamp: false
    out_dtype: float32
    price_at: {m: 4611686018427387904, n: 4611686018427387904, k: 4611686018427387904}
    profiles: [cublas]
"""


@pytest.mark.slow
def test_a_price_at_that_does_not_compile_is_unresolved(run_cli, tmp_path):
    (tmp_path / "c.yaml").write_text(CASE)
    code, out, err = run_cli("run", tmp_path / "c.yaml", "--target", "h100", "--mode", "deviceless", "--goldens",
                             tmp_path / "g", "--json", tmp_path / "r.json", cwd=tmp_path)
    [r] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert r["outcome"] == "UNRESOLVED" and code == 1, (code, r["outcome"], r["reason"])
    assert r["reason"].startswith("price_at (m=4611686018427387904, n=4611686018427387904, k=4611686018427387904) "
                                  "does not compile: ") and "overflow" in r["reason"]
    assert r.get("estimate") is None
