"""A wheel that works anywhere: built with `uv build`, installed into a fresh environment outside the
checkout, then `fp8-check init`, `bless`, `run`, `check` and `matrix` on a small user project (a flax Dense with
FP8 dot_general, and a plain function), plus the scaffolded pytest test using the `fp8` fixture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from fp8_check.versions._envs import find_uv

from ..conftest import REPO

USER_MODEL = textwrap.dedent('''\
    """A user's own model code: nothing here knows about fp8-check."""
    import jax
    import jax.numpy as jnp
    from flax import linen as nn
    from flax.linen import fp8_ops


    def scaled_relu(a, b, a_scale, b_scale):
        c = jax.lax.dot_general(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale,
                                (((1,), (0,)), ((), ())))
        return jnp.clip(jax.nn.relu(c), -448.0, 448.0).astype(jnp.float8_e4m3fn)


    def dense_forward(x, kernel, input_scale, kernel_scale):
        """nn.Dense with flax's FP8 dot_general; the weights and scales are arguments, not constants."""
        model = nn.Dense(features=kernel.shape[1], use_bias=False, dot_general_cls=fp8_ops.Fp8DotGeneral)
        shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), x))
        given = {"kernel": kernel, "input_scale": input_scale, "kernel_scale": kernel_scale}
        variables = jax.tree_util.tree_map_with_path(
            lambda path, s: given.get(path[-1].key, jnp.ones(s.shape, s.dtype)), shapes)
        return model.apply(variables, x)


    def dense_args():
        return (jax.ShapeDtypeStruct((64, 128), jnp.bfloat16), jax.ShapeDtypeStruct((128, 256), jnp.bfloat16),
                jax.ShapeDtypeStruct((1,), jnp.float32), jax.ShapeDtypeStruct((1,), jnp.float32))
''')

USER_CASES = textwrap.dedent('''\
    cases:
      - id: my_scaled_relu
        description: the user's plain function -> one FP8 gemm with RELU
        kind: python
        callable: mymodel:scaled_relu
        requires: [flax]     # mymodel imports flax: without it (a JAX-only environment) UNSUPPORTED
        args:
          - {name: a, shape: [64, 64], dtype: float8_e4m3fn}
          - {name: b, shape: [64, 32], dtype: float8_e4m3fn}
          - {name: a_scale, shape: [], dtype: float32}
          - {name: b_scale, shape: [], dtype: float32}
        profiles: [cublas]
      - id: my_dense_fp8
        description: the user's flax Dense with Fp8DotGeneral -> one E4M3 x E4M3 FP8 gemm
        kind: python
        callable: mymodel:dense_forward
        requires: [flax]
        args:
          - {name: x, shape: [64, 128], dtype: bfloat16}
          - {name: kernel, shape: [128, 256], dtype: bfloat16}
          - {name: input_scale, shape: [1], dtype: float32}
          - {name: kernel_scale, shape: [1], dtype: float32}
        profiles: [cublas]
