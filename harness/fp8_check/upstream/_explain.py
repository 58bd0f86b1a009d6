"""`fp8-check bisect ... --explain`: everything an XLA developer needs about one change between two JAX versions.

For a case whose signature differs between the last good and the first bad JAX
version, `investigate` runs the minimal repro (fp8_check.upstream._repro) in both
versions' environments, in a clean interpreter, with per-pass dumps, and gathers:
- the XLA commit range (the shipped table, fp8_check.versions.xla_commits);
- the first diverging pass (fp8_check.upstream._passes);
- whether the repro reproduces the harness's signature on both versions;
- the XLA-style FileCheck test and whether it passes on good and fails on bad
  (fp8_check.upstream._xla_test).
`Explanation` is saved as JSON (`reports/upstream/<case>.<target>.<profile>.json`)
so the report's issue body can include it (`markdown()`), and read back with `load`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from fp8_check.core import UnsafeName, check
from fp8_check.platforms import Platform
from fp8_check.signature import extract
from fp8_check.targets import platform_of
from fp8_check.upstream._passes import Divergence, Run, clean_line, first_divergence, run_repro
from fp8_check.upstream._repro import minimal
from fp8_check.upstream._xla_test import Verification, export, verify
from fp8_check.verdict import compare
from fp8_check.versions import Manager, XlaRange, xla_range

DEFAULT_DIR = Path("reports") / "upstream"


@dataclass
class Explanation:
    case: str
    target: str
    profile: str
    good: str
    bad: str
    xla_good: str | None
    xla_bad: str | None
    divergence: Divergence
    repro: str  # the minimal repro, pinned to the bad version
    printed: dict[str, str] = field(default_factory=dict)  # version -> what the repro printed
    reproduces: dict[str, bool] = field(default_factory=dict)  # version -> repro's signature == the harness's
    diffs: list[str] = field(default_factory=list)  # signature field diffs, expected: good, found: bad (repro's)
    xla_test: str = ""
    filecheck_good: list[str] = field(default_factory=list)  # FileCheck errors on good (empty: passes)
    filecheck_bad: list[str] = field(default_factory=list)

    @property
    def xla_range(self) -> XlaRange:
        return XlaRange(self.good, self.bad, self.xla_good, self.xla_bad)

    @property
    def verification(self) -> Verification:  # (the field `xla_test` shadows the module in this class)
        return Verification(self.filecheck_good, self.filecheck_bad)

    @property
    def repro_lines(self) -> int:
        return self.repro.count("\n")

    def text(self) -> str:
        """What `bisect --explain` prints."""
        lines = [f"first bad version: jax {self.bad} (last good: jax {self.good})",
                 self.xla_range.text(), self.divergence.text(),
                 f"minimal repro: {self.repro_lines} lines; reproduces the harness's signature: "
                 + (", ".join(f"jax {v}: {'yes' if ok else 'NO'}" for v, ok in self.reproduces.items()) or "not checked"),
                 "XLA-style test: " + self.verification.text()]
        return "\n".join(lines)

    @property
    def target_platform(self) -> Platform:
        return platform_of(self.target)

    def repro_markdown(self) -> str:
        """The issue body's reproducer section: the minimal repro and what it prints on both versions."""
        ok = ", ".join(f"jax {v}: {'yes' if r else '**no**'}" for v, r in self.reproduces.items()) or "(not checked)"
        printed = "\n\n".join(f"It prints on jax {v}:\n\n" + _fence(_strip(t)) for v, t in self.printed.items())
        return "\n".join([
            f"### Minimal reproducer ({self.repro_lines} lines, no fp8-check code)", "",
            f"`pip install \"{self.target_platform.install(self.bad)}\"`, then `python repro.py` compiles for {self.target.upper()} without "
            f"a GPU and prints the gemm and fusion kernels (`--hlo`: the whole optimized module). Run in a clean "
            f"environment, it reproduces fp8-check's fusion signature on {ok}.", "",
            _fence(self.repro, "python"), "", printed, ""])

    def analysis_markdown(self) -> str:
        """The issue body's analysis: first bad version and XLA range, first diverging pass, the XLA test."""
        return "\n".join([
            "### First bad version and XLA commit range", "",
            f"- Last good: jax {self.good} (XLA `{(self.xla_good or 'unknown')[:12]}`); first bad: jax {self.bad} "
            f"(XLA `{(self.xla_bad or 'unknown')[:12]}`), found by `fp8-check bisect`.",
            f"- Commits to look at: {self.xla_range.markdown()}.",
            *(["- Signature change: " + "; ".join(f"`{d}`" for d in self.diffs)] if self.diffs else []), "",
            "### First diverging XLA pass", "", self.divergence.markdown(), "",
            "### XLA test", "",
            f"For `xla/service/gpu/transforms/gemm_rewriter_fp8_test.cc`: the module before optimizations, with FileCheck "
            f"lines derived from the jax {self.good} signature. {self.verification.text()}.", "",
            _fence(self.xla_test, "c++"), ""])

    def markdown(self) -> str:
        return self.repro_markdown() + "\n" + self.analysis_markdown()


