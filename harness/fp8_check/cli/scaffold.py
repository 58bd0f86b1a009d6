"""`fp8-check init [DIR]`: scaffold fp8-check in another project.

Writes (never overwriting an existing file unless --force):

    cases/fp8_example.yaml              a pattern case, and a commented `kind: python` case for your own function
    goldens/README.md                   where `fp8-check bless` records the expected signatures
    tests/test_fp8_fusion.py            a pytest test using the `fp8` fixture of fp8-check's pytest plugin
    .github/workflows/fp8-check.yml     CI: calls fp8-check's reusable workflow (matrix + HTML report artifact)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from fp8_check.core.about import install_requirement
from fp8_check.core.files import atomic_write

DEFAULT_USES = "OWNER/fp8-check/.github/workflows/fp8-check.yml@main"

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
# FP8 fusion regression checks (fp8-check): the cases in cases/ across JAX versions, deviceless.
# The HTML report is uploaded as the artifact `fp8-check-report`.
name: fp8-check

on:
  pull_request:
  schedule:
    - cron: "23 4 * * *"
  workflow_dispatch:

jobs:
  fp8-check:
    uses: {uses}
    # actions: read lets the reusable workflow read this run's `referenced_workflows`, which names the
    # fp8-check commit it was called at: what it installs when `requirement` is not set.
    permissions:
      contents: read
      actions: read
{issues_permission}    with:
{requirement_line}      jax-range: "0.6.1.."
      select: minor
      targets: h100
{issues_line}"""

# What --uses may name: a local workflow (./…) or OWNER/REPO/PATH@REF, in characters that need no YAML quoting.
_USES = re.compile(r"\./[A-Za-z0-9_./-]+\.ya?ml|[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+\.ya?ml@[A-Za-z0-9_./-]+")


def files(uses: str, requirement: str, file_issues: bool = False) -> dict[str, str]:
    if not _USES.fullmatch(uses) or ".." in uses:
        raise ValueError(f"--uses {uses!r} is not ./PATH.yml or OWNER/REPO/PATH.yml@REF")
    return {
        "cases/fp8_example.yaml": CASES,
        "goldens/README.md": GOLDENS,
        "tests/test_fp8_fusion.py": TEST,
        ".github/workflows/fp8-check.yml": WORKFLOW.format(
            uses=uses, requirement_line=f"      requirement: {_yaml_string(requirement)}\n" if requirement else "",
            # file-issues: the called `issues` job takes the token this job grants (issues: write)
            issues_permission="      issues: write\n" if file_issues else "",
            issues_line="      file-issues: true\n" if file_issues else ""),
    }


def _yaml_string(text: str) -> str:
    import json

    return json.dumps(text)  # a JSON string is a valid YAML scalar, whatever it contains


def register(subparsers) -> dict:
    p = subparsers.add_parser("init", help="scaffold cases/, goldens/, a pytest example and a CI workflow in a project")
    p.add_argument("directory", nargs="?", type=Path, default=Path("."), help="project directory (default: .)")
    p.add_argument("--uses", default=DEFAULT_USES,
                   help=f"the reusable workflow the CI calls (default: {DEFAULT_USES}; replace OWNER)")
    p.add_argument("--requirement", default=None,
                   help="what the CI installs fp8-check from: a requirement, git URL or wheel URL (default: the git URL "
                        "and commit, or the wheel URL, this fp8-check was installed from; fp8-check is not on PyPI)")
    p.add_argument("--file-issues", action="store_true",
                   help="the CI opens one issue per upstream change (grants the called workflow issues: write)")
    p.add_argument("--force", action="store_true", help="overwrite existing files")
    return {"init": cmd_init}


def cmd_init(args) -> int:
    root = Path(args.directory)
    if root.exists() and not root.is_dir():
        print(f"fp8-check init: error: {root} is not a directory", file=sys.stderr)
        return 2
    wrote: list[str] = []
    kept: list[str] = []
    if args.requirement is None:
        args.requirement = install_requirement()
        if not args.requirement:
            print("fp8-check init: note: no git URL or wheel URL is known for this fp8-check; the workflow installs "
                  "fp8-check from the repository and commit it calls (set `requirement` to pin another)")
    try:
        planned = files(args.uses, args.requirement, getattr(args, "file_issues", False))
    except ValueError as exc:
        print(f"fp8-check init: error: {exc}", file=sys.stderr)
        return 2
    for rel, text in planned.items():
        path = root / rel
        if path.exists() and not args.force:
            kept.append(rel)
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)
        except OSError as exc:  # a read-only directory, `cases` is a file, a full disk: one line, nothing half-written
            print(f"fp8-check init: error: cannot write {path}: {exc.strerror or exc}"
                  + (f" ({path.parent} exists and is not a directory)" if _blocked(path) else "")
                  + (f"; already wrote {', '.join(str(root / r) for r in wrote)}" if wrote else ""), file=sys.stderr)
            return 2
        wrote.append(rel)
    for rel in wrote:
        print(f"wrote {root / rel}")
    for rel in kept:
        print(f"kept  {root / rel} (exists; --force overwrites)")
    print("next: fp8-check bless   (record the goldens), then fp8-check run")
    if args.uses == DEFAULT_USES:
        print(f"      edit .github/workflows/fp8-check.yml: replace OWNER in '{DEFAULT_USES}'")
    return 0


def _blocked(path: Path) -> bool:
    """A folder on the way to `path` exists as a file."""
    return any(p.exists() and not p.is_dir() for p in path.parents)
