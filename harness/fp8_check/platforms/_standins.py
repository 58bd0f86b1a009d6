"""Load-time stand-ins for runtime libraries a compiler plugin links but PyPI does not ship.

The ROCm plugin (`jax_plugins/xla_rocm7/xla_rocm_plugin.so` and the `jax_rocm7_plugin`
extensions) links libamdhip64, libhipblaslt, libhsa-runtime64, rocprofiler-sdk, MIOpen, ... that
exist only in an AMD ROCm install, so the dynamic loader refuses it on any other machine. A
deviceless compile calls none of them beyond load-time registration (the HIP fat-binary
constructors), so a small shared library per missing one, generated from the plugin's *own*
tables, lets it load without changing anything XLA decides:

- `readelf -d`: the libraries each ELF needs (`NEEDED`) and where it looks (`RUNPATH`);
- `readelf -V`: the symbol versions it needs from each (`hip_4.2`, `ROCR_1`, ...);
- `readelf --dyn-syms`: its undefined symbols, each with its version (so, its library).

Each missing library becomes `lib<name>.so.N` (the `SONAME` it is asked for) with every symbol
the plugin needs from it under the version it asks for (a linker version script), each a function
that returns 0 and, when `$FP8_CHECK_STANDIN_LOG` names a file, appends `symbol library` to it; with
`$FP8_CHECK_STANDIN_STRICT` set (compile workers set it) every function but the load-time registration
ones (`REGISTRATION`) aborts the process instead of returning: a compile that needed the real runtime
fails loudly rather than decide on a stand-in's answer.
Symbols without a version (hipBLASLt's C++ API, rocBLAS, MIOpen, ...) go into the first missing
library: the loader looks them up in every loaded library. Built with the system C compiler into
`<env>/site-packages/jax_plugins/rocm/lib` (the plugins' first RUNPATH entry, `$ORIGIN/../rocm/lib`),
once per environment, keyed by a hash of the tables (`standins.json`).

tests/platforms/test_rocm.py proves the claim: during a compile the log holds registration calls only.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT = 120  # seconds for one readelf or compiler run
GENERATOR = 3  # bumped whenever the generated code changes: environments made with another are rebuilt
MANIFEST = "standins.json"
LOG_VARIABLE = "FP8_CHECK_STANDIN_LOG"
STRICT_VARIABLE = "FP8_CHECK_STANDIN_STRICT"  # set (the compile worker sets it): any other call aborts
# What the plugin calls while it loads: a HIP binary's static constructors/destructors register its
# embedded GPU code objects, kernels and device variables with the HIP runtime, and XLA's ROCm
# profiler registers itself as a rocprofiler-sdk tool (`rocprofiler_force_configure`).
REGISTRATION = re.compile(r"^__hip(Register|Unregister)\w*$|^rocprofiler_force_configure$")
_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$]*$")
_LIBRARY = re.compile(r"^lib[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*\.so(?:\.\d+)*$")


class StandinError(RuntimeError):
    """The stand-ins could not be generated (no readelf or C compiler, or an unreadable plugin)."""


@dataclass
class Library:
    soname: str
    versions: list[str] = field(default_factory=list)  # in the order the plugin names them
    symbols: dict[str, set[str]] = field(default_factory=dict)  # version ('' = none) -> names


def _run(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        raise StandinError(f"{argv[0]}: {exc}") from None
    if out.returncode != 0:
        raise StandinError(f"{' '.join(argv[:3])}: exit {out.returncode}: {out.stderr.strip()[:400]}")
    return out.stdout


def _tool(name: str) -> str:
    found = shutil.which(name)
    if not found:
        raise StandinError(f"no `{name}` on PATH: the ROCm plugin's stand-in libraries are generated with "
                           "binutils' readelf and the system C compiler (apt-get install binutils gcc)")
    return found


def system_libraries() -> dict[str, str]:
    """SONAME -> path of the (x86-64) libraries the system's loader cache resolves (`ldconfig -p`)."""
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    try:
        text = _run([ldconfig, "-p"])
    except StandinError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines()[1:]:
        m = re.match(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
        if m and ("x86-64" in m.group(2) or "64bit" in m.group(2)):
            out.setdefault(m.group(1), m.group(3))
    return out


_DEFINED: dict[str, frozenset[str]] = {}


def defined(path: str) -> frozenset[str]:
    """The dynamic symbols a (system) library defines."""
    if path not in _DEFINED:
        names = set()
        for line in _run([_tool("readelf"), "--dyn-syms", "-W", path]).splitlines():
            parts = line.split()
            if len(parts) >= 8 and parts[6] != "UND" and parts[4] in ("GLOBAL", "WEAK"):
                names.add(parts[7].split("@", 1)[0])
        _DEFINED[path] = frozenset(names)
    return _DEFINED[path]


def needed(elf: Path) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _run([_tool("readelf"), "-d", "-W", str(elf)]))


