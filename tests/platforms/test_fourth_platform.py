"""An open platform registry: a fourth platform from its own module (tests/fourth_platform.py), registered without an
edit to fp8_check.platforms, fp8_check.targets or any default, runs a case end to end (real CPU compiles, no mocks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from fp8_check import platforms
from fp8_check.platforms import _registry
from fp8_check.targets import PROFILES, load_target, profile_applies

from .. import fourth_platform

REPO = Path(__file__).resolve().parents[2]
CASES = """\
cases:
  - id: standin_plain
    description: plain FP8 matmul on the stand-in platform
    dequant: float32
    out_dtype: float32
    shape: {m: 64, n: 32, k: 64}
    profiles: [standin]
"""


def _installed_dist(root: Path) -> Path:
    """A tiny installed distribution whose only content is an `fp8_check.platforms` entry point."""
    info = root / "fp8_check_standin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fp8-check-standin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{platforms.ENTRY_POINTS}]\nstandin = tests.fourth_platform:STANDIN\n")
    return root


def _cli(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "import sys; from fp8_check.cli.main import main; sys.exit(main())",
                           *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_platform_registered_from_its_own_module_is_seen_by_every_lookup():
    assert "standin" not in [p.name for p in platforms.registered()]
    platforms.register(fourth_platform.STANDIN)
    try:
        assert platforms.registered()[-1] is fourth_platform.STANDIN and platforms.by_name("standin") is fourth_platform.STANDIN
        assert platforms.of_spec(fourth_platform.SPEC) is fourth_platform.STANDIN
        target = load_target("standin1")  # the platform names its own target: targets/ is not edited
        assert (target.platform, target.arch, target.features) == (fourth_platform.STANDIN, "standin1", frozenset())
        assert PROFILES["standin"] is fourth_platform.PROFILE and profile_applies("standin", target)
        assert not profile_applies("standin", load_target(platforms.default_target()))
    finally:
        _registry._REGISTRY.pop("standin", None)
        load_target.cache_clear()
    assert "standin" not in PROFILES


def test_a_fourth_platform_from_an_entry_point_runs_a_case_end_to_end(tmp_path):
    site = _installed_dist(tmp_path / "site")
    work = tmp_path / "work"
    (work / "cases").mkdir(parents=True)
    (work / "cases" / "standin.yaml").write_text(CASES)
    common = ("--mode", "deviceless", "--target", "standin1", "--goldens", str(work / "g"))
    first = _cli(work, site, "run", *common)
    assert first.returncode == 1 and "NEW" in first.stdout and "standin1/standin" in first.stdout, first.stdout + first.stderr
    blessed = _cli(work, site, "bless", *common)
    assert blessed.returncode == 0 and "blessed: 1 golden(s) changed" in blessed.stdout, blessed.stdout + blessed.stderr
    golden = yaml.safe_load((work / "g" / "standin1" / "standin" / "deviceless" / "standin_plain.yaml").read_text())
    gemm = golden["expect"][0]["signature"]["gemms"][0]  # the host runs the matmul wide, in a fusion of its own
    assert gemm["operand_dtypes"] == ["f32", "f32"] and not gemm["target"].startswith("__")
    again = _cli(work, site, "run", *common, "--json", str(work / "r.json"))
    assert again.returncode == 0 and "1 PASS" in again.stdout, again.stdout + again.stderr
    assert "verdict: no regressions against goldens" in again.stdout


def test_a_broken_entry_point_is_one_warning_line_and_costs_its_platform_only(tmp_path):
    site = tmp_path / "site"
    info = site / "broken-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{platforms.ENTRY_POINTS}]\nbroken = no_such_module_xyz:PLATFORM\n")
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "standin.yaml").write_text(CASES.replace("[standin]", f"[{platforms.default_profile()}]"))
    out = _cli(tmp_path, site, "list")
    assert out.returncode == 0 and "standin_plain" in out.stdout and "Traceback" not in out.stderr, out.stdout + out.stderr
    warned = [line for line in out.stderr.splitlines() if "entry point 'broken'" in line]
    assert warned == ["fp8-check: warning: platform entry point 'broken' (no_such_module_xyz:PLATFORM) skipped: "
                      "No module named 'no_such_module_xyz'"], out.stderr
