"""Hardening round 6 (issue 53), the five smaller items done after the rest of the round: each test here failed
before its fix (docs/hardening.md, round 6)."""

from __future__ import annotations

import pytest

from fp8_check import platforms
from tests.conftest import REPO

BAD_LIBTPU_FLAGS = "--xla_bogus_flag=1"
TPU_DOT = ["fp8_check.models.tpu_fp8:fp8_dot", "--arg", "a=float8_e4m3fn[256,512]", "--arg", "b=float8_e4m3fn[512,256]"]


# ---- a bad LIBTPU_INIT_ARGS: the hint is the target's platform's, not the CUDA install


@pytest.mark.parametrize("argv", [
    ["run", str(REPO / "cases" / "tpu.yaml"), "--target", "v6e", "-k", "tpu_fp8_dot_e4m3", "--no-cache"],
    ["check", *TPU_DOT, "--target", "v6e"],
], ids=["run", "check"])
def test_a_bad_libtpu_init_args_is_named_as_the_cause_with_no_cuda_hint(run_cli, monkeypatch, argv):
    monkeypatch.setenv("LIBTPU_INIT_ARGS", BAD_LIBTPU_FLAGS)
    code, out, err = run_cli(*argv)
    assert code == 3, (code, out, err)
    first = err.splitlines()[0]
    assert "LIBTPU_INIT_ARGS is set: its flags are the probable cause" in first, err
    assert "xla_bogus_flag" in first, err  # libtpu's own words follow
    assert "cuda" not in (out + err).lower(), (out, err)


def test_the_start_hint_is_the_platforms_own():
    assert platforms.NVIDIA.start_hint({}) == "is jax[cuda12] installed?"
    assert platforms.TPU.start_hint({}) == "is jax[tpu] installed?"
    assert platforms.TPU.start_hint({"LIBTPU_INIT_ARGS": " "}) == "is jax[tpu] installed?"
    assert platforms.TPU.start_hint({"LIBTPU_INIT_ARGS": BAD_LIBTPU_FLAGS}).startswith("LIBTPU_INIT_ARGS is set")
    assert BAD_LIBTPU_FLAGS not in platforms.TPU.start_hint({"LIBTPU_INIT_ARGS": BAD_LIBTPU_FLAGS})  # never the value
    assert platforms.NVIDIA.start_hint({"LIBTPU_INIT_ARGS": BAD_LIBTPU_FLAGS}) == "is jax[cuda12] installed?"


# ---- Unicode layer names: HLO's C escapes decoded where op_name is read


def test_a_unicode_layer_name_reads_back_in_unicode():
    import jax
    import jax.numpy as jnp

    from fp8_check.api import fusion_signature

    def project(a, b):
        with jax.named_scope("проекция"), jax.named_scope('ünï"code'):
            return jnp.dot(a, b, preferred_element_type=jnp.float32)

    a = jax.ShapeDtypeStruct((64, 128), jnp.float8_e4m3fn)
    b = jax.ShapeDtypeStruct((128, 64), jnp.float8_e4m3fn)
    report = fusion_signature(project, a, b, target="h100")
    assert "\\320\\277" in report.hlo  # XLA printed it escaped
    (gemm,) = report.signature.gemms
    assert gemm.layer == 'проекция/ünï"code', gemm.layer
    assert 'проекция/ünï"code' in report.layer_table()


def test_hlo_c_escapes_are_decoded():
    from fp8_check.signature._attribution import c_unescape, parse_metadata

    assert c_unescape("\\320\\277\\321\\200") == "пр"
    assert c_unescape('a\\"b\\\\c\\nd') == 'a"b\\c\nd'
    assert c_unescape("\\377x") == "\ufffdx"  # not UTF-8: one replacement character, never a traceback
    assert parse_metadata('{op_name="jit(f)/\\303\\274/dot_general" source_line=3}')["op_name"] == "jit(f)/ü/dot_general"


# ---- a requirement environment missing its requirement is rebuilt, not reused


