"""The compile cache (harness/fp8_check/compile/_cache.py): keys, soundness rules, corrupt entries, concurrent writers, eviction."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fp8_check.compile._cache import (
    CompileCache,
    Entry,
    KeyMaterial,
    cacheable,
    compiling_code_hash,
    imported_modules,
)

REPO = Path(__file__).resolve().parents[2]

BASE = KeyMaterial(
    source="import jax\nFN = None\nARGS = []\n",
    target_config="gpu_device_info { cuda_compute_capability { major: 9 } }\n",
    compiler_options={"xla_gpu_enable_triton_gemm": False},
    mode="deviceless",
    versions={"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "jaxlib_git_hash": "abc", "cuda_plugin": "0.12.0.1",
              "cuda_pjrt": "0.12.0.1", "python": "3.12.1"},
    xla_flags="",
    env_vars={},
    distributions="d1",
    imports={"jax": "dist:jax==0.12.0.1"},
    device=None,
)

# One changed value per component of the key: each must give another key.
CHANGES = {
    "source": BASE.source + "# edited\n",
    "target_config": BASE.target_config.replace("major: 9", "major: 10"),
    "compiler_options": {"xla_gpu_autotune_level": 0},
    "mode": "device",
    "versions.jax": "0.11.2",
    "versions.jaxlib": "0.11.2",
    "versions.jaxlib_git_hash": "def",
    "versions.cuda_plugin": "0.11.2",
    "versions.cuda_pjrt": "0.11.2",
    "versions.python": "3.13.0",
    "xla_flags": "--xla_gpu_enable_cublaslt=false",
    "env_vars": {"JAX_ENABLE_X64": "1"},
    "distributions": "d2",
    "imports": {"jax": "dist:jax==0.11.2"},
    "requires": ("flax",),
    "device": {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "cublas": "12.9.1"},
    "harness": "another version of aot.py/worker.py",
    "case_env": {"MY_LAYER_SWITCH": "plain"},  # a case's `env:` variable and its value (tests/cases/test_case_env.py)
}


def changed(component: str, value) -> KeyMaterial:
    if component.startswith("versions."):
        versions = dict(BASE.versions)
        versions[component.split(".", 1)[1]] = value
        return dataclasses.replace(BASE, versions=versions)
    return dataclasses.replace(BASE, **{component: value})


def test_every_field_of_the_key_material_is_covered_by_the_test():
    fields = {f.name for f in dataclasses.fields(KeyMaterial)}
    covered = {c.split(".")[0] for c in CHANGES}
    assert fields == covered
    assert set(BASE.versions) == {c.split(".", 1)[1] for c in CHANGES if c.startswith("versions.")}


@pytest.mark.parametrize("component", sorted(CHANGES))
def test_a_change_in_any_component_is_a_miss(component, tmp_path):
    cache = CompileCache(tmp_path)
    cache.put(BASE.key(), Entry("HloModule m", "module {}", 0.5))
    assert cache.get(BASE.key()) is not None
    other = changed(component, CHANGES[component])
    assert other.key() != BASE.key()
    assert cache.get(other.key()) is None


def test_key_is_stable_and_independent_of_dict_order():
    a = dataclasses.replace(BASE, env_vars={"XLA_X": "1", "JAX_Y": "2"})
    b = dataclasses.replace(BASE, env_vars={"JAX_Y": "2", "XLA_X": "1"})
    assert a.key() == b.key() and len(a.key()) == 64
    assert BASE.harness == compiling_code_hash()


def test_hit_returns_what_was_stored_and_refreshes_its_use(tmp_path):
    cache = CompileCache(tmp_path)
    key = BASE.key()
    cache.put(key, Entry("HloModule m\nENTRY e {}", "module @m {}", 0.25), note={"case": "x"})
    path = cache.path(key)
    assert path.parent.parent.parent == tmp_path and path.name == key + ".json.gz"
    old = time.time() - 1000
    os.utime(path, (old, old))
    got = cache.get(key)
    assert got == Entry("HloModule m\nENTRY e {}", "module @m {}", 0.25)
    assert path.stat().st_mtime > old + 500  # a hit counts as a use for eviction
    assert (cache.stats.hits, cache.stats.misses, cache.stats.writes) == (1, 0, 1)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".tmp-")]


def _entry_doc(key, **over):
    doc = {"schema": "fp8-check/compile-cache/1", "key": key, "hlo": "HloModule m", "stablehlo": "module {}",
           "seconds": 0.1, "error": None}
    doc.update(over)
    return gzip.compress(json.dumps(doc).encode())


CORRUPT = {
    "empty": lambda key: b"",
    "truncated": lambda key: _entry_doc(key)[:20],
    "not gzip": lambda key: b"HloModule m",
    "not json": lambda key: gzip.compress(b"{not json"),
    "another key": lambda key: _entry_doc("0" * 64),
    "wrong schema": lambda key: _entry_doc(key, schema="fp8-check/compile-cache/0"),
    "hlo not text": lambda key: _entry_doc(key, hlo=7),
    "no hlo": lambda key: _entry_doc(key, hlo=""),
    "seconds not a number": lambda key: _entry_doc(key, seconds="fast"),
    "a list": lambda key: gzip.compress(b"[1, 2]"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupt_entry_is_a_miss_and_is_removed_then_rewritten(kind, tmp_path):
    cache = CompileCache(tmp_path)
    key = BASE.key()
    path = cache.path(key)
    path.parent.mkdir(parents=True)
    path.write_bytes(CORRUPT[kind](key))
    assert cache.get(key) is None
    assert cache.stats.corrupt == 1 and not path.exists()
    cache.put(key, Entry("HloModule good", "module {}", 1.0))
    assert cache.get(key).hlo == "HloModule good"


def test_unwritable_cache_only_misses(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    cache = CompileCache(blocker / "cache")
    cache.put(BASE.key(), Entry("HloModule m", "module {}", 0.1))  # must not raise
    assert cache.get(BASE.key()) is None and cache.stats.writes == 0


WRITER = textwrap.dedent("""
    import sys
    from fp8_check.compile._cache import CompileCache, Entry
    root, me, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cache = CompileCache(root)
    keys = ["%064x" % k for k in range(8)]
    bad = 0
    for i in range(rounds):
        for k in keys:
            # every writer writes the same 8 keys with its own (large) value, and reads them back
            cache.put(k, Entry("HloModule w%d_%d\\n" % (me, i) + "x" * 20000, "module {}", float(me)))
            got = cache.get(k)
            if got is not None and not (got.hlo.startswith("HloModule w") and len(got.hlo) > 20000):
                bad += 1
    print(bad, cache.stats.corrupt)
