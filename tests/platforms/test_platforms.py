"""The platform seam: what differs between accelerator platforms lives in harness/fp8_check/platforms/ and nowhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fp8_check import platforms
from fp8_check.platforms import AMD, NVIDIA
from fp8_check.targets import PROFILES, canonical_target, load_target, parse_target, profile_applies

HARNESS = Path(__file__).resolve().parents[2] / "harness"
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
    exact = {p.jax_platform for p in platforms.registered()} | {p.spec_platform_name for p in platforms.registered()}
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


# NVIDIA's default target and the GPU gemm rewriter's profile: named by NVIDIA's module (and the GPU profiles' module
# it shares with AMD) alone; everyone else asks (platforms.default_target(), default_profile(), a platform's profiles).
# Goldens, cases and docs are data. The scaffold's templates are the files it writes into a user's project: data.
DEFAULT_WORDS = re.compile(r"(?<![A-Za-z0-9_$])(h100|cublas)(?![A-Za-z0-9_$])")
DEFAULT_WORD_HOMES = {SEAM / "_nvidia.py", SEAM / "_xla_gpu.py"}
DATA_MODULES = {HARNESS / "fp8_check" / "cli" / "scaffold.py"}


def default_words_outside_nvidia(root: Path = HARNESS) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if path in DEFAULT_WORD_HOMES | DATA_MODULES:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docs = _docstring_ids(tree)
        found += [f"{path.relative_to(root.parent)}:{node.lineno}: {m.group(1)!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  for m in DEFAULT_WORDS.finditer(node.value)]
    return found


def test_the_default_target_and_profile_are_named_by_nvidia_alone():
    assert default_words_outside_nvidia() == []
    assert (platforms.default_target(), platforms.default_profile()) == (NVIDIA.default_target, NVIDIA.default_profile)


def test_the_default_word_check_finds_one(tmp_path):
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "bad.py").write_text(
        '"""docstrings may say h100 and cublas."""\nT = "h100"\nP = f"--profile cublas,{1}"\n'
        'C = "__cublas$gemm"\nB = "cublaslt"\nF = "cublas-fp8"\n')
    assert sorted(default_words_outside_nvidia(tmp_path / "harness")) == [
        "harness/bad.py:2: 'h100'", "harness/bad.py:3: 'cublas'", "harness/bad.py:6: 'cublas'"]


def test_target_features_are_the_platforms_words():
    assert load_target("h100").features == {"fp8", "fp8-ocp"} and load_target("a100").features == frozenset()
    assert load_target("b200").features == {"fp8", "fp8-ocp", "cudnn-block-scaled"}
    assert load_target("mi300x").features == {"fp8", "fp8-fnuz"} and load_target("mi350x").features == {"fp8", "fp8-ocp"}


def test_version_header_lines_are_the_platforms():
    line = NVIDIA.version_header("dnn", (9, 8, 0), "cuDNN 9.8.0")
    assert line == "# cudnn: 9.8.0  source: cuDNN 9.8.0" and NVIDIA.parse_version_line(line) == ("dnn", (9, 8, 0), "source: cuDNN 9.8.0")
    assert AMD.parse_version_line(line) is None and AMD.parse_version_line("# rocm_runtime: 7.0.0")[:2] == ("runtime", (7, 0, 0))


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

    from fp8_check.verdict import _classify as verdict

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


# ---- the registry: a platform is one module or folder under platforms/, registered once

PLATFORM_HOMES = {"nvidia": [SEAM / "_nvidia.py"], "amd": [SEAM / "_amd.py", SEAM / "_standins.py"],
                  "tpu": sorted((SEAM / "tpu").rglob("*.py"))}
SHARED_HOMES = [SEAM / "__init__.py", SEAM / "_registry.py", SEAM / "_base.py", SEAM / "_xla_gpu.py"]


def _code_strings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstring_ids(tree)
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_every_platform_is_registered_once_with_its_own_home():
    assert [p.name for p in platforms.registered()] == ["nvidia", "amd", "tpu"]
    assert set(PLATFORM_HOMES) == {p.name for p in platforms.registered()}
    homes = {path for paths in PLATFORM_HOMES.values() for path in paths} | set(SHARED_HOMES)
    assert set(SEAM.rglob("*.py")) == homes  # no platform code lives anywhere else in the seam
    with pytest.raises(ValueError, match="registered already"):
        platforms.register(platforms.TPU)


def test_no_platform_literal_lives_in_another_platform():
    # a literal owned by one platform alone (ROCm's XLA shares the cuBLAS custom-call names) appears in no other
    # platform's home, nor in the shared modules: adding the TPU touched the registry and platforms/tpu/ only
    owners: dict[str, set[str]] = {}
    for p in platforms.registered():
        for literal in p.literals():
            owners.setdefault(literal, set()).add(p.name)
    found = []
    for name, paths in PLATFORM_HOMES.items():
        for path in paths:
            for text in _code_strings(path):
                found += [f"{path.name}: {lit!r} ({', '.join(sorted(o))})" for lit, o in owners.items()
                          if name not in o and (lit == text if lit in ("tpu", "cuda", "rocm") else lit in text)]
    for path in SHARED_HOMES:
        for text in _code_strings(path):
            found += [f"{path.name}: {lit!r}" for lit, o in owners.items() if len(o) == 1 and
                      (lit == text if lit in ("tpu", "cuda", "rocm") else lit in text)]
    assert found == []


def test_the_tpu_platform_imports_no_other_platform():
    for path in PLATFORM_HOMES["tpu"]:
        tree = ast.parse(path.read_text())
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {m for m in modules if m.startswith("fp8_check.") and not m.startswith(
            ("fp8_check.platforms.tpu", "fp8_check.platforms._base"))}, path


def test_an_unknown_spec_is_refused_never_taken_for_nvidia():
    with pytest.raises(platforms.UnknownSpec, match="names no platform"):
        platforms.of_spec('gpu_device_info { threads_per_warp: 32 }\nplatform_name: "SOMETHING"\n')
    with pytest.raises(ValueError, match="target 'odd': the spec names no platform"):
        parse_target("odd", "gpu_device_info { threads_per_warp: 32 }\n")


def test_profiles_belong_to_their_platforms():
    h100, v6e = load_target("h100"), load_target("v6e")
    assert [p for p in PROFILES if profile_applies(p, h100)] == ["cublas", "triton", "default"]
    assert [p for p in PROFILES if profile_applies(p, v6e)] == ["tpu"]
    assert load_target("mi300x").platform.canary_profile == "cublas" and v6e.platform.canary_profile == "tpu"


@pytest.mark.parametrize("name, arch, devices, topology_name", [
    ("v5e", "v5e", 1, "v5e:1x1"), ("v5p", "v5p", 1, "v5p:1x1x1"), ("v6e", "v6e", 1, "v6e:1x1"),
    ("tpu7x", "tpu7x", 1, "tpu7x:1x1x1"), ("v5e-2x2", "v5e", 4, "v5e:2x2"), ("v6e-2x2", "v6e", 4, "v6e:2x2"),
    ("tpu7x-2x2x1", "tpu7x", 8, "tpu7x:2x2x1"),  # tpu7x: one JAX device per TensorCore, two per chip
])
def test_tpu_targets(name, arch, devices, topology_name):
    t = load_target(name)
    assert t.platform is platforms.TPU and t.arch == arch and t.devices == devices
    assert t.versions is not None and t.versions.runtime == () and t.versions.dnn == ()
    arguments = platforms.TPU.topology_arguments(t.config_text, t.topology, "0.11.2")
    assert arguments["topology_name"] == topology_name
    # libtpu before 0.12.0 assumes 2x2x1 chips per host: a single chip says so; from 0.12.0 it need not
    assert arguments.get("chips_per_host_bounds") == ([1, 1, 1] if devices == 1 else None)
    assert "chips_per_host_bounds" not in platforms.TPU.topology_arguments(t.config_text, t.topology, "0.12.0")


@pytest.mark.parametrize("name", ["v7e", "v6e-0x2", "v6e-2x2x1", "v5p-2x2", "tpu7x-2x2", "v6e-1x1", "v6e-02x2"])
def test_malformed_tpu_targets_are_unknown(name):
    assert canonical_target(name) is None
    with pytest.raises(KeyError, match="unknown target"):
        load_target(name)


def test_tpu_releases_and_generations():
    assert platforms.TPU.requirements("0.6.1", "deviceless") == ["jax[tpu]==0.6.1", "flatbuffers"]
    assert platforms.TPU.requirements("0.5.3", "deviceless") is None
    assert "no libtpu pin of jax[tpu]==0.5.3" in platforms.TPU.unsupported_reason("0.5.3")
    assert platforms.TPU.unsupported_reason("0.8.0", "v6e") == ""
    assert platforms.TPU.unsupported_reason("0.8.0", "tpu7x") == ("JAX 0.8.0's libtpu 0.0.24 has no tpu7x topology: tpu7x "
                                                                  "exists from JAX 0.8.1 (libtpu 0.0.30)")
    assert platforms.TPU.unsupported_reason("0.8.1", "tpu7x") == ""
    assert load_target("tpu7x").native_fp8 == ("float8_e4m3fn", "float8_e5m2") and load_target("v6e").native_fp8 == ()


def test_the_canary_probes_are_the_platforms():
    # verdict/_canary.py runs any platform's probes and imports no platform: the cuDNN one is NVIDIA's data
    from fp8_check.verdict import _canary as canary

    tree = ast.parse((HARNESS / "fp8_check" / "verdict" / "_canary.py").read_text())
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert {name for module, name in imported if module == "fp8_check.platforms"} == {"DEFAULT", "Probe"}
    assert not {module for module, _ in imported if module and module.startswith("fp8_check.platforms.")}
    (probe,) = NVIDIA.probes()
    assert AMD.probes() == () and platforms.TPU.probes() == ()
    b200, h100 = load_target("b200"), load_target("h100")
    assert probe.feature in b200.features and probe.feature not in h100.features
    assert probe.min_dnn("0.7.1") == (9, 7, 0) and probe.min_dnn("0.8.0") == probe.min_dnn("0.12.0.1") == (9, 10, 0)
    assert canary.expects_cudnn(b200, "0.12.0.1") and not canary.expects_cudnn(h100, "0.12.0.1")
    assert canary.PROBE is not None and canary.PROBE.id == probe.id and canary.BLOCK_SCALED_TARGET == probe.reaches