def version_needs(elf: Path) -> dict[str, list[tuple[str, int]]]:
    """library -> the (version name, version index) pairs the ELF needs from it."""
    out: dict[str, list[tuple[str, int]]] = {}
    current = None
    in_needs = False
    for line in _run([_tool("readelf"), "-V", "-W", str(elf)]).splitlines():
        if "Version needs section" in line:
            in_needs = True
            continue
        if not in_needs:
            continue
        m = re.search(r"File:\s+(\S+)", line)
        if m:
            current = m.group(1)
            out.setdefault(current, [])
            continue
        m = re.search(r"Name:\s+(\S+)\s+Flags:.*Version:\s+(\d+)", line)
        if m and current:
            out[current].append((m.group(1), int(m.group(2))))
        elif "section" in line:
            in_needs = False
    return out


def undefined(elf: Path) -> list[tuple[str, int, str]]:
    """(name, version index or 0, type) of each undefined global/weak dynamic symbol."""
    out = []
    for line in _run([_tool("readelf"), "--dyn-syms", "-W", str(elf)]).splitlines():
        parts = line.split()
        if len(parts) < 8 or parts[6] != "UND" or parts[4] not in ("GLOBAL", "WEAK"):
            continue
        name = parts[7].split("@", 1)[0]
        index = re.fullmatch(r"\((\d+)\)", parts[8]) if len(parts) > 8 else None
        out.append((name, int(index.group(1)) if index else 0, parts[3]))
    return out


def plan(elves: list[Path], present: dict[str, str]) -> dict[str, Library]:
    """The stand-in libraries `elves` need: one per NEEDED library the system lacks (`present`: SONAME ->
    path), with the symbols (by version) the ELFs take from it. An unversioned symbol goes to the first
    missing library unless a present library the ELF needs defines it (libstdc++ exports some unversioned)."""
    libraries: dict[str, Library] = {}
    for elf in elves:
        wanted = needed(elf)
        missing = [lib for lib in wanted if lib not in present]
        provided = frozenset().union(*(defined(present[lib]) for lib in wanted if lib in present))
        if not missing:
            continue
        needs = version_needs(elf)
        owner = {index: (lib, v) for lib in missing for v, index in needs.get(lib, [])}
        for lib in missing:
            entry = libraries.setdefault(lib, Library(lib))
            entry.versions += [v for v, _ in needs.get(lib, []) if v not in entry.versions]
        first = libraries[missing[0]]
        for name, version, kind in undefined(elf):
            if kind not in ("FUNC", "NOTYPE") or name.startswith("__gmon") or (kind == "NOTYPE" and not version):
                continue  # weak hooks (gmon, gcov, zstd tracing) stay undefined, as with the real libraries
            if version:
                if version in owner:
                    lib, vname = owner[version]
                    libraries[lib].symbols.setdefault(vname, set()).add(name)
            elif kind == "FUNC" and name not in provided:
                first.symbols.setdefault("", set()).add(name)
    return libraries


def _check_names(lib: Library) -> None:
    if not _LIBRARY.fullmatch(lib.soname):
        raise StandinError(f"unexpected library name {lib.soname!r} in the plugin's NEEDED entries")
    for version, names in lib.symbols.items():
        for name in [version, *names] if version else names:
            if not _SYMBOL.fullmatch(name):
                raise StandinError(f"unexpected symbol name {name!r} needed from {lib.soname}")


