"""One isolated environment per JAX version, made with uv and cached for reuse.

Each environment holds only JAX for version V, in one of two wheel sets
(`fp8_check.versions._wheels`): for deviceless compiles (the default) the slim
`jax[cuda12-local]==V` plus ptxas (jax, jaxlib, CUDA plugin, PJRT, nvidia-cuda-nvcc-cu12:
about 1 GB, proved to compile identically to the full set by scripts/slim_check.py), for device mode the full
`jax[cuda12]==V` with NVIDIA's runtime wheels (about 5.5 GB). The compile worker needs
nothing else, because it imports `harness` from this checkout through PYTHONPATH.

Layout, under `cache_dir()/envs` ($FP8_CHECK_CACHE, else $XDG_CACHE_HOME/fp8-check,
else ~/.cache/fp8-check):

    jax-0.8.0-slim-py3.12/             a complete deviceless (slim) environment (has fp8-check-env.json)
    jax-0.8.0-py3.12/                  a complete device (full) environment
    jax-0.8.0-slim-py3.12-with-1a2b3c4d/  the same plus extra requirements (`matrix --with flax`): the
                                       suffix hashes the sorted requirements, so each set is its own
                                       environment; uv resolves them together with that jax version
    .jax-0.8.0-py3.12.lock             held while that environment is being built
    .building-jax-0.8.0-py3.12-<pid>/  an environment being built

An environment is built in a `.building-*` directory and renamed into place only
once it is complete (`uv venv --relocatable`, so it works after the rename). So
an interrupted build never leaves a directory that looks usable: Ctrl-C removes
the half-built one, and a killed build's leftover is removed the next time that
version is built. The per-version lock lets several fp8-check processes share the cache.
uv's own wheel cache (hard links) makes a rebuild of a version that was built before fast and cheap on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fp8_check import platforms
from fp8_check.cases import check_requirement, outside
from fp8_check.compile import cache_dir
from fp8_check.core import BrokenEnvironmentError, from_env, run, wait_lock
from fp8_check.platforms import DEVICE_MARKER, NVIDIA, Platform
from fp8_check.versions import _wheels
from fp8_check.versions._requirements import _satisfied
from fp8_check.versions._uvbin import UV_MISSING, find_uv
from fp8_check.versions._verify import damaged, missing_requirements
from fp8_check.versions.releases import jax_index, parse_version

MARKER = "fp8-check-env.json"

_PROBE = (
    "import importlib.metadata as m, json, platform\n"
    "def v(d):\n"
    "    try:\n"
    "        return m.version(d)\n"
    "    except m.PackageNotFoundError:\n"
    "        return None\n"
    f"print(json.dumps({{'jax': v('jax'), 'jaxlib': v('jaxlib'), 'cuda_plugin': v({NVIDIA.plugin_distributions[0]!r}),"
    f" 'cuda_pjrt': v({NVIDIA.pjrt_distributions[0]!r}), 'python': platform.python_version()}}))\n"
)


class InstallError(RuntimeError):
    """uv could not make the environment; `log` is the installer's output."""

    def __init__(self, version: str, message: str, log: str = ""):
        self.version, self.log = version, log
        super().__init__(message)


@dataclass
class Env:
    version: str
    path: Path
    built: bool = False  # False: reused from the cache
    seconds: float = 0.0  # time spent in ensure() (building, or checking the cached one)
    info: dict = field(default_factory=dict)
    interpreter: Path | None = None  # set for the harness's own environment

    @property
    def python(self) -> Path:
        return self.interpreter or self.path / "bin" / "python"


def own_jax() -> dict:
    """jax/jaxlib/plugin versions of the environment fp8-check itself runs in ({} if it has no CUDA plugin)."""
    import importlib.metadata as md

    try:
        info = {"jax": md.version("jax"), "jaxlib": md.version("jaxlib"),
                "cuda_plugin": md.version(NVIDIA.plugin_distributions[0])}
    except md.PackageNotFoundError:
        return {}
    try:
        md.version(DEVICE_MARKER)
        info["wheels"] = _wheels.DEVICE
    except md.PackageNotFoundError:
        info["wheels"] = _wheels.DEVICELESS
    return info


def base_python() -> str:
    """The interpreter the environments are made from: $FP8_CHECK_PYTHON, else this process's base interpreter."""
    if os.environ.get("FP8_CHECK_PYTHON"):
        return os.environ["FP8_CHECK_PYTHON"]
    return getattr(sys, "_base_executable", None) or sys.executable


