"""The pytest plugin (entry point pytest11 `fp8_check`): case files as pytest items, in a real pytest subprocess."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fp8_check.verdict import _golden as golden

from ..conftest import write_cases


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rsx", *args],
                          cwd=str(cwd), capture_output=True, text=True, env=env, timeout=600)


def test_plugin_is_registered_by_entry_point():
    from importlib.metadata import entry_points

    assert any(ep.value == "fp8_check.cli.pytest_plugin" for ep in entry_points(group="pytest11"))


@pytest.mark.slow
def test_cases_are_items_with_k_junitxml_and_outcome_mapping(workspace):
    write_cases(workspace / "cases" / "extra.yaml", """\
cases:
  - id: extra_known_issue
    description: a known issue that is active on every version -> XFAIL
    out_dtype: float32
    profiles: [cublas]
    known_issues:
      - url: https://example.invalid/issue/1
        jax: ">=0.1"
        summary: pretend it is broken
""")
    golden.bless(workspace / "goldens", "extra_known_issue", "h100", "cublas", "deviceless", "0.0",
                 {"kernels": 99, "launches": [], "gemms": [], "unfused": []})
    p = pytest_run(workspace, "cases/", "-k", "plain_f32 or extra", "--fp8-mode", "deviceless",
                   "--junitxml", "junit.xml")
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"2 passed, \d+ deselected, 1 xfailed", p.stdout), p.stdout
    assert "XFAIL cases/extra.yaml::extra_known_issue[h100-cublas]" in p.stdout
    cases = {c.get("name"): c for c in ET.parse(workspace / "junit.xml").getroot().iter("testcase")}
    assert set(cases) == {"seed_plain_f32[h100-cublas]", "seed_plain_f32[h100-triton]", "extra_known_issue[h100-cublas]"}
    props = {p.get("name"): p.get("value") for p in cases["seed_plain_f32[h100-cublas]"].iter("property")}
    assert props["fp8_outcome"] == "PASS" and props["kernels"].isdigit()


@pytest.mark.slow
def test_failure_shows_the_field_diff_and_unsupported_is_a_skip(workspace):
    path = golden.path_for(workspace / "goldens", "seed_relu_f32", "h100", "cublas", "deviceless")
    path.write_text(path.read_text().replace("epilogue: RELU", "epilogue: DEFAULT"))
    p = pytest_run(workspace, "cases/seed.yaml", "-k", "seed_relu_f32", "--fp8-mode", "deviceless",
                   "--fp8-profile", "cublas,default", "-x")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "FAIL h100/cublas seed_relu_f32" in p.stdout
    assert "gemms[0].epilogue: expected DEFAULT, found RELU" in p.stdout
    # the golden differs in the epilogue only: the same kernels on the same dtypes, so no estimated cost
    assert "cost: estimated below the model's resolution (|Δ| < 0.5 µs or 0.1 %) per call on H100 SXM at these shapes" \
        in p.stdout
    # deviceless `default` compiles (autotune replay) and its failure says whose decisions the program holds
    p = pytest_run(workspace, "cases/seed.yaml", "-k", "seed_plain_f32", "--fp8-mode", "deviceless",
                   "--fp8-profile", "default")
    assert p.returncode == 1 and "NEW h100/default seed_plain_f32" in p.stdout, p.stdout + p.stderr
    assert "no autotune results for this target and release: XLA's deviceless defaults for all 1" in p.stdout
    write_cases(workspace / "cases" / "missing.yaml", """\
cases:
  - id: needs_missing_dependency
    kind: python
    callable: no_such_package_xyz.layers:dense
    requires: [no_such_package_xyz]
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}]
    profiles: [cublas]
""")
    p = pytest_run(workspace, "cases/missing.yaml", "--fp8-mode", "deviceless", "--fp8-profile", "cublas")
    assert p.returncode == 0 and "1 skipped" in p.stdout, p.stdout + p.stderr


@pytest.mark.slow
def test_xdist_parallelism(workspace):
    p = pytest_run(workspace, "cases/seed.yaml", "-k", "plain", "--fp8-mode", "deviceless", "-n", "2")
    assert p.returncode == 0 and "4 passed" in p.stdout, p.stdout + p.stderr


@pytest.mark.slow
def test_no_collection_outside_an_fp8_check_project(tmp_path):
    # A `cases:` YAML in another project (no goldens/ beside cases/) and arbitrary YAML are left alone.
    write_cases(tmp_path / "cases" / "c.yaml", "cases:\n  - id: foreign\n")
    write_cases(tmp_path / "conf" / "other.yaml", "key: value\n")
    (tmp_path / "test_ok.py").write_text("def test_ok():\n    pass\n")
    p = pytest_run(tmp_path, ".")
    assert p.returncode == 0 and "1 passed" in p.stdout, p.stdout + p.stderr
    # --fp8-check opts in: the case file is collected (and validated), the other YAML still is not.
    p = pytest_run(tmp_path, "cases", "conf", "--fp8-check", "--collect-only")
    assert "foreign[h100-cublas]" in p.stdout and "other.yaml" not in p.stdout, p.stdout
    # and --no-fp8-check turns it off inside a project
    (tmp_path / "goldens").mkdir()
    p = pytest_run(tmp_path, "cases", "--no-fp8-check", "--collect-only")
    assert "foreign" not in p.stdout and p.returncode == 5


def test_a_bad_case_file_is_a_one_line_collection_error(workspace):
    write_cases(workspace / "cases" / "bad.yaml", "cases:\n  - id: bad_one\n    epilogue: sparkle\n")
    p = pytest_run(workspace, "cases/bad.yaml", "--fp8-mode", "deviceless")
    assert p.returncode == 2
    assert re.search(r"bad\.yaml:\d+: case 'bad_one': field 'epilogue'", p.stdout), p.stdout


@pytest.mark.slow
def test_pool_and_cache_give_the_same_items_and_outcomes(workspace, tmp_path):
    env_cache = str(tmp_path / "cc")

    def run(name, *extra):
        env = dict(os.environ, FP8_CHECK_COMPILE_CACHE=env_cache)
        env.pop("PYTEST_XDIST_WORKER", None)
        env.pop("PYTEST_ADDOPTS", None)
        p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "cases/seed.yaml",
                            "--fp8-mode", "deviceless", "--junitxml", name, *extra],
                           cwd=str(workspace), capture_output=True, text=True, env=env, timeout=600)
        assert p.returncode == 0, p.stdout + p.stderr
        items = [(c.get("name"), {q.get("name"): q.get("value") for q in c.iter("property")})
                 for c in ET.parse(workspace / name).getroot().iter("testcase")]
        return p, items

    p1, one = run("one.xml", "--fp8-jobs", "1", "--fp8-no-cache")
    p2, cold = run("cold.xml", "--fp8-jobs", "2")
    p3, warm = run("warm.xml", "--fp8-jobs", "2")
    assert "16 passed" in p1.stdout and "16 passed" in p2.stdout and "16 passed" in p3.stdout
    names = [n for n, _ in one]
    assert names == [n for n, _ in cold] == [n for n, _ in warm] and len(names) == 16
    assert all(props["fp8_outcome"] == "PASS" for _, props in one + cold + warm)
    assert {props["cached"] for _, props in one + cold} == {"false"}
    assert {props["cached"] for _, props in warm} == {"true"}
