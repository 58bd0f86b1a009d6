"""What a case is compiled for: a `Target` (GPU spec), a `Profile` (XLA options) and a mode.

Targets are GpuTargetConfig text protos shipped in `harness/targets/*.txtpb`.
Modes: `deviceless` compiles for the target on any machine (no GPU needed);
`device` compiles on the local GPU; `auto` picks `device` when a GPU is present.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

TARGET_DIR = Path(__file__).parent / "targets"
MODES = ("auto", "deviceless", "device")


@dataclass(frozen=True)
class Target:
    name: str
    config_text: str
    compute_capability: tuple[int, int]
    description: str

    @property
    def fp8_capable(self) -> bool:
        """FP8 tensor cores exist from sm_89 (Ada) on."""
        return self.compute_capability >= (8, 9)

    @property
    def has_runtime_version(self) -> bool:
        return re.search(r"^\s*runtime_version\s*\{", self.config_text, re.M) is not None


@dataclass(frozen=True)
class Profile:
    name: str
    compiler_options: dict[str, object] = field(default_factory=dict)
    deviceless: bool = True
    description: str = ""


PROFILES: dict[str, Profile] = {
    "cublas": Profile(
        "cublas",
        {"xla_gpu_enable_triton_gemm": False},
        description="Triton gemm off: exercises XLA's FP8 GEMM rewriter (cuBLASLt FP8 custom-calls)",
    ),
    "triton": Profile(
        "triton",
        {"xla_gpu_autotune_level": 0},
        description="autotuning off: Triton gemm fusions with their default tiling",
    ),
    "default": Profile(
        "default",
        {},
        deviceless=False,
        description="XLA's defaults, autotuning on: needs a real GPU",
    ),
}


def target_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in TARGET_DIR.glob("*.txtpb")))


@cache
def load_target(name: str) -> Target:
    """A shipped target by name, or a GpuTargetConfig text proto given by path (`*.txtpb`)."""
    path = TARGET_DIR / f"{name}.txtpb"
    if name.endswith(".txtpb"):
        path = Path(name)
        name = path.stem
    if not path.is_file():
        raise KeyError(f"unknown target '{name}'; allowed: {', '.join(target_names())}, or a path to a *.txtpb spec")
    try:
        return parse_target(name, path.read_text())
    except ValueError as exc:
        raise KeyError(f"{path}: {exc}") from None


def parse_target(name: str, text: str) -> Target:
    cc = re.search(r"cuda_compute_capability\s*\{([^}]*)\}", text)
    if not cc:
        raise ValueError(f"target '{name}': no cuda_compute_capability in its GpuTargetConfig")
    major = re.search(r"major:\s*(\d+)", cc.group(1))
    minor = re.search(r"minor:\s*(\d+)", cc.group(1))
    first = text.splitlines()[0] if text else ""
    desc = first.split(":", 1)[1].strip() if first.startswith("# fp8-check target spec:") else name
    return Target(
        name=name,
        config_text=text,
        compute_capability=(int(major.group(1)) if major else 0, int(minor.group(1)) if minor else 0),
        description=desc,
    )


def gpu_present() -> bool:
    """Cheap check for a local NVIDIA GPU, without initialising CUDA in this process."""
    if os.environ.get("FP8_CHECK_NO_GPU"):
        return False
    if Path("/dev/nvidia0").exists():
        return True
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
            return out.returncode == 0 and "GPU" in out.stdout
        except (OSError, subprocess.SubprocessError):
            return False
    return False


def resolve_mode(mode: str) -> str:
    if mode == "auto":
        return "device" if gpu_present() else "deviceless"
    return mode
