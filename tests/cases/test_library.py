"""The case library itself: every case's standalone repro runs on its own and reproduces its golden."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import jax
import pytest

from fp8_check.cases import _load as cases
from fp8_check.compile import _render as render
from fp8_check.platforms import NVIDIA
from fp8_check.signature import _extract as signature
from fp8_check.targets import PROFILES, load_target
from fp8_check.verdict import _comparator as comparator, _device_validity as device_validity, _golden as golden

from ..conftest import REPO

LIBRARY = cases.load([REPO / "cases"])


def _run_repro(case, tmp_path):
    script = tmp_path / f"{case.id}.py"
    script.write_text(render.repro(case, load_target("h100"), PROFILES["cublas"], jax.__version__))
    # nothing from this checkout on the path, no inherited JAX settings: only the installed packages
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    return case, proc


@pytest.mark.slow
def test_every_repro_runs_standalone_and_reproduces_the_golden(tmp_path):
    failures = []
    (tmp_path / "tmp").mkdir()
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        runnable = [c for c in LIBRARY if "cublas" in c.profiles and (not c.targets or "h100" in c.targets)]
        for case, proc in pool.map(lambda c: _run_repro(c, tmp_path), runnable):
            if proc.returncode != 0:
                failures.append(f"{case.id}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            sig = signature.extract(proc.stdout)
            found = sig.to_dict()
            g = golden.load(golden.path_for(REPO / "goldens", case.id, "h100", "cublas", "deviceless"))
            expected = g.expected_for(jax.__version__)
            issue = case.known_issue(jax.__version__, "h100", "cublas")
            # a known issue's golden states the fused signature it should get, or the gemm the device cannot run
            diffs = comparator.compare(expected.signature, found) + device_validity.diffs(sig, NVIDIA)
            if bool(diffs) != bool(issue):
                failures.append(f"{case.id}: repro signature vs golden: {[str(d) for d in diffs][:3]}")
    assert not failures, "\n".join(failures)
    assert not list((tmp_path / "tmp").iterdir())  # each repro removed its dump directory


@pytest.mark.parametrize("family", ["scale_", "dequant_", "epi_", "dtype_", "layout_", "flax_", "seed_", "bs_"])
def test_every_family_is_present(family):
    assert any(c.id.startswith(family) for c in LIBRARY)


def test_every_case_has_a_description_and_goldens_for_each_shipped_target():
    for case in LIBRARY:
        assert case.description, case.id
        for target, profiles in (("h100", ("cublas", "triton")), ("a100", ("cublas",)), ("h200", ("cublas",)), ("b200", ("cublas",))):
            if case.targets and target not in case.targets:
                continue  # the case runs only on the targets it lists
            for profile in profiles:
                if profile not in case.profiles:
                    continue
                assert golden.path_for(REPO / "goldens", case.id, target, profile, "deviceless").exists(), (case.id, target, profile)
