"""AMD/ROCm, deviceless: the ROCm plugin loads on a machine without AMD software through stand-in runtime
libraries generated from the plugin itself, and a compile calls nothing in them (harness/fp8_check/platforms/_standins.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fp8_check.compile._service import harness_path
from fp8_check.platforms import AMD, _standins as standins
from fp8_check.signature import _extract as signature
from fp8_check.versions import _envs as envs

HERE = Path(__file__).resolve().parents[1]
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


FP8_MATMULS = '''import jax.numpy as jnp


def two_matmuls(a, b, c):
    # a, b: fnuz (MI300's FP8); c: OCP E4M3 (MI350's and H100's)
    x = jnp.dot(a, b, preferred_element_type=jnp.float32)
    y = jnp.dot(c, b.astype(c.dtype), preferred_element_type=jnp.float32)
    return x + y
'''


def test_check_reports_the_native_fp8_gemm_and_warns_on_the_other_family(run_cli, tmp_path, monkeypatch):
    (tmp_path / "fp8mm_rocm.py").write_text(FP8_MATMULS)
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, err = run_cli("check", "fp8mm_rocm:two_matmuls", "--arg", "a=float8_e4m3fnuz[64,64]",
                             "--arg", "b=float8_e4m3fnuz[64,64]", "--arg", "c=float8_e4m3fn[64,64]",
                             "--target", "mi300x,mi350x", "--json", str(tmp_path / "out.json"), cwd=tmp_path)
    assert code == 0, out + err
    reports = {r["target"]: r for r in json.loads((tmp_path / "out.json").read_text())["results"]}
    gemms = {t: sorted((g["target"], tuple(g["operand_dtypes"])) for g in r["signature"]["gemms"]) for t, r in reports.items()}
    # MI300X (gfx942): the fnuz matmul is an FP8 hipBLASLt gemm, the OCP one is upcast; MI350X (gfx950): the reverse
    assert gemms["mi300x"] == [("__cublas$lt$matmul", ("f16", "f16")), ("__cublas$lt$matmul$f8", ("f8e4m3fnuz", "f8e4m3fnuz"))]
    assert gemms["mi350x"] == [("__cublas$lt$matmul", ("f16", "f16")), ("__cublas$lt$matmul$f8", ("f8e4m3fn", "f8e4m3fn"))]
    assert "coverage: 2 matmuls, 1 FP8/FP4 (1 hipBLASLt FP8), 1 wider (1 hipBLASLt f16)" in out
    assert ("warning: fp8mm_rocm.two_matmuls on mi300x/hipblaslt: float8_e4m3fn is not native on mi300x (gfx942 runs "
            "float8_e4m3fnuz, float8_e5m2fnuz in FP8 gemms)") in err
    assert "on mi350x/hipblaslt: float8_e4m3fnuz is not native on mi350x (gfx950 runs float8_e4m3fn, float8_e5m2" in err
    # the results file (the standard one, as `run` writes it) carries the warning as the result's reason
    assert "warning: " in reports["mi300x"]["reason"] and "float8_e4m3fn is not native" in reports["mi300x"]["reason"]
    assert reports["mi300x"]["jax"] == ROCM_JAX  # compiled in the ROCm environment, not the main one


def test_the_seed_cases_on_amd_with_the_default_profiles_are_green_and_say_which_jax(run_cli, tmp_path):
    """Issue 44: `run cases/seed.yaml --target mi300x,mi350x` with the default profiles exits 0, and the header names
    the ROCm plugin and the release that compiled (not this environment's), and why."""
    from ..conftest import REPO

    code, out, err = run_cli("run", REPO / "cases" / "seed.yaml", "--target", "mi300x,mi350x",
                             "--json", tmp_path / "r.json", "--html", tmp_path / "r.html", cwd=REPO)
    assert code == 0, out + err
    header = out.splitlines()[0]
    assert f"jax {ROCM_JAX} (jaxlib {ROCM_JAX}, ROCm plugin {ROCM_JAX}" in header and "CUDA plugin" not in header
    if not AMD.installed():  # this environment has no ROCm plugin: the header says so and names the release used
        assert f"the newest release with a ROCm plugin (jax=={ROCM_JAX} jax-rocm7-plugin=={ROCM_JAX})" in header
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert results and {r["outcome"] for r in results} <= {"PASS", "XFAIL"}
    assert {r["target"] for r in results} == {"mi300x", "mi350x"}
