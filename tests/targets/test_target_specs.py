"""Target specs that cannot lie: versions stated once, written where each JAX version's XLA reads them,
user specs fixed or refused, and the cuDNN canary proving the version took effect (real deviceless compiles)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from fp8_check.compile._service import Compiler
from fp8_check.platforms import AMD
from fp8_check.targets import TargetSpecError, load_target, parse_target, target_names
from fp8_check.verdict import CudnnCanaryError, check_cudnn
from fp8_check.worker import _aot as aot

from ..conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "targets"


def test_shipped_targets_state_real_versions_once_with_a_source():
    for name in target_names():
        text = (REPO / "harness" / "fp8_check" / "targets" / f"{name}.txtpb").read_text()
        # No version field in the body: only the header states them.
        assert not re.search(r"^\s*(runtime_version|dnn_version_info)\s*\{", text, re.M), name
        assert not re.search(r"^\s*dnn_version\s*:", text, re.M), name
        t = load_target(name)
        if t.platform is AMD:  # the ROCm 7 runtime the jax-rocm7 plugins are built for; no cuDNN
            assert t.versions.runtime == (7, 0, 0) and t.versions.dnn == ()
            assert "rocm_runtime source:" in t.versions.source and t.notes == ()
            continue
        assert t.versions.runtime == (12, 8, 0)
        assert t.versions.dnn in ((9, 8, 0), (9, 13, 0))  # released cuDNN versions (10.8 never existed)
        assert "source:" in t.versions.source and t.notes == ()
    assert load_target("b200").versions.dnn == (9, 13, 0)


@pytest.mark.parametrize("jax_version,top,device", [
    ("0.6.1", True, False), ("0.9.2", True, False),  # gpu_device_info.dnn_version is a parse error before 0.10
    ("0.10.0", True, True), ("0.11.0", True, True),  # both parse; XLA reads the top-level one
    ("0.11.1", True, True), ("0.12.0.1", True, True),  # XLA reads only gpu_device_info.dnn_version
])
def test_versions_are_written_where_each_jax_version_parses_them(jax_version, top, device):
    t = load_target("b200")
    text = aot.target_config_for(t.config_text, t.versions_dict(), jax_version)
    assert ("dnn_version_info {\n  major: 9\n  minor: 13\n  patch: 0\n}" in text) is top
    assert ('  dnn_version: "9.13.0"\n}' in text) is device  # inside gpu_device_info, before its closing brace
    assert text.count("runtime_version {") == 1 and "major: 12\n  minor: 8" in text


def test_field_read_follows_the_measured_versions():
    assert aot.dnn_field_read("0.11.0") == "dnn_version_info"
    assert aot.dnn_field_read("0.11.1") == "gpu_device_info.dnn_version"
    assert aot.dnn_field_read("0.12.0.1") == "gpu_device_info.dnn_version"


def test_user_spec_with_top_level_dnn_is_fixed_and_says_so():
    t = load_target(str(FIXTURES / "sm100_top_level_dnn.txtpb"))
    assert t.versions.dnn == (9, 13, 0) and t.compute_capability == (10, 0)
    assert len(t.notes) == 1 and "dnn_version_info" in t.notes[0] and "9.13.0" in t.notes[0]
    # The spec body no longer carries the field XLA might ignore; the worker writes both.
    assert not re.search(r"^\s*dnn_version_info", t.config_text, re.M)


def test_spec_without_runtime_or_with_conflicting_cudnn_is_refused():
    with pytest.raises(TargetSpecError) as e:
        load_target(str(FIXTURES / "sm100_no_runtime.txtpb"))
    assert e.value.field == "runtime_version"
    with pytest.raises(TargetSpecError) as e:
        load_target(str(FIXTURES / "sm100_conflicting_dnn.txtpb"))
    assert e.value.field == "gpu_device_info.dnn_version" and "9.8.0" in str(e.value) and "9.13.0" in str(e.value)
    no_dnn = re.sub(r"dnn_version_info \{[^}]*\}\n", "", (FIXTURES / "sm100_top_level_dnn.txtpb").read_text())
    with pytest.raises(TargetSpecError):
        parse_target("x", no_dnn)


@pytest.mark.slow
def test_target_check_cli_on_the_locked_jax(run_cli):
    code, out, err = run_cli("target", "check", FIXTURES / "sm100_top_level_dnn.txtpb")
    assert code == 0, out + err
    assert "cuDNN 9.13.0" in out and "fixed:" in out and "__cudnn$blockScaledDot reached" in out
    code, out, err = run_cli("target", "check", FIXTURES / "sm100_no_runtime.txtpb")
    assert code == 3 and "runtime_version" in err
    code, out, err = run_cli("target", "check")
    assert code == 0, out + err
    for name in target_names():
        if load_target(name).platform is AMD:  # checked by name, in the ROCm environment (tests/platforms/test_rocm.py)
            assert f"{name}" in out.splitlines()[0] and "compile in another environment" in out.splitlines()[0]
            continue
        assert f"{name}: compute capability" in out
    assert out.count("__cudnn$blockScaledDot reached") == 1  # b200 only: h100/h200/a100 are below sm_100


@pytest.mark.slow
def test_cudnn_canary_catches_a_field_this_xla_ignores():
    """Written as for JAX 0.9 (top-level dnn_version_info only), the locked XLA ignores cuDNN: exit-3 error."""
    stale = dataclasses.replace(load_target("b200"), write_for_jax="0.9.0")
    with Compiler("deviceless") as compiler:
        jax_version = compiler.environment()["jax"]
        if aot.dnn_field_read(jax_version) != "gpu_device_info.dnn_version":
            pytest.skip(f"jax {jax_version} still reads the top-level field")
        with pytest.raises(CudnnCanaryError) as e:
            check_cudnn(compiler, stale, jax_version)
        assert "gpu_device_info.dnn_version" in str(e.value) and jax_version in str(e.value)
        assert check_cudnn(compiler, load_target("b200"), jax_version).reached
        assert not check_cudnn(compiler, load_target("h100"), jax_version).checked