def render(lib: Library) -> tuple[str, str]:
    """The C source and the linker version script of `lib`'s stand-in."""
    _check_names(lib)
    c = ["/* Generated by fp8-check from the ROCm plugin's own symbol tables: a load-time stand-in for "
         f"{lib.soname}. */",
         "#include <fcntl.h>", "#include <stdlib.h>", "#include <string.h>", "#include <unistd.h>",
         "static void note(const char *what) {",
         f'  const char *path = getenv("{LOG_VARIABLE}");',
         "  if (!path || !*path) return;",
         "  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);",
         "  if (fd < 0) return;",
         "  ssize_t n = write(fd, what, strlen(what));",
         "  (void)n;",
         "  close(fd);",
         "}",
         "static long other(const char *what) {",
         "  note(what);",
         f'  const char *strict = getenv("{STRICT_VARIABLE}");',
         "  if (strict && *strict) abort();",
         "  return 0;",
         "}"]
    index = 0
    for version in sorted(lib.symbols):
        for name in sorted(lib.symbols[version]):
            c.append(f'long standin_{index}(void) __asm__("{name}");')
            if REGISTRATION.match(name):
                c.append(f'long standin_{index}(void) {{ note("{name} {lib.soname}\\n"); return 0; }}')
            else:
                c.append(f'long standin_{index}(void) {{ return other("{name} {lib.soname}\\n"); }}')
            index += 1
    script = []
    unversioned = sorted(lib.symbols.get("", ()))
    previous = ""
    for i, version in enumerate(lib.versions):
        names = sorted(lib.symbols.get(version, ()))
        if i == 0:
            names = names + unversioned
        body = (" global:" + "".join(f" {n};" for n in names)) if names else ""
        local = " local: *;" if i == 0 else ""
        script.append(f"{version} {{{body}{local} }}{(' ' + previous) if previous else ''};")
        previous = version
    if not lib.versions:
        body = (" global:" + "".join(f" {n};" for n in unversioned)) if unversioned else ""
        script.append(f"{{{body} local: *; }};")
    return "\n".join(c) + "\n", "\n".join(script) + "\n"


def build(lib: Library, out_dir: Path, work: Path) -> Path:
    source, script = render(lib)
    stem = lib.soname.replace("+", "_")
    (work / f"{stem}.c").write_text(source)
    (work / f"{stem}.map").write_text(script)
    target = out_dir / lib.soname
    _run([_tool("cc"), "-shared", "-fPIC", "-O0", "-o", str(target), str(work / f"{stem}.c"),
          f"-Wl,-soname,{lib.soname}", f"-Wl,--version-script={work / f'{stem}.map'}"])
    return target


def key(libraries: dict[str, Library]) -> str:
    data = {name: {"versions": lib.versions, "symbols": {v: sorted(s) for v, s in sorted(lib.symbols.items())}}
            for name, lib in sorted(libraries.items())}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def damaged(out_dir: Path) -> list[str]:
    """What is wrong with the stand-ins in `out_dir` against their manifest: a library missing, or its bytes not
    the ones the manifest's checksum states (a manifest without checksums, from an older fp8-check, cannot vouch
    for them: that is damage too). [] when they are whole."""
    try:
        manifest = json.loads((out_dir / MANIFEST).read_text())
        names, sums = dict(manifest["libraries"]), manifest.get("sha256")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [f"{MANIFEST} missing or unreadable"]
    if not isinstance(sums, dict):
        return [f"{MANIFEST} states no checksums"]
    out = []
    for name in sorted(names):
        path = out_dir / name
        if not path.is_file():
            out.append(f"{name} missing")
        elif sums.get(name) != _sha256(path):
            out.append(f"{name} differs from its checksum")
    return out


def ensure(elves: list[Path], out_dir: Path) -> dict:
    """Generate (or reuse, when whole: `damaged`) the stand-ins `elves` need into `out_dir`; the manifest written
    there, with each library's sha256."""
    libraries = plan(elves, system_libraries())
    digest = key(libraries)
    manifest_path = out_dir / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("key") == digest and manifest.get("generator") == GENERATOR and not damaged(out_dir):
            return manifest
    except (OSError, ValueError, KeyError):
        pass
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / ".src"
    work.mkdir(exist_ok=True)
    for lib in libraries.values():
        build(lib, out_dir, work)
    manifest = {"key": digest, "generator": GENERATOR, "libraries": {n: sum(len(s) for s in lib.symbols.values())
                                             for n, lib in sorted(libraries.items())},
                "sha256": {n: _sha256(out_dir / n) for n in sorted(libraries)},
                "from": sorted(e.name for e in elves)}
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def read_log(path: Path) -> list[tuple[str, str]]:
    """(symbol, library) of every stand-in call a log recorded, in order."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    return [tuple(line.split(" ", 1)) for line in lines if " " in line]  # type: ignore[misc]


def beyond_registration(calls: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [c for c in calls if not REGISTRATION.match(c[0])]
