"""What a command runs on: cases, targets, profiles, the compile mode, and a checked compiler.

Shared by the CLI and the pytest plugin (and every command module), so both select the
same way and say the same one-line errors. Nothing here prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fp8_check import platforms
from fp8_check.cases import Case, load, matching
from fp8_check.compile import DEFAULT_TIMEOUT, Compiler, CompilerPool, PoolOptions, WorkerError, from_options
from fp8_check.core import BadInput, BrokenEnvironmentError, installed, option
from fp8_check.platforms import Profile
from fp8_check.targets import (
    MODES,
    PROFILES,
    TARGET_DIR,
    Target,
    all_target_names,
    gpu_present,
    load_target,
    profile_alias,
    profile_applies,
    resolve_mode,
)
from fp8_check.verdict import golden_files_of
from fp8_check.versions import InstallError, other_platform, python_for, wrap

DEFAULT_CASES = Path("cases")


class UsageError(BadInput):
    """Bad input or usage: one line, exit 2."""


class BrokenEnvironment(BrokenEnvironmentError):
    """JAX or the CUDA plugin cannot compile here at all: exit 3."""


def comma_list(value: str | None) -> list[str]:
    """`a, b,,a` -> ['a', 'b'] (order kept, repeats merged)."""
    out: list[str] = []
    for v in (value or "").split(","):
        v = v.strip()
        if v and v not in out:
            out.append(v)
    return out


def load_cases(paths: list[Path] | None, filter_text: str | None = None) -> list[Case]:
    """The cases under `paths` (default cases/) whose id matches `-k`; UsageError when none does."""
    paths = list(paths or [DEFAULT_CASES])
    cases = matching(load(paths), filter_text)
    if not cases:
        raise UsageError(f"no case matches{' -k ' + filter_text if filter_text else ''} in {', '.join(map(str, paths))}")
    return cases


def find_case(paths: list[Path] | None, case_id: str) -> Case:
    paths = list(paths or [DEFAULT_CASES])
    for c in load(paths):
        if c.id == case_id:
            return c
    raise UsageError(f"no case with id '{case_id}' in {', '.join(map(str, paths))}")


def targets_from(value: str | None, option: str = "--target") -> list[Target]:
    out: dict[str, Target] = {}
    for name in comma_list(value or platforms.default_target()):
        try:
            t = load_target(name)
        except KeyError as exc:
            raise UsageError(f"{option}: {exc.args[0]}") from None
        if t.name in out and out[t.name].config_text != t.config_text:
            raise UsageError(f"{option}: two different specs are both named '{t.name}' ({name})")
        out[t.name] = t  # the same target given twice (by name and by path): once
    return list(out.values())


def profiles_from(value: str | None, mode: str, option: str = "--profile", for_targets: "list[Target] | None" = None) -> list[str]:
    """The named profiles, or every profile the mode supports (of the platforms of `for_targets` when given: an
    NVIDIA run does not list the TPU's profile)."""
    if value:
        names = list(dict.fromkeys(profile_alias(n) for n in comma_list(value)))  # `hipblaslt`: AMD's name for cublas
        for n in names:
            if n not in PROFILES:
                raise UsageError(f"{option}: unknown profile '{n}'; allowed: {', '.join(PROFILES)}")
        return names
    return [n for n, p in PROFILES.items() if (p.deviceless or mode == "device")
            and (for_targets is None or any(profile_applies(n, t) for t in for_targets))]


def mode_from(value: str | None) -> str:
    return resolve_mode(value or "auto")


def start_compiler(mode_name: str, timeout: float = DEFAULT_TIMEOUT, check_targets=(),
                   pool_options: PoolOptions | None = None, workers: int | None = None, for_targets=(),
                   cases=(), log=None) -> tuple[CompilerPool, dict]:
    """A pool of compile workers behind the compile cache, and its environment (versions, device); deviceless,
    `check_targets`' specs are parsed by XLA first, so that a malformed one is bad input (UsageError), not a
    broken environment. Shipped targets are known to parse and are not checked (a fully cached run starts no JAX).
    `pool_options`: `-j/--workers` and `--no-cache` as given (fp8_check.compile._pool.add_options; None: the
    defaults); `workers` overrides -j. The workers run in the environment that compiles for `check_targets` and
    `for_targets` (`platform_python`); `cases` that name `requirements:` compile in their set's environment for
    this JAX (_requirement_envs.py, which builds it on first use and tells `log`)."""
    if mode_name == "device" and not gpu_present():
        raise UsageError("--mode device compiles on a local NVIDIA GPU and this machine has none; use --mode deviceless")
    python = platform_python([*check_targets, *for_targets]) if mode_name == "deviceless" else None
    try:
        compiler = from_options(pool_options or PoolOptions(), mode_name, python=python, jobs=workers, timeout=timeout)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        env = compiler.environment()
        for t in [t for t in check_targets if not shipped(t)] if mode_name == "deviceless" else ():
            check_target_spec(compiler, t)
        selected = [*check_targets, *for_targets]
        if selected:  # only the sets of cases that run on the selected targets (an h100 run needs no TPU case's set)
            cases = [c for c in cases if not c.targets or any(t.name in c.targets for t in selected)]
        if cases:
            platform = env_platform([*check_targets, *for_targets]) if mode_name == "deviceless" else None
            compiler = wrap(compiler, cases, env["jax"], mode_name, timeout, compiler.cache, platform,
                                             log or (lambda _: None))
    except WorkerError as exc:
        compiler.close()
        hint = platforms.of_targets([*check_targets, *for_targets]).start_hint()
        raise BrokenEnvironment(f"cannot start the compile worker ({hint}): {exc}") from None
    except BaseException:  # a bad target spec (UsageError), an environment not built, or interrupted while starting
        compiler.kill()
        raise
    return compiler, env


def environment_note(targets, env: dict) -> str:
    """Why a deviceless run compiles in another JAX release than this environment's ('' when it does not): the
    targets' platform has no plugin here, so the cached environment of its newest release with one compiles."""
    platform = env_platform(targets)
    if platform is None or platform.installed():
        return ""
    own = installed("jax")
    return (f"{platform.vendor} targets compile in the cached environment of jax {env.get('jax')}, the newest release "
            f"with a {platform.plugin_label} ({platform.install(str(env.get('jax')))}): this environment's jax {own} "
            f"has no {platform.plugin_label}")


def env_platform(targets) -> platforms.Platform | None:
    """The platform whose plugin joins the CUDA one in the environments compiling for `targets` (_envs.other_platform)."""
    try:
        return other_platform(targets)
    except ValueError as exc:
        raise UsageError(f"--target: {exc}") from None


def platform_python(targets) -> str | None:
    """The interpreter that compiles for `targets` (_envs.python_for): None for this one."""
    try:
        return python_for(targets)
    except ValueError as exc:
        raise UsageError(f"--target: {exc}") from None
    except InstallError as exc:
        raise BrokenEnvironment(f"cannot build the environment for {', '.join(t.name for t in targets)}: {exc}") from None


def check_spec_files(given: str | None, mode_name: str, option: str = "--target") -> None:
    """For commands that compile in other environments (matrix, bisect): target specs given as files are
    parsed by this environment's XLA first, so that a malformed one is bad input (exit 2) before anything
    is built. Shipped targets are known to parse and are not checked (no worker is started for them)."""
    files = [t for n, t in zip(comma_list(given or platforms.default_target()), targets_from(given, option)) if n.endswith(".txtpb")]
    if files and mode_name == "deviceless":
        compiler, _ = start_compiler(mode_name, check_targets=files)
        compiler.close()


def shipped(target: Target) -> bool:
    path = TARGET_DIR / f"{target.name}.txtpb"
    try:
        return path.is_file() and path.read_text() == target.config_text
    except OSError:
        return False


def check_target_spec(compiler: Compiler | CompilerPool, target: Target) -> None:
    """UsageError naming the field when the installed XLA cannot parse `target`'s spec (the worker builds its device)."""
    reply = compiler.prepare(target)
    if reply.get("ok"):
        return
    error = str(reply.get("error", "")).strip()
    if "GpuTargetConfig" not in error:
        raise WorkerError(error)
    detail = [line.split("] ", 1)[-1] for line in compiler.worker.stderr_tail().splitlines()
              if "Error parsing text-format" in line]
    raise UsageError(f"--target {target.name}: not a valid GpuTargetConfig text proto: "
                     + (detail[-1] if detail else error.splitlines()[0]))


def add_timeout(p) -> None:
    """`--timeout SECONDS`: how long one case may compile."""
    p.add_argument("--timeout", type=option("--timeout"), default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"seconds one case may compile before it is UNRESOLVED and its worker killed "
                        f"(default: {DEFAULT_TIMEOUT:g}; a fresh worker's start-up is not counted)")


@dataclass
class Selection:
    """Everything a run needs to know before compiling."""

    cases: list[Case]
    targets: list[Target]
    profiles: list[str]
    mode: str
    goldens: Path = Path("goldens")
    profile_objs: list[Profile] = field(init=False)

    def __post_init__(self) -> None:
        self.profile_objs = [PROFILES[p] for p in self.profiles]


@dataclass(frozen=True)
class SelectionOptions:
    """The standard selection options (`add_options`) as given: case `paths` (none: cases/), `-k`, `--target`
    (None: h100), `--profile` (None: every profile the mode supports), `--mode`, `--goldens`. The CLI builds it
    from its parsed options; `select` turns it into a checked `Selection`."""

    paths: tuple[Path, ...] = ()
    filter: str | None = None
    target: str | None = None
    profile: str | None = None
    mode: str = "auto"
    goldens: Path = Path("goldens")


def select(options: SelectionOptions) -> Selection:
    """The selection the standard options give; UsageError (one line) for a bad one."""
    m = mode_from(options.mode)
    chosen = targets_from(options.target)
    return Selection(
        cases=load_cases(list(options.paths) or None, options.filter),
        targets=chosen,
        profiles=profiles_from(options.profile, m, for_targets=chosen),
        mode=m,
        goldens=Path(options.goldens or "goldens"),
    )


def unshipped_profiles(goldens_root: Path, targets: list[Target], profiles: list[str]) -> dict[tuple[str, str], str]:
    """(target, profile) pairs a run with the default profiles leaves out, each with its one line: the goldens
    have a profile folder for the target, but none for this profile (the library ships no triton goldens for
    h200, say). A target with no goldens at all is never skipped: a new project starts with every row NEW."""
    out: dict[tuple[str, str], str] = {}
    root = Path(goldens_root)
    for t in targets:
        have = sorted(p for p in profiles if golden_files_of(root, t.name, p))
        if not have:
            continue
        for p in profiles:
            if p not in have and PROFILES[p].deviceless:
                out[(t.name, p)] = (f"{t.name}/{p} skipped: {root}/{t.name}/ has goldens for {', '.join(have)} only, "
                                    f"none for {p} (--profile {p} runs it)")
    return out


def add_options(p, paths: bool = True) -> None:
    """The standard selection options on an argparse parser."""
    if paths:
        p.add_argument("paths", nargs="*", type=Path, help="case files or directories (default: cases/)")
    p.add_argument("-k", dest="filter", help="only cases whose id contains this text (alternatives separated by ',')")
    p.add_argument("--target", default=platforms.default_target(), help=f"target(s), comma-separated: {', '.join(all_target_names())} (default: {platforms.default_target()})")
    p.add_argument("--profile", help=f"profile(s), comma-separated: {', '.join(PROFILES)} (default: every profile the mode supports; "
                                       "a target compiles under its own platform's profiles only)")
    p.add_argument("--mode", default="auto", choices=MODES, help="deviceless: compile for the target spec without a GPU; device: on the local GPU; auto: device if a GPU is present (default)")
    p.add_argument("--goldens", type=Path, default=Path("goldens"), help="goldens directory (default: goldens/)")
