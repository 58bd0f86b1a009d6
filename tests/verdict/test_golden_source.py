"""Device results against deviceless goldens (harness/fp8_check/verdict/_golden_source.py): a device run is judged by the
device golden when one covers the version, else by the deviceless one, saying so; a difference is a fidelity
finding (FAIL with that reason), never NEW. The optimized HLO is recorded from real compiles (tests/fixtures/hlo);
no GPU here, so the device results are those compilations filed under mode `device`."""

from __future__ import annotations

from fp8_check.cases import _load as cases
from fp8_check.compile._service import Compilation
from fp8_check.run import _runner as runner
from fp8_check.signature import _extract as signature
from fp8_check.verdict import _golden as golden
from fp8_check.verdict._outcome import FAIL, NEW, PASS

from ..conftest import REPO

HLO = REPO / "tests" / "fixtures" / "hlo" / "jax-0.12.0.1"
JAX = "0.12.0.1"


def _case(cid: str):
    return next(c for c in cases.load_file(REPO / "tests" / "fixtures" / "hlo" / "cases.yaml") if c.id == cid)


def _comp(recorded: str, mode: str) -> Compilation:
    return Compilation("relu_amax", "h100", "cublas", mode, hlo=(HLO / f"{recorded}.h100.cublas.txt").read_text())


def _bless(root, mode: str, recorded: str) -> None:
    sig = signature.extract((HLO / f"{recorded}.h100.cublas.txt").read_text()).to_dict()
    golden.bless(root, "relu_amax", "h100", "cublas", mode, JAX, sig)


def test_a_device_result_falls_back_to_the_deviceless_golden(tmp_path):
    case = _case("relu_amax")
    _bless(tmp_path, "deviceless", "relu_amax")
    same = runner.judge(case, _comp("relu_amax", "device"), JAX, tmp_path)
    assert same.code is PASS and same.mode == "device"
    assert "judged against the deviceless golden" in same.reason and "/deviceless/relu_amax.yaml" in same.reason
    # what the GPU compiled differs from the deviceless prediction: a fidelity finding, not NEW
    other = runner.judge(case, _comp("scaled", "device"), JAX, tmp_path)
    assert other.code is FAIL and other.reason.startswith("fidelity finding: ")
    assert other.diffs and other.verdict is not None
    # a deviceless result without its golden stays NEW (no fallback the other way)
    assert runner.judge(case, _comp("relu_amax", "deviceless"), JAX, tmp_path / "none").code is NEW


def test_a_device_golden_wins_when_it_covers_the_version(tmp_path):
    case = _case("relu_amax")
    _bless(tmp_path, "deviceless", "relu_amax")
    _bless(tmp_path, "device", "scaled")  # the device golden records what the GPU does
    out = runner.judge(case, _comp("scaled", "device"), JAX, tmp_path)
    assert out.code is PASS and "deviceless" not in (out.reason or "")
    out = runner.judge(case, _comp("relu_amax", "device"), JAX, tmp_path)
    assert out.code is FAIL and "fidelity" not in out.reason and "/device/relu_amax.yaml" in out.reason
