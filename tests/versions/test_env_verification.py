"""A cached environment is verified before use (hardening round 5, issue 43): a corrupted AMD runtime stand-in
was reused forever (every mi300x compile exited 3 with "topology not implemented for rocm", naming neither the
library nor the fix). Now the stand-ins are checked against their manifest's sha256 (a damaged one is made again
in place, under the build lock), and the jax/jaxlib an environment was built with must still be there (else one
line naming what is damaged and the folder to delete)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from fp8_check.platforms import AMD, _standins as standins
from fp8_check.versions import _envs as envs

VERSION = "0.10.0"


def _standins(folder, with_sums: bool = True):
    folder.mkdir(parents=True)
    (folder / "libamdhip64.so.7").write_bytes(b"\x7fELF stand-in one")
    (folder / "libhsa-runtime64.so.1").write_bytes(b"\x7fELF stand-in two")
    manifest = {"key": "k", "generator": standins.GENERATOR, "libraries": {"libamdhip64.so.7": 3,
                                                                            "libhsa-runtime64.so.1": 2}}
    if with_sums:
        manifest["sha256"] = {n: standins._sha256(folder / n) for n in manifest["libraries"]}
    (folder / standins.MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_a_stand_in_that_differs_from_its_checksum_is_named(tmp_path):
    folder = _standins(tmp_path / "lib")
    assert standins.damaged(folder) == []
    (folder / "libamdhip64.so.7").write_bytes(b"\x7fELF corrupted")
    (folder / "libhsa-runtime64.so.1").unlink()
    assert standins.damaged(folder) == ["libamdhip64.so.7 differs from its checksum", "libhsa-runtime64.so.1 missing"]
    assert standins.damaged(_standins(tmp_path / "old", with_sums=False)) == ["standins.json states no checksums"]


def _env(root, manager, jaxlib: bool = True):
    """A cached environment's folder as `ensure` leaves it: marker, interpreter, jax and jaxlib (real files)."""
    path = root / manager.name(VERSION)
    site = path / "lib" / "python3.12" / "site-packages"
    for dist in ("jax", "jaxlib") if jaxlib else ("jax",):
        (site / f"{dist}-{VERSION}.dist-info").mkdir(parents=True)
        (site / dist).mkdir()
        (site / dist / "__init__.py").write_text("")
    if jaxlib:
        (site / "jaxlib" / "_jax.so").write_bytes(b"\x7fELF")
    (path / "bin").mkdir()
    os.symlink(sys.executable, path / "bin" / "python")
    info = {"jax": VERSION, "jaxlib": VERSION}
    if manager.platform is not None:
        info["finished"] = {"generator": standins.GENERATOR}
    (path / envs.MARKER).write_text(json.dumps(info))
    return path, site


def test_a_whole_cached_environment_is_used(tmp_path):
    manager = envs.Manager(root=tmp_path, reuse_self=False, python=sys.executable)
    path, _ = _env(tmp_path, manager)
    env = manager.cached(VERSION)
    assert env is not None and env.path == path


def test_an_environment_without_its_jaxlib_names_what_and_the_folder_to_delete(tmp_path):
    manager = envs.Manager(root=tmp_path, reuse_self=False, python=sys.executable)
    path, _ = _env(tmp_path, manager, jaxlib=False)
    with pytest.raises(envs.InstallError) as info:
        manager.cached(VERSION)
    message = str(info.value)
    assert "jaxlib 0.10.0's metadata (jaxlib-0.10.0.dist-info) missing" in message, message
    assert f"the cached environment {path} is damaged" in message and "delete that folder" in message


def test_damaged_stand_ins_are_made_again_under_the_lock(tmp_path):
    manager = envs.Manager(root=tmp_path, reuse_self=False, python=sys.executable, platform=AMD)
    path, site = _env(tmp_path, manager)
    lib = _standins(AMD.standin_dir(site))
    (lib / "libamdhip64.so.7").write_bytes(b"\x7fELF corrupted")
    assert AMD.damaged(site) == ["runtime stand-in libamdhip64.so.7 differs from its checksum"]
    assert manager.cached(VERSION) is None  # outside the lock: not used, never repaired
    env = manager.cached(VERSION, repair=True)  # what ensure() calls holding the build lock
    # made again from the plugin's tables (this folder holds no plugin: none needed), the manifest with checksums
    assert env is not None and AMD.damaged(site) == []
    assert "sha256" in json.loads((lib / standins.MANIFEST).read_text())
    assert json.loads((path / envs.MARKER).read_text())["finished"]["sha256"] == {}
