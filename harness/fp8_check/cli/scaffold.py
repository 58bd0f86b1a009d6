"""`fp8-check init [DIR]`: scaffold fp8-check in another project, with a CI that runs on its first push.

Writes (never overwriting an existing file unless --force):

    cases/fp8_example.yaml                      a pattern case, and a commented `kind: python` case for your own function
    goldens/README.md                           where `fp8-check bless` records the expected signatures
    tests/test_fp8_fusion.py                    a pytest test using the `fp8` fixture of fp8-check's pytest plugin
    conftest.py                                 puts the project's root on sys.path: tests import its modules
    .github/workflows/fp8-check.yml             CI: calls the reusable workflow below, with what the cases need; runs on
                                                a push to the default branch, pull requests, nightly and by hand
    .github/workflows/fp8-check-reusable.yml    fp8-check's reusable workflow (a copy): one job per JAX version x target
                                                group, the pytest tests per target group, merged
    .github/fp8-check/fp8_check-V-py3-none-any.whl   this fp8-check, which the CI installs (not with --requirement)

Then (unless --no-goldens) it records the starting goldens on the JAX installed here: `fp8-check bless` of the cases
it finds and `pytest tests/test_fp8_fusion.py --fp8-bless` (the test's `fp8.check_golden`), each timed; what it
could not record it names, and the CI's first run stays green with a job summary saying how to bless it.

Nothing to edit: the caller names the local copy (`uses: ./…`) and the committed wheel; the modules the project's
cases `requires:` go into the workflow's `with:` (every per-version environment; a case's `requirements:` set gets
an environment of its own from `matrix`). docs/ci.md says why a committed wheel.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from fp8_check.cases import CaseError, discover, load
from fp8_check.cli.own_wheel import WheelError, build, reusable_workflow
from fp8_check.core import atomic_write, shown_path

REUSABLE = ".github/workflows/fp8-check-reusable.yml"
DEFAULT_USES = "./" + REUSABLE
WHEEL_DIR = ".github/fp8-check"

CASES = """\
# fp8-check cases: each is compiled for the target GPU (no GPU needed) and its fusion
# signature is compared with goldens/<target>/<profile>/<mode>/<id>.yaml.
#   fp8-check bless      record the goldens (review the diff like code)
#   fp8-check run        check them
cases:
  - id: example_scaled_relu
    description: scaled E4M3 inputs, relu, clamp, E4M3 output -> one cuBLASLt FP8 gemm with a RELU epilogue
    dequant: float32
    input_scales: both
    output_scale: divide
    clamp: true
    out_dtype: float8_e4m3fn
    epilogue: relu
    profiles: [cublas]

  # Your own function (imported from this directory or PYTHONPATH):
  # - id: my_forward
  #   kind: python
  #   callable: mymodel:forward
  #   args:
  #     - {name: x, shape: [64, 128], dtype: bfloat16}
  #     - {name: w, shape: [128, 256], dtype: bfloat16}
  #   profiles: [cublas]
  #   requires: [flax]   # optional dependencies: not installed -> UNSUPPORTED (an import error is UNRESOLVED)
"""

CONFTEST = '''\
"""pytest: the project's own modules (beside this file) are importable from tests/ (written by `fp8-check init`)."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
'''

GOLDENS = """\
# goldens

`fp8-check bless` writes one YAML file per case x target x profile x mode here:
`<target>/<profile>/<mode>/<case>.yaml`. Commit them; `fp8-check run` compares against them.
"""

TEST = '''\
"""FP8 fusion checks of this project's own functions (fp8-check's pytest plugin provides `fp8`).

    pytest tests/test_fp8_fusion.py                  # h100, cublas profile, no GPU needed
    pytest tests/test_fp8_fusion.py --fp8-target h100,h200
    pytest tests/test_fp8_fusion.py --fp8-bless      # (re)record the goldens of fp8.check_golden
"""

import jax
import jax.numpy as jnp


def scaled_relu(a, b, a_scale, b_scale):
    c = jax.lax.dot_general(a.astype(jnp.float32) * a_scale, b.astype(jnp.float32) * b_scale,
                            (((1,), (0,)), ((), ())))
    return jnp.clip(jax.nn.relu(c), -448.0, 448.0).astype(jnp.float8_e4m3fn)


