"""`fp8-check target capture NAME`: write the GpuTargetConfig of the local GPU as a target spec.

Where the spec comes from: JAX exposes the topology of the local devices
(`jax.experimental.topologies.get_attached_topology`), and its `serialize()`
returns XLA's `PjRtTopologyDescriptionProto`. For the CUDA plugin its
`platform_specific_topology` is an `Any` holding an `xla.GpuTopologyProto`, whose
field 8, `gpu_target_config`, is the `stream_executor.GpuTargetConfigProto` that
XLA itself built from the device (StreamExecutor's device description: core
count, shared memory, clocks, compute capability, CUDA runtime and cuDNN
versions). That is exactly what a deviceless compile consumes, so a captured spec
is what XLA saw on the real device, not numbers copied from a data sheet.

JAX has no Python API that returns the target config as text, and the worker
must not depend on `protobuf`, so this module decodes the protobuf wire format
itself, with the field numbers of `xla/stream_executor/device_description.proto`
and `xla/service/gpu_topology.proto` (checked against the descriptors embedded
in the jax-cuda12 plugin 0.12.0.1), and prints the text format XLA parses. A
field this table does not know is kept as a comment (`# unknown field N ...`)
rather than dropped silently; `autotune_results` is left out (a spec is a
device description, autotuning results do not belong in it).

The same decoder runs on CPU in the tests: a deviceless topology built from a
shipped spec serializes to the same protos, so the test decodes it and compiles
with the result.
"""

from __future__ import annotations

import base64
import getpass
import platform
import struct
import time
from pathlib import Path
from typing import AbstractSet, Any

from fp8_check import platforms
from fp8_check.core import atomic_write, check
from fp8_check.platforms import ARCH_NAME
from fp8_check.targets import TARGET_DIR, parse_target

# message name -> {field number: (field name, type, message type or enum names)}
_INT, _UINT, _BOOL, _STR, _FLOAT, _MSG, _ENUM, _MAP = "int", "uint", "bool", "str", "float", "msg", "enum", "map"

SCHEMA: dict[str, dict[int, tuple]] = {
    "PjRtTopologyDescriptionProto": {
        1: ("platform_id", _UINT, None),
        2: ("platform_name", _STR, None),
        3: ("platform_version", _STR, None),
        4: ("is_subslice_topology", _BOOL, None),
        9: ("platform_specific_topology", _MSG, "Any"),
    },
    "Any": {1: ("type_url", _STR, None), 2: ("value", "bytes", None)},
    "GpuTopologyProto": {
        3: ("platform_version", _STR, None),
        4: ("num_partitions", _INT, None),
        5: ("num_hosts_per_partition", _INT, None),
        6: ("num_devices_per_host", _INT, None),
        8: ("gpu_target_config", "bytes", None),
        9: ("host_target_machine_options", "bytes", None),
        10: ("num_devices_per_process", _INT, None),
    },
    "GpuTargetConfigProto": {
        1: ("gpu_device_info", _MSG, "GpuDeviceInfoProto"),
        4: ("platform_name", _STR, None),
        5: ("dnn_version_info", _MSG, "VersionProto"),
        6: ("autotune_results", "skip", None),
        7: ("device_description_str", _STR, None),
        8: ("runtime_version", _MSG, "VersionProto"),
    },
    "VersionProto": {1: ("major", _INT, None), 2: ("minor", _INT, None), 3: ("patch", _INT, None)},
    "CudaComputeCapabilityProto": {
        1: ("major", _INT, None),
        2: ("minor", _INT, None),
        3: ("feature_extension", _ENUM, ("UNSPECIFIED", "NONE", "ACCELERATED_FEATURES", "FAMILY_COMPATIBLE_FEATURES")),
    },
    "RocmComputeCapabilityProto": {1: (ARCH_NAME, _STR, None)},
    "OneAPIComputeCapabilityProto": {1: ("architecture", _STR, None)},
    "ExecutionUnitDescriptionProto": {1: ("rate_infos", _MAP, "RateInfosEntry")},
    "RateInfosEntry": {1: ("key", _INT, None), 2: ("value", _MSG, "RateInfoProto")},
    "RateInfoProto": {1: ("clock_rate_ghz", _FLOAT, None), 2: ("units_per_core", _INT, None), 3: ("ops_per_clock", _INT, None)},
    "DeviceInterconnectInfoProto": {1: ("active_links", _INT, None), 2: ("cluster_uuid", _STR, None), 3: ("clique_id", _STR, None)},
    "GpuDeviceInfoProto": {
        1: ("threads_per_block_limit", _INT, None),
        2: ("threads_per_warp", _INT, None),
        3: ("shared_memory_per_block", _INT, None),
        4: ("shared_memory_per_core", _INT, None),
        5: ("threads_per_core_limit", _INT, None),
        6: ("core_count", _INT, None),
        7: ("fpus_per_core", _INT, None),
        8: ("block_dim_limit_x", _INT, None),
        9: ("block_dim_limit_y", _INT, None),
        10: ("block_dim_limit_z", _INT, None),
        11: ("memory_bandwidth", _INT, None),
        12: ("l2_cache_size", _INT, None),
        13: ("clock_rate_ghz", _FLOAT, None),
        14: ("device_memory_size", _INT, None),
        15: ("shared_memory_per_block_optin", _INT, None),
        16: (platforms.NVIDIA.arch_field, _MSG, "CudaComputeCapabilityProto"),
        17: (platforms.AMD.arch_field, _MSG, "RocmComputeCapabilityProto"),
        18: ("registers_per_core_limit", _INT, None),
        19: ("registers_per_block_limit", _INT, None),
        20: ("scalar_unit_description", _MSG, "ExecutionUnitDescriptionProto"),
        21: ("matrix_unit_description", _MSG, "ExecutionUnitDescriptionProto"),
        22: ("oneapi_compute_capability", _MSG, "OneAPIComputeCapabilityProto"),
        23: ("driver_version", _STR, None),
        24: ("kernel_mode_driver_version", _STR, None),
        25: ("runtime_version", _STR, None),
        26: ("compile_time_toolkit_version", _STR, None),
        27: ("dnn_version", _STR, None),
        28: ("cub_version", _STR, None),
        29: ("device_interconnect_info", _MSG, "DeviceInterconnectInfoProto"),
        30: ("device_vendor", _STR, None),
        31: ("platform_version", _STR, None),
        32: ("pci_bus_id", _STR, None),
        34: ("name", _STR, None),
        35: ("model_str", _STR, None),
        36: ("numa_node", _INT, None),
        37: ("thread_dim_limit_x", _INT, None),
        38: ("thread_dim_limit_y", _INT, None),
        39: ("thread_dim_limit_z", _INT, None),
        40: ("device_address_bits", _INT, None),
        41: ("pcie_bandwidth", _INT, None),
        42: ("ecc_enabled", _BOOL, None),
        43: ("collective_memory_granularity", _INT, None),
    },
}

