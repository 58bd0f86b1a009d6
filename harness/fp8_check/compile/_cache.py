"""A content-addressed cache of compilations: never compile the same thing twice.

Key: SHA-256 of a canonical JSON of everything that decides what XLA produces
(`KeyMaterial`): the rendered source, the target spec text, the profile's
compiler options, the mode, the JAX / jaxlib / CUDA plugin / PJRT versions and
jaxlib's git hash, the Python version, a fingerprint of every installed
distribution of the compiling environment (so flax, ml_dtypes, the NVIDIA wheels
… count too), how each module the source imports resolves there, the XLA flags
and the other compile-relevant environment variables (`XLA_*`, `JAX_*`,
`CUDA_*`, `NVIDIA_*`), the local GPU's identity in device mode, and a hash of the
code that compiles (`aot.py`, `worker.py`).

Value: what judging needs: the optimized HLO, the StableHLO and the compile
seconds of the original compilation (or, for a case whose import is missing,
the import error).

What is cached (`cacheable`), and why that is sound:
- a compilation that succeeded, or one refused because an optional dependency the
  case declares (`requires:`) is not installed (UNSUPPORTED; the distributions
  fingerprint changes when it is installed);
- never a crash, a timeout or any other error (may be transient), nor a compile
  that executed the case (`--numerics`);
- never a source that imports a module from outside the standard library and the
  installed distributions (the checkout, PYTHONPATH, an editable install), or that
  imports dynamically (`__import__`, `importlib`, `exec`, relative imports): its
  behaviour depends on code the key does not cover. Except a python case's own project
  modules, when the key holds their texts: every project file importing it runs, found
  statically (`fp8_check.cases._user_modules`; `source:<digest>` in the key);
- device mode only where the profile turns autotuning off
  (`xla_gpu_autotune_level: 0`): with autotuning, XLA picks kernels by timing
  them on the GPU, so the same inputs can give a different program; the key then
  also holds the GPU's name, compute capability, driver, CUDA, cuBLAS and cuDNN
  versions. Deviceless compiles never autotune (there is no GPU to time on); a deviceless
  `default` replays a device's autotune results file, which the key holds by its content
  (`autotune_results.key_options`), and its entry keeps the replay's coverage.

Storage: `<root>/v1/<2 hex>/<key>.json.gz` under `$FP8_CHECK_COMPILE_CACHE`, else
`compile/` in fp8-check's cache directory (`$FP8_CHECK_CACHE`, XDG, ~/.cache).
Entries are written to a temporary file in the same directory and renamed into
place, so readers never see a partial entry and concurrent writers of one key
both leave a complete one. An unreadable or inconsistent entry is a miss (and is
removed). A hit refreshes the entry's mtime; when the cache grows past its bound
(`$FP8_CHECK_CACHE_MAX_MB`, default 256) the least recently used entries are
removed down to 80 % of it.
"""

from __future__ import annotations

import ast
import functools
import gzip
import hashlib
import json
import os
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fp8_check.core import package_path
from fp8_check.targets import Coverage

SCHEMA = "fp8-check/compile-cache/1"
LAYOUT = "v1"
DEFAULT_MAX_MB = 256
_HERE = package_path("worker")  # the worker's sources
# The code that turns a request into a compilation: changing it must miss.
_COMPILING_CODE = ("_aot.py", "serve.py")
_DYNAMIC = {"__import__", "exec", "eval", "importlib", "import_module", "runpy"}


