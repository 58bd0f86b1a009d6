"""`fp8-check matrix --jax-index URL`: JAX builds from an extra PEP 503 index (JAX's nightlies), tested
against a local index made from a wheel in uv's cache (jaxlib and the plugin come from uv's cache/the default index).

JAX's nightly index cannot be reached from the test machines, so a "nightly" is made the way JAX's
nightly builds differ from a release: the released jax wheel from uv's cache, re-versioned to a
`.devYYYYMMDD` pre-release (METADATA, dist-info name, `_release_version`, RECORD). That version exists
on no other index, so an environment with it proves uv took jax from the configured index.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fp8_check.versions import releases
from fp8_check.versions._envs import find_uv

from ..conftest import REPO

BASE = "0.12.0.1"  # the locked JAX: its jaxlib and plugin are in uv's cache
NIGHTLY = "0.12.1.dev20261123"


def _cached_wheel_dir(name: str, version: str) -> Path | None:
    cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    for d in sorted(cache.glob(f"archive-v0/*/{name}-{version}.dist-info")):
        if (d / "METADATA").is_file():
            return d.parent
    return None


def make_nightly_wheel(src: Path, out_dir: Path, base: str, version: str) -> Path:
    """A wheel of the unpacked jax wheel `src`, re-versioned from `base` to `version`."""
    files: dict[str, bytes] = {}
    old_info, new_info = f"jax-{base}.dist-info", f"jax-{version}.dist-info"
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = path.relative_to(src).as_posix()
        if "__pycache__" in rel or rel.endswith(".pyc"):
            continue
        data = path.read_bytes()
        if rel == f"{old_info}/METADATA":
            data = re.sub(rb"^Version: .*$", f"Version: {version}".encode(), data, count=1, flags=re.M)
        if rel == "jax/version.py":
            data = re.sub(rb"^_release_version: str = .*$", f"_release_version: str = '{version}'".encode(), data,
                          count=1, flags=re.M)
        if rel.startswith(old_info + "/"):
            rel = new_info + rel[len(old_info):]
        if rel != f"{new_info}/RECORD" and not rel.endswith("/INSTALLER") and not rel.endswith("/REQUESTED") \
                and not rel.endswith("/direct_url.json"):
            files[rel] = data
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for rel, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([rel, f"sha256={digest}", len(data)])
    writer.writerow([f"{new_info}/RECORD", "", ""])
    files[f"{new_info}/RECORD"] = record.getvalue().encode()
    wheel = out_dir / f"jax-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for rel, data in files.items():
            z.writestr(rel, data)
    return wheel


def make_index(root: Path, wheels: list[Path]) -> str:
    """A PEP 503 simple index under `root` serving `wheels` (all of package jax); its file:// URL."""
    pkg = root / "simple" / "jax"
    pkg.mkdir(parents=True)
    links = []
    for w in wheels:
        shutil.copy(w, pkg / w.name)
        digest = hashlib.sha256(w.read_bytes()).hexdigest()
        links.append(f'<a href="{w.name}#sha256={digest}">{w.name}</a><br/>')
    (pkg / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    (root / "simple" / "index.html").write_text('<!DOCTYPE html><html><body><a href="jax/">jax</a></body></html>\n')
    return (root / "simple").as_uri()


@pytest.fixture(scope="module")
def nightly_index(tmp_path_factory) -> str:
    src = _cached_wheel_dir("jax", BASE)
    assert src is not None, f"jax {BASE} is not in uv's cache (scripts/env.sh puts it there)"
    root = tmp_path_factory.mktemp("index")
    (root / "wheels").mkdir()
    return make_index(root / "idx", [make_nightly_wheel(src, root / "wheels", BASE, NIGHTLY)])


def test_index_versions_reads_a_pep503_page(tmp_path):
    pkg = tmp_path / "simple" / "jax"
    pkg.mkdir(parents=True)
    (pkg / "index.html").write_text(
        '<a href="jax-0.8.1.dev20251010-py3-none-any.whl#sha256=00">x</a>\n'
        '<a href="../../files/jax-0.8.1.dev20251009-py3-none-any.whl">x</a>\n'
        '<a href="jax-0.8.0.tar.gz">x</a> <a href="notes.txt">n</a>\n')
    url = (tmp_path / "simple").as_uri()
    assert releases.index_versions(url) == ["0.8.0", "0.8.1.dev20251009", "0.8.1.dev20251010"]
    assert releases.newest_on_index(url) == "0.8.1.dev20251010"
    with pytest.raises(releases.VersionError, match="cannot read"):
        releases.index_versions((tmp_path / "nothing").as_uri())


def test_nightly_needs_an_index(run_cli, monkeypatch):
    monkeypatch.delenv(releases.INDEX_ENV, raising=False)
    code, out, err = run_cli("matrix", "--jax", "nightly", "--list-versions")
    assert code == 2 and "--jax nightly needs a package index" in err


def test_uv_is_found_without_path(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("FP8_CHECK_UV", raising=False)
    uv = find_uv()
    assert uv and Path(uv).is_file() and subprocess.run([uv, "--version"], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.network
def test_matrix_installs_the_nightly_from_the_configured_index(nightly_index, tmp_path, monkeypatch):
    assert releases.newest_on_index(nightly_index) == NIGHTLY
    # uv resolves jaxlib and the CUDA plugin from its cache (revalidated against the default index).
    env = dict(os.environ, FP8_CHECK_JAX_INDEX=nightly_index, FP8_CHECK_NO_GPU="1")
    env.pop("VIRTUAL_ENV", None)
    p = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "matrix", "--jax", "nightly", "--list-versions"],
                       cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0 and p.stdout.split() == [NIGHTLY], p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "fp8_check.cli.main", "matrix", "--jax", "nightly", "-k", "seed_plain_f32",
                        "--profile", "cublas", "--cache", str(tmp_path / "envs"), "--out", str(tmp_path / "m.json"),
                        "--no-html", "--jobs", "1"],
                       cwd=REPO, capture_output=True, text=True, env=env, timeout=900)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "m.json").read_text())
    [entry] = doc["versions"]
    assert entry["jax"] == NIGHTLY and entry["status"] == "ran", entry
    assert entry["env"]["index_url"] == nightly_index and entry["environment"]["jax"] == NIGHTLY
    assert [r["outcome"] for r in entry["results"]] == ["PASS"]


def test_missing_uv_says_how_to_get_it(monkeypatch):
    from fp8_check.versions import _envs as envs

    monkeypatch.setenv("FP8_CHECK_UV", "/nonexistent/uv")
    assert envs.find_uv() is None
    with pytest.raises(envs.InstallError, match=r"python -m pip install uv"):
        envs._uv()
