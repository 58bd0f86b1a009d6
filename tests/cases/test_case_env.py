"""A case's `env:` (issue 45): environment variables the compiled code reads are part of the compile cache's key.

A python case whose module picks a layer's precision from `MY_LAYER_SWITCH` when it is traced: run once with the
FP8 path, then with the variable switched. Without `env:` the second run is the first run's cached compilation (a
stale `PASS (cached)`); with it, the second run compiles anew and sees the plain matmul. Deviceless, real plugins.
"""

from __future__ import annotations

import json

import pytest

from fp8_check.cases._load import CaseError, load_file
from fp8_check.compile._cache import KeyMaterial
from tests.conftest import write_cases

MODEL = '''
import os

import jax.numpy as jnp


def step(x, w):
    if os.environ.get("MY_LAYER_SWITCH") == "plain":
        return jnp.dot(x, w, preferred_element_type=jnp.bfloat16)
    x8, w8 = x.astype(jnp.float8_e4m3fn), w.astype(jnp.float8_e4m3fn)
    return jnp.dot(x8.astype(jnp.bfloat16), w8.astype(jnp.bfloat16), preferred_element_type=jnp.bfloat16)
'''

CASE = '''cases:
- id: switched
  kind: python
  callable: model:step
  args:
    - {{name: x, shape: [64, 128], dtype: bfloat16}}
    - {{name: w, shape: [128, 256], dtype: bfloat16}}
  targets: [h100]
  profiles: [cublas]
{env}'''


def _project(tmp_path, env: str):
    (tmp_path / "model.py").write_text(MODEL)
    write_cases(tmp_path / "cases" / "c.yaml", CASE.format(env=env))
    return tmp_path


def _targets(path) -> list[str]:
    [r] = json.loads(path.read_text())["results"]
    return [g["target"] for g in r["signature"]["gemms"]]


@pytest.mark.parametrize("env, cached", [("  env: [MY_LAYER_SWITCH]\n", False), ("", True)])
@pytest.mark.slow
def test_switching_a_listed_variable_is_never_a_stale_cache_hit(tmp_path, run_cli, monkeypatch, env, cached):
    work = _project(tmp_path, env)
    monkeypatch.syspath_prepend(str(work))
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cc"))
    monkeypatch.setenv("MY_LAYER_SWITCH", "fp8")
    code, out, err = run_cli("bless", "cases", "--goldens", "goldens", cwd=work)
    assert code == 0, out + err
    code, out1, err = run_cli("run", "cases", "--goldens", "goldens", "--json", "fp8.json", cwd=work)
    assert code == 0 and "PASS" in out1, out1 + err
    assert _targets(work / "fp8.json") == ["__cublas$lt$matmul$f8"]
    monkeypatch.setenv("MY_LAYER_SWITCH", "plain")
    code, out2, err = run_cli("run", "cases", "--goldens", "goldens", "--json", "plain.json", "-v", cwd=work)  # -v: a PASS line
    assert ("(cached)" in out2) is cached, out2
    if cached:  # the stale answer this field exists for: the FP8 gemm of the first run, "PASS (cached)"
        assert code == 0 and _targets(work / "plain.json") == ["__cublas$lt$matmul$f8"], out2
    else:
        assert code == 1 and "FAIL" in out2, out2 + err
        assert _targets(work / "plain.json") != ["__cublas$lt$matmul$f8"], out2


@pytest.mark.parametrize("value, field", [
    ("[MY SWITCH]", "env[0]"), ("[1ST]", "env[0]"), ("[A, {B: 1}]", "env[1]"), ("{A: 1}", "env"), ("[]", "env"),
    ("[A=1]", "env[0]"),
])
def test_env_names_are_validated_one_line_naming_file_case_and_field(tmp_path, value, field):
    path = write_cases(tmp_path / "c.yaml", CASE.format(env=f"  env: {value}\n"))
    with pytest.raises(CaseError) as exc:
        load_file(path)
    text = str(exc.value)
    assert "\n" not in text and str(path) in text and "case 'switched'" in text and f"field '{field}'" in text, text


def test_the_key_changes_with_the_values_and_a_case_without_env_keeps_its_key(tmp_path):
    [case] = load_file(write_cases(tmp_path / "c.yaml", CASE.format(env="  env: [MY_LAYER_SWITCH, MY_LAYER_SWITCH]\n")))
    assert case.env == ("MY_LAYER_SWITCH",)
    base = dict(source="s", target_config="t", compiler_options={}, mode="deviceless", versions={}, xla_flags="",
                env_vars={}, distributions="d", imports={}, harness="h")
    fp8, plain, unset = (KeyMaterial(**base, case_env={"MY_LAYER_SWITCH": v}) for v in ("fp8", "plain", None))
    assert len({fp8.key(), plain.key(), unset.key()}) == 3
    assert KeyMaterial(**base).key() == KeyMaterial(**base, case_env={}).key()
