"""Extra requirements of the per-version environments: `--with REQ`, `--with-requirements FILE`, the cases'
`requirements:` (harness/fp8_check/cases/_requirement_sets.py), and whether this process's own environment already satisfies them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fp8_check.cases import check_requirement, read_set


def read_requirements(path: Path) -> list[str]:
    """The requirements of a requirements file (its `jax` range aside: `read_set`)."""
    return list(read_set(path).requirements)


def _satisfied(requirements: list[str]) -> bool:
    """Whether this process's environment already has every requirement (then it can serve as that version's env)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    for text in requirements:
        try:
            req = Requirement(text)
        except ValueError:
            return False
        if req.url:  # `flax @ URL`: what the URL holds is unknown until it is installed; any installed flax won't do
            return False
        try:
            installed = md.version(req.name)
        except md.PackageNotFoundError:
            return False
        if req.specifier and not req.specifier.contains(installed, prereleases=True):
            return False
    return True


def add_with_options(p) -> None:
    """`--with REQ` (repeatable) and `--with-requirements FILE`: extra packages in every per-version environment."""
    p.add_argument("--with", dest="with_", action="append", default=[], metavar="REQUIREMENT",
                   help="also install REQUIREMENT (PEP 508, e.g. flax or 'optax>=0.2') in every per-version environment, "
                        "resolved by uv together with that JAX version, so each version gets a compatible flax; repeat "
                        "for more. Environments are cached per set of requirements")
    p.add_argument("--with-requirements", type=Path, metavar="FILE",
                   help="a requirements file (one requirement a line, # comments) added like --with")


@dataclass(frozen=True)
class RequirementOptions:
    """`--with REQ` (repeatable) and `--with-requirements FILE` (`add_with_options`) as given."""

    requirements: tuple[str, ...] = ()
    requirements_file: Path | None = None


def extras_of(options: RequirementOptions) -> tuple[list[str], str]:
    """The extra requirements of `--with` and `--with-requirements`, which go into every version's environment,
    and the JAX range `--with-requirements` states ('' for any). A case's `requirements:` are not among them:
    `matrix` and `bisect` build its set's environment for its cases alone, on the releases its range includes."""
    found = [check_requirement(r) for r in options.requirements]
    jax_range = ""
    if options.requirements_file:
        given = read_set(options.requirements_file)
        found += given.requirements
        jax_range = given.jax
    return sorted(set(found)), jax_range
