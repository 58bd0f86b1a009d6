"""The wheel of *this* fp8-check and its reusable CI workflow, for `fp8-check init` to commit into a project.

fp8-check is not on a package index, so the CI `init` writes installs the very fp8-check that `init` ran with (the one
that blessed the project's goldens), from a wheel committed beside the workflow: no fp8-check repository, URL or index
entry that the workflow depends on (docs/ci.md says why).

- Run from a checkout (an editable install, as `scripts/env.sh` makes): `uv build --wheel` of the checkout.
- Installed from a wheel or a git URL: the installed files re-packed as a wheel (`repack`): the distribution's
  RECORD lists them; compiled bytecode, files outside the package (the console script) and the installer's own
  notes (INSTALLER, REQUESTED, direct_url.json, uv's) are left out, and a new RECORD is written with each file's hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from fp8_check import core
from fp8_check.core import DISTRIBUTION
from fp8_check.versions import find_uv

PACKAGE_DIR = core.package_path().resolve()  # fp8_check/
# The reusable workflow: in the wheel (pyproject.toml force-includes it here), else in the checkout it comes from.
WORKFLOW_IN_PACKAGE = PACKAGE_DIR / "templates" / "fp8-check-reusable.yml"
_CHECKOUT = core.checkout()
WORKFLOW_IN_CHECKOUT = (_CHECKOUT or PACKAGE_DIR.parents[1]) / ".github" / "workflows" / "fp8-check.yml"
# What an installer adds to a distribution's metadata: not part of the wheel.
_INSTALLER_FILES = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "uv_cache.json", "uv_build.json"}


class WheelError(Exception):
    """This fp8-check cannot be made into a wheel (one line: what failed)."""


def reusable_workflow() -> str:
    """The text of fp8-check's reusable workflow (one home: .github/workflows/fp8-check.yml of the checkout)."""
    for path in (WORKFLOW_IN_PACKAGE, WORKFLOW_IN_CHECKOUT):
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise WheelError(f"the reusable workflow is missing from this fp8-check (looked at {WORKFLOW_IN_PACKAGE})")


def checkout() -> Path | None:
    """The source checkout this fp8-check runs from (editable install or plain checkout), or None."""
    root = PACKAGE_DIR.parents[1]
    return root if (root / "pyproject.toml").is_file() and WORKFLOW_IN_CHECKOUT.is_file() else None


def build(out_dir: Path, timeout: float = 600) -> Path:
    """A wheel of this fp8-check in `out_dir` (created); its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    root = checkout()
    if root is not None:
        return _build_checkout(root, out_dir, timeout)
    return repack(out_dir)


def _build_checkout(root: Path, out_dir: Path, timeout: float) -> Path:
    uv = find_uv()
    if uv is None:
        raise WheelError("cannot build fp8-check's wheel: no uv (python -m pip install uv)")
    with tempfile.TemporaryDirectory(prefix="fp8-check-wheel-") as tmp:
        try:
            p = subprocess.run([uv, "build", "--wheel", "--quiet", "--out-dir", tmp, str(root)], capture_output=True,
                               text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise WheelError(f"`uv build --wheel {root}` did not finish within {timeout:g} s") from None
        except OSError as exc:
            raise WheelError(f"cannot run uv ({uv}): {exc.strerror or exc}") from None
        built = sorted(Path(tmp).glob("fp8_check-*.whl"))
        if p.returncode != 0 or len(built) != 1:
            last = (p.stderr or p.stdout).strip().splitlines()
            raise WheelError(f"`uv build --wheel {root}` failed: {last[-1] if last else f'exit {p.returncode}'}")
        target = out_dir / built[0].name
        target.write_bytes(built[0].read_bytes())
    return target


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(out_dir: Path) -> Path:
    """The installed distribution's files as a wheel (see the module's docstring)."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise WheelError(f"{DISTRIBUTION} is not installed and runs from no checkout: nothing to build a wheel from") from None
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    if (direct.get("dir_info") or {}).get("editable"):
        raise WheelError(f"{DISTRIBUTION} is an editable install whose checkout was not found")
    version = dist.version
    info = f"fp8_check-{version}.dist-info"
    entries: list[tuple[str, bytes]] = []
    for f in dist.files or []:
        name = str(f).replace("\\", "/")
        parts = name.split("/")
        if parts[0] == ".." or "__pycache__" in parts or name.endswith(".pyc"):
            continue
        if parts[0] == info and parts[-1] in _INSTALLER_FILES:
            continue
        if parts[0] not in ("fp8_check", info):
            continue
        entries.append((name, Path(str(f.locate())).read_bytes()))
    if not any(n == f"{info}/WHEEL" for n, _ in entries) or not any(n.startswith("fp8_check/") for n, _ in entries):
        raise WheelError(f"the installed {DISTRIBUTION} {version} lists no package files or no WHEEL in its RECORD")
    entries.sort(key=lambda e: (e[0].startswith(info), e[0]))  # the .dist-info last, as wheels have it
    record = "".join(f"{n},{_digest(d)},{len(d)}\n" for n, d in entries) + f"{info}/RECORD,,\n"
    target = out_dir / f"fp8_check-{version}-py3-none-any.whl"
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for n, d in entries:
                z.writestr(n, d)
            z.writestr(f"{info}/RECORD", record)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target