# Fields that describe one machine rather than the GPU model: left out of a
# shipped spec so that specs captured on two hosts with the same GPU agree.
HOST_SPECIFIC = {"pci_bus_id", "numa_node", "device_interconnect_info"}


class CaptureError(RuntimeError):
    pass


# ------------------------------------------------------------ wire format


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data):
            raise CaptureError("truncated varint in the serialized topology")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int, Any]]:
    """The (field number, wire type, raw value) of each field in a serialized message, in order.

    The raw value is an int (varint, wire type 0) or bytes (the other wire types): the wire type says which."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise CaptureError(f"unsupported wire type {wire} for field {number}")
        if pos > len(data):
            raise CaptureError("truncated field in the serialized topology")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _float_text(raw: bytes) -> str:
    """The shortest decimal that reads back as the same float32 (how XLA's text format prints floats)."""
    (value,) = struct.unpack("<f", raw)
    for digits in range(1, 10):
        text = "%.*g" % (digits, value)
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == value:
            return text
    return repr(value)


def _quote(text: bytes) -> str:
    out = []
    for ch in text.decode("utf-8", "replace"):
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ord(ch) < 32:
            out.append("\\%03o" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


_WIRE = {_INT: 0, _UINT: 0, _BOOL: 0, _ENUM: 0, _FLOAT: 5}  # the wire type of each scalar kind
_PACKABLE = frozenset(_WIRE)


def _scalar(kind: str, sub: Any, raw: Any) -> str:
    if kind == _FLOAT:
        return _float_text(raw)
    if kind == _BOOL:
        return "true" if raw else "false"
    if kind == _ENUM:
        return str(sub[raw] if raw < len(sub) else raw)
    return str(raw if kind == _UINT else _signed(raw))


def _unpack(kind: str, raw: bytes) -> list[Any]:
    """The values of a packed repeated field (wire type 2): 4-byte floats, else varints."""
    if kind == _FLOAT:
        return [raw[i:i + 4] for i in range(0, len(raw) - len(raw) % 4, 4)]
    values, pos = [], 0
    while pos < len(raw):
        value, pos = _varint(raw, pos)
        values.append(value)
    return values


def to_text(data: bytes, message: str, indent: int = 0, skip: AbstractSet[str] = frozenset()) -> list[str]:
    """`data` (a serialized `message`) in protobuf text format, one line per scalar field."""
    schema = SCHEMA[message]
    pad = "  " * indent
    lines: list[str] = []
    for number, wire, raw in fields(data):
        if number not in schema:
            shown = raw.hex() if isinstance(raw, bytes) else raw
            lines.append(f"{pad}# unknown field {number} (wire type {wire}): {shown}")
            continue
        name, kind, sub = schema[number]
        if name in skip or kind == "skip":
            continue
        expected = _WIRE.get(kind, 2)  # messages, maps, strings, bytes: length-delimited
        if wire != expected and not (wire == 2 and kind in _PACKABLE):  # its type changed in this XLA: shown, not guessed
            shown = raw.hex() if isinstance(raw, bytes) else raw
            lines.append(f"{pad}# field {number} ({name}): wire type {wire}, expected {expected}: {shown}")
            continue
        if kind in (_MSG, _MAP):
            lines.append(f"{pad}{name} {{")
            lines.extend(to_text(raw, sub, indent + 1, skip))
            lines.append(f"{pad}}}")
        elif kind == _STR:
            lines.append(f"{pad}{name}: {_quote(raw)}")
        elif kind == "bytes":
            shown = "".join(chr(c) if 32 <= c < 127 and chr(c) not in '"\\' else "\\%03o" % c for c in raw)
            lines.append(f'{pad}{name}: "{shown}"')
        elif wire == 2 and kind in _PACKABLE:  # a packed repeated scalar: its values one after the other
            lines.extend(f"{pad}{name}: {_scalar(kind, sub, v)}" for v in _unpack(kind, raw))
        else:
            lines.append(f"{pad}{name}: {_scalar(kind, sub, raw)}")
    return lines


def _first(data: bytes, number: int):
    for n, _, raw in fields(data):
        if n == number:
            return raw
    return None


def target_config_from_topology(serialized: bytes) -> bytes:
    """The serialized GpuTargetConfigProto inside a serialized PjRtTopologyDescriptionProto."""
    any_msg = _first(serialized, 9)
    if any_msg is None:
        raise CaptureError("the device topology has no platform_specific_topology (is this a CUDA device?)")
    type_url = (_first(any_msg, 1) or b"").decode()
    if not type_url.endswith("xla.GpuTopologyProto"):
        raise CaptureError(f"the device topology is a {type_url or 'unknown proto'}, not an xla.GpuTopologyProto")
    config = _first(_first(any_msg, 2) or b"", 8)
    if not config:
        raise CaptureError(
            "the GPU topology carries no gpu_target_config; this XLA version does not export the target config of "
            "an attached device (or PJRT_GPU_SE_DISABLE_TARGET_CONFIG is set)"
        )
    return config


def config_text(config: bytes) -> str:
    """A GpuTargetConfigProto in text format, without host-specific fields."""
    return "\n".join(to_text(config, "GpuTargetConfigProto", skip=HOST_SPECIFIC)) + "\n"


# ------------------------------------------------------------ spec file


def spec_text(name: str, config: str, environment: dict, when: float | None = None, host: str | None = None) -> str:
    """A target spec file: the header fp8-check reads, where and when it was captured, then the config."""
    dev = environment.get("device") or {}
    cc = dev.get("compute_capability")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when if when is not None else time.time()))
    kind = dev.get("name") or "unknown GPU"
    header = [
        f"# fp8-check target spec: {kind}" + (f" (sm_{str(cc).replace('.', '')})" if cc else "") + f", captured from a real device ({name}).",
        "# stream_executor.GpuTargetConfigProto in text format, as XLA built it for the attached GPU",
        "# (jax.experimental.topologies.get_attached_topology), written by `fp8-check target capture`.",
        f"# Captured {stamp} on {host or platform.node() or 'unknown host'} by {_user()}:",
        f"#   jax {environment.get('jax')}, jaxlib {environment.get('jaxlib')}, CUDA plugin {environment.get('cuda_plugin')},",
        f"#   {platforms.DEFAULT.device_line(dev)}.",
    ]
    return "\n".join(header) + "\n" + config


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in a container
        return "unknown user"


def write_spec(name: str, text: str, directory: Path = TARGET_DIR, force: bool = False) -> Path:
    if name.endswith(".txtpb"):
        raise ValueError(f"target name '{name}': give the name without the .txtpb suffix")
    path = Path(directory) / f"{check('target', name)}.txtpb"
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; pass --force to replace it")
    parse_target(name, text)  # must read back as a Target

    atomic_write(path, text)
    return path


def decode_reply(reply: dict) -> bytes:
    return base64.b64decode(reply["topology"])


# ------------------------------------------------------------ CLI


def capture(compiler) -> tuple[str, dict]:
    """(GpuTargetConfig text, environment) of the GPU attached to `compiler`'s device-mode worker."""
    env = compiler.environment()
    return config_text(target_config_from_topology(decode_reply({"topology": compiler.topology()}))), env
