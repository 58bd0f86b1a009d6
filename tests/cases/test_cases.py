"""Case loading and strict validation: every error path gives one line naming file, case and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from fp8_check.cases import _load as cases
from fp8_check.cases._load import CaseError

from ..conftest import REPO, write_cases

BASE = """\
cases:
  - id: c1
    out_dtype: float8_e4m3fn
    clamp: true
"""


def load_text(tmp_path: Path, text: str) -> list[cases.Case]:
    return cases.load([write_cases(tmp_path / "c.yaml", text)])


def error_of(tmp_path: Path, text: str) -> CaseError:
    with pytest.raises(CaseError) as info:
        load_text(tmp_path, text)
    err = info.value
    assert "\n" not in str(err), "an error is one line"
    assert str(tmp_path / "c.yaml") in str(err), "names the file"
    return err


def test_defaults_and_fields_load(tmp_path):
    (case,) = load_text(tmp_path, BASE)
    assert case.id == "c1" and case.spec.out_dtype == "float8_e4m3fn" and case.spec.clamp is True
    assert case.spec.dequant == "float32" and case.spec.shape.m == 64 and case.line == 2


def test_defaults_merge_and_bias_dtype_default(tmp_path):
    (case,) = load_text(tmp_path, "defaults:\n  dequant: bfloat16\ncases:\n  - id: b\n    epilogue: bias\n")
    assert case.spec.dequant == "bfloat16" and case.spec.bias_dtype == "bfloat16"


@pytest.mark.parametrize(
    "snippet, field, needle",
    [
        ("    clmap: true\n", "clmap", "did you mean 'clamp'"),
        ("    epilogue: swish\n", "epilogue", "allowed: none, relu, gelu_tanh"),
        ("    a_dtype: float16\n", "a_dtype", "allowed: float8_e4m3fn, float8_e5m2"),
        ("    dequant: float64\n", "dequant", "allowed: float32, bfloat16, float16"),
        ("    transpose_b: 1\n", "transpose_b", "allowed: true, false"),
        ("    transpose_b: 'yes'\n", "transpose_b", "allowed: true, false"),
        ("    input_scales: all\n", "input_scales", "allowed: none, a, b, both"),
        ("    output_scale: 2.0\n", "output_scale", "allowed: none, multiply, divide"),
        ("    amax: post_scale\n", "amax", "allowed: none, pre_scale"),
        ("    profiles: [cublas, tensorrt]\n", "profiles", "allowed: cublas, triton, default"),
        ("    profiles: [cublas, cublas]\n", "profiles", "twice"),
        ("    targets: [h100, v100]\n", "targets", "allowed: a100"),
        ("    shape: [64, 32, 64]\n", "shape", "expected a mapping"),
        ("    shape: {m: 64, n: 32}\n", "shape.k", "missing"),
        ("    shape: {m: 64, n: 32, k: 0}\n", "shape.k", "positive integer"),
        ("    shape: {m: 64, n: 32, k: 8, batch: true}\n", "shape.batch", "positive integer"),
        ("    shape: {m: 64, n: 32, k: 8, depth: 2}\n", "shape.depth", "unknown key"),
        ("    description: 12\n", "description", "expected a string"),
        ("    kind: cuda\n", "kind", "allowed: pattern, python"),
        ("    known_issues: {url: x}\n", "known_issues", "expected a list"),
        ("    known_issues: [{url: 'https://x/1'}]\n", "known_issues[0].jax", "missing"),
        ("    known_issues: [{jax: '>=0.1'}]\n", "known_issues[0].url", "or a summary where none exists"),
        ("    known_issues: [{url: 'nope', jax: '>=0.1'}]\n", "known_issues[0].url", "http(s) URL"),
        ("    known_issues: [{url: 'https://x/1', jax: 'soon'}]\n", "known_issues[0].jax", "version range"),
        ("    known_issues: [{url: 'https://x/1', jax: '>=0.1', bug: 3}]\n", "known_issues[0].bug", "unknown key"),
        ("    filecheck: {cuda: 'CHECK: x'}\n", "filecheck", "allowed: cublas"),
    ],
)
def test_bad_field(tmp_path, snippet, field, needle):
    err = error_of(tmp_path, BASE + snippet)
    assert err.case == "c1" and err.field == field
    assert f"case 'c1': field '{field}'" in str(err)
    assert needle in str(err)


@pytest.mark.parametrize(
    "text, field, needle",
    [
        ("cases:\n  - id: x\n    clamp: true\n    out_dtype: bfloat16\n", "clamp", "out_dtype is bfloat16"),
        ("cases:\n  - id: x\n    bias_dtype: float32\n", "bias_dtype", "has no bias"),
        ("cases:\n  - id: x\n    scale_dtype: bfloat16\n", "scale_dtype", "has no scale"),
    ],
)
def test_contradictions(tmp_path, text, field, needle):
    err = error_of(tmp_path, text)
    assert err.field == field and needle in str(err)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("cases:\n  - id: x\n    clamp: true\n    clamp: false\n", "duplicate key 'clamp'"),
        ("cases:\n  - id: x\n   bad: indent\n", "invalid YAML"),
        ("cases: {id: x}\n", "expected a list of cases"),
        ("- id: x\n", "expected a mapping with a 'cases' list"),
        ("case:\n  - id: x\n", "unknown top-level key"),
        ("cases:\n  - description: no id\n", "every case needs an id"),
        ("cases:\n  - id: 'has space'\n", "an id is letters"),
        ("cases:\n  - 3\n", "expected a mapping"),
        ("defaults:\n  id: x\ncases: []\n", "ids cannot have a default"),
        ("defaults:\n  colour: red\ncases: []\n", "defaults.colour"),
        ("cases:\n  - id: x\n  - id: x\n", "duplicate id"),
        ("cases:\n  - id: p\n    kind: python\n", "'callable': missing"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'no colon'\n    args: []\n", "package.module:function"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'm:f'\n", "'args': missing"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'm:f'\n    args: [{name: a, shape: [2], dtype: int4}]\n", "args[0].dtype"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'm:f'\n    args: [{name: a, shape: [2]}]\n", "exactly name, shape, dtype"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'm:f'\n    args: [{name: 1a, shape: [2], dtype: float32}]\n", "not a Python identifier"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'm:f'\n    args: [{name: a, shape: [0], dtype: float32}]\n", "positive integers"),
        ("cases:\n  - id: p\n    kind: python\n    callable: 'm:f'\n    clamp: true\n    args: [{name: a, shape: [2], dtype: float32}]\n", "field 'clamp': unknown key"),
    ],
)
def test_structure_errors(tmp_path, text, needle):
    err = error_of(tmp_path, text)
    assert needle in str(err)


def test_error_carries_line_number(tmp_path):
    err = error_of(tmp_path, "cases:\n  - id: ok\n  - id: bad\n    relu: true\n")
    assert str(err).startswith(f"{tmp_path / 'c.yaml'}:3: case 'bad': field 'relu': unknown key")


def test_missing_path(tmp_path):
    with pytest.raises(CaseError, match="no such file"):
        cases.load([tmp_path / "nope.yaml"])


def test_duplicate_ids_across_files(tmp_path):
    write_cases(tmp_path / "d" / "a.yaml", "cases:\n  - id: same\n")
    write_cases(tmp_path / "d" / "b.yaml", "cases:\n  - id: same\n")
    with pytest.raises(CaseError, match=r"duplicate id, first defined at .*a\.yaml:2"):
        cases.load([tmp_path / "d"])


def test_select_filters_by_substring_alternatives(tmp_path):
    loaded = load_text(tmp_path, "cases:\n  - id: relu_a\n  - id: gelu_b\n  - id: plain\n")
    assert [c.id for c in cases.matching(loaded, "relu,gelu")] == ["relu_a", "gelu_b"]
    assert cases.matching(loaded, None) == loaded


def test_known_issue_applies_by_version_target_profile(tmp_path):
    (case,) = load_text(
        tmp_path,
        "cases:\n  - id: k\n    known_issues:\n      - url: https://github.com/openxla/xla/issues/17887\n"
        "        jax: '>=0.4.32,<0.4.34'\n        profiles: [cublas]\n",
    )
    assert case.known_issue("0.4.32", "h100", "cublas") is not None
    assert case.known_issue("0.4.31", "h100", "cublas") is None
    assert case.known_issue("0.4.33", "h100", "triton") is None


def test_repository_cases_are_valid():
    loaded = cases.load([REPO / "cases"])
    assert len({c.id for c in loaded}) == len(loaded) >= 8


def test_cli_typo_is_one_clear_line_and_exit_2(tmp_path, run_cli):
    write_cases(tmp_path / "cases" / "t.yaml", "cases:\n  - id: t\n    epilouge: relu\n")
    code, out, err = run_cli("run", "--mode", "deviceless", cwd=tmp_path)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert "t.yaml:2: case 't': field 'epilouge': unknown key; did you mean 'epilogue'?" in lines[0]
    assert "Traceback" not in out + err
