"""Extra requirements of the per-version environments: `--with REQ`, `--with-requirements FILE`, and
whether this process's own environment already satisfies them."""

from __future__ import annotations

from pathlib import Path

from fp8_check.platforms import NVIDIA


def read_requirements(path: Path) -> list[str]:
    """The requirements of a requirements file: one a line, `#` comments and blank lines skipped; no pip options."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--with-requirements {path}: cannot read it: {exc}") from None
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise ValueError(f"--with-requirements {path}:{n}: options ({line.split()[0]}) are not supported; one requirement a line")
        out.append(check_requirement(line, f"--with-requirements {path}:{n}"))
    return out


def check_requirement(text: str, where: str = "--with") -> str:
    """A PEP 508 requirement (`flax`, `flax>=0.10`, `optax==0.2.4`), or ValueError naming it."""
    from packaging.requirements import InvalidRequirement, Requirement

    text = text.strip()
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(f"{where} {text!r}: not a requirement: {exc}") from None
    if req.name.lower().replace("_", "-") in ("jax", "jaxlib", *NVIDIA.plugin_distributions[:1], *NVIDIA.pjrt_distributions[:1]):
        raise ValueError(f"{where} {text!r}: jax itself is chosen per version (--jax / --jax-range)")
    return str(req)


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


def extras_from_args(args) -> list[str]:
    extras = [check_requirement(r) for r in getattr(args, "with_", []) or []]
    if getattr(args, "with_requirements", None):
        extras += read_requirements(args.with_requirements)
    return extras