def _python_tag(python: str) -> str:
    if python == base_python() and Path(python).resolve() == Path(getattr(sys, "_base_executable", sys.executable)).resolve():
        return f"py{sys.version_info.major}.{sys.version_info.minor}"
    try:
        out = subprocess.run([python, "-c", "import sys; print('py%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:  # $FP8_CHECK_PYTHON names nothing runnable, or it hangs
        raise InstallError("", f"cannot run the interpreter {python} ($FP8_CHECK_PYTHON): "
                               f"{getattr(exc, 'strerror', None) or type(exc).__name__}") from None
    if out.returncode != 0:
        raise InstallError("", f"cannot run the interpreter {python}: {out.stderr.strip()}")
    return out.stdout.strip()


def envs_root() -> Path:
    return cache_dir() / "envs"


def _uv() -> str:
    uv = find_uv()
    if not uv:
        raise InstallError("", UV_MISSING)
    return uv


def _uv_env() -> dict:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    return env


def _read_marker(path: Path) -> dict | None:
    try:
        info = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    # A complete environment whose interpreter still runs (the base interpreter may have gone).
    if not (path / "bin" / "python").exists():
        return None
    return info if isinstance(info, dict) else None


class Manager:
    """Makes and finds the per-version environments under `root`."""

    def __init__(self, root: Path | None = None, python: str | None = None, reuse_self: bool = True,
                 index_url: str | None = None, extras: list[str] | None = None, kind: str = _wheels.DEVICELESS,
                 slim_extras: list[str] | None = None, platform: Platform | None = None, jax_range: str = ""):
        # Extra requirements installed with jax in every environment (`--with`), resolved by uv per version.
        self.extras = sorted({check_requirement(r) for r in (extras or [])})
        self.jax_range = jax_range  # the JAX versions the extras work with (a requirements file's `jax` line)
        # kind: which wheel set (_wheels.DEVICELESS, the slim default, or _wheels.DEVICE); slim_extras
        # replaces the slim set's extra wheels (scripts/slim_check.py tries candidates with it).
        if kind not in _wheels.KINDS:
            raise ValueError(f"unknown environment kind {kind!r}")
        self.kind, self.slim_extras = kind, slim_extras
        # platform: another platform whose plugin joins the CUDA one, or stands alone (TPU) (deviceless only): its
        # environments are named after it and finished by it (the ROCm plugin's runtime stand-ins).
        self.platform = None if platform is None or platform is NVIDIA else platform
        if self.platform is not None and kind != _wheels.DEVICELESS:
            raise ValueError(f"{self.platform.vendor} environments are deviceless only")
        self.root = Path(root) if root else envs_root()
        # An extra index for JAX builds that are not released (nightlies): uv looks there first
        # (jax, jaxlib and the plugins come from it when it has them) and allows pre-releases.
        self.index_url = jax_index(index_url)
        self.python = python or base_python()
        self.reuse_self = reuse_self
        self._tag: str | None = None
        _uv_timeout()  # a bad FP8_CHECK_UV_TIMEOUT is one line before anything is built, not after the first wait

    @property
    def tag(self) -> str:
        if self._tag is None:
            self._tag = _python_tag(self.python)
        return self._tag

    def name(self, version: str) -> str:
        slim = "-slim" if self.kind == _wheels.DEVICELESS else ""
        if self.platform is not None:
            slim += f"-{self.platform.name}"
        base = f"jax-{parse_version(version)}{slim}-{self.tag}"
        if not self.extras:
            return base
        return base + "-with-" + hashlib.sha256("\n".join(self.extras).encode()).hexdigest()[:8]

    def requirements(self, version: str) -> list[str]:
        if self.platform is not None and self.platform.alone:  # its plugin alone (libtpu), no GPU wheels
            own = self.platform.requirements(version, self.kind)
            if own is None:
                raise InstallError(version, self.platform.unsupported_reason(version))
            return own
        out = _wheels.requirements(version, self.kind, self.slim_extras)
        if self.platform is not None:
            more = self.platform.requirements(version, self.kind)
            if more is None:
                raise InstallError(version, self.platform.unsupported_reason(version))
            out += [r for r in more if r.split("==")[0] not in ("jax", "jaxlib")]
        return out

    def path_for(self, version: str) -> Path:
        return self.root / self.name(version)

    def cached(self, version: str, repair: bool = False) -> Env | None:
        """The cached environment for `version`, verified (`damaged`: InstallError naming what and the folder to
        delete); with `repair` (under the build lock) the platform's damaged additions are made again in place,
        without it such an environment is not returned."""
        path = self.path_for(version)
        info = _read_marker(path)
        if info and info.get("requirement", "").split() not in ([], self.requirements(version)):
            return None  # built with another wheel set (SLIM_EXTRAS changed): rebuilt by ensure()
        if info and self.platform is not None and not self.platform.finished(info.get("finished") or {}):
            return None  # finished by an older fp8-check (other stand-in libraries): rebuilt by ensure()
        if not info:
            return None
        if missing_requirements(path, info):
            return None  # a requirement uninstalled since (or its files removed): rebuilt by ensure()
        if damage := damaged(path, info):
            raise InstallError(version, f"the cached environment {path} is damaged ({'; '.join(damage[:3])}): "
                                        "delete that folder and run again to rebuild it")
        if self.platform is not None and self.platform.damaged(_site_packages(path)):
            if not repair:
                return None
            try:  # the platform's own additions (the ROCm runtime stand-ins): made again in place, no download
                info["finished"] = self.platform.finish_environment(_site_packages(path))
            except Exception as exc:  # StandinError, OSError
                raise InstallError(version, f"the cached environment {path} has damaged "
                                            f"{'; '.join(self.platform.damaged(_site_packages(path))[:3])} and they "
                                            f"cannot be made again ({exc}): delete that folder and run again") from None
            (path / MARKER).write_text(json.dumps(info, indent=1) + "\n")
        return Env(version, path, False, 0.0, info)

    def list(self) -> list[Env]:
        out = []
        if self.root.is_dir():
            for p in sorted(self.root.glob("jax-*")):
                info = _read_marker(p)
                if info:
                    out.append(Env(info.get("jax", "?"), p, False, 0.0, info))
        return out

    def ensure(self, version: str, log=None) -> Env:
        """The environment for `version`: the cached one, or a new one built now (raises InstallError)."""
        if problem := outside(self.jax_range, version, "(--with-requirements)"):
            raise InstallError(version, problem)
        start = time.perf_counter()
        own = own_jax() if self.reuse_self else {}
        if (own and own["jax"] == str(parse_version(version)) and _satisfied(self.extras)
                and (self.platform is None or self.platform.installed())
                and (self.kind == _wheels.DEVICELESS or own["wheels"] == _wheels.DEVICE)):
            # The version fp8-check itself runs with: its own (locked) environment is that version's environment.
            return Env(version, Path(sys.prefix), False, time.perf_counter() - start,
                       {**own, "own_environment": True}, Path(sys.executable))
        env = self.cached(version)
        if env:
            env.seconds = time.perf_counter() - start
            return env
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # $FP8_CHECK_CACHE=/dev/null, a file, a read-only folder
            raise InstallError(version, f"cannot make the environments folder {self.root} (under $FP8_CHECK_CACHE): {exc.strerror or exc}") from None
        try:  # a read-only cache: every version would fail alike (exit 3, one line)
            lock_file = open(self.root / f".{(name := self.name(version))}.lock", "w")
        except OSError as exc:
            raise BrokenEnvironmentError(f"cannot write the environments folder {self.root} ($FP8_CHECK_CACHE): "
                                         f"{exc.strerror}") from None
        with lock_file as lock:
            wait_lock(lock)  # another process may be building it: wait for it (a stop interrupts)
            env = self.cached(version, repair=True)
            if env:
                env.seconds = time.perf_counter() - start
                return env
            final = self.root / name
            for stale in [final, *self.root.glob(f".building-{name}-*")]:
                if stale.exists():  # a killed build, or a directory that never got its marker
                    shutil.rmtree(stale, ignore_errors=True)
            tmp = self.root / f".building-{name}-{os.getpid()}"
            try:
                info = self._build(version, tmp, log)
                info["seconds"] = round(time.perf_counter() - start, 2)
                (tmp / MARKER).write_text(json.dumps(info, indent=1) + "\n")
                os.rename(tmp, final)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return Env(version, final, True, time.perf_counter() - start, info)

    def _build(self, version: str, tmp: Path, log) -> dict:
        uv = _uv()
        steps = [
            [uv, "venv", "--quiet", "--relocatable", "--no-project", "--python", self.python, str(tmp)],
            [uv, "pip", "install", "--python", str(tmp / "bin" / "python"), *self.requirements(version),
             *self.extras],
        ]
        if self.index_url:
            steps[1][3:3] = ["--extra-index-url", self.index_url, "--prerelease", "allow"]
        output = []
        for cmd in steps:
            if log:
                log(f"$ {' '.join(cmd)}")
            limit = _uv_timeout()
            try:
                proc = run(cmd, limit, env=_uv_env(), cwd=str(self.root))
            except subprocess.TimeoutExpired:
                raise InstallError(version, f"uv did not finish within {limit:g} s (FP8_CHECK_UV_TIMEOUT)") from None
            except OSError as exc:  # uv vanished, or an argument list over the system's limit (E2BIG)
                raise InstallError(version, f"cannot run uv: {exc.strerror or exc}") from None
            output.append(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                text = (proc.stderr or proc.stdout).strip()
                wanted = " ".join([*self.requirements(version), *self.extras])
                raise InstallError(version, f"uv could not install {wanted}: "
                                   f"{_last_lines(text)}", "\n".join(output))
        try:
            probe = subprocess.run([str(tmp / "bin" / "python"), "-c", _PROBE], capture_output=True, text=True,
                                   timeout=120, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:  # uv said it built, but there is no working interpreter
            raise InstallError(version, "uv finished but the new environment does not run: "
                               + (getattr(exc, "strerror", None) or type(exc).__name__)) from None
        if probe.returncode != 0:
            raise InstallError(version, f"the new environment does not run: {_last_lines(probe.stderr)}", probe.stderr)
        try:
            info = json.loads(probe.stdout)
        except ValueError:
            raise InstallError(version, "the new environment's probe printed something that is not JSON") from None
        if info.get("jax") != str(parse_version(version)) and info.get("jax") != version:
            raise InstallError(version, f"asked for jax {version}, got {info.get('jax')}")
        if self.platform is not None:
            try:
                info["finished"] = self.platform.finish_environment(_site_packages(tmp))
            except Exception as exc:  # StandinError, OSError: the environment cannot load its plugin
                raise InstallError(version, f"cannot finish the {self.platform.vendor} environment: {exc}") from None
            info["gpu_platform"] = self.platform.name
        if self.index_url:
            info["index_url"] = self.index_url
        if self.extras:
            info["with"] = self.extras
            info["with_installed"] = _installed(tmp / "bin" / "python", self.extras)
        info.update({"requirement": " ".join(self.requirements(version)), "wheels": self.kind, "base_python": self.python,
                     "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "platform": platform.platform(),
                     "installer": " ".join(output).strip().splitlines()[-1:]})
        return info

    def remove(self, version: str) -> bool:
        path = self.path_for(version)
        if path.exists():
            # Rename first so that a half-removed environment never looks complete.
            doomed = self.root / f".building-{path.name}-rm{os.getpid()}"
            os.rename(path, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
            return True
        return False


def other_platform(targets) -> Platform | None:
    """The platform whose plugin joins the CUDA one in the environments compiling for `targets` (None: the
    default platform's alone); ValueError when targets need two different ones."""
    others = {t.platform.name: t.platform for t in targets if t.platform is not platforms.DEFAULT}
    if len(others) > 1:
        raise ValueError(f"targets of {', '.join(sorted(others))} compile in different environments; run them separately")
    return next(iter(others.values()), None)


def python_for(targets) -> str | None:
    """The interpreter that compiles for `targets` deviceless: None (this one) when its JAX has every plugin
    they need, else the cached environment of the newest JAX release with the other platform's plugin (built
    on first use, e.g. ROCm for mi300x). Raises ValueError (mixed platforms) or InstallError."""
    platform = other_platform(targets)
    if platform is None or platform.installed():
        return None
    version = platform.default_release
    if version is None:
        raise InstallError("", f"no JAX release to compile for {platform.vendor} targets with")
    return str(Manager(platform=platform).ensure(version).python)


def _installed(python: Path, requirements: list[str]) -> dict:
    """name -> installed version of each extra requirement in the environment of `python`."""
    from packaging.requirements import Requirement

    names = [Requirement(r).name for r in requirements]
    code = ("import importlib.metadata as m, json, sys\n"
            "def v(d):\n    try:\n        return m.version(d)\n    except m.PackageNotFoundError:\n        return None\n"
            "print(json.dumps({d: v(d) for d in sys.argv[1:]}))")
    out = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, timeout=120)
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {}


def _site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python*/site-packages"))
    if not found:
        raise InstallError("", f"{env}: no site-packages")
    return found[0]


def _last_lines(text: str, n: int = 6) -> str:
    """The last lines of another program's output, quoted: none starts with `::` (a GitHub workflow command)."""
    lines = [re.sub(r"^(\s*)::", "\\1\u200b::", line) for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:]) if lines else "(no output)"


def _uv_timeout() -> float:
    return from_env("FP8_CHECK_UV_TIMEOUT", 3600.0)


def disk_bytes(path: Path) -> int:
    """Bytes of the files under `path` (apparent size, each hard-linked file once): an environment's size."""
    seen, total = set(), 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total
