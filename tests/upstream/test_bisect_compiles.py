"""`bisect --criterion compiles`: search for the first version that compiles a case (a fix), where the older side
fails to compile; before, bisect gave up on such an endpoint (exit 125). Real per-version environments and
deviceless compiles; the user's function refuses JAX < 0.10.1 as a model needing a newer JAX does."""

from __future__ import annotations

import pytest

from ..conftest import write_cases

CASES = """\
defaults:
  kind: python
  profiles: [cublas]
  args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
cases:
  - id: new_model
    callable: user_new36:plain
"""
MODULE = '''import jax
import jax.numpy as jnp


def plain(a, b):
    if tuple(int(x) for x in jax.__version__.split(".")[:3]) < (0, 10, 1):
        raise NotImplementedError("this model needs jax >= 0.10.1")
    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))
'''


@pytest.mark.slow
def test_bisect_finds_the_first_compiling_version(tmp_path, run_cli):
    write_cases(tmp_path / "cases" / "py.yaml", CASES)
    (tmp_path / "user_new36.py").write_text(MODULE)
    args = ("bisect", "new_model", "cases", "--good", "0.10.0", "--bad", "0.11.0")
    code, out, err = run_cli(*args, cwd=tmp_path)  # the default criterion: the older side is untestable
    assert code == 125 and "the good version 0.10.0 is untestable: does not compile" in out, (code, out, err)
    # the exit 125 points to the criterion that can decide it
    assert "fp8-check bisect new_model --good 0.10.0 --bad 0.11.0 --criterion compiles" in out
    code, out, err = run_cli(*args, "--criterion", "compiles", cwd=tmp_path)
    assert code == 1, (code, out, err)
    assert "jax 0.10.0    good  reference: does not compile: NotImplementedError" in out
    assert "first version where the case compiles: jax 0.10.1 (last where it did not: jax 0.10.0)" in out
