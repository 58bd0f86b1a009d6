"""Requirement sets: what a requirements file asks for, and a case's `requirements:` field.

A requirements file lists one PEP 508 requirement a line (`#` comments, no pip options); one `jax` line with a
version range (`jax>=0.11.1`) states the JAX versions the set works with: JAX itself is chosen per version (the
run's own, or `matrix --jax`), never installed from the file. A case names a set shipped with fp8-check
(`requirements: maxtext`) or a file relative to its case file; it then compiles in a cached environment with the
set installed (harness/fp8_check/versions/_requirement_envs.py; `matrix` and `bisect` build, per release its range
includes, one environment per set for the cases that need it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fp8_check import core, platforms
from fp8_check.core import ReadError, package_path, read_text

# Named requirement sets a case may name (`requirements: maxtext`): files shipped in the package.
NAMED = {"maxtext": package_path("models", "maxtext-requirements.txt"),
         "qwix": package_path("models", "qwix-requirements.txt")}

MAX_BYTES = 64 * 1024  # a requirements file lists packages: a few KiB; more is not a requirements file
EXCERPT = 60  # characters of an offending requirement an error may quote (escaped, one line)
def chosen_per_version() -> frozenset[str]:
    """What JAX and each registered platform's plugins are called: chosen per version, never from a requirement set."""
    return frozenset({"jax", "jaxlib", *(d for p in platforms.registered() for d in (*p.plugin_distributions,
                                                                                  *p.pjrt_distributions))})


@dataclass(frozen=True)
class RequirementSet:
    """What a requirements file asks for: `requirements` (sorted PEP 508 strings) and `jax`, the range of JAX
    versions they work with ('' for any); `name` is how it was given (a named set or the file's path)."""

    name: str
    requirements: tuple[str, ...]
    jax: str = ""

    def unsupported(self, jax_version: str) -> str | None:
        return outside(self.jax, jax_version, self.name)


def outside(jax_range: str, jax_version: str, name: str) -> str | None:
    """Why requirements `name`, which work with `jax_range`, cannot be installed with `jax_version`, or None."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    if jax_range and Version(jax_version) not in SpecifierSet(jax_range):
        return f"requirements {name} need jax{jax_range}; this is jax {jax_version}"
    return None


def excerpt(text: str) -> str:
    """`text` as an error may quote it: escaped (one line, control characters shown), at most EXCERPT characters."""
    return core.excerpt(text, EXCERPT)


def read_set(path: Path, where: str = "--with-requirements", name: str | None = None,
             home: Path | None = None) -> RequirementSet:
    """The requirement set of a requirements file: one a line, `#` comments and blank lines skipped; no pip
    options; at most one `jax` line, a version range only. The file must be a regular file of at most MAX_BYTES
    of UTF-8 text. ValueError (prefixed with `where`) when malformed; it quotes at most a short escaped excerpt
    of the offending line, never more of the file."""
    from packaging.requirements import InvalidRequirement, Requirement

    given = name or str(path)
    shown = f"{where} {core.shown_path(given)}"
    try:
        text = read_text(path, MAX_BYTES, home, "the case file's folder")
    except ReadError as exc:
        raise ValueError(f"{shown}: {exc}") from None
    out, jax = [], ""
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        at = f"{shown}:{n}"
        if line.startswith("-"):
            raise ValueError(f"{at}: options ({excerpt(line.split()[0])}) are not supported; one requirement a line")
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise ValueError(f"{at}: {excerpt(line)}: not a requirement: {_first(exc)}") from None
        if req.name.lower() == "jax" and not (req.extras or req.url or req.marker) and str(req.specifier) and not jax:
            jax = str(req.specifier)  # the JAX versions the set works with
            continue
        out.append(check_requirement(line, at))
    return RequirementSet(name or str(path), tuple(sorted(set(out))), jax)


def case_set(value, case_file: Path) -> RequirementSet:
    """A case's `requirements:`: a named set (`maxtext`) or a requirements file in the case file's folder (or
    below it), a regular file there after resolving links. ValueError with the message for the field; it never
    quotes the file's content beyond a short excerpt of an offending requirement."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a named set ({', '.join(NAMED)}) or a requirements file relative to the case file, "
                         f"got {excerpt(str(value))}")
    if value in NAMED:
        return read_set(NAMED[value], "requirements", name=value)
    shown = excerpt(value)
    if any(not c.isprintable() for c in value):
        raise ValueError(f"{shown}: a file name has no line breaks or control characters")
    given = Path(value)
    if given.is_absolute() or ".." in given.parts:
        raise ValueError(f"{shown}: give a file in the case file's folder, by a relative path without '..'")
    folder = Path(case_file).parent.resolve()
    path = folder / given
    if not path.exists():
        raise ValueError(f"{shown} is neither a named set ({', '.join(NAMED)}) nor a file next to the case file")
    return read_set(path, "requirements", name=value, home=folder)


def check_requirement(text: str, where: str = "--with") -> str:
    """A PEP 508 requirement (`flax`, `flax>=0.10`, `optax==0.2.4`), or ValueError naming it."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    text = text.strip()
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"{where} {excerpt(text)}: not a requirement: {_first(exc)}") from None
    if "$" in text:  # installers expand ${VAR} in requirements: an environment variable must not reach an index
        raise ValueError(f"{where} {excerpt(text)}: '$' is not allowed in a requirement (no environment variables)")
    if canonicalize_name(req.name) in chosen_per_version():
        raise ValueError(f"{where} {excerpt(text)}: jax, jaxlib and the GPU plugins are chosen per version "
                         "(--jax / --jax-range, the target's platform)")
    return str(req)


def _first(exc: Exception) -> str:
    """packaging's parse errors quote the text over three lines: the first says it."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
