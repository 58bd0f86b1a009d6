"""Requirement sets: what a requirements file asks for, and a case's `requirements:` field.

A requirements file lists one PEP 508 requirement a line (`#` comments, no pip options); one `jax` line with a
version range (`jax>=0.11.1`) states the JAX versions the set works with: JAX itself is chosen per version (the
run's own, or `matrix --jax`), never installed from the file. A case names a set shipped with fp8-check
(`requirements: maxtext`) or a file relative to its case file; it then compiles in a cached environment with the
set installed (harness/fp8_check/versions/requirement_envs.py; `matrix` and `bisect` add the set to every version's environment).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fp8_check.core.files import package_path
from fp8_check.platforms import NVIDIA

# Named requirement sets a case may name (`requirements: maxtext`): files shipped in the package.
NAMED = {"maxtext": package_path("models", "maxtext-requirements.txt"),
         "qwix": package_path("models", "qwix-requirements.txt")}


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


def read_set(path: Path, where: str = "--with-requirements", name: str | None = None) -> RequirementSet:
    """The requirement set of a requirements file: one a line, `#` comments and blank lines skipped; no pip
    options; at most one `jax` line, a version range only. ValueError (prefixed with `where`) when malformed."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{where} {path}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    out, jax = [], ""
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise ValueError(f"{where} {path}:{n}: options ({line.split()[0]}) are not supported; one requirement a line")
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise ValueError(f"{where} {path}:{n}: {line!r}: not a requirement: {_first(exc)}") from None
        if req.name.lower() == "jax" and not (req.extras or req.url or req.marker) and str(req.specifier) and not jax:
            jax = str(req.specifier)  # the JAX versions the set works with
            continue
        out.append(check_requirement(line, f"{where} {path}:{n}"))
    return RequirementSet(name or str(path), tuple(sorted(set(out))), jax)


def case_set(value, case_file: Path) -> RequirementSet:
    """A case's `requirements:`: a named set (`maxtext`) or a requirements file relative to the case file.
    ValueError with the message for the field."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a named set ({', '.join(NAMED)}) or a requirements file relative to the case file, "
                         f"got {value!r}")
    if value in NAMED:
        return read_set(NAMED[value], "requirements", name=value)
    path = Path(case_file).parent / value
    if not path.is_file():
        raise ValueError(f"{value!r} is neither a named set ({', '.join(NAMED)}) nor a file next to the case file ({path})")
    return read_set(path, "requirements", name=value)


def check_requirement(text: str, where: str = "--with") -> str:
    """A PEP 508 requirement (`flax`, `flax>=0.10`, `optax==0.2.4`), or ValueError naming it."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = text.strip()
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"{where} {text!r}: not a requirement: {_first(exc)}") from None
    if req.name.lower().replace("_", "-") in ("jax", "jaxlib", *NVIDIA.plugin_distributions[:1], *NVIDIA.pjrt_distributions[:1]):
        raise ValueError(f"{where} {text!r}: jax itself is chosen per version (--jax / --jax-range)")
    return str(req)


def _first(exc: Exception) -> str:
    """packaging's parse errors quote the text over three lines: the first says it."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
