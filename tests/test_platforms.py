"""The platform seam: what differs between GPU vendors lives in harness/fp8_check/platforms/ and nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fp8_check import platforms
from fp8_check.platforms import AMD, NVIDIA
from fp8_check.targets import load_target

HARNESS = Path(__file__).resolve().parent.parent / "harness"
SEAM = HARNESS / "fp8_check" / "platforms"


def _docstring_ids(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def platform_literals_outside_the_seam(root: Path = HARNESS) -> list[str]:
    """`file:line: literal` for each string constant in code (docstrings and comments aside) outside
    harness/fp8_check/platforms/ that names a platform: JAX's platform names exactly, anything else as a substring."""
    names = platforms.literals()
    exact = {p.jax_platform for p in platforms.PLATFORMS} | {p.spec_platform_name for p in platforms.PLATFORMS}
    parts = [n for n in names if n not in exact]
    found = []
    for path in sorted(root.rglob("*.py")):
        if SEAM in path.parents:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstring_ids(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                text = node.value
                hits = [n for n in parts if n in text] + ([text] if text in exact else [])
                found += [f"{path.relative_to(root.parent)}:{node.lineno}: {h!r}" for h in hits]
    return found


def test_no_platform_literal_outside_the_seam():
    assert platform_literals_outside_the_seam() == []


def test_the_literal_check_finds_one(tmp_path):
    # the check itself is not vacuous: a module naming the CUDA platform, a plugin or a gemm library is caught
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "bad.py").write_text(
        '"""docstrings may say cuda and jax-cuda12-plugin."""\n'
        'P = "cuda"\nD = f"pip install jax-rocm7-plugin=={1}"\n# a comment: __cublas$lt$matmul$f8\nT = "__cublas$gemm"\n')
    found = platform_literals_outside_the_seam(tmp_path / "harness")
    assert sorted(found) == ["harness/bad.py:2: 'cuda'", "harness/bad.py:3: 'jax-rocm'", "harness/bad.py:3: 'jax-rocm7-plugin'",
                             "harness/bad.py:5: '__cublas'"]


def test_a_spec_names_its_platform():
    h100 = load_target("h100")
    assert h100.platform is NVIDIA and h100.arch == "sm_90" and h100.native_fp8 == ("float8_e4m3fn", "float8_e5m2")
    assert load_target("a100").native_fp8 == () and not load_target("a100").fp8_capable
    text = ('gpu_device_info {\n  threads_per_warp: 64\n  rocm_compute_capability {\n    gcn_arch_name: "gfx942:sramecc+:xnack-"\n'
            '  }\n}\nplatform_name: "ROCM"\n')
    assert platforms.of_spec(text) is AMD
    assert AMD.arch_of_spec(text) == ("gfx942", (9, 4))
    assert AMD.native_fp8("gfx942", (9, 4)) == ("float8_e4m3fnuz", "float8_e5m2fnuz")
    assert AMD.native_fp8("gfx950", (9, 5)) == ("float8_e4m3fn", "float8_e5m2")


@pytest.mark.parametrize("target, family, label", [
    ("__cublas$lt$matmul$f8", "cublas-fp8", "cuBLASLt FP8"),
    ("__cublas$lt$matmul", "cublas", "cuBLAS"),
    ("__cublas$gemm", "cublas", "cuBLAS"),
    ("__cudnn$blockScaledDot", "cudnn", "cuDNN"),
])
def test_gemm_engines(target, family, label):
    engine = NVIDIA.engine_of(target)
    assert engine is not None and (engine.family, engine.label) == (family, label)
    if family.startswith("cublas"):  # ROCm's XLA emits the same custom-calls, backed by hipBLASLt
        amd = AMD.engine_of(target)
        assert amd is not None and amd.family == family and amd.label.startswith("hipBLASLt")


def test_rocm_plugin_releases():
    assert AMD.requirements("0.12.0", "deviceless") == ["jax==0.12.0", "jaxlib==0.12.0", "jax-rocm7-plugin==0.12.0",
                                                       "jax-rocm7-pjrt==0.12.0", "flatbuffers"]
    for version in ("0.6.2", "0.7.0", "0.8.1", "0.9.0", "0.12.0.1"):
        assert AMD.requirements(version, "deviceless") is None
        assert "no ROCm plugin for JAX " + version in AMD.unsupported_reason(version)
    assert AMD.needs_runtime_version("0.11.2") and not AMD.needs_runtime_version("0.12.0")


def test_the_wrong_fp8_family_silently_upcast_is_a_regression():
    # E4M3 (OCP) golden on gfx950 has an FP8 hipBLASLt gemm; the same case on gfx942 (or a release that stopped
    # running the family) upcasts it: judged like any FP8 gemm that became a wider one, in the same words
    import yaml

    from fp8_check.verdict import verdict

    def sig(target: str) -> dict:
        path = HARNESS.parent / "goldens" / target / "cublas" / "deviceless" / "seed_plain_f32.yaml"
        return yaml.safe_load(path.read_text())["expect"][0]["signature"]

    fp8, upcast = sig("mi350x"), sig("mi300x")
    assert fp8["gemms"][0]["target"] == "__cublas$lt$matmul$f8" and upcast["gemms"][0]["operand_dtypes"] == ["f32", "f32"]
    v = verdict.classify(fp8, upcast)
    assert v.cls == verdict.REGRESSION and any("FP8 gemm -> " in line.why for line in v.lines), v
    assert any(line.cls == verdict.IMPROVEMENT for line in v.lines)  # the dropped transpose no longer makes it "mixed"
    back = verdict.classify(upcast, fp8)  # regaining FP8 does not decide alone (the transpose came back)
    assert back.cls == verdict.MIXED and any(x.cls == verdict.IMPROVEMENT and "-> cuBLASLt FP8 gemm" in x.why for x in back.lines)
