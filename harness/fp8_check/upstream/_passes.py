"""The first XLA pass after which two JAX versions compile a case differently.

Both versions compile the minimal repro (fp8_check.upstream._repro) with per-pass
dumps (`--xla_dump_hlo_pass_re=.*`): XLA writes the module after every pass that
changed it, as `module_N.NAME.SEQ.PIPELINE.after_PASS.before_NEXT.txt`. Each
dump is reduced to its *fusion-relevant structure* — a sorted multiset of lines,
one per instruction of the non-fused computations: the opcode, result and
operand dtypes, for gemm custom-calls the target, epilogue and damax flag, for
fusions their kind and the pattern ops inside — so names, ids, layouts and
metadata never make a difference.

The two timelines are aligned on the passes both ran ((pipeline, pass,
occurrence)): the first aligned pass whose after-structure differs, while the
previous aligned one was equal, is the diverging pass. Passes that ran in only
one version between the two are listed as well (a new or removed pass may be
the cause).
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fp8_check.signature import Instruction, Module, dtype_of, match_bracket, parse

_DUMP = re.compile(r"^module_(\d+)\.(.+?)\.(\d{4})\.([\w\-]+)\.after_([\w\-]+)\.before_([\w\-]+)\.txt$")
_SKIP = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "copy-start", "copy-done", "after-all"}
_PATTERN_OPS = {"convert", "multiply", "divide", "clamp", "maximum", "minimum", "abs", "reduce", "add", "tanh", "erf",
                "exponential", "dot", "transpose", "broadcast", "select", "compare", "bitcast-convert", "pad", "slice"}


@dataclass
class Step:
    seq: int
    pipeline: str
    name: str  # the pass
    path: Path

    @property
    def label(self) -> str:
        return f"{self.name} (pipeline {self.pipeline})"


@dataclass
class Divergence:
    """Where two versions' compilations of the same program first differ."""

    good_version: str
    bad_version: str
    pipeline: str | None = None
    pass_name: str | None = None
    changed_in: str | None = None  # the pass changed the module in this version only (None: in both)
    before: list[str] = field(default_factory=list)  # structure before the pass (equal in both)
    after_good: list[str] = field(default_factory=list)
    after_bad: list[str] = field(default_factory=list)
    message: str = ""
    hlo_good: str = ""  # ENTRY of each version's module after the pass (metadata removed, cut to EXCERPT_LINES)
    hlo_bad: str = ""

    @property
    def found(self) -> bool:
        return self.pass_name is not None

    def diff(self) -> list[str]:
        """Unified diff of the structure after the pass: good (-) vs bad (+)."""
        return [line for line in difflib.unified_diff(self.after_good, self.after_bad, lineterm="", n=1)
                if not line.startswith(("---", "+++"))]

    def text(self) -> str:
        if not self.found:
            return f"first diverging pass: not found ({self.message})"
        lines = [f"first diverging pass: {self.pass_name} (pipeline {self.pipeline}), "
                 f"jax {self.good_version} -> {self.bad_version}"]
        if self.changed_in:
            lines.append(f"  it changed the module in jax {self.changed_in} only")
        lines.append(f"  structure after {self.pass_name} (- jax {self.good_version}, + jax {self.bad_version}):")
        lines += ["    " + line for line in self.diff()]
        return "\n".join(lines)

    def markdown(self) -> str:
        if not self.found:
            return f"**First diverging pass:** not found ({self.message})."
        parts = [f"**First diverging XLA pass:** `{self.pass_name}` (pipeline `{self.pipeline}`): the module is the same "
                 f"in jax {self.good_version} and {self.bad_version} before it and differs after it."]
        if self.changed_in:
            parts.append(f"XLA dumps a pass only when it changes the module: this one changed it in jax "
                         f"{self.changed_in} only.")
        parts.append("Fusion-relevant structure before the pass:\n\n```\n" + "\n".join(self.before) + "\n```")
        parts.append(f"After it (`-` jax {self.good_version}, `+` jax {self.bad_version}):\n\n```diff\n"
                     + "\n".join(self.diff()) + "\n```")
        for version, text in ((self.good_version, self.hlo_good), (self.bad_version, self.hlo_bad)):
            if text:
                parts.append(f"ENTRY after `{self.pass_name}`, jax {version}:\n\n```\n{text}\n```")
        return "\n\n".join(parts)


EXCERPT_LINES = 40