@dataclass(frozen=True)
class KeyMaterial:
    """Everything a compilation depends on. Two requests with equal material compile to the same thing."""

    source: str
    target_config: str
    compiler_options: dict
    mode: str
    versions: dict  # jax, jaxlib, jaxlib_git_hash, cuda_plugin, cuda_pjrt, python
    xla_flags: str
    env_vars: dict  # other compile-relevant environment variables (XLA_*, JAX_*, CUDA_*, NVIDIA_*)
    distributions: str  # fingerprint of every installed distribution (name==version)
    imports: dict  # top-level module -> how it resolves in the compiling environment
    requires: tuple = ()  # the optional dependencies the case declares (missing -> UNSUPPORTED)
    device: dict | None = None  # device mode: the GPU and its CUDA/cuBLAS/cuDNN versions
    harness: str = field(default_factory=lambda: _code_hash())
    # the case's `env:` variables and their values when it compiles (None: unset); the user's code reads them
    case_env: dict = field(default_factory=dict)

    def key(self) -> str:
        material = asdict(self)
        if not material["case_env"]:
            del material["case_env"]  # a case without `env:` keeps the key it had before the field existed
        text = json.dumps({"schema": SCHEMA, **material}, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def compiling_code_hash() -> str:
    h = hashlib.sha256()
    for name in _COMPILING_CODE:
        h.update(name.encode() + b"\0" + (_HERE / name).read_bytes() + b"\0")
    return h.hexdigest()


_CODE_HASH: str | None = None


def _code_hash() -> str:
    global _CODE_HASH
    if _CODE_HASH is None:
        _CODE_HASH = compiling_code_hash()
    return _CODE_HASH


def imported_modules(source: str) -> tuple[set[str], str | None]:
    """The top-level modules `source` imports statically, and why it is not cacheable (dynamic imports), if so."""
    names, why = _imported_modules(source)
    return set(names), why


@functools.lru_cache(maxsize=4096)  # a run asks twice per request (batch resolve, then the key)
def _imported_modules(source: str) -> tuple[frozenset[str], str | None]:
    names, why = _scan_imports(source)
    return frozenset(names), why


def _scan_imports(source: str) -> tuple[set[str], str | None]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return set(), f"the source does not parse: {exc.msg}"
    names: set[str] = set()
    literal_imports: set[int] = set()  # `importlib.import_module("a.b")` with a literal name: as static as `import a.b`
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "importlib"
                and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str) and not node.args[0].value.startswith(".")):
            names.add(node.args[0].value.split(".")[0])
            literal_imports.add(id(node.func))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                return names, "it uses a relative import"
            names.add((node.module or "").split(".")[0])
        elif isinstance(node, ast.Name) and node.id in _DYNAMIC and not _is_importlib_of(node, literal_imports, tree):
            return names, f"it imports or executes code dynamically ({node.id})"
        elif isinstance(node, ast.Attribute) and node.attr in _DYNAMIC and id(node) not in literal_imports:
            return names, f"it imports or executes code dynamically ({node.attr})"
    names.discard("")
    return names, None


def _is_importlib_of(name: ast.Name, literal_imports: set[int], tree) -> bool:
    """`importlib` as the module of a literal `importlib.import_module("…")` call, or in `import importlib`."""
    if name.id != "importlib":
        return False
    return any(isinstance(n, ast.Attribute) and n.value is name and id(n) in literal_imports for n in ast.walk(tree))


def cacheable(mode: str, compiler_options: dict, imports: dict, dynamic: str | None, executes: bool) -> str | None:
    """None when the compilation may be cached; else why not (see the module docstring)."""
    if executes:
        return "it executes the case (--numerics)"
    if dynamic:
        return dynamic
    if mode == "device" and compiler_options.get("xla_gpu_autotune_level") != 0:
        return "device mode with autotuning: XLA picks kernels by timing them"
    local = sorted(n for n, how in imports.items()
                   if not (how == "stdlib" or how == "missing" or how.startswith(("dist:", "source:"))))
    if local:
        return f"it imports {', '.join(local)} from outside the installed distributions"
    return None


@dataclass
class Entry:
    hlo: str | None
    stablehlo: str | None
    seconds: float
    error: str | None = None
    unsupported: str | None = None  # a declared optional dependency is not installed (the case is UNSUPPORTED)
    autotune: dict | None = None  # a replay's coverage (`autotune_results.Coverage.to_json(full=True)`)


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    writes: int = 0
    corrupt: int = 0
    uncacheable: int = 0
    evicted: int = 0


