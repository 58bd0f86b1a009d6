"""What a case is compiled for: a `Target` (a GPU spec or a TPU topology), a `Profile` (XLA options) and a mode.

GPU targets are GpuTargetConfig text protos shipped in `harness/fp8_check/targets/*.txtpb`; other platforms name
their own targets (fp8_check.platforms: TPU generations and topologies). Profiles belong to platforms too.
Modes: `deviceless` compiles for the target on any machine (no GPU needed);
`device` compiles on the local GPU; `auto` picks `device` when a GPU is present.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from fp8_check import platforms
from fp8_check.core import BrokenEnvironmentError, ReadError, check, package_path, read_text
from fp8_check.platforms import DEVICE_NODE, SMI, Platform, Profile
from fp8_check.worker import TOPOLOGY_LINE, device_count, strip_version_fields, topology_of

TARGET_DIR = package_path("targets")
MODES = ("auto", "deviceless", "device")


class TargetSpecError(BrokenEnvironmentError):
    """A target spec XLA would silently misread (a missing or contradictory version field): refused."""

    prefix = "refused target spec: "

    def __init__(self, where: str, fld: str, message: str):
        self.where, self.field = where, fld
        super().__init__(f"{where}: field '{fld}': {message}")


@dataclass(frozen=True)
class TargetVersions:
    """The versions a target is compiled for, stated once; the worker writes them where its XLA reads them.

    `runtime`: the platform's runtime (CUDA, ROCm); `dnn`: its deep-learning library (cuDNN); () where the
    platform states none (a TPU: libtpu is the JAX release's pin)."""

    runtime: tuple[int, ...]
    dnn: tuple[int, ...]
    source: str = ""  # where the versions come from (shipped specs), or which spec fields they were read from

    def to_dict(self) -> dict:
        return {"runtime": list(self.runtime) if self.runtime else None,
                "dnn": list(self.dnn) if self.dnn else None}

    @staticmethod
    def text(v: tuple[int, ...] | None) -> str:
        return ".".join(map(str, v)) if v else "none"


@dataclass(frozen=True)
class Target:
    name: str
    config_text: str  # the GpuTargetConfig without version fields (see `versions`)
    compute_capability: tuple[int, int]
    description: str
    versions: TargetVersions | None = None
    notes: tuple[str, ...] = ()  # what was fixed in a user's spec so XLA cannot misread it
    path: str = ""
    # Write the version fields as for this JAX version instead of the installed one (tests
    # use it to show what an ignored field does; None: the installed version, always in runs).
    write_for_jax: str | None = None
    # Slices x hosts x GPUs per host (JAX's topology string); multi-device targets (`h100x8`, `h100x2x4`)
    # state it in one comment line of `config_text` too (harness/fp8_check/worker/_aot.py reads it from there).
    topology: str = "1x1x1"
    arch: str = ""  # the architecture the spec names: `sm_90`, `gfx942`

    @property
    def platform(self) -> Platform:
        return platforms.of_spec(self.config_text)

    @property
    def native_fp8(self) -> tuple[str, ...]:
        """The FP8 dtypes this target's gemm library runs natively (() when it has no FP8 gemms)."""
        return self.platform.native_fp8(self.arch, self.compute_capability)

    @property
    def features(self) -> frozenset[str]:
        """What the architecture has, in its platform's words (`fp8`, `fp8-fnuz`, `cudnn-block-scaled`, ...)."""
        return self.platform.features(self.arch, self.compute_capability)

    @property
    def devices(self) -> int:
        return device_count(self.topology)

    @property
    def fp8_capable(self) -> bool:
        """The target has FP8 gemms (NVIDIA: sm_89 and newer; AMD: gfx942, gfx950)."""
        return bool(self.native_fp8)

    @property
    def has_runtime_version(self) -> bool:
        return self.versions is not None and bool(self.versions.runtime)

    def versions_dict(self) -> dict:
        d = self.versions.to_dict() if self.versions else {}
        if d and self.write_for_jax:
            d["write_for_jax"] = self.write_for_jax
        return d


class _Profiles(Mapping[str, Profile]):
    """Every registered platform's profiles by name, read from the registry at each look-up (a platform registered
    later brings its own)."""

    def __getitem__(self, name: str) -> Profile:
        return platforms.profiles()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(platforms.profiles())

    def __len__(self) -> int:
        return len(platforms.profiles())

    def __repr__(self) -> str:
        return f"PROFILES({', '.join(self)})"


# Every platform's profiles by name (fp8_check.platforms: each GPU platform's, the TPU's, a registered one's).
PROFILES: Mapping[str, Profile] = _Profiles()


def profile_applies(profile: Profile | str, target: "Target") -> bool:
    """Whether a case compiles for `target` under `profile` (a profile belongs to its platforms)."""
    p = PROFILES.get(profile) if isinstance(profile, str) else profile
    return p is not None and (not p.platforms or target.platform.name in p.platforms)


def profile_label(target: "str | Target", profile: str) -> str:
    """`profile` as `target`'s rows show it: `hipblaslt` for `cublas` on AMD (Platform.profile_names), else itself."""
    platform = platform_of(target) if isinstance(target, str) else target.platform
    return platform.profile_names.get(profile, profile)


def profile_alias(name: str) -> str:
    """The profile a name given on the command line means: a platform's shown name (`hipblaslt`) is its profile."""
    if name in PROFILES:
        return name
    return next((p for pl in platforms.registered() for p, shown in pl.profile_names.items() if shown == name), name)


def target_names() -> tuple[str, ...]:
    """The shipped GPU specs (one GPU each)."""
    return tuple(sorted(p.stem for p in TARGET_DIR.glob("*.txtpb")))


gpu_spec_names = target_names


def platform_target_names() -> tuple[str, ...]:
    """The targets platforms name themselves (TPU generations `v6e` and topologies `tpu7x-2x2x1`)."""
    return tuple(platforms.target_specs())


# Multi-device targets: a shipped GPU spec and a topology. `<gpu>x<N>` is one host with N GPUs,
# `<gpu>x<H>x<N>` H hosts with N GPUs each; these are the ones the case library and goldens use.
MULTI_DEVICE_TARGETS = ("h100x8", "h100x2x4", "b200x4", "mi300x8", "mi350x8")
_MULTI = re.compile(r"^([a-z][a-z0-9]*?\d)x(\d+)(?:x(\d+))?$")
_COUNTS = re.compile(r"^(\d+)(?:x(\d+))?$")


def _split_multi(name: str) -> tuple[str, str, str | None] | None:
    """(GPU spec, N, None) or (spec, HOSTS, N) of a multi-device name: `h100x8`, `h100x2x4`, and for a spec
    whose own name ends in `x` (`mi300x`), `mi300x8`."""
    m = _MULTI.fullmatch(name)
    if m and (TARGET_DIR / f"{m.group(1)}.txtpb").is_file():
        return m.group(1), m.group(2), m.group(3)
    for spec in sorted(gpu_spec_names(), key=len, reverse=True):
        prefix = spec if spec.endswith("x") else spec + "x"
        counts = _COUNTS.fullmatch(name[len(prefix):]) if name.startswith(prefix) else None
        if counts:
            return spec, counts.group(1), counts.group(2)
    return None


def all_target_names() -> tuple[str, ...]:
    """What `--target` and a case's `targets:` accept by name: the GPU specs and the multi-device targets, and the
    targets platforms name (`v6e`, `tpu7x-2x2x1`)."""
    return target_names() + MULTI_DEVICE_TARGETS + platform_target_names()


def canonical_target(name: object) -> str | None:
    """The one name of a target a case or `--target` may give: a GPU spec's name, or `<gpu>x<N>` /
    `<gpu>x<H>x<N>` for any shipped GPU in its normal form (`h100x08` is `h100x8`; a spec whose own name ends
    in `x` takes the count directly: `mi300x8`); None when it is neither."""
    if not isinstance(name, str):
        return None
    if name in target_names() or any(p.spec_for(name) is not None for p in platforms.registered()):
        return name
    m = _split_multi(name)
    if m is None:
        return None
    hosts, per_host = (int(m[1]), int(m[2])) if m[2] else (1, int(m[1]))
    if not 1 <= hosts <= 64 or not 1 <= per_host <= 64 or hosts * per_host < 2:
        return None
    prefix = m[0] if m[0].endswith("x") else m[0] + "x"
    return f"{prefix}{hosts}x{per_host}" if m[2] else f"{prefix}{per_host}"


def _multi_device(name: str) -> Target | None:
    """`h100x8` / `h100x2x4`: the GPU spec `h100` on a topology of 1 host x 8 / 2 hosts x 4 GPUs."""
    from dataclasses import replace

    canonical = canonical_target(name)
    m = _split_multi(canonical) if canonical is not None and canonical not in gpu_spec_names() else None
    if canonical is None or m is None:
        return None
    name = canonical
    hosts, per_host = (int(m[1]), int(m[2])) if m[2] else (1, int(m[1]))
    base = load_target(m[0])
    topology = f"1x{hosts}x{per_host}"
    where = f"{hosts} hosts x {per_host} GPUs" if hosts > 1 else f"{per_host} GPUs"
    return replace(base, name=name, topology=topology, description=f"{where}, each {base.description}",
                   config_text=f"{TOPOLOGY_LINE} {topology}\n{base.config_text}")

MAX_SPEC_BYTES = 256 * 1024  # a GpuTargetConfig is a few KiB


@cache
def load_target(name: str) -> Target:
    """A shipped target by name (a GPU spec, or a multi-device target such as `h100x8`), or a
    GpuTargetConfig text proto given by path (`*.txtpb`).

    A spec file is named by its file name without `.txtpb`, which must be a safe path part (it names
    the goldens' folder). A user's spec named like a shipped target (`./h100.txtpb`) but differing
    from it is refused: it would be judged against, and blessed into, that target's goldens.
    """
    for platform in platforms.registered():
        named = None if name.endswith(".txtpb") else platform.spec_for(name)
        if named is not None:
            return parse_target(name, named, where=f"{platform.vendor} target '{name}'")
    multi = None if name.endswith(".txtpb") else _multi_device(name)
    if multi is not None:
        return multi
    shipped = TARGET_DIR / f"{name}.txtpb"
    path = Path(name) if name.endswith(".txtpb") else shipped
    if name.endswith(".txtpb"):
        name = path.stem
    elif name not in gpu_spec_names():
        raise KeyError(f"unknown target '{name}'; allowed: {', '.join(target_names() + platform_target_names())}, a multi-device target "
                       f"GPUxN or GPUxHOSTSxN ({', '.join(MULTI_DEVICE_TARGETS)}), a multi-chip TPU "
                       f"GENERATION-TOPOLOGY (e.g. {', '.join(n for n in platforms.target_specs() if '-' in n)}), "
                       "or a path to a *.txtpb spec")
    if not path.is_file():
        raise KeyError(f"{path}: no such target spec file")
    try:
        check("target", name)
        text = read_text(path, MAX_SPEC_BYTES)
        target = parse_target(name, text, where=str(path))
    except (ValueError, ReadError) as exc:
        raise KeyError(f"{path}: {exc}") from None
    # any GPUxN counts as shipped: a one-GPU spec named h100x4.txtpb must not meet the generated 4-GPU goldens
    if path != shipped and canonical_target(name) is not None and target.config_text != load_target(name).config_text:
        raise KeyError(f"{path}: named like the shipped target '{name}' but a different spec: its results would be "
                       f"judged against (and blessed into) the shipped {name} goldens; rename the file "
                       f"(e.g. {name}-mine.txtpb)")
    return target


# Shipped specs state their versions in a header, once, in lines their platform reads and writes
# (Platform.parse_version_line / version_header): `# <runtime key>: X.Y.Z  source: ...`, `# <dnn key>: ...`.
def _header_versions(text: str, platform: Platform) -> dict[str, tuple[str, tuple[int, ...], str]]:
    """kind (`runtime`, `dnn`) -> (header key, version, source) of the header lines `platform` reads in `text`."""
    out: dict[str, tuple[str, tuple[int, ...], str]] = {}
    for line in text.splitlines():
        found = platform.parse_version_line(line)
        if found is not None:
            kind, version, source = found
            out[kind] = (platform.runtime_header if kind == "runtime" else platform.dnn_header, version, source)
    return out


_BLOCK_VERSION = r"^\s*{name}\s*\{{([^{{}}]*)\}}"


def _block_version(text: str, name: str) -> tuple[int, ...] | None:
    m = re.search(_BLOCK_VERSION.format(name=re.escape(name)), text, re.M)
    if not m:
        return None
    parts = [re.search(rf"{k}:\s*(\d+)", m.group(1)) for k in ("major", "minor", "patch")]
    return tuple(int(p.group(1)) if p else 0 for p in parts)


def parse_versions(text: str, where: str, platform: Platform = platforms.DEFAULT) -> tuple[TargetVersions, tuple[str, ...]]:
    """The runtime and DNN library versions a spec states (CUDA and cuDNN, ROCm; a platform with its own rule
    says), and notes on what fp8-check rewrites.

    Refuses (TargetSpecError) a spec without a CUDA runtime or cuDNN version, or one
    whose two cuDNN fields disagree: XLA would compile it without complaint and
    give a silently different answer.
    """
    header = _header_versions(text, platform)
    runtime_block = _block_version(text, "runtime_version")
    top_dnn = _block_version(text, "dnn_version_info")
    m = re.search(r'^\s*dnn_version\s*:\s*"(\d+)\.(\d+)(?:\.(\d+))?"', text, re.M)
    device_dnn = tuple(int(x or 0) for x in m.groups()) if m else None
    notes: list[str] = []
    own = platform.parse_versions(text, where)
    if own is not None:
        runtime, dnn, source, own_notes = own
        return TargetVersions(runtime, dnn, source), own_notes
    sources = "; ".join(f"{key} {source}".strip() for key, _v, source in sorted(header.values()) if source)
    if not platform.dnn_header:  # a platform whose specs state a runtime only (ROCm)
        runtime = header["runtime"][1] if "runtime" in header else runtime_block
        if runtime is None:
            raise TargetSpecError(where, "runtime_version", f"no {platform.vendor} runtime version: add a header line "
                                  f"'{platform.version_header('runtime', (7, 0, 0), '...').split('  source')[0]}' or "
                                  "runtime_version { major: 7 }; without it XLA before JAX 0.12.0 never emits FP8 gemms")
        return TargetVersions(runtime, (), sources or "read from the spec's own fields"), ()
    runtime = header["runtime"][1] if "runtime" in header else runtime_block
    if runtime is None:
        raise TargetSpecError(where, "runtime_version", "no CUDA runtime version: without it XLA assumes an unknown "
                              "cuBLAS and never emits FP8 gemms; add runtime_version { major: 12 minor: 8 patch: 0 } "
                              "(the CUDA runtime of the GPU you mean)")
    if top_dnn and device_dnn and top_dnn != device_dnn:
        raise TargetSpecError(where, "gpu_device_info.dnn_version", f"says cuDNN {TargetVersions.text(device_dnn)} but the "
                              f"top-level dnn_version_info says {TargetVersions.text(top_dnn)}; XLA reads one or the other "
                              "depending on the JAX version: state one")
    cudnn = header["dnn"][1] if "dnn" in header else (device_dnn or top_dnn)
    if cudnn is None:
        raise TargetSpecError(where, "gpu_device_info.dnn_version", "no cuDNN version (neither gpu_device_info.dnn_version "
                              "nor the top-level dnn_version_info): XLA would compile as if cuDNN were absent")
    if "dnn" not in header:
        found = "gpu_device_info.dnn_version" if device_dnn else "dnn_version_info"
        notes.append(f"cuDNN {TargetVersions.text(cudnn)} from the spec's {found} is written where each JAX version reads it "
                     "(top-level dnn_version_info up to 0.11.0, gpu_device_info.dnn_version from 0.11.1)")
    return TargetVersions(runtime, cudnn, sources or "read from the spec's own fields"), tuple(notes)


def _with_version_header(text: str, versions: TargetVersions, platform: Platform) -> str:
    """`text` stating its versions in the header form of its platform, so that it parses back to the same Target."""
    have = _header_versions(text, platform)
    lines = [platform.version_header(kind, value, versions.source)
             for kind, value in (("runtime", versions.runtime), ("dnn", versions.dnn)) if kind not in have and value]
    return "\n".join(lines + [text]) if lines else text


def parse_target(name: str, text: str, where: str | None = None) -> Target:
    try:
        platform = platforms.of_spec(text)
        arch, compute_capability = platform.arch_of_spec(text)
    except ValueError as exc:
        raise ValueError(f"target '{name}': {exc}") from None
    first = text.splitlines()[0] if text else ""
    desc = first.split(":", 1)[1].strip() if first.startswith("# fp8-check target spec:") else name

    versions, notes = parse_versions(text, where or f"target '{name}'", platform)
    own = platform.parse_versions(text, where or name) is not None
    return Target(
        name=name,
        config_text=text if own else _with_version_header(strip_version_fields(text), versions, platform),
        topology=topology_of(text),
        compute_capability=compute_capability,
        arch=arch,
        description=desc,
        versions=versions,
        notes=notes,
        path=where or "",
    )


def gpu_present() -> bool:
    """Cheap check for a local NVIDIA GPU, without initialising CUDA in this process."""
    if os.environ.get("FP8_CHECK_NO_GPU"):
        return False
    if Path(DEVICE_NODE).exists():
        return True
    smi = shutil.which(SMI)
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            return out.returncode == 0 and "GPU" in out.stdout
        except (OSError, subprocess.SubprocessError):
            return False
    return False


def as_target(target: "str | Target") -> Target:
    """A Target given by itself or by name (ValueError naming the field for an unknown name: the Python API)."""
    if isinstance(target, Target):
        return target
    try:
        return load_target(str(target))
    except KeyError as exc:
        raise ValueError(f"target: {exc.args[0]}") from None


def as_profile(profile: "str | Profile") -> Profile:
    """A Profile given by itself or by name (ValueError naming the allowed ones)."""
    if isinstance(profile, Profile):
        return profile
    if profile not in PROFILES:
        raise ValueError(f"profile: unknown profile '{profile}'; allowed: {', '.join(PROFILES)}")
    return PROFILES[profile]


def platform_of(name: str) -> Platform:
    """The platform of the target named `name` (a shipped or multi-device target, or a spec path);
    the default platform when no such spec can be read (the command then says what is wrong with the name)."""
    try:
        return load_target(name).platform
    except KeyError:
        return platforms.DEFAULT


def resolve_mode(mode: str) -> str:
    if mode == "auto":
        return "device" if gpu_present() else "deviceless"
    return mode