def clean_line(line: str) -> str:
    """An HLO line without metadata, frontend attributes and origin, and with backend_config cut to the gemm's
    epilogue and damax flag (balanced braces, quotes respected)."""
    out = line
    for key in ("metadata", "frontend_attributes", "origin", "backend_config"):
        m = re.search(r",\s*" + key + r"=", out)
        if not m:
            continue
        start = m.end()
        if start < len(out) and out[start] == "{":
            end = match_bracket(out, start) + 1
        elif start < len(out) and out[start] == '"':
            end = start + 1
            while end < len(out) and out[end] != '"':
                end += 2 if out[end] == "\\" else 1
            end += 1
        else:
            continue
        keep = ""
        if key == "backend_config":
            fields = re.findall(r'\\?"(?:epilogue|damax_output)\\?":(?:\\?"\w+\\?"|\w+)', out[start:end])
            keep = ", backend_config={..." + ",".join(f.replace('\\"', '"') for f in fields) + "...}" if fields else ""
        out = out[:m.start()] + keep + out[end:]
    return out


def entry_excerpt(path: Path, limit: int = EXCERPT_LINES) -> str:
    """The ENTRY computation of a dumped module, its lines cleaned by `clean_line`."""
    lines, inside = [], False
    for line in Path(path).read_text(errors="replace").splitlines():
        if line.startswith("ENTRY"):
            inside = True
        if inside:
            line = clean_line(line)
            lines.append(line.rstrip())
            if line.startswith("}"):
                break
    if len(lines) > limit:
        lines = lines[:limit - 1] + [f"  ... ({len(lines) - limit + 1} more lines)"]
    return "\n".join(lines)


def steps(dump_dir: Path) -> list[Step]:
    """The per-pass dumps of the module with the most passes (the GPU compilation) in pass order."""
    by_module: dict[str, list[Step]] = {}
    for p in Path(dump_dir).rglob("module_*.txt"):
        m = _DUMP.match(p.name)
        if m:
            by_module.setdefault(m.group(1), []).append(Step(int(m.group(3)), m.group(4), m.group(5), p))
    if not by_module:
        return []
    chosen = max(by_module.values(), key=len)
    return sorted(chosen, key=lambda s: s.seq)


def _fused_ops(module: Module, instr: Instruction, depth: int = 0) -> list[str]:
    ops: set[str] = set()
    for name in instr.called:
        comp = module.computations.get(name)
        if comp is None or depth > 4:
            continue
        for inner in comp.instructions:
            if inner.opcode in ("fusion", "call"):
                ops.update(_fused_ops(module, inner, depth + 1))
            elif inner.opcode in _PATTERN_OPS:
                ops.add(inner.opcode)
    return sorted(ops)


def _dtypes(instr: Instruction) -> str:
    return ",".join(dtype_of(t) for t in instr.result_types if not t.startswith("s8[")) or "?"


def structure(text: str) -> list[str]:
    """The fusion-relevant structure of one HLO module (sorted lines; see the module docstring)."""
    module = parse(text)
    entry = module.entry
    out: list[str] = []
    todo, seen = [entry], set()
    while todo:
        comp = todo.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        types = {i.name: i.type for i in comp.instructions}
        for ins in comp.instructions:
            if ins.opcode in _SKIP:
                continue
            operands = ",".join(dtype_of(types.get(o, "?")) if o in types else "?" for o in ins.operands)
            line = f"{ins.opcode}({operands}) -> {_dtypes(ins)}"
            if ins.opcode == "custom-call":
                target = ins.custom_call_target or "?"
                line = f"custom-call {target}({operands}) -> {_dtypes(ins)}"
                gemm = ins.backend_config.get("gemm_backend_config")
                if gemm:
                    line += f" epilogue={gemm.get('epilogue', 'DEFAULT')} damax={gemm.get('damax_output', False)}"
            elif ins.opcode == "fusion":
                bc = ins.backend_config
                backend = (bc.get("fusion_backend_config") or (bc if "kind" in bc else {})).get("kind")
                kind = f"{ins.fusion_kind or '?'}" + (f" {backend}" if backend else "")
                line = f"fusion {kind} [{', '.join(_fused_ops(module, ins))}]({operands}) -> {_dtypes(ins)}"
            elif ins.opcode in ("call", "async-start", "while", "conditional"):
                todo += [module.computations[n] for n in ins.called if n in module.computations]
                continue
            out.append(line)
    return sorted(out)


