"""`fp8-check target capture`: decoding XLA's serialized topology into a target spec that XLA accepts.

On CPU the worker serializes the compile-only topology built from a shipped
spec (the same PjRtTopologyDescriptionProto / GpuTopologyProto / GpuTargetConfigProto
that an attached GPU serializes to); the decoded spec must carry the same
values and compile the canary to an FP8 gemm, deviceless, in a fresh worker.
"""

from __future__ import annotations

import struct

import pytest

from fp8_check.compile import _render as render
from fp8_check.compile._service import Compiler
from fp8_check.gpu import _capture as capture
from fp8_check.signature import _extract as signature
from fp8_check.targets import PROFILES, load_target, parse_target
from fp8_check.verdict._canary import CANARY

from ..conftest import requires_gpu


@pytest.fixture(scope="module")
def h100_topology() -> bytes:
    with Compiler("deviceless") as compiler:
        h100 = load_target("h100")
        reply = compiler.worker.request({"op": "topology", "target_config": h100.config_text,
                                         "target_versions": h100.versions_dict()})
    assert reply.get("ok"), reply
    return capture.decode_reply(reply)


def test_decoded_target_config_carries_the_spec_values(h100_topology):
    text = capture.config_text(capture.target_config_from_topology(h100_topology))
    shipped = load_target("h100").config_text
    for field in ("core_count: 132", "shared_memory_per_block_optin: 232448", "l2_cache_size: 52428800",
                  "clock_rate_ghz: 1.98", "device_memory_size: 84942979072", "memory_bandwidth: 3352320000000",
                  'platform_name: "CUDA"', 'device_description_str: "NVIDIA H100 80GB HBM3"'):
        assert field in shipped and field in text, field
    assert "runtime_version {\n  major: 12\n  minor: 8\n}" in text
    assert "cuda_compute_capability {\n    major: 9\n" in text
    assert "# unknown field" not in text
    assert parse_target("x", text).compute_capability == (9, 0)


@pytest.mark.slow
def test_captured_spec_compiles_the_canary_to_an_fp8_gemm(h100_topology, tmp_path):
    config = capture.config_text(capture.target_config_from_topology(h100_topology))
    env = {"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "cuda_plugin": "0.12.0.1",
           "device": {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "driver_version": "570.1",
                      "cuda_runtime": "12.8", "cublas": "12.8.4"}}
    text = capture.spec_text("h100cap", config, env, when=0, host="gpu-host")
    assert text.startswith("# fp8-check target spec: NVIDIA H100 80GB HBM3 (sm_90), captured from a real device")
    assert "Captured 1970-01-01T00:00:00Z on gpu-host" in text and "driver 570.1" in text
    path = capture.write_spec("h100cap", text, tmp_path)
    target = load_target(str(path))
    assert target.fp8_capable and target.has_runtime_version
    assert target.description.startswith("NVIDIA H100 80GB HBM3 (sm_90), captured")
    with Compiler("deviceless") as compiler:
        comp = compiler.compile(render.render(CANARY), target, PROFILES["cublas"])
    assert comp.ok, comp.error
    assert signature.extract(comp.hlo).fp8_gemms == 1


def test_write_spec_refuses_to_overwrite_and_bad_names(tmp_path):
    text = load_target("h100").config_text
    capture.write_spec("a", text, tmp_path)
    with pytest.raises(FileExistsError):
        capture.write_spec("a", text, tmp_path)
    capture.write_spec("a", text, tmp_path, force=True)
    with pytest.raises(ValueError):
        capture.write_spec("../evil", text, tmp_path)
    with pytest.raises(ValueError):
        capture.write_spec("b", "gpu_device_info {}\n", tmp_path)  # no compute capability: not a target


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def test_wire_decoder_scalars_negative_ints_floats_and_unknown_fields():
    device_info = (
        _varint(6 << 3) + _varint(132)  # core_count
        + _varint(13 << 3 | 5) + struct.pack("<f", 1.755)  # clock_rate_ghz
        + _varint(36 << 3) + _varint((1 << 64) - 1)  # numa_node -1 (host specific: dropped)
        + _varint(99 << 3) + _varint(7)  # a field this XLA does not know yet
    )
    config = _varint(1 << 3 | 2) + _varint(len(device_info)) + device_info + _varint(4 << 3 | 2) + _varint(4) + b"CUDA"
    lines = capture.to_text(config, "GpuTargetConfigProto")
    assert lines == ["gpu_device_info {", "  core_count: 132", "  clock_rate_ghz: 1.755", "  numa_node: -1",
                     "  # unknown field 99 (wire type 0): 7", "}", 'platform_name: "CUDA"']
    assert "numa_node" not in capture.config_text(config)
    with pytest.raises(capture.CaptureError, match="no platform_specific_topology"):
        capture.target_config_from_topology(_varint(2 << 3 | 2) + _varint(4) + b"cuda")


def test_cli_capture_without_gpu_is_a_usage_error(run_cli, monkeypatch):
    monkeypatch.setenv("FP8_CHECK_NO_GPU", "1")
    code, out, err = run_cli("target", "capture", "mine")
    assert code == 2 and "needs a GPU" in err


@requires_gpu
def test_gpu_capture_writes_a_spec_that_compiles(run_cli, tmp_path):
    code, out, err = run_cli("target", "capture", "local", "--dir", tmp_path)
    assert code == 0, err
    target = load_target(str(tmp_path / "local.txtpb"))
    assert target.has_runtime_version and "captured from a real device" in target.description
    with Compiler("deviceless") as compiler:
        comp = compiler.compile(render.render(CANARY), target, PROFILES["cublas"])
    assert comp.ok, comp.error
    if target.fp8_capable:
        assert signature.extract(comp.hlo).fp8_gemms == 1


def test_wire_decoder_packed_repeated_scalars_and_a_field_whose_type_changed():
    # the H200 session's capture crashed on a length-delimited value where the schema has an integer: a newer XLA
    # packs a repeated scalar (wire type 2) or changed a field's type; the first is decoded, the second shown
    packed = bytes(_varint(5) + _varint(300) + _varint(7))
    device_info = _varint(6 << 3 | 2) + _varint(len(packed)) + packed  # core_count as a packed repeated varint
    device_info += _varint(13 << 3 | 2) + _varint(8) + struct.pack("<ff", 1.5, 2.0)  # clock_rate_ghz packed floats
    device_info += _varint(16 << 3) + _varint(9)  # the compute capability (a message) sent as a varint
    config = _varint(1 << 3 | 2) + _varint(len(device_info)) + device_info
    lines = capture.to_text(config, "GpuTargetConfigProto")
    assert lines[1:4] == ["  core_count: 5", "  core_count: 300", "  core_count: 7"]
    assert lines[4:6] == ["  clock_rate_ghz: 1.5", "  clock_rate_ghz: 2"]
    assert lines[6] == "  # field 16 (cuda_compute_capability): wire type 0, expected 2: 9"
