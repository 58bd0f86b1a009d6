"""A case's `requirements:` (a named set or a requirements file): read at load time, bad values are one line
(exit 2), a JAX outside the set's range makes the case UNSUPPORTED without building anything.

The environment itself (built with uv on first use, MaxText compiled there) is exercised by the slow test in
tests/test_maxtext.py."""

from __future__ import annotations

import json

import jax
import pytest

from fp8_check.cases import load as case_mod
from fp8_check.cases.requirement_sets import NAMED, read_set
from fp8_check.verdict import outcome
from fp8_check.versions import requirements
from tests.conftest import write_cases

CASE = """
cases:
- id: needs_more
  kind: python
  callable: mod:step
  args: [{name: x, shape: [16, 16], dtype: bfloat16}]
  requires: [somepkg]
  requirements: %s
"""
MODULE = "import jax.numpy as jnp\n\ndef step(x):\n    return jnp.dot(x, x)\n"


def _write(tmp_path, value: str, reqs: str | None = None):
    (tmp_path / "mod.py").write_text(MODULE)
    if reqs is not None:
        (tmp_path / "reqs.txt").write_text(reqs)
    return write_cases(tmp_path / "cases.yaml", CASE % value)


def test_the_named_maxtext_set_states_its_jax_range_and_excludes_jax():
    found = read_set(NAMED["maxtext"])
    assert found.jax == ">=0.11.1"
    assert "maxtext==0.2.5" in found.requirements
    assert not any(r.split("=")[0].split(">")[0] == "jax" for r in found.requirements)


def test_a_case_reads_its_requirements_file_relative_to_the_case_file(tmp_path):
    path = _write(tmp_path, "reqs.txt", "# ours\nsomepkg>=1.0  # the layers\njax>=0.9\n")
    [case] = case_mod.load([path])
    assert case.requirements and case.requirements.requirements == ("somepkg>=1.0",) and case.requirements.jax == ">=0.9"
    assert case.requirements.name == "reqs.txt"


@pytest.mark.parametrize("value, reqs, message", [
    ("nothere.txt", None, "neither a named set (maxtext, qwix) nor a file next to the case file"),
    ("reqs.txt", "-e .\n", "reqs.txt:1: options ('-e') are not supported"),
    ("reqs.txt", "flax>>1\n", "not a requirement"),
    ("reqs.txt", "jaxlib==0.7.0\n", "chosen per version"),
    ("[1, 2]", None, "expected a named set (maxtext, qwix) or a requirements file"),
])
def test_a_bad_requirements_field_is_one_line_naming_file_case_and_field(tmp_path, run_cli, value, reqs, message):
    path = _write(tmp_path, value, reqs)
    code, out, err = run_cli("list", path)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert f"{path}" in err and "case 'needs_more'" in err and "field 'requirements'" in err


def test_matrix_adds_the_cases_requirements_and_their_jax_range(tmp_path):
    path = _write(tmp_path, "reqs.txt", "somepkg\njax>=0.11.1\n")
    cases = case_mod.load([path])

    class Args:
        with_ = ["flax"]
        with_requirements = None

    assert requirements.extras_from_args(Args(), cases) == (["flax", "somepkg"], ">=0.11.1")


@pytest.mark.slow
def test_a_jax_outside_the_sets_range_is_unsupported_naming_the_range(tmp_path, run_cli):
    path = _write(tmp_path, "reqs.txt", "somepkg\njax>=99\n")
    code, out, err = run_cli("run", path, "--target", "h100", "--profile", "cublas", "--json", tmp_path / "r.json",
                             "--goldens", tmp_path / "g", cwd=tmp_path)
    [row] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert row["outcome"] == outcome.UNSUPPORTED.name
    assert row["reason"].startswith(f"requirements reqs.txt need jax>=99; this is jax {jax.__version__}"), row["reason"]
    assert "fp8-check matrix --jax" in row["reason"]
    assert "the environment for jax" not in out  # nothing was built for it
    assert code == 0