''')


def _run(cmd, cwd: Path, env: dict, timeout: int = 1200) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout)
    return p


@pytest.mark.slow
@pytest.mark.network
def test_wheel_installs_outside_the_checkout_and_checks_a_user_project(tmp_path):
    uv = find_uv()
    assert uv, "uv is a dependency of fp8-check"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env.update(UV_PYTHON_DOWNLOADS="never", FP8_CHECK_NO_GPU="1")

    # 1. the wheel, with the templates and target specs inside
    dist = tmp_path / "dist"
    p = _run([uv, "build", "--wheel", "--out-dir", dist, REPO], tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    [wheel] = dist.glob("fp8_check-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("fp8_check/templates/pattern.py.j2", "fp8_check/templates/report.html.j2",
                   "fp8_check/targets/h100.txtpb", "fp8_check/targets/a100.txtpb", "fp8_check/worker/serve.py"):
        assert needed in names, needed
    assert not any(n.startswith(("tests/", "cases/", "goldens/", "harness/")) for n in names)

    # 2. a fresh environment outside the checkout (packages from uv's cache)
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    p = _run([uv, "venv", "--python", base, venv], tmp_path, env)
    assert p.returncode == 0, p.stderr
    py = venv / "bin" / "python"
    # Pinned to the versions of uv.lock, so the install comes from uv's cache and matches what the suite tested.
    constraints = tmp_path / "constraints.txt"
    p = _run([uv, "export", "--locked", "--all-extras", "--no-hashes", "--no-emit-project", "-o", constraints], REPO, env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = _run([uv, "pip", "install", "--python", py, "-c", constraints, f"{wheel}[flax]", "pytest"], tmp_path, env)
    assert p.returncode == 0, p.stdout + p.stderr
    bin_dir = venv / "bin"
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    project = tmp_path / "userproject"
    project.mkdir()
    p = _run([py, "-c", "import fp8_check, sys; print(fp8_check.__file__)"], project, env)
    assert p.returncode == 0 and str(venv) in p.stdout and str(REPO) not in p.stdout, p.stdout + p.stderr

    # 3. init scaffolds the project; the user adds a model and cases for it
    p = _run([bin_dir / "fp8-check", "init"], project, env)
    assert p.returncode == 0, p.stdout + p.stderr
    for rel in ("cases/fp8_example.yaml", "goldens/README.md", "tests/test_fp8_fusion.py", ".github/workflows/fp8-check.yml"):
        assert (project / rel).is_file(), rel
    (project / "mymodel.py").write_text(USER_MODEL)
    (project / "cases" / "mine.yaml").write_text(USER_CASES)

    # 4. bless, then run: every case passes against the goldens just recorded
    p = _run([bin_dir / "fp8-check", "bless"], project, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (project / "goldens" / "h100" / "cublas" / "deviceless" / "my_dense_fp8.yaml").is_file()
    p = _run([bin_dir / "fp8-check", "run"], project, env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "3 results: 3 PASS" in p.stdout, p.stdout
    results = {r["case"]: r for r in json.loads((project / "reports" / "results.json").read_text())["results"]}
    dense = results["my_dense_fp8"]["signature"]["gemms"]
    assert [g["operand_dtypes"] for g in dense if g["target"] == "__cublas$lt$matmul$f8"] == [["f8e4m3fn", "f8e4m3fn"]]
    assert (project / "reports" / "report.html").is_file()

    # 5. check: the plain function by --arg, the flax layer by an args factory
    p = _run([bin_dir / "fp8-check", "check", "mymodel:scaled_relu", "--arg", "a=float8_e4m3fn[64,64]",
              "--arg", "b=float8_e4m3fn[64,32]", "--arg", "a_scale=float32[]", "--arg", "b_scale=float32[]",
              "--expect", "fp8_gemms=1", "--expect", "epilogue=RELU"], project, env)
    assert p.returncode == 0 and "PASS        h100/cublas  mymodel.scaled_relu" in p.stdout, p.stdout + p.stderr
    p = _run([bin_dir / "fp8-check", "check", "mymodel:dense_forward", "--args", "mymodel:dense_args",
              "--target", "a100", "--expect", "fp8_gemms=1", "--json", "-"], project, env)
    assert p.returncode == 1, p.stdout + p.stderr
    [res] = json.loads(p.stdout)["results"]
    # the standard results file (as `run` writes it): the diff's found side names the gemm that ran instead
    d = res["diffs"][0]
    assert res["outcome"] == "FAIL" and (d["path"], d["expected"]) == ("fp8_gemms", 1) and str(d["found"]).startswith("0 ("), d

    # 6. matrix from the installed wheel: the worker runs in another JAX version's environment (only JAX
    #    there: the user's flax module cannot import, so its cases, which declare `requires: [flax]`, are
    #    UNSUPPORTED, as documented; without the declaration they would be UNRESOLVED)
    p = _run([bin_dir / "fp8-check", "matrix", "--jax", "0.7.0", "--profile", "cublas", "--out", "reports/m.json",
              "--no-html", "--fail-on", "never"], project, env)
    assert p.returncode == 0, p.stdout + p.stderr
    [entry] = json.loads((project / "reports" / "m.json").read_text())["versions"]
    assert entry["status"] == "ran" and entry["environment"]["jax"] == "0.7.0", entry
    by_case = {r["case"]: r for r in entry["results"]}
    assert by_case["example_scaled_relu"]["signature"]["kernels"] >= 1
    assert by_case["my_dense_fp8"]["outcome"] == "UNSUPPORTED" and "flax" in by_case["my_dense_fp8"]["reason"]

    # 7. the scaffolded pytest test, through the installed plugin's fixture
    p = _run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", "--fp8-bless"], project, env)
    assert p.returncode == 0 and "2 passed" in p.stdout, p.stdout + p.stderr