def cache_dir() -> Path:
    """fp8-check's cache: $FP8_CHECK_CACHE, else $XDG_CACHE_HOME/fp8-check, else ~/.cache/fp8-check."""
    if os.environ.get("FP8_CHECK_CACHE"):
        return Path(os.environ["FP8_CHECK_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "fp8-check"


def default_root() -> Path:
    if os.environ.get("FP8_CHECK_COMPILE_CACHE"):
        return Path(os.environ["FP8_CHECK_COMPILE_CACHE"]).expanduser()

    return cache_dir() / "compile"


def default_max_bytes() -> int:
    """The bound from $FP8_CHECK_CACHE_MAX_MB; ValueError (bad input, one line) when it is not a finite number."""
    import math

    text = os.environ.get("FP8_CHECK_CACHE_MAX_MB", "").strip()
    try:
        mb = float(text) if text else DEFAULT_MAX_MB
    except ValueError:
        mb = math.nan
    if not math.isfinite(mb) or mb > 2**40:
        raise ValueError(f"$FP8_CHECK_CACHE_MAX_MB: expected a size in MB (e.g. {DEFAULT_MAX_MB}), got {text[:40]!r}")
    return int(max(mb, 1) * 2**20)


class CompileCache:
    def __init__(self, root: Path | None = None, max_bytes: int | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.max_bytes = max_bytes if max_bytes is not None else default_max_bytes()
        self.stats = Stats()

    def path(self, key: str) -> Path:
        return self.root / LAYOUT / key[:2] / f"{key}.json.gz"

    def get(self, key: str) -> Entry | None:
        path = self.path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            self.stats.misses += 1
            return None
        except OSError:
            self.stats.misses += 1
            return None
        entry = _decode(raw, key)
        if entry is None:  # truncated, not gzip, not JSON, another key's, wrong types: a miss
            self.stats.corrupt += 1
            self.stats.misses += 1
            try:
                path.unlink()
            except OSError:
                pass
            return None
        try:
            os.utime(path)  # least recently *used*: a hit counts as a use
        except OSError:
            pass
        self.stats.hits += 1
        return entry

    def put(self, key: str, entry: Entry, note: dict | None = None) -> None:
        doc = {"schema": SCHEMA, "key": key, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "note": note or {}, "hlo": entry.hlo, "stablehlo": entry.stablehlo, "seconds": entry.seconds,
               "error": entry.error, "unsupported": entry.unsupported,
               **({"autotune": entry.autotune} if entry.autotune is not None else {})}
        data = gzip.compress(json.dumps(doc).encode(), compresslevel=6, mtime=0)
        path = self.path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            return  # a cache that cannot be written is only slower
        self.stats.writes += 1

    def size(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _entries(self):
        base = self.root / LAYOUT
        if not base.is_dir():
            return
        for sub in base.iterdir():
            if not sub.is_dir():
                continue
            for f in sub.iterdir():
                try:
                    st = f.stat()
                except OSError:
                    continue
                yield f, st.st_size, st.st_mtime

    def evict(self) -> int:
        """Remove the least recently used entries while the cache is over its bound; returns how many."""
        now = time.time()
        entries = []
        for f, size, mtime in self._entries():
            if f.name.startswith(".tmp-"):
                if now - mtime > 3600:  # left behind by a killed writer
                    _unlink(f)
                continue
            entries.append((mtime, size, f))
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return 0
        removed = 0
        for _, size, f in sorted(entries):
            if total <= self.max_bytes * 0.8:
                break
            if _unlink(f):
                total -= size
                removed += 1
        self.stats.evicted += removed
        return removed


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
        return True
    except OSError:
        return False


def _decode(raw: bytes, key: str) -> Entry | None:
    try:
        doc = json.loads(gzip.decompress(raw))
    except (OSError, EOFError, zlib.error, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("key") != key:
        return None
    hlo, stablehlo, seconds, error = doc.get("hlo"), doc.get("stablehlo"), doc.get("seconds"), doc.get("error")
    unsupported = doc.get("unsupported")
    if unsupported is not None and (not isinstance(unsupported, str) or error != unsupported):
        return None
    if error is None:
        if not isinstance(hlo, str) or not isinstance(stablehlo, str) or not hlo:
            return None
    elif not isinstance(error, str):
        return None
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    autotune = doc.get("autotune")
    if autotune is not None:
        try:
            Coverage.from_json(autotune)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
    return Entry(hlo=hlo, stablehlo=stablehlo, seconds=float(seconds), error=error, unsupported=unsupported,
                 autotune=autotune)