def _uv_pip(*args):
    import subprocess

    from fp8_check.versions import _uvbin as uvbin

    p = subprocess.run([uvbin.find_uv(), "pip", *args], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.slow
@pytest.mark.network
def test_a_requirement_environment_whose_requirement_was_uninstalled_is_rebuilt(tmp_path):
    import subprocess

    from fp8_check.versions import _envs as envs

    manager = envs.Manager(root=tmp_path, reuse_self=False, extras=["six"], platform=platforms.TPU)
    release = platforms.TPU.default_release
    env = manager.ensure(release)
    assert env.built and env.info["with_installed"].get("six")
    assert not manager.ensure(release).built  # whole: reused
    _uv_pip("uninstall", "--python", str(env.python), "six")  # the marker still says built
    assert manager.cached(release) is None
    again = manager.ensure(release)
    assert again.built and again.path == env.path
    p = subprocess.run([str(again.python), "-c", "import six"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_a_requirement_is_missing_when_its_metadata_or_its_files_are_gone(tmp_path):
    import shutil
    import sys
    from pathlib import Path

    from fp8_check.versions import _envs as envs

    own = Path(sys.prefix)
    assert envs.missing_requirements(own, {"with_installed": {"packaging": "1", "PyYAML": "6"}}) == []
    assert envs.missing_requirements(own, {"with_installed": {"no-such-dist": "1"}}) == ["no-such-dist"]
    # a copy of this environment's `packaging` (metadata and package), then its package removed
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    import packaging

    shutil.copytree(Path(packaging.__file__).parent, site / "packaging")
    (dist,) = [d for d in next(own.glob("lib/python*/site-packages")).glob("packaging-*.dist-info")]
    shutil.copytree(dist, site / dist.name)
    assert envs.missing_requirements(tmp_path, {"with_installed": {"packaging": "1"}}) == []
    shutil.rmtree(site / "packaging")
    assert envs.missing_requirements(tmp_path, {"with_installed": {"packaging": "1"}}) == ["packaging"]


# ---- `run` flags a backend cached at import, as `check` does (one warning, worker.not_representative)

BACKEND_CASE = """cases:
- id: backend_at_import
  kind: python
  callable: backend_at_import:matmul
  args:
  - {name: x, shape: [64, 128], dtype: bfloat16}
  - {name: w, shape: [128, 256], dtype: bfloat16}
  targets: [h100]
  profiles: [cublas]
"""
NOT_REPRESENTATIVE = ("NOT REPRESENTATIVE: the checked code asked JAX for the device (jax.extend.backend.get_backend()) "
                      "and saw this machine's CPU, not h100's devices")


@pytest.fixture
def backend_project(tmp_path, monkeypatch):
    import shutil

    from tests.conftest import write_cases

    shutil.copy(REPO / "tests" / "fixtures" / "device_view" / "backend_at_import.py", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    write_cases(tmp_path / "cases" / "c.yaml", BACKEND_CASE)
    return tmp_path


@pytest.mark.slow
def test_run_flags_a_backend_cached_at_import_every_time(backend_project, run_cli, tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "cache"))  # its own: the second run must not hit
    for _ in range(2):  # the second run too: such a compilation is never cached
        code, out, err = run_cli("run", "cases", "--goldens", "g", "--json", "r.json", cwd=backend_project)
        assert NOT_REPRESENTATIVE in out, out + err  # printed though NEW/PASS: never a plain line
        [row] = json.loads((backend_project / "r.json").read_text())["results"]
        assert row["not_representative"].startswith("the checked code asked JAX for the device"), row
        assert not row["cached"]


@pytest.mark.slow
def test_check_flags_a_backend_cached_at_import_with_the_same_words(backend_project, run_cli):
    import json

    argv = ["check", "backend_at_import:matmul", "--arg", "x=bfloat16[64,128]", "--arg", "w=bfloat16[128,256]"]
    code, out, err = run_cli(*argv, cwd=backend_project)
    assert NOT_REPRESENTATIVE in out, out + err
    code, out, err = run_cli(*argv, "--json", "-", cwd=backend_project)
    [res] = json.loads(out)["results"]
    assert res["not_representative"].startswith("the checked code asked JAX for the device"), res


# ---- bless --from-matrix writes no golden `run` would refuse (golden.MAX_BYTES, one home)


def _decoder_signatures():
    import gzip

    from fp8_check.signature import _extract as signature

    models = REPO / "tests" / "fixtures" / "hlo" / "models"
    return [signature.extract(gzip.decompress((models / name).read_bytes()).decode()).to_dict()
            for name in ("decoder_direct_train.jax-0.11.2.h100.cublas.txt.gz", "decoder_qdq_train.jax-0.12.0.1.h100.cublas.txt.gz")]


def _flapping_matrix(tmp_path, count):
    """A real decoder's two signatures (recorded HLO), alternating over `count` releases: one run per release."""
    import json

    from fp8_check.verdict import _golden as golden

    a, b = _decoder_signatures()
    root = tmp_path / "goldens"
    golden.bless(root, "decoder", "h100", "cublas", "deviceless", "0.12.0.1", a)  # an exact golden keeps its form
    versions = [{"jax": v, "status": "ran", "results": [
        {"case": "decoder", "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": v, "outcome": "PASS",
         "signature": (a, b)[i % 2], "reason": ""}]} for i, v in enumerate(f"1.{i}.0" for i in range(count))]
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": "fp8-check/matrix/1", "mode": "deviceless", "versions": versions}))
    return path, root


@pytest.mark.slow
def test_bless_from_matrix_writes_a_flapping_golden_compactly_within_the_read_limit(tmp_path, run_cli):
    import dataclasses
    import json

    from fp8_check.verdict import _golden as golden

    matrix, root = _flapping_matrix(tmp_path, 120)
    code, out, err = run_cli("bless", "--from-matrix", matrix, "--goldens", root, cwd=tmp_path)
    assert code == 0, err
    path = golden.path_for(root, "decoder", "h100", "cublas", "deviceless")
    g = golden.load(path)  # what `run` reads: within the limit
    assert len(g.expect) == 120 and path.stat().st_size <= golden.MAX_BYTES
    copies = [dataclasses.replace(e, signature=json.loads(json.dumps(e.signature))) for e in g.expect]
    plain = dataclasses.replace(g, expect=copies).to_yaml()  # one copy per expectation: what was written before
    assert len(plain.encode()) > golden.MAX_BYTES and "*id" not in plain
    assert [e.jax for e in g.expect[-2:]] == [">=1.1.0,<1.2.0", ">=1.0.0,<1.1.0"]
    assert g.expect[0].signature == g.expect[2].signature != g.expect[1].signature


@pytest.mark.slow
def test_bless_from_matrix_refuses_a_golden_over_what_the_reader_takes_in_one_line(tmp_path, run_cli):
    from fp8_check.verdict import _golden as golden

    matrix, root = _flapping_matrix(tmp_path, 160)
    path = golden.path_for(root, "decoder", "h100", "cublas", "deviceless")
    before = path.read_text()
    code, out, err = run_cli("bless", "--from-matrix", matrix, "--goldens", root, cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1, (code, err)
    assert f"{path}: not written: its 160 expectations make 3.1 MiB, over the 2 MiB limit a golden is read with" in err
    assert "more than 200000 values once its aliases are expanded" in err
    assert path.read_text() == before


def test_a_golden_is_read_and_written_under_one_limit(tmp_path):
    from fp8_check.core import _safe_yaml as safe_yaml
    from fp8_check.verdict import _golden as golden

    assert golden.MAX_BYTES == safe_yaml.MAX_BYTES
    path = golden.path_for(tmp_path, "big", "h100", "cublas", "deviceless")
    path.parent.mkdir(parents=True)
    path.write_text("case: big\n" + "#" * golden.MAX_BYTES + "\n")
    with pytest.raises(golden.GoldenError, match="larger than the 2 MiB limit"):
        golden.load(path)