def _strip(text: str) -> str:
    """The repro's kernel lines, without metadata and frontend attributes, backend_config cut to the gemm's epilogue
    and damax flag, and without JAX's own messages."""
    out = []
    for line in text.splitlines():
        if not line.lstrip().startswith(("%", "ROOT")):
            continue
        line = clean_line(line)
        out.append(line.strip())
    return "\n".join(out)


def _fence(text: str, lang: str = "") -> str:
    ticks = "```"
    while ticks in text:
        ticks += "`"
    return f"{ticks}{lang}\n{text.rstrip()}\n{ticks}"


def investigate(case, target, profile, good: str, bad: str, expected: dict[str, dict] | None = None,
                manager=None, work: Path | None = None, log=print) -> Explanation:
    """Run the minimal repro on `good` and `bad` (their environments) and explain the change.

    `expected`: version -> the harness's signature dict there (from bisect), to check the repro against.
    """
    if work is None:  # the per-pass dumps are read here and then removed
        with tempfile.TemporaryDirectory(prefix="fp8-check-explain-") as scratch:
            return investigate(case, target, profile, good, bad, expected, manager, Path(scratch), log)
    manager = manager or Manager()
    root = Path(work)
    runs: dict[str, Run] = {}
    clean = Manager(manager.root, manager.python, reuse_self=False)
    for version in (good, bad):
        env = manager.ensure(version)
        if env.info.get("own_environment"):
            # fp8-check's own environment has the checkout on sys.path (editable install): use a JAX-only one
            env = clean.ensure(version)
        log(f"  jax {version:<9} compiling the minimal repro with per-pass dumps ({env.python})")
        runs[version] = run_repro(minimal(case, target, profile, version), str(env.python), root / version, version)
    sigs = {v: extract(r.optimized_hlo) for v, r in runs.items()}
    known = expected or {}
    reproduces = {v: not compare(known[v], sigs[v].to_dict()) for v in runs if known.get(v)}
    diffs = [str(d) for d in compare(sigs[good].to_dict(), sigs[bad].to_dict())]
    rng = xla_range(good, bad)
    ver = verify(sigs[good], runs[good].optimized_hlo, runs[bad].optimized_hlo)
    return Explanation(
        case.id, target.name, profile.name, good, bad, rng.good, rng.bad,
        first_divergence(runs[good].steps, runs[bad].steps, good, bad),
        minimal(case, target, profile, bad), {v: r.printed for v, r in runs.items()}, reproduces, diffs,
        export(case.id, runs[good].before_hlo, sigs[good], good, bad, target.name, profile.compiler_options),
        ver.good_errors, ver.bad_errors)


def path_for(directory: Path, case: str, target: str, profile: str) -> Path:
    return Path(directory) / (f"{check('case', case)}.{check('target', target)}."
                              f"{check('profile', profile)}.json")


def save(exp: Explanation, directory: Path = DEFAULT_DIR) -> Path:
    path = path_for(directory, exp.case, exp.target, exp.profile)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(exp), indent=1) + "\n")
    os.replace(tmp, path)
    return path


def load(path: Path) -> Explanation:
    raw = json.loads(Path(path).read_text())
    raw["divergence"] = Divergence(**raw["divergence"])
    return Explanation(**raw)


def find(case: str, target: str, profile: str, versions: tuple[str, str], directory: Path | None = None) -> Explanation | None:
    """The saved explanation for this case/target/profile whose good..bad pair is `versions` (either order)."""
    directory = Path(directory or os.environ.get("FP8_CHECK_UPSTREAM_DIR") or DEFAULT_DIR)
    try:
        path = path_for(directory, case, target, profile)
    except UnsafeName:  # a name read from a results file that no saved explanation can have
        return None
    if not path.is_file():
        return None
    try:
        exp = load(path)
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return exp if {exp.good, exp.bad} == set(versions) else None