ARGS = (jax.ShapeDtypeStruct((64, 64), jnp.float8_e4m3fn), jax.ShapeDtypeStruct((64, 32), jnp.float8_e4m3fn),
        jax.ShapeDtypeStruct((), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32))


def test_scaled_relu_is_one_fp8_gemm(fp8):
    fp8.assert_fusion(scaled_relu, *ARGS, fp8_gemms=1, epilogue="RELU", fp8_output=True, no_upcast_dot=True)


def test_scaled_relu_golden(fp8):
    fp8.check_golden("scaled_relu", scaled_relu, *ARGS)
'''

WORKFLOW = """\
# FP8 fusion regression checks (fp8-check), deviceless. What runs when: on a push to the default branch, on every
# pull request, nightly at 04:23 UTC and by hand (Actions > fp8-check > Run workflow), the same jobs — the cases in
# cases/ across JAX versions, one job per version x target group (fp8-check-reusable.yml), merged into one job
# summary (the HTML report is the artifact `fp8-check-report`), and the pytest tests in tests/ once per target group.
# A newer run of the same event and branch cancels the one still running.
# Written by `fp8-check init`: `with:` lists what the cases' `requires:` name (a `requirements:` set gets its own
# environment); add to it
# when they need more.
name: fp8-check

on:
  push:
  pull_request:
  schedule:
    - cron: "23 4 * * *"
  workflow_dispatch:

concurrency:
  group: fp8-check-${{{{ github.event_name }}}}-${{{{ github.ref }}}}
  cancel-in-progress: true

jobs:
  fp8-check:
    # a push runs on the default branch only (a branch's changes are checked by its pull request)
    if: github.event_name != 'push' || github.ref_name == github.event.repository.default_branch
    uses: {uses}
    # actions: read lets the reusable workflow read this run's `referenced_workflows` when `requirement` is empty.
    permissions:
      contents: read
      actions: read
{issues_permission}    with:
{requirement_line}      jax-range: "0.6.1.."
      select: minor
      targets: h100
{with_line}{issues_line}"""

# What --uses may name: a local workflow (./…) or OWNER/REPO/PATH@REF, in characters that need no YAML quoting.
_USES = re.compile(r"\./[A-Za-z0-9_./-]+\.ya?ml|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+\.ya?ml@[A-Za-z0-9_./-]+")


def files(uses: str, requirement: str, file_issues: bool = False, with_: tuple[str, ...] = (),
          reusable: str | None = None) -> dict[str, str]:
    """The text files `init` writes (the wheel aside): `with_` the requirements of every per-version environment,
    `reusable` the reusable workflow's text when the caller names the local copy."""
    if not _USES.fullmatch(uses) or ".." in uses:
        raise ValueError(f"--uses {uses!r} is not ./PATH.yml or OWNER/REPO/PATH.yml@REF")
    if uses == "./.github/workflows/fp8-check.yml":
        raise ValueError(f"--uses {uses!r} names the caller init writes; the reusable workflow goes elsewhere "
                         f"(default {DEFAULT_USES})")
    planned = {
        "cases/fp8_example.yaml": CASES,
        "goldens/README.md": GOLDENS,
        "tests/test_fp8_fusion.py": TEST,
        "conftest.py": CONFTEST,
        ".github/workflows/fp8-check.yml": WORKFLOW.format(
            uses=uses, requirement_line=f"      requirement: {_yaml_string(requirement)}\n" if requirement else "",
            # file-issues: the called `issues` job takes the token this job grants (issues: write)
            issues_permission="      issues: write\n" if file_issues else "",
            with_line=(f"      # what the cases' requires: name, in every per-version environment\n"
                       # one word each: the workflow splits the input on whitespace (PEP 508 needs none)
                       f"      with: {_yaml_string(' '.join(''.join(r.split()) for r in with_))}\n") if with_ else "",
            issues_line="      file-issues: true\n" if file_issues else ""),
    }
    if reusable is not None and uses.startswith("./"):
        planned[uses[2:]] = reusable
    return planned


def case_requirements(root: Path) -> tuple[str, ...]:
    """What the project's cases need in every per-version environment: the distributions of the modules their
    `requires:` names (as installed here, else the module's own name). Their `requirements:` sets are not among
    them: `matrix` builds each set's environment for its cases alone, on the releases the set's range includes.
    A case file that does not load is bad input (CaseError: one line naming file, case and field)."""
    from importlib import metadata

    if not (root / "cases").is_dir() or not any(discover([root / "cases"])):
        return ()
    loaded = load([root / "cases"])
    dists = metadata.packages_distributions()
    out: dict[str, None] = {}
    for case in loaded:
        for module in case.required_modules():
            top = module.split(".")[0]
            for name in dists.get(top, [top])[:1]:
                out.setdefault(name, None)
    return tuple(out)


def _yaml_string(text: str) -> str:
    import json

    return json.dumps(text)  # a JSON string is a valid YAML scalar, whatever it contains


def register(subparsers) -> dict:
    p = subparsers.add_parser("init", help="scaffold cases/, goldens/, a pytest example and a CI workflow in a project")
    p.add_argument("directory", nargs="?", type=Path, default=Path("."), help="project directory (default: .)")
    p.add_argument("--uses", default=DEFAULT_USES,
                   help=f"the reusable workflow the CI calls (default: {DEFAULT_USES}, the copy init writes; "
                        "OWNER/REPO/PATH.yml@REF calls another repository's instead)")
    p.add_argument("--requirement", default=None,
                   help="what the CI installs fp8-check from, instead of the wheel of this fp8-check that init commits "
                        "under .github/fp8-check/: a pinned requirement (a git URL at a commit, a wheel's URL)")
    p.add_argument("--file-issues", action="store_true",
                   help="the CI opens one issue per upstream change (grants the called workflow issues: write)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    p.add_argument("--no-goldens", dest="goldens_now", action="store_false",
                   help="write the files only: record no starting goldens (by default init compiles the cases it "
                        "finds and the pytest test on the JAX installed here, and blesses them)")
    return {"init": cmd_init}


def cmd_init(args) -> int:
    root = Path(args.directory)
    if root.exists() and not root.is_dir():
        print(f"fp8-check init: error: {shown_path(root)} is not a directory", file=sys.stderr)
        return 2
    wrote: list[str] = []
    kept: list[str] = []
    try:
        needs = case_requirements(root)
    except CaseError as exc:  # one line naming file, case and field
        print(f"fp8-check init: error: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="fp8-check-init-") as tmp:
        wheel: Path | None = None
        requirement = args.requirement
        if requirement is not None and (not requirement.isprintable() or "${{" in requirement or not requirement.strip()):
            # it goes into the workflow as written: an expression would run in the CI, a line break adds lines
            print(f"fp8-check init: error: --requirement {shown_path(requirement) if requirement.isprintable() else repr(requirement[:60])}: "
                  "one requirement on one line, without '${{' (a workflow expression)", file=sys.stderr)
            return 2
        try:
            reusable = reusable_workflow() if args.uses.startswith("./") else None
            if requirement is None:  # the CI installs this very fp8-check, from a wheel committed beside the workflow
                wheel = build(Path(tmp))
                requirement = f"{WHEEL_DIR}/{wheel.name}"
            planned = files(args.uses, requirement, getattr(args, "file_issues", False), needs, reusable)
        except (ValueError, WheelError) as exc:
            print(f"fp8-check init: error: {exc}", file=sys.stderr)
            return 2
        binary = {f"{WHEEL_DIR}/{wheel.name}": wheel} if wheel is not None else {}
        for rel in [*planned, *binary]:
            path = root / rel
            if path.exists() and not args.force:
                kept.append(rel)
                continue
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if rel in binary:
                    _copy_whole(binary[rel], path)
                else:
                    atomic_write(path, planned[rel])
            except OSError as exc:  # a read-only directory, `cases` is a file, a full disk: one line, nothing half-written
                print(f"fp8-check init: error: cannot write {path}: {exc.strerror or exc}"
                      + (f" ({path.parent} exists and is not a directory)" if _blocked(path) else "")
                      + (f"; already wrote {', '.join(str(root / r) for r in wrote)}" if wrote else ""), file=sys.stderr)
                return 2
            wrote.append(rel)
    for rel in wrote:
        print(f"wrote {shown_path(root / rel)}")
    for rel in kept:
        print(f"kept  {shown_path(root / rel)} (exists; --force overwrites)")
    if needs:
        print(f"the CI installs what the cases need in every JAX version's environment: {' '.join(needs)}")
    recorded = record_goldens(root, "tests/test_fp8_fusion.py" in wrote) if getattr(args, "goldens_now", True) else None
    if recorded is None:
        print("next: fp8-check bless                           record the goldens of cases/ (then fp8-check run checks them)")
        print("      pytest tests/test_fp8_fusion.py --fp8-bless   record the goldens of the pytest test's fp8.check_golden")
    else:
        print("next: fp8-check run                             check the cases against the goldens init recorded")
        if not recorded:
            print("      fp8-check bless; pytest tests --fp8-bless   record what init could not (named above)")
    print("      git add .github cases goldens tests conftest.py; git commit; git push   nothing to edit; then the CI runs:")
    print("        on a push to the default branch, each pull request, nightly (04:23 UTC) and by hand (Run workflow):")
    print("        the cases on every JAX version x target group, and the pytest tests per target group")
    print("        (a case without a golden is told, with how to bless it, not failed)")
    return 0


def record_goldens(root: Path, with_test: bool) -> bool:
    """The starting goldens, on the JAX installed here: `fp8-check bless` of the cases init finds, then (when init
    wrote the test) `pytest tests/test_fp8_fusion.py --fp8-bless`; each in a subprocess with a timeout, timed. Says
    what it recorded and what it could not; True when everything was recorded."""
    import importlib.util
    import subprocess
    import time
    from importlib import metadata

    jax_version = metadata.version("jax")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    steps = [("the cases", [sys.executable, "-m", "fp8_check.cli.main", "bless", "cases", "--goldens", "goldens"])]
    if with_test:
        if importlib.util.find_spec("pytest") is None:
            print("goldens: the pytest test's not recorded: pytest is not installed here "
                  "(pip install pytest; then pytest tests/test_fp8_fusion.py --fp8-bless)")
            with_test = False
        else:
            steps.append(("the pytest test's", [sys.executable, "-m", "pytest", "tests/test_fp8_fusion.py", "--fp8-bless",
                                                "--fp8-goldens", "goldens", "-q", "-p", "no:cacheprovider"]))
    complete = True
    for what, cmd in steps:
        start = time.perf_counter()
        try:
            p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            print(f"goldens: {what} not recorded: no answer within 1800 s (record them with: {_by_hand(cmd)})")
            complete = False
            continue
        took = time.perf_counter() - start
        lines = p.stdout.splitlines()
        missed = [x for x in lines if x.startswith(("UNSUPPORTED ", "UNRESOLVED ", "skipped "))]
        if p.returncode == 0 and not missed:
            told = next((x for x in reversed(lines) if x.startswith("blessed:") or " passed" in x), "recorded")
            print(f"goldens: {what} recorded on jax {jax_version} in {took:.1f} s ({told.strip('= ')})")
            continue
        complete = False
        print(f"goldens: {what} not all recorded on jax {jax_version} ({took:.1f} s; exit {p.returncode}); "
              f"the CI's first run stays green and its job summary says how to bless them:")
        for x in (missed or [x for x in lines if x.strip()][-5:] or p.stderr.strip().splitlines()[-5:]):
            print(f"  {x}")
    return complete


def _by_hand(cmd: list[str]) -> str:
    return ("fp8-check " + " ".join(cmd[3:])) if cmd[2] == "fp8_check.cli.main" else " ".join(["pytest", *cmd[3:]])


def _copy_whole(source: Path, path: Path) -> None:
    """Copy a binary file so that readers see the old file or the new one (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(source.read_bytes())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _blocked(path: Path) -> bool:
    """A folder on the way to `path` exists as a file."""
    return any(p.exists() and not p.is_dir() for p in path.parents)
