"""Sharded FP8 compiles for multi-device targets, deviceless through the real CUDA plugin (slow).

What XLA does, measured (docs/sharded.md): an FSDP weight quantized in-graph
(QDQ) with one replicated scale is all-gathered as f8e4m3fn and the gemm stays
`__cublas$lt$matmul$f8`; with one scale per shard the bf16 weight is all-gathered (twice
the bytes) and the gemm is a bf16 cuBLAS gemm; a row-parallel FP8 matmul all-reduces its
bf16 partial sums after an FP8 gemm.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import jax
import pytest
import yaml

from fp8_check.cases import _load as cases
from fp8_check.compile import _render as render
from fp8_check.compile._service import Compiler
from fp8_check.signature._extract import extract
from fp8_check.signature._types import FP8_TYPES
from fp8_check.targets import PROFILES, load_target
from fp8_check.verdict import _golden as golden

from ..conftest import REPO
from ..matrix.test_matrix import TEST_CACHE

NEW = jax.__version__
# The oldest release with the multi-device compile-only topology, one in the middle, and this environment's.
VERSIONS = ["0.6.2", "0.8.0", NEW]
FP8_CUBLAS = "__cublas$lt$matmul$f8"


def _case(case_id: str) -> cases.Case:
    return next(c for c in cases.load([REPO / "cases" / "sharded.yaml"]) if c.id == case_id)


def _only(sig, op):
    found = [c for c in sig.collectives if c.op == op]
    assert len(found) == 1, sig.collectives
    return found[0]


@pytest.fixture(scope="module", params=VERSIONS)
def compiler(request, tmp_path_factory):
    import os

    from fp8_check.versions._envs import Manager

    old = os.environ.get("FP8_CHECK_CACHE")
    os.environ["FP8_CHECK_CACHE"] = str(TEST_CACHE)
    try:
        env = Manager().ensure(request.param)
    finally:
        if old is None:
            os.environ.pop("FP8_CHECK_CACHE", None)
        else:
            os.environ["FP8_CHECK_CACHE"] = old
    with Compiler("deviceless", python=str(env.python)) as c:
        assert c.environment()["jax"] == request.param
        yield c


def _signature(compiler, case_id):
    comp = compiler.compile(render.render(_case(case_id)), load_target("h100x8"), PROFILES["cublas"])
    assert comp.ok, comp.error
    return extract(comp.hlo)


@pytest.mark.slow
@pytest.mark.network
def test_fsdp_scales_and_row_parallel_on_h100x8(compiler):
    replicated = _signature(compiler, "shard_fsdp_qdq_replicated")
    ag = _only(replicated, "all-gather")
    assert ag.dtype == "f8e4m3fn" and ag.groups == "1x8" and ag.layer == "fsdp_dense"
    assert ag.bytes == 1024 * 1024  # the whole 1024 x 1024 weight, one byte per element
    assert [g.target for g in replicated.gemms] == [FP8_CUBLAS] and replicated.fp8_gemms == 1

    per_shard = _signature(compiler, "shard_fsdp_qdq_per_shard")
    ag2 = _only(per_shard, "all-gather")
    assert ag2.dtype == "bf16" and ag2.bytes == 2 * ag.bytes
    assert len(per_shard.gemms) == 1 and per_shard.fp8_gemms == 0
    assert per_shard.gemms[0].target != FP8_CUBLAS and per_shard.gemms[0].operand_dtypes == ["bf16", "bf16"]

    row = _signature(compiler, "shard_tp_row")
    ar = _only(row, "all-reduce")
    assert ar.dtype == "bf16" and ar.bytes == 256 * 1024 * 2  # the bf16 [256, 1024] partial sums
    assert [g.target for g in row.gemms] == [FP8_CUBLAS]
    assert all(d in FP8_TYPES for d in row.gemms[0].operand_dtypes)


@pytest.mark.slow
def test_a_golden_expecting_an_fp8_all_gather_fails_as_a_regression(tmp_path, run_cli):
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "sharded.yaml").write_text((REPO / "cases" / "sharded.yaml").read_text())
    args = ("-k", "shard_fsdp_qdq_per_shard", "--target", "h100x8", "--profile", "cublas", "--goldens", tmp_path / "g")
    # the library's golden is an exact signature (a new golden of a case whose gemms carry layers would be a
    # contract, docs/contracts.md): re-blessed, it keeps its form
    path = golden.path_for(tmp_path / "g", "shard_fsdp_qdq_per_shard", "h100x8", "cublas", "deviceless")
    path.parent.mkdir(parents=True)
    path.write_text(golden.path_for(REPO / "goldens", "shard_fsdp_qdq_per_shard", "h100x8", "cublas", "deviceless").read_text())
    code, out, err = run_cli("bless", "cases", *args, cwd=tmp_path)
    assert code == 0, out + err
    doc = yaml.safe_load(path.read_text())
    (ag,) = [c for c in doc["expect"][0]["signature"]["collectives"] if c["op"] == "all-gather"]
    assert ag["dtype"] == "bf16"
    # what the replicated-scale pattern achieves: the weight all-gathered as E4M3, half the bytes
    ag.update(dtype="f8e4m3fn", shape=ag["shape"].replace("bf16", "f8e4m3fn"), bytes=ag["bytes"] // 2)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    code, out, err = run_cli("run", "cases", *args, "--fail-on", "regression", "--json", tmp_path / "r.json", cwd=tmp_path)
    assert code == 1, out + err
    line = next(x for x in out.splitlines() if "shard_fsdp_qdq_per_shard" in x and x.startswith("FAIL"))
    # the result line leads with the FP8 answer (#45); the collective that widened is named in its diff lines
    assert "[regression]" in line
    assert "FP8 collective now moves bf16 instead of f8e4m3fn" in out, out
    # the cost estimate (issue 27): the golden's all-gather moves half the bytes; a ring all-gather among 8
    # sends 7/8 of the difference over H100's NVLink (450 GB/s one way): 7/8 x 1 MiB / 450 GB/s = 2.04 us more
    assert "estimated +2.0 µs" in line
    assert "collectives[0].dtype: expected f8e4m3fn, found bf16  [regression: FP8 collective now moves bf16 " \
           "instead of f8e4m3fn]" in out
    # the issue body shows the collectives (dtype, bytes per device) next to the gemms
    code, body, err = run_cli("report", tmp_path / "r.json", "--markdown", "shard_fsdp_qdq_per_shard", cwd=tmp_path)
    assert code == 0, err
    assert "### Collectives (sharded compile)" in body and "Gemms: `__cublas$lt$matmul` bf16xbf16->bf16" in body
    assert "| all-gather | bf16 | bf16[1024,1024] | 2097152 | 1x8 | fsdp_dense |" in body
    # the HTML report's expected-vs-found table has the collective's fields (in the page's data island)
    page = (tmp_path / "r.html").read_text()
    assert "collectives[0].dtype" in page and "collectives[0].bytes" in page


USER_MODULE = '''\
import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec as P


def qdq(x, scale):
    q = jnp.clip(x / scale.astype(x.dtype), -448.0, 448.0).astype(jnp.float8_e4m3fn)
    return q.astype(x.dtype) * scale.astype(x.dtype)


def fsdp_dense(x, w, x_scale, w_scale):
    return jnp.dot(qdq(x, x_scale), qdq(w, w_scale), preferred_element_type=jnp.bfloat16)


def example_args():
    mesh = AbstractMesh((8,), ("fsdp",))
    rows, scalar = NamedSharding(mesh, P("fsdp", None)), NamedSharding(mesh, P())
    return (jax.ShapeDtypeStruct((256, 1024), jnp.bfloat16, sharding=rows),
            jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16, sharding=rows),
            jax.ShapeDtypeStruct((), jnp.float32, sharding=scalar),
            jax.ShapeDtypeStruct((), jnp.float32, sharding=scalar))
'''


@pytest.mark.slow
def test_check_a_user_function_with_abstract_mesh_inputs(tmp_path, run_cli):
    (tmp_path / "mymodel_sharded.py").write_text(USER_MODULE)
    sys.modules.pop("mymodel_sharded", None)
    code, out, err = run_cli("check", "mymodel_sharded:fsdp_dense", "--args", "mymodel_sharded:example_args",
                             "--target", "h100x8,h100x2x4", "--json", cwd=tmp_path)
    assert code == 0, out + err
    doc = json.loads(out)
    for result in doc["results"]:
        (ag,) = result["signature"]["collectives"]
        assert (ag["op"], ag["dtype"], ag["groups"]) == ("all-gather", "f8e4m3fn", "1x8"), result["target"]
        assert [g["target"] for g in result["signature"]["gemms"]] == [FP8_CUBLAS]
    code, out, err = run_cli("check", "mymodel_sharded:fsdp_dense", "--args", "mymodel_sharded:example_args",
                             "--target", "h100", cwd=tmp_path)
    assert code == 2 and err.count("\n") == 1 and "mesh of 8 devices" in err and "h100x8" in err


@pytest.mark.slow
def test_the_repro_script_compiles_the_sharded_case(tmp_path):
    case, target = _case("shard_moe_all_to_all"), load_target("h100x8")
    script = tmp_path / "repro.py"
    script.write_text(render.repro(case, target, PROFILES["cublas"], NEW))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sig = extract(proc.stdout)
    a2a = _only(sig, "all-to-all")
    assert a2a.dtype == "f8e4m3fn" and a2a.groups == "1x8"
    assert FP8_CUBLAS in [g.target for g in sig.gemms]
    assert textwrap.dedent("MESH = [['ep', 8]]") in script.read_text()
