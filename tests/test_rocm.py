"""AMD/ROCm, deviceless: the ROCm plugin loads on a machine without AMD software through stand-in runtime
libraries generated from the plugin itself, and a compile calls nothing in them (harness/platforms/standins.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fp8_check.pipeline import signature
from fp8_check.pipeline.compile import harness_path
from fp8_check.platforms import AMD, standins
from fp8_check.versions import envs

HERE = Path(__file__).resolve().parent
ROCM_JAX = AMD.default_release or "0.12.0"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rocm_env() -> envs.Env:
    """The ROCm environment of the newest JAX release with a ROCm plugin (built on first use, then cached)."""
    return envs.Manager(platform=AMD).ensure(ROCM_JAX)


def _site_packages(env: envs.Env) -> Path:
    return next(env.path.glob("lib/python*/site-packages"))


def _run(env: envs.Env, args: list[str], extra_env: dict | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("FP8_CHECK_STANDIN", "JAX_", "XLA_"))}
    environ.update(PYTHONPATH=str(harness_path()), **(extra_env or {}))
    return subprocess.run([str(env.python), *args], capture_output=True, text=True, timeout=600, env=environ)


def test_the_standins_are_made_from_the_plugins_own_tables(rocm_env):
    site = _site_packages(rocm_env)
    elves = AMD.plugin_elves(site)
    manifest = json.loads((AMD.standin_dir(site) / standins.MANIFEST).read_text())
    assert manifest["generator"] == standins.GENERATOR and "xla_rocm_plugin.so" in manifest["from"]
    # every library the plugin needs that this machine lacks has a stand-in, and only those
    present = standins.system_libraries()
    needed = {lib for elf in elves for lib in standins.needed(elf)}
    assert set(manifest["libraries"]) == {lib for lib in needed if lib not in present}
    assert {"libamdhip64.so.7", "libhipblaslt.so.1", "libhsa-runtime64.so.1"} <= set(manifest["libraries"])
    # each stand-in exports what the plugin asks of it, under the version it asks for (hipMalloc@hip_4.2 ...)
    hip = AMD.standin_dir(site) / "libamdhip64.so.7"
    text = subprocess.run(["readelf", "--dyn-syms", "-W", str(hip)], capture_output=True, text=True, timeout=60).stdout
    xla = next(e for e in elves if e.name == "xla_rocm_plugin.so")
    plugin = subprocess.run(["readelf", "--dyn-syms", "-W", str(xla)], capture_output=True, text=True, timeout=60).stdout
    wanted = {line.split()[7] for line in plugin.splitlines() if " UND " in line and "@hip_" in line}
    exported = {line.split()[7].replace("@@", "@") for line in text.splitlines() if " UND " not in line and "@" in line}
    assert wanted and wanted <= exported, sorted(wanted - exported)[:5]
    # regenerating is a no-op (keyed by the tables)
    assert standins.ensure(elves, AMD.standin_dir(site)) == manifest


def test_a_compile_calls_nothing_in_the_standins(rocm_env, tmp_path):
    log = tmp_path / "calls.log"
    out = _run(rocm_env, [str(HERE / "rocm_probe.py"), str(log), "float8_e4m3fnuz"])
    assert out.returncode == 0, out.stderr[-3000:]  # strict mode (the worker's): any other call would abort
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["jax"] == ROCM_JAX
    # loading the plugin registers its HIP code objects (and XLA's profiler), nothing else ...
    assert report["load"] and all(standins.REGISTRATION.match(name) for name, _ in report["load"])
    assert any(name == "__hipRegisterFatBinary" for name, _ in report["load"])
    # ... and the compile itself calls no stand-in at all, yet decides: an FP8 hipBLASLt gemm on fnuz operands
    assert report["compile"] == []
    gemms = [(g.target, tuple(g.operand_dtypes)) for g in signature.extract(report["hlo"]).gemms]
    assert gemms == [("__cublas$lt$matmul$f8", ("f8e4m3fnuz", "f8e4m3fnuz"))]


def test_a_call_beyond_registration_aborts_in_strict_mode(rocm_env, tmp_path):
    # the evidence above is not vacuous: a stand-in that is called logs it, and in strict mode aborts
    hip = AMD.standin_dir(_site_packages(rocm_env)) / "libamdhip64.so.7"
    code = f"import ctypes; lib = ctypes.CDLL({str(hip)!r}); print(lib.hipGetDeviceCount(None))"
    log = tmp_path / "calls.log"
    lenient = _run(rocm_env, ["-c", code], {standins.LOG_VARIABLE: str(log)})
    assert lenient.returncode == 0 and lenient.stdout.strip() == "0"
    assert standins.read_log(log) == [("hipGetDeviceCount", "libamdhip64.so.7")]
    strict = _run(rocm_env, ["-c", code], {standins.STRICT_VARIABLE: "1"})
    assert strict.returncode == -6  # SIGABRT


def test_a_version_without_a_rocm_plugin_is_refused():
    with pytest.raises(envs.InstallError, match="no ROCm plugin for JAX 0.8.1"):
        envs.Manager(platform=AMD).requirements("0.8.1")
