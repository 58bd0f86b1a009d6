"""The target's view of the device: while a deviceless compile traces user code, `jax.devices()`,
`local_devices()`, `device_count()` and `default_backend()` answer with the compile target's devices
(platform 'gpu', their device_kind, compute capability, count), in a case (the worker: import, factory,
tracing), in its repro, and in `fp8-check check` (`--args` factory, tracing; the devices built at the first question).

Proved with a function of our own that takes an FP8 path only on one H100 GPU, and with qwix, whose MXFP8 dot
takes its GPU path (jax.nn.scaled_matmul: a block-scaled dot) only when `jax.devices()[0].platform` is 'gpu'
and otherwise emulates (dequantize, bf16 gemm).
"""

from __future__ import annotations

import json
import shutil

import pytest

from fp8_check.platforms import NVIDIA
from fp8_check.worker import _aot as aot, target_view
from tests.conftest import REPO, write_cases

FIXTURES = REPO / "tests" / "fixtures" / "device_view"


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("branchy.py", "qmx.py", "at_import.py", "backend_at_import.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_view_answers_with_the_target_and_restores_jax():
    import jax

    config = (REPO / "harness" / "fp8_check" / "targets" / "h100.txtpb").read_text()
    devices = aot.compile_device("deviceless", aot.target_config_for("# fp8-check topology: 1x1x8\n" + config,
                                                                     {}, jax.__version__), NVIDIA.jax_platform)
    before = jax.devices
    with target_view(devices) as view:
        assert jax.devices()[0].platform == "gpu" and "H100" in jax.devices()[0].device_kind
        assert jax.device_count() == 8 and len(jax.local_devices()) == 8 and jax.default_backend() == "gpu"
        assert jax.devices("cpu")[0].platform == "cpu"  # another backend, asked by name: as usual
        assert jax.devices()[0].compute_capability == "9.0"
    assert jax.devices is before and jax.devices()[0].platform == "cpu"
    assert view.asked == ["devices", "device_count", "local_devices", "default_backend"]
    with target_view(None) as view:  # no target devices: answered as usual, and recorded
        assert jax.devices()[0].platform == "cpu"
    assert view.asked == ["devices"]


CASE = """cases:
- id: branchy
  kind: python
  callable: branchy:matmul
  args:
  - {name: x, shape: [64, 128], dtype: bfloat16}
  - {name: w, shape: [128, 256], dtype: bfloat16}
  targets: [h100]
  profiles: [cublas]
- id: qwix_mxfp8
  kind: python
  callable: qmx:forward
  args: qmx:forward_args
  requires: [flax, qwix]
  targets: [h100]
  profiles: [cublas]
"""


@pytest.mark.slow
def test_a_case_that_branches_on_the_platform_takes_its_gpu_branch(project, run_cli):
    write_cases(project / "cases" / "c.yaml", CASE)
    code, out, err = run_cli("run", "cases", "-k", "branchy", "--goldens", "g", "--json", "r.json", cwd=project)
    [row] = json.loads((project / "r.json").read_text())["results"]
    assert [g["operand_dtypes"] for g in row["signature"]["gemms"]] == [["f8e4m3fn", "f8e4m3fn"]], out + err


@pytest.mark.slow
def test_qwix_takes_its_gpu_mxfp8_path_in_a_case(project, run_cli):
    write_cases(project / "cases" / "c.yaml", CASE)
    code, out, err = run_cli("show", "qwix_mxfp8", "cases", cwd=project)
    assert code == 0, err
    # the GPU path: jax.nn.scaled_matmul's block-scaled dot on FP8 operands with their scales (the emulation
    # dequantizes to bf16 and has no such call)
    assert "block_scaled_dot" in out and "f8E4M3FN" in out


@pytest.mark.slow
def test_check_sees_the_target_too(project, run_cli):
    code, out, err = run_cli("check", "branchy:matmul", "--arg", "x=bfloat16[64,128]", "--arg", "w=bfloat16[128,256]",
                             "--json", "-", cwd=project)
    assert code == 0, err
    [res] = json.loads(out)["results"]
    assert res["signature"]["gemms"][0]["operand_dtypes"] == ["f8e4m3fn", "f8e4m3fn"] and "not_representative" not in res
    # qwix decides at its first dot, in the --args factory (model.init), and caches the answer: the factory sees the target
    code, out, err = run_cli("check", "qmx:forward", "--args", "qmx:forward_args", "--json", "-", cwd=project)
    assert code == 0, err
    [res] = json.loads(out)["results"]
    assert not any(g["output"] == "bf16" and g["operand_dtypes"] == ["bf16", "bf16"] for g in res["signature"]["gemms"])


def test_the_view_records_a_backend_asked_for_as_answered_by_this_machine():
    import jax
    import jax.extend.backend

    config = (REPO / "harness" / "fp8_check" / "targets" / "h100.txtpb").read_text()
    devices = aot.compile_device("deviceless", aot.target_config_for(config, {}, jax.__version__), NVIDIA.jax_platform)
    before = jax.extend.backend.get_backend
    with target_view(devices) as view:
        assert jax.devices()[0].platform == "gpu"
        assert jax.extend.backend.get_backend().platform == "cpu"  # no target can answer it: recorded
    assert jax.extend.backend.get_backend is before
    assert view.asked == ["devices", "extend.backend.get_backend"] and view.local == ["extend.backend.get_backend"]


@pytest.mark.slow
def test_check_imports_the_module_under_the_targets_view(project, run_cli):
    """Issue 43: a module that asks jax.devices() at import got the CPU path's signature, PASS, from `check`."""
    code, out, err = run_cli("check", "at_import:matmul", "--arg", "x=bfloat16[64,128]", "--arg", "w=bfloat16[128,256]",
                             "--json", "-", cwd=project)
    assert code == 0, err
    [res] = json.loads(out)["results"]
    assert res["signature"]["gemms"][0]["operand_dtypes"] == ["f8e4m3fn", "f8e4m3fn"] and "not_representative" not in res


@pytest.mark.slow
def test_check_of_a_backend_cached_at_import_is_not_representative(project, run_cli):
    code, out, err = run_cli("check", "backend_at_import:matmul", "--arg", "x=bfloat16[64,128]",
                             "--arg", "w=bfloat16[128,256]", cwd=project)
    assert "NOT REPRESENTATIVE: the checked code asked JAX for the device (jax.extend.backend.get_backend())" in out, \
        out + err