def _merged(good: list[Step], bad: list[Step]) -> list[tuple[Step | None, Step | None]]:
    """The two pass timelines merged in order: (good step, bad step), None where a version did not dump that pass.

    XLA dumps a pass only when it changed the module, so a pass missing on one
    side ran there without changing anything (or does not exist in that version).
    """
    import difflib as _difflib

    def keyed(seq):
        counts: Counter = Counter()
        out = []
        for s in seq:
            k = (s.pipeline, s.name)
            out.append((*k, counts[k]))
            counts[k] += 1
        return out

    kg, kb = keyed(good), keyed(bad)
    merged: list[tuple[Step | None, Step | None]] = []
    for op, g0, g1, b0, b1 in _difflib.SequenceMatcher(a=kg, b=kb, autojunk=False).get_opcodes():
        if op == "equal":
            merged += list(zip(good[g0:g1], bad[b0:b1]))
        else:
            merged += [(s, None) for s in good[g0:g1]] + [(None, s) for s in bad[b0:b1]]
    return merged


def first_divergence(good: list[Step], bad: list[Step], good_version: str, bad_version: str) -> Divergence:
    """Walk the merged timelines; the first pass after which the two modules' structures differ."""
    cache: dict[Path, list[str]] = {}

    def struct(s: Step) -> list[str]:
        if s.path not in cache:
            cache[s.path] = structure(s.path.read_text(errors="replace"))
        return cache[s.path]

    res = Divergence(good_version, bad_version)
    if not good or not bad:
        res.message = f"no per-pass dumps from jax {good_version if not good else bad_version}"
        return res
    state_g, state_b = struct(good[0]), struct(bad[0])
    file_g, file_b = good[0].path, bad[0].path
    if state_g != state_b:
        res.pipeline, res.pass_name = good[0].pipeline, "(input: the HLO before the first pass)"
        res.after_good, res.after_bad = state_g, state_b
        res.hlo_good, res.hlo_bad = entry_excerpt(file_g), entry_excerpt(file_b)
        res.message = "the modules differ before XLA's first pass (JAX lowers the program differently)"
        return res
    for g, b in _merged(good[1:], bad[1:]):
        before = state_g
        if g is not None:
            state_g, file_g = struct(g), g.path
        if b is not None:
            state_b, file_b = struct(b), b.path
        if state_g != state_b:
            step = g or b
            assert step is not None  # _merged pairs never hold two Nones
            res.pipeline, res.pass_name = step.pipeline, step.name
            if g is None or b is None:
                res.changed_in = bad_version if g is None else good_version
            res.before, res.after_good, res.after_bad = before, state_g, state_b
            res.hlo_good, res.hlo_bad = entry_excerpt(file_g), entry_excerpt(file_b)
            return res
    res.message = "every pass leaves the same structure in both versions"
    return res


@dataclass
class Run:
    """One version's compilation of the minimal repro with per-pass dumps."""

    version: str
    steps: list[Step]
    before_hlo: str  # the module before optimizations
    optimized_hlo: str
    printed: str  # what the repro printed (its gemm and fusion lines)


def _read_last(dump_root: Path, suffix: str) -> str:
    files = sorted(dump_root.rglob(f"module_*{suffix}"), key=lambda p: p.name)
    return files[-1].read_text(errors="replace") if files else ""


def run_repro(script: str, python: str, dump_root: Path, version: str, pass_dumps: bool = True,
              timeout: float = 600) -> Run:
    """Run the minimal repro `script` with `python` in a clean interpreter (-I: no checkout on sys.path, no
    PYTHONPATH), from `dump_root`, with XLA's per-pass dumps under it."""
    dump_root.mkdir(parents=True, exist_ok=True)
    path = dump_root / "repro.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS", "VIRTUAL_ENV")}
    if pass_dumps:
        env["XLA_FLAGS"] = "--xla_dump_hlo_pass_re=.*"
    env["TMPDIR"] = str(dump_root)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([python, "-I", str(path)], capture_output=True, text=True, env=env, cwd=str(dump_root),
                          stdin=subprocess.DEVNULL,
                          timeout=timeout)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"the repro failed on jax {version} ({python}): {tail}")
    return Run(version, steps(dump_root), _read_last(dump_root, ".before_optimizations.txt"),
               _read_last(dump_root, "gpu_after_optimizations.txt"), proc.stdout)