""")


@pytest.mark.slow
def test_concurrent_writers_in_real_processes_leave_only_whole_entries(tmp_path):
    root = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(n), "40"], cwd=str(REPO),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.split() == ["0", "0"], out  # no partial or foreign entry was ever read
    cache = CompileCache(root)
    for k in range(8):
        got = cache.get("%064x" % k)
        assert got is not None and got.seconds in (0.0, 1.0, 2.0, 3.0) and got.hlo.startswith(f"HloModule w{int(got.seconds)}_")
    assert not list(root.rglob(".tmp-*"))


def test_eviction_removes_least_recently_used_down_to_the_bound(tmp_path):
    cache = CompileCache(tmp_path, max_bytes=10_000)
    payload = os.urandom(3000).hex()  # incompressible: each entry is a few kB on disk
    keys = ["%064x" % i for i in range(6)]
    now = time.time()
    for i, k in enumerate(keys):
        cache.put(k, Entry("HloModule " + payload, "module {}", 0.1))
        os.utime(cache.path(k), (now - 1000 + i, now - 1000 + i))
    cache.get(keys[0])  # the oldest write, but just used
    assert cache.size() > 10_000
    removed = cache.evict()
    assert removed > 0 and cache.size() <= 8_000
    assert cache.path(keys[0]).exists() and cache.path(keys[-1]).exists()
    assert not cache.path(keys[1]).exists()  # least recently used goes first


def test_eviction_removes_stale_temporary_files_only(tmp_path):
    cache = CompileCache(tmp_path)
    cache.put(BASE.key(), Entry("HloModule m", "module {}", 0.1))
    d = cache.path(BASE.key()).parent
    stale, fresh = d / ".tmp-stale", d / ".tmp-fresh"
    stale.write_text("x")
    fresh.write_text("x")
    os.utime(stale, (time.time() - 7200,) * 2)
    cache.evict()
    assert not stale.exists() and fresh.exists() and cache.path(BASE.key()).exists()


def test_root_and_bound_come_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("FP8_CHECK_COMPILE_CACHE", raising=False)
    monkeypatch.setenv("FP8_CHECK_CACHE", str(tmp_path / "fp8"))
    monkeypatch.setenv("FP8_CHECK_CACHE_MAX_MB", "3")
    cache = CompileCache()
    assert cache.root == tmp_path / "fp8" / "compile" and cache.max_bytes == 3 * 2**20
    monkeypatch.setenv("FP8_CHECK_COMPILE_CACHE", str(tmp_path / "elsewhere"))
    assert CompileCache().root == tmp_path / "elsewhere"


def test_imported_modules_and_dynamic_imports():
    names, why = imported_modules("import jax\nimport jax.numpy as jnp\nfrom flax.linen import fp8_ops\nimport os, math\n")
    assert names == {"jax", "flax", "os", "math"} and why is None
    for src, word in (("x = __import__('mylib')", "__import__"), ("import importlib\nname = 'm'\nimportlib.import_module(name)", "import"),
                      ("from . import sibling", "relative"), ("exec('import mylib')", "exec")):
        assert word in (imported_modules(src)[1] or ""), src
    assert "does not parse" in imported_modules("def (")[1]
    # the rendered form of a case whose module is not inlined: a literal module name is a static import
    names, why = imported_modules("import importlib\n\nFN = getattr(importlib.import_module('flax.linen'), 'Dense')\n")
    assert names == {"importlib", "flax"} and why is None
    assert "import_module" in (imported_modules("import importlib\nm = 'x'\nimportlib.import_module(m)\n")[1] or "")


def test_soundness_rules():
    dist = {"jax": "dist:jax==0.12.0.1", "os": "stdlib"}
    assert cacheable("deviceless", {"xla_gpu_enable_triton_gemm": False}, dist, None, False) is None
    assert cacheable("deviceless", {}, {**dist, "flax": "missing"}, None, False) is None
    assert "autotuning" in cacheable("device", {"xla_gpu_enable_triton_gemm": False}, dist, None, False)
    assert "autotuning" in cacheable("device", {}, dist, None, False)
    assert cacheable("device", {"xla_gpu_autotune_level": 0}, dist, None, False) is None
    assert "numerics" in cacheable("deviceless", {}, dist, None, True)
    assert "mylib" in cacheable("deviceless", {}, {**dist, "mylib": "local:/home/u/mylib/__init__.py"}, None, False)
    assert cacheable("deviceless", {}, dist, "it imports or executes code dynamically (exec)", False)
