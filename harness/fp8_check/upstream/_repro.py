"""Minimal standalone repro: a short JAX program (no harness code) for one case, target and profile.

`minimal(case, target, profile, jax_version)` returns a script of at most 40 lines:
the case function (the rendered source without comments), a deviceless compile for
the target (its GpuTargetConfig written compactly), and a print of the gemm
custom-calls and the fusions of the optimized HLO. `python repro.py --hlo` prints
the whole optimized module instead (what the tests turn into a signature), and
extra XLA flags pass through `XLA_FLAGS` (e.g. per-pass dumps). Only `kind:
pattern` cases have a minimal repro; `kind: python` cases have the full repro, which embeds
their project modules (`_render.repro`).
"""

from __future__ import annotations

import re

from fp8_check.cases import Case, kind_of
from fp8_check.compile import arg_specs, render
from fp8_check.platforms import Profile
from fp8_check.targets import Target
from fp8_check.worker import target_config_for

MAX_LINES = 40


class ReproError(ValueError):
    """The case cannot be written as a minimal repro."""


def _case_lines(source: str) -> list[str]:
    """The rendered case source without its docstring, comments, blank lines and the `FN = ...` alias."""
    body = re.sub(r'^""".*?"""\n', "", source, count=1, flags=re.S)
    out = []
    for line in body.splitlines():
        code = line.split("  #", 1)[0].rstrip()
        if not code.strip() or code.lstrip().startswith("#") or code.startswith("FN = "):
            continue
        out.append(code)
    return out


def _compact_proto(text: str) -> str:
    """A text proto on one line, comments dropped (text format does not need newlines)."""
    lines = [line.split("#", 1)[0].strip() if not line.lstrip().startswith('device_description_str') else line.strip()
             for line in text.splitlines()]
    return " ".join(line for line in lines if line)


def _wrap(text: str, width: int = 100, indent: str = "    ") -> list[str]:
    """`text` as Python string literals of at most `width` characters, split at spaces."""
    parts, cur = [], ""
    for word in text.split(" "):
        if cur and len(cur) + 1 + len(word) > width:
            parts.append(cur + " ")
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    parts.append(cur)
    return [indent + repr(p) for p in parts]


def _args_lines(case: Case) -> list[str]:
    items = [repr((name, tuple(shape), dtype)) for name, shape, dtype in arg_specs(case)]
    out, cur = [], "ARGS = ["
    for i, item in enumerate(items):
        piece = item + ("]" if i == len(items) - 1 else ", ")
        if len(cur) + len(piece) > 118:
            out.append(cur.rstrip())
            cur = "        "
        cur += piece
    return out + [cur]


def _comment(text: str) -> str:
    """Text for a `#` comment: one line, whatever the case file held (a newline must never become code)."""
    return " ".join(str(text).split())


def minimal(case: Case, target: Target, profile: Profile, jax_version: str) -> str:
    if not re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", jax_version):
        raise ReproError(f"not a JAX version: {jax_version!r}")
    if not kind_of(case).REDUCIBLE:
        raise ReproError(f"case '{case.id}' is kind: {case.kind}; its repro is the full one (fp8-check show --repro)")
    lines = _case_lines(render(case).source)
    fn = next(line.split("(")[0][4:] for line in lines if line.startswith("def "))
    head = [
        _comment(f"# {case.id}: {case.description}").rstrip(": ")[:110],
        f'# pip install "{target.platform.install(jax_version)}"; python repro.py [--hlo]: compiles deviceless (no GPU) for'
        f" {_comment(target.name)}, profile {profile.name}; prints the gemm and fusion kernels (--hlo: the optimized HLO)",
        "import glob, os, sys, tempfile",
        "D = tempfile.mkdtemp()",
        "os.environ.update(JAX_PLATFORMS=\"cpu\", " + "".join(f'{k}="{v}", ' for k, v in target.platform.deviceless_env.items())
        + 'XLA_FLAGS=os.environ.get("XLA_FLAGS", "") + f" --xla_dump_to={D} --xla_dump_hlo_as_text")',
    ]
    body = [line for line in lines if not line.startswith(("import jax", "import jax.numpy"))]
    body = body[:body.index("ARGS = [")] + _args_lines(case)
    # The target's CUDA runtime and cuDNN versions, written where this JAX version's XLA reads them.
    spec = _wrap(_compact_proto(target_config_for(target.config_text, target.versions_dict(), jax_version)), width=110)
    tail = [
        "TARGET = (" + spec[0].strip(),
        *spec[1:-1],
        spec[-1] + ")",
        f'dev = topologies.get_topology_desc(platform="{target.platform.jax_platform}", target_config=TARGET, '
        'topology="1x1x1").devices[0]',
        "specs = [jax.ShapeDtypeStruct(s, jnp.dtype(t), sharding=jax.sharding.SingleDeviceSharding(dev)) for _, s, t in ARGS]",
        "try:",
        f"    jax.jit({fn}).lower(*specs).compile(compiler_options={profile.compiler_options!r})",
        "except ValueError as e:  # JAX 0.8.2-0.8.3 fail after compiling (no memory kinds); the dump is written",
        '    assert "memory addressable" in str(e), e',
        'hlo = open(max(glob.glob(D + "/*gpu_after_optimizations.txt"), key=lambda p: int(p.split("module_")[1][:4]))).read()',
        'print(hlo if "--hlo" in sys.argv else "\\n".join(l.strip() for l in hlo.splitlines() if "custom-call(" in l or " fusion(" in l))',
    ]
    imports = ["import jax, jax.numpy as jnp", "from jax.experimental import topologies",
               f'if jax.__version__ != "{jax_version}":',
               f'    print(f"note: written for jax {jax_version}, running jax {{jax.__version__}}", file=sys.stderr)']
    script = "\n".join(head + imports + body + tail) + "\n"
    n = script.count("\n")
    if n > MAX_LINES:
        raise ReproError(f"case '{case.id}': the minimal repro has {n} lines (> {MAX_LINES})")
    return script
