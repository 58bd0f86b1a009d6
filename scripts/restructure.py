#!/usr/bin/env python3
"""Move fp8-check's code to one name and stage folders: `harness/<module>` -> `harness/fp8_check/<stage>/<module>`.

Before: the code lives in `harness/` and is imported as `fp8_check` through a committed link
(`packaging/editable/fp8_check`) and a hatch `sources` mapping. After: the folder `harness/fp8_check/`
*is* the package (hatch's ordinary `packages = ["harness/fp8_check"]`), its folders are the stages
declared in `harness/fp8_check/stages.py`, and `tests/test_layers.py` enforces their order.

What it does, in order (docs/layout.md):
1. refuses when a module under harness/ is not in MOVES (add one line to MOVES and run again);
2. rewrites every reference in the repository's tracked text files: imports in all forms (a
   `from fp8_check.pipeline import golden, cost` whose names go to different stages is split),
   dotted names in strings (mock patches, YAML `callable:`/`args:`, `python -m`, entry points),
   file paths `harness/x/y.py` and path constructions `"harness" / "x" / "y.py"`;
3. `git mv`s every file, writes the stage folders' `__init__.py`, `stages.py` and tests/test_layers.py;
4. applies PATCHES (exact edits where a file finds its data or the checkout by its depth), drops
   packaging/ and the hatch mapping, and fixes scripts/gpu_session.sh.

Idempotent: a second run changes nothing. Run from anywhere:

    python3 scripts/restructure.py             # apply; prints what could not be rewritten
    python3 scripts/restructure.py --dry-run   # print the plan, change nothing
    python3 scripts/restructure.py --check     # exit 1 if anything of the old layout remains
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent / "restructure"
PKG = "fp8_check"
SRC = "harness"  # the top-level folder the project keeps
NEW_ROOT = f"{SRC}/{PKG}"

# old path under harness/ -> new path under harness/fp8_check/ (one line per module; a module another
# branch adds needs one line here). `-` as the new path: the file is removed (its role taken by stages.py).
MOVES_TABLE = """
__init__.py                   __init__.py
platforms/__init__.py         platforms/__init__.py
platforms/amd.py              platforms/amd.py
platforms/base.py             platforms/base.py
platforms/nvidia.py           platforms/nvidia.py
platforms/standins.py         platforms/standins.py
errors.py                     core/errors.py
dtypes.py                     core/dtypes.py
about.py                      core/about.py
pipeline/names.py             core/names.py
pipeline/safe_yaml.py         core/safe_yaml.py
pipeline/typed.py             core/typed.py
pipeline/outputs.py           core/outputs.py
pipeline/aot.py               worker/aot.py
pipeline/device_view.py       worker/device_view.py
pipeline/worker_guard.py      worker/worker_guard.py
pipeline/worker.py            worker/worker.py
targets.py                    targets/__init__.py
layers/__init__.py            models/__init__.py
layers/decoder.py             models/decoder.py
layers/flax_fp8.py            models/flax_fp8.py
layers/maxtext_llama.py       models/maxtext_llama.py
layers/sharded.py             models/sharded.py
pipeline/case_model.py        cases/case_model.py
pipeline/requirement_sets.py  cases/requirement_sets.py
pipeline/cases.py             cases/cases.py
pipeline/sharded_cases.py     cases/sharded_cases.py
pipeline/user_modules.py      cases/user_modules.py
pipeline/source.py            cases/source.py
pipeline/kinds/__init__.py    cases/kinds/__init__.py
pipeline/kinds/block_scaled.py  cases/kinds/block_scaled.py
pipeline/kinds/pattern.py     cases/kinds/pattern.py
pipeline/kinds/python.py      cases/kinds/python.py
pipeline/render.py            compile/render.py
pipeline/compile.py           compile/compile.py
pipeline/cache.py             compile/cache.py
pipeline/pool.py              compile/pool.py
pipeline/sharing.py           compile/sharing.py
export.py                     compile/export.py
check_process.py              compile/check_process.py
pipeline/hlo.py               signature/hlo.py
pipeline/constants.py         signature/constants.py
pipeline/signature.py         signature/signature.py
pipeline/signature_types.py   signature/signature_types.py
pipeline/attribution.py       signature/attribution.py
pipeline/collectives.py       signature/collectives.py
pipeline/coverage.py          signature/coverage.py
pipeline/filecheck.py         signature/filecheck.py
pipeline/identity.py          signature/identity.py
pipeline/cost.py              cost/cost.py
pipeline/cost_delta.py        cost/cost_delta.py
pipeline/cost_engine.py       cost/cost_engine.py
pipeline/cost_pairs.py        cost/cost_pairs.py
pipeline/cost_policy.py       cost/cost_policy.py
pipeline/cost_rates.py        cost/cost_rates.py
pipeline/cost_table.py        cost/cost_table.py
outcome.py                    verdict/outcome.py
verdict.py                    verdict/verdict.py
verdict_rules.py              verdict/verdict_rules.py
collective_rules.py           verdict/collective_rules.py
pipeline/golden.py            verdict/golden.py
pipeline/comparator.py        verdict/comparator.py
pipeline/golden_source.py     verdict/golden_source.py
pipeline/contract.py          verdict/contract.py
pipeline/contract_judge.py    verdict/contract_judge.py
pipeline/layer_rules.py       verdict/layer_rules.py
pipeline/canary.py            verdict/canary.py
versions/__init__.py          versions/__init__.py
versions/releases.py          versions/releases.py
versions/envs.py              versions/envs.py
versions/requirements.py      versions/requirements.py
versions/uvbin.py             versions/uvbin.py
versions/wheels.py            versions/wheels.py
versions/shared_xla.py        versions/shared_xla.py
upstream/xla_commits.py       versions/xla_commits.py
other_environments.py         versions/other_environments.py
requirement_envs.py           versions/requirement_envs.py
pipeline/runner.py            run/runner.py
pipeline/results.py           run/results.py
selection.py                  run/selection.py
target_check.py               run/target_check.py
target_check_cli.py           run/target_check_cli.py
versions/matrix_document.py   matrix/matrix_document.py
versions/matrix_view.py       matrix/matrix_view.py
versions/news.py              matrix/news.py
versions/goldens.py           matrix/goldens.py
upstream/__init__.py          upstream/__init__.py
versions/bisect.py            upstream/bisect.py
upstream/explain.py           upstream/explain.py
upstream/issue.py             upstream/issue.py
upstream/passes.py            upstream/passes.py
upstream/reduce.py            upstream/reduce.py
upstream/repro.py             upstream/repro.py
upstream/xla_test.py          upstream/xla_test.py
report/__init__.py            report/__init__.py
report/changes.py             report/changes.py
report/diffs.py               report/diffs.py
report/github.py              report/github.py
report/hlo_text.py            report/hlo_text.py
report/issue.py               report/issue.py
report/issue_filing.py        report/issue_filing.py
report/markup.py              report/markup.py
report/model.py               report/model.py
report/page.py                report/page.py
report/terminal.py            report/terminal.py
gpu/__init__.py               gpu/__init__.py
gpu/block_numerics.py         gpu/block_numerics.py
gpu/calibrate.py              gpu/calibrate.py
gpu/capture.py                gpu/capture.py
gpu/fidelity.py               gpu/fidelity.py
gpu/numerics.py               gpu/numerics.py
gpu/number_formats.py         gpu/number_formats.py
gpu/pattern_numerics.py       gpu/pattern_numerics.py
gpu/session.py                gpu/session.py
api.py                        api.py
cli.py                        cli/cli.py
commands.py                   cli/commands.py
check.py                      cli/check.py
scaffold.py                   cli/scaffold.py
pytest_plugin.py              cli/pytest_plugin.py
versions/matrix.py            cli/matrix.py
pipeline/__init__.py          -
"""

# Data next to the code: a folder (trailing /) or a file, old -> new (under harness/ and harness/fp8_check/).
DATA_TABLE = """
templates/                       templates/
targets/                         targets/
upstream/xla_commits.json        versions/xla_commits.json
layers/maxtext-requirements.txt  models/maxtext-requirements.txt
"""

# Folders of the old layout as a whole (for paths like `harness/layers/` in prose); pipeline/ has no one home.
OLD_DIRS = {"layers/": "models/", "pipeline/kinds/": "cases/kinds/", "platforms/": "platforms/", "versions/": "versions/",
            "upstream/": "upstream/", "report/": "report/", "gpu/": "gpu/", "templates/": "templates/", "targets/": "targets/"}


def _table(text: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for line in text.strip().splitlines():
        old, new = line.split()
        out[old] = None if new == "-" else new
    return out


MOVES = _table(MOVES_TABLE)
DATA = _table(DATA_TABLE)

# Exact edits after the move, in new paths: (file, old text, new text). A file that finds its data, the
# checkout or the worker's sources by how deep it sits. Each must apply, or be applied already.
PATCHES: list[tuple[str, str, str]] = [
    ("compile/compile.py", "REPO_ROOT = Path(__file__).resolve().parent.parent.parent\n",
     "REPO_ROOT = Path(__file__).resolve().parents[3]\n"),
    ("compile/compile.py", "if (REPO_ROOT / \"pyproject.toml\").is_file() and PACKAGE_DIR == (REPO_ROOT / PACKAGE).resolve():\n        return REPO_ROOT\n",
     "if (REPO_ROOT / \"pyproject.toml\").is_file() and PACKAGE_DIR == (REPO_ROOT / \"harness\" / PACKAGE).resolve():\n"
     "        return REPO_ROOT / \"harness\"\n"),
    ("compile/compile.py", 'f"{PACKAGE}.pipeline.worker"', 'f"{PACKAGE}.worker.worker"'),
    ("compile/cache.py", "_HERE = Path(__file__).resolve().parent\n",
     "_HERE = Path(__file__).resolve().parent.parent / \"worker\"  # the worker's sources\n"),
    ("compile/render.py", '(Path(__file__).parent / "device_view.py").read_text() + "\\n\\n" + (Path(__file__).parent / "aot.py").read_text()',
     '(_WORKER / "device_view.py").read_text() + "\\n\\n" + (_WORKER / "aot.py").read_text()'),
    ("compile/render.py", "\n\ndef repro_script(", "\n\n_WORKER = Path(__file__).resolve().parent.parent / \"worker\"  # the sources a repro embeds\n\n\ndef repro_script("),
    ("cases/user_modules.py", "REPO_ROOT = Path(__file__).resolve().parent.parent.parent\n",
     "REPO_ROOT = Path(__file__).resolve().parents[3]\n"),
    ("core/about.py", "checkout = Path(__file__).resolve().parent.parent\n", "checkout = Path(__file__).resolve().parents[3]\n"),
    ("targets/__init__.py", 'TARGET_DIR = Path(__file__).parent / "targets"', "TARGET_DIR = Path(__file__).parent"),
    ("cases/requirement_sets.py", 'Path(__file__).resolve().parent.parent / "layers" / "maxtext-requirements.txt"',
     'Path(__file__).resolve().parent.parent / "models" / "maxtext-requirements.txt"'),
]
# The same, for files outside the package (paths from the repository root).
REPO_PATCHES: list[tuple[str, str, str]] = [
    ("tests/test_architecture.py", 'PACKAGE = REPO / "harness"  #', 'PACKAGE = REPO / "harness" / "fp8_check"  #'),
    ("tests/test_architecture.py", 'KIND_DIR = PACKAGE / "pipeline" / "kinds"', 'KIND_DIR = PACKAGE / "cases" / "kinds"'),
    ("tests/test_platforms.py", 'SEAM = HARNESS / "platforms"\n', 'SEAM = HARNESS / "fp8_check" / "platforms"\n'),
    ("tests/test_package.py", "{IMPORT_NAME}.cli:main", "{IMPORT_NAME}.cli.cli:main"),
    ("tests/test_package.py", "{IMPORT_NAME}.pytest_plugin", "{IMPORT_NAME}.cli.pytest_plugin"),
    ("tests/test_architecture.py", '"fp8_check.worker.worker_guard", "fp8_check.pipeline",', '"fp8_check.worker.worker_guard", "fp8_check.worker",'),
    (".github/workflows/nightly.yml", "PYTHONPATH: packaging/editable", "PYTHONPATH: harness"),
    (".github/workflows/nightly.yml", "# packaging/editable holds the package under its import name (a link to harness/).",
     "# harness/ holds the package under its import name (harness/fp8_check)."),
]

# test_architecture.py's layer list (a list of module names) gives way to tests/test_layers.py (stage folders).
ARCH_TEST = "tests/test_architecture.py"
ARCH_LAYERS_MARKER = "# ------------------------------------------------------------------ layers"

GPU_SESSION = "scripts/gpu_session.sh"
GPU_SESSION_OLD = re.compile(
    r"# The code lives in harness/ and is imported as fp8_check: .*?\n(?:#.*\n)*"
    r"((?:.*\n)*?)LINKS=.*\ntrap .*\nln -s .*\nexport PYTHONPATH=\"\$LINKS:(\$CHECKOUT[^\"]*)\"\n", re.M)
GPU_SESSION_NEW_COMMENT = "# The package is the folder harness/fp8_check: harness/ on PYTHONPATH makes it importable. Set PYTHON to choose\n# the interpreter.\n"

SUFFIXES = {".py", ".j2", ".yml", ".yaml", ".toml", ".md", ".sh", ".cfg", ".ini", ".txt", ".json", ".html", ".in"}
DATA_PREFIXES = ("tests/fixtures/", "benchmarks/out/", "reports/", "docs/gpu-session/")  # recorded data: code (.py) only
SKIP = {"scripts/restructure.py", "tests/test_restructure.py", "docs/layout.md", "uv.lock"}
SKIP_PREFIXES = ("scripts/restructure/", "packaging/")


# ------------------------------------------------------------------ names


def _dotted(rel: str) -> str:
    parts = [PKG] + rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


OLD_MODULES: dict[str, str | None] = {_dotted(o): (_dotted(n) if n else None) for o, n in MOVES.items()}
NEW_MODULES: set[str] = {_dotted(n) for n in MOVES.values() if n} | {f"{PKG}.stages"}
NEW_PACKAGES: set[str] = {PKG} | {m.rpartition(".")[0] for m in NEW_MODULES if m.count(".") >= 2}
NEW_MODULES |= NEW_PACKAGES
# old module names that are new package names too (verdict.py -> verdict/, cli.py -> cli/): only a name
# found while the old file is still there is an old one
AMBIGUOUS = {o for o, n in OLD_MODULES.items() if o in NEW_PACKAGES and n != o}


def _old_file(module: str) -> Path:
    rel = module.split(".", 1)[1].replace(".", "/") if "." in module else ""
    return ROOT / SRC / (rel + ".py")


def _longest(parts: list[str], names: set[str] | dict) -> int:
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in names:
            return i
    return 0


@dataclass
class Report:
    changed: dict[str, int] = field(default_factory=dict)  # file -> rewrites
    unresolved: dict[str, list[str]] = field(default_factory=dict)  # file -> what could not be rewritten

    def note(self, path: str, what: str) -> None:
        self.unresolved.setdefault(path, [])
        if what not in self.unresolved[path]:
            self.unresolved[path].append(what)


def map_module(name: str, moved: bool) -> str | None:
    """The new name of a dotted name (a module, or an attribute under one); None: no home (an old package)."""
    parts = name.split(".")
    i, j = _longest(parts, OLD_MODULES), _longest(parts, NEW_MODULES)
    if i == 0 or j > i:
        return name
    old = ".".join(parts[:i])
    if j == i and (old not in AMBIGUOUS or moved):
        return name  # the same name in both layouts (a package kept), or already new
    new = OLD_MODULES[old]
    if new is None:
        return None
    return ".".join([new] + parts[i:])


_FROM = re.compile(r"^(?P<indent>[ \t]*)(?P<head>from\s+)(?P<mod>" + PKG + r"(?:\.\w+)*)(?P<mid>\s+import\s+)"
                   r"(?P<names>\([^)]*\)|[^\n#;]*[^\s#;])(?P<tail>[ \t]*(?:#[^\n]*)?)$", re.M)
_TOKEN = re.compile(r"(?<![\w.])" + PKG + r"(?:\.[A-Za-z_]\w*)+")
_PATH = re.compile(r"(?<![\w/.-])" + SRC + r"/(?!" + PKG + r"/)((?:[\w.*-]+/)*[\w.*-]*)")
_INSTALLED = re.compile(r"(?<![\w/.-])" + PKG + r"/((?:[\w.-]+/)*[\w.-]+\.\w+)")
_PATH_EXPR = re.compile(r"([\"'])" + SRC + r"\1((?:\s*/\s*([\"'])[^\"'{}\n]+\3)+)")


def rewrite_from(text: str, moved: bool, path: str, report: Report) -> tuple[str, int]:
    count = 0

    def one(m: re.Match) -> str:
        nonlocal count
        mod, names = m["mod"], m["names"]
        paren = names.startswith("(")
        body = re.sub(r"#[^\n]*", "", names[1:-1] if paren else names)  # comments stay where they are (one group)
        groups: dict[str, list[str]] = {}
        for item in [s.strip() for s in body.split(",") if s.strip()]:
            name, _, alias = item.partition(" as ")
            name, alias = name.strip(), alias.strip()
            full = f"{mod}.{name}"
            if full in OLD_MODULES and OLD_MODULES[full] != full and not (full in AMBIGUOUS and moved):
                new = OLD_MODULES[full]  # an old module: to its stage
                if new is None:
                    report.note(path, f"import of a removed module: {full}")
                    return m.group(0)
                dest, _, leaf = new.rpartition(".")
            else:  # an attribute, or a module of the new layout
                target = map_module(mod, moved)
                if target is None:
                    report.note(path, f"import from a package with no home: from {mod} import {name}")
                    return m.group(0)
                dest, leaf = target, name
            alias = alias or (name if leaf != name else "")
            groups.setdefault(dest, []).append(f"{leaf} as {alias}" if alias else leaf)
        if list(groups) == [mod]:
            return m.group(0)
        count += 1
        if len(groups) == 1 and all(" as " not in n or n in body for n in groups[next(iter(groups))]):
            (dest,) = groups  # only the module moves: the names keep their layout and comments
            return f"{m['indent']}{m['head']}{dest}{m['mid']}{names}{m['tail']}"
        if "#" in names:
            report.note(path, f"import to split, with a comment inside (split by hand): {m.group(0).strip()[:80]}")
            return m.group(0)
        lines = [f"{m['indent']}from {dest} import {', '.join(ns)}{m['tail']}" for dest, ns in groups.items()]  # a noqa for each
        return "\n".join(lines)

    return _FROM.sub(one, text), count


def rewrite_tokens(text: str, moved: bool, path: str, report: Report) -> tuple[str, int]:
    count = 0

    def one(m: re.Match) -> str:
        nonlocal count
        if re.match(r"\s+import\b", text[m.end():m.end() + 12]) and text[max(0, m.start() - 5):m.start()].endswith("from "):
            return m.group(0)  # the module of a `from … import` (rewrite_from's)
        new = map_module(m.group(0), moved)
        if new is None:
            report.note(path, f"dotted name with no home: {m.group(0)}")
            return m.group(0)
        if new != m.group(0):
            count += 1
        return new

    return _TOKEN.sub(one, text), count


def map_path(rel: str) -> str | None:
    """A path under harness/ (old layout) -> its path under harness/fp8_check/; None: no single home."""
    if rel in MOVES:
        return MOVES[rel]
    for old, new in sorted(DATA.items(), key=lambda kv: -len(kv[0])):
        if rel == old or (old.endswith("/") and (rel.startswith(old) or rel + "/" == old)):
            return (new + rel[len(old):]) if rel.startswith(old) else new.rstrip("/")
    for old, new in sorted(OLD_DIRS.items(), key=lambda kv: -len(kv[0])):
        if rel.startswith(old) or rel + "/" == old:
            rest = rel[len(old):] if rel.startswith(old) else ""
            if rest.endswith(".py") and "*" not in rest:
                return None  # a module not in MOVES
            return new + rest if rel.startswith(old) else new.rstrip("/")
    return None


def rewrite_paths(text: str, path: str, report: Report) -> tuple[str, int]:
    count = 0

    def one(m: re.Match) -> str:
        nonlocal count
        rel = m.group(1)
        if not rel or rel.startswith("fp8_check"):
            return m.group(0)
        trail = ""
        while rel and rel[-1] in ".-" and not rel.endswith((".py", ".j2", ".txt", ".json", ".txtpb", ".yaml")):
            trail, rel = rel[-1] + trail, rel[:-1]  # a sentence's full stop
        new = map_path(rel)
        if new is None:
            report.note(path, f"path with no single home: {SRC}/{rel}")
            return m.group(0)
        count += 1
        return f"{NEW_ROOT}/{new}{trail}"

    text = _PATH.sub(one, text)

    def installed(m: re.Match) -> str:  # a path inside the wheel or site-packages: fp8_check/pipeline/worker.py
        nonlocal count
        rel = m.group(1)
        if rel not in MOVES and not any(rel.startswith(o) for o in DATA if o.endswith("/")) and rel not in DATA:
            return m.group(0)
        new = map_path(rel)
        if new is None or new == rel:
            return m.group(0)
        count += 1
        return f"{PKG}/{new}"

    return _INSTALLED.sub(installed, text), count


def rewrite_path_exprs(text: str, path: str, report: Report) -> tuple[str, int]:
    """`REPO / "harness" / "targets" / "h100.txtpb"` -> `REPO / "harness" / "fp8_check" / "targets" / "h100.txtpb"`."""
    count = 0

    def one(m: re.Match) -> str:
        nonlocal count
        q = m.group(1)
        segs = re.findall(r"([\"'])([^\"'{}\n]+)\1", m.group(2))
        parts = [s for _, s in segs]
        if parts[0] == PKG:
            return m.group(0)
        rel = "/".join(parts)
        new = map_path(rel) if rel + ".py" not in MOVES else None
        if new is None:
            new = map_path(rel + "/")
        if new is None:
            report.note(path, f"path expression with no single home: {m.group(0)}")
            return m.group(0)
        count += 1
        return " / ".join(f"{q}{s}{q}" for s in [SRC, PKG, *new.rstrip("/").split("/")])

    return _PATH_EXPR.sub(one, text), count


def rewrite_text(text: str, path: str, moved: bool, report: Report) -> str:
    n = 0
    text, k = rewrite_from(text, moved, path, report)
    n += k
    text, k = rewrite_tokens(text, moved, path, report)
    n += k
    text, k = rewrite_paths(text, path, report)
    n += k
    if path.endswith(".py"):
        text, k = rewrite_path_exprs(text, path, report)
        n += k
    if n:
        report.changed[path] = report.changed.get(path, 0) + n
    return text


# ------------------------------------------------------------------ the tree


def git(*args: str, check: bool = True) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=check).stdout


def text_files() -> list[str]:
    out = []
    for rel in git("ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        if not rel or rel in SKIP or rel.startswith(SKIP_PREFIXES):
            continue
        if rel.startswith(DATA_PREFIXES) and not rel.endswith(".py"):
            continue
        p = ROOT / rel
        if Path(rel).suffix in SUFFIXES and p.is_file() and not p.is_symlink():
            out.append(rel)
    return out


def old_layout_files() -> list[str]:
    """Files under harness/ outside harness/fp8_check/ (the old layout), caches aside."""
    base = ROOT / SRC
    return sorted(str(p.relative_to(base)) for p in base.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not str(p.relative_to(base)).startswith(PKG + "/"))


def unknown_files(files: list[str]) -> list[str]:
    return [f for f in files if f not in MOVES and not any(f == o or (o.endswith("/") and f.startswith(o)) for o in DATA)]


def moves_plan(files: list[str]) -> list[tuple[str, str | None]]:
    plan: list[tuple[str, str | None]] = []
    for f in files:
        new = MOVES.get(f) if f in MOVES else map_path(f)
        plan.append((f, new))
    # data first: targets.py becomes the __init__.py of the folder its data moves into
    return sorted(plan, key=lambda fn: fn[0].endswith(".py"))


def stage_inits() -> dict[str, str]:
    sys.path.insert(0, str(HERE))
    from stages import STAGES  # noqa: E402 (the declaration shipped next to this script)

    sys.path.pop(0)
    out = {}
    for name, purpose in STAGES:
        if (ROOT / NEW_ROOT / name).is_dir() or any((n or "").startswith(name + "/") for n in MOVES.values()):
            out[f"{NEW_ROOT}/{name}/__init__.py"] = f'"""{purpose[0].upper() + purpose[1:]} (stage `{name}`, fp8_check/stages.py)."""\n'
    return out


def apply_patches(report: Report, dry: bool) -> None:
    for rel, old, new in [(f"{NEW_ROOT}/{f}", o, n) for f, o, n in PATCHES] + REPO_PATCHES:
        p = ROOT / rel
        if not p.is_file():
            report.note(rel, "patch target missing")
            continue
        text = p.read_text()
        applied = new in text if old in new else (old not in text and new in text)
        if applied:
            continue
        if old in text:
            if not dry:
                p.write_text(text.replace(old, new))
            report.changed[rel] = report.changed.get(rel, 0) + 1
        else:
            report.note(rel, f"patch did not apply (edit by hand): {old.strip()[:70]!r}")


def fix_pyproject(dry: bool, report: Report) -> None:
    p = ROOT / "pyproject.toml"
    text = p.read_text()
    new = re.sub(r"# The code lives in harness/ and is installed as `fp8_check`.*\n", "# The package is the folder harness/fp8_check (docs/layout.md).\n", text)
    new = new.replace('only-include = ["harness"]\nsources = {"harness" = "fp8_check"}\ndev-mode-dirs = ["packaging/editable"]\n',
                      'packages = ["harness/fp8_check"]\n')
    new = new.replace('exclude = ["packaging/editable/fp8_check", ', "exclude = [")
    if "sources = {" in new or "dev-mode-dirs" in new:
        report.note("pyproject.toml", "the hatch mapping is still there (edit by hand)")
    if new != text:
        report.changed["pyproject.toml"] = report.changed.get("pyproject.toml", 0) + 1
        if not dry:
            p.write_text(new)


def fix_gpu_session(dry: bool, report: Report) -> None:
    p = ROOT / GPU_SESSION
    text = p.read_text()
    m = GPU_SESSION_OLD.search(text)
    if not m:
        if "ln -s" in text:
            report.note(GPU_SESSION, "the link block changed: make harness/ the PYTHONPATH entry by hand")
        return
    new = text[:m.start()] + GPU_SESSION_NEW_COMMENT + m.group(1) + f'export PYTHONPATH="$CHECKOUT/harness:{m.group(2)}"\n' + text[m.end():]
    new = new.replace('cannot import fp8_check from $CHECKOUT/harness with', 'cannot import fp8_check from $CHECKOUT/harness/fp8_check with')
    report.changed[GPU_SESSION] = report.changed.get(GPU_SESSION, 0) + 1
    if not dry:
        p.write_text(new)


def cut_arch_layers(dry: bool, report: Report) -> None:
    p = ROOT / ARCH_TEST
    text = p.read_text()
    if ARCH_LAYERS_MARKER not in text:
        return
    head = text[:text.index(ARCH_LAYERS_MARKER)].rstrip() + "\n\n\n# The layer order: tests/test_layers.py, from harness/fp8_check/stages.py.\n"
    report.changed[ARCH_TEST] = report.changed.get(ARCH_TEST, 0) + 1
    if not dry:
        p.write_text(head)


def apply(dry: bool) -> Report:
    report = Report()
    olds = old_layout_files()
    unknown = unknown_files(olds)
    if unknown:
        sys.exit("restructure: not in MOVES (add one line per module to MOVES_TABLE in scripts/restructure.py, then run again):\n  "
                 + "\n  ".join(f"{SRC}/{u}" for u in unknown))
    moved = not olds
    # 1. references, while the old files still tell an old name from a new one
    for rel in text_files():
        p = ROOT / rel
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite_text(text, rel, moved, report)
        if new != text and not dry:
            p.write_text(new)
    # 2. the files
    plan = moves_plan(olds)
    for old, new in plan:
        src = f"{SRC}/{old}"
        if dry:
            print(f"move {src} -> {NEW_ROOT + '/' + new if new else '(removed)'}")
            continue
        tracked = bool(git("ls-files", src).strip())
        if new is None:
            (git("rm", "-q", "-f", src) if tracked else (ROOT / src).unlink())
            continue
        dest = ROOT / NEW_ROOT / new
        dest.parent.mkdir(parents=True, exist_ok=True)
        if tracked:
            git("mv", src, f"{NEW_ROOT}/{new}")
        else:
            shutil.move(str(ROOT / src), dest)
    if not dry:  # the old folders, now empty but for caches
        for d in (ROOT / SRC).iterdir():
            if d.is_dir() and d.name != PKG and not any("__pycache__" not in f.parts for f in d.rglob("*") if f.is_file()):
                shutil.rmtree(d)
    # 3. what the new layout adds
    adds = {**stage_inits(), f"{NEW_ROOT}/stages.py": (HERE / "stages.py").read_text(),
            "tests/test_layers.py": (HERE / "test_layers.py").read_text()}
    for rel, text in adds.items():
        p = ROOT / rel
        if p.exists():
            continue
        if dry:
            print(f"write {rel}")
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        git("add", rel)
    # 4. edits by hand, made once
    if not dry:
        apply_patches(report, dry)
        cut_arch_layers(dry, report)
    fix_pyproject(dry, report)
    fix_gpu_session(dry, report)
    if (ROOT / "packaging").exists():
        if dry:
            print("remove packaging/ (the link and its README)")
        else:
            git("rm", "-r", "-q", "-f", "packaging", check=False)
            shutil.rmtree(ROOT / "packaging", ignore_errors=True)
    return report


def check() -> list[str]:
    """What of the old layout remains (empty: none)."""
    problems = [f"old layout: {SRC}/{f}" for f in old_layout_files()]
    if (ROOT / "packaging" / "editable").exists():
        problems.append("packaging/editable is still there")
    text = (ROOT / "pyproject.toml").read_text()
    if "sources = {" in text or "dev-mode-dirs" in text:
        problems.append("pyproject.toml still maps a folder to the package")
    if not (ROOT / NEW_ROOT / "__init__.py").is_file():
        problems.append(f"{NEW_ROOT}/__init__.py is missing")
    report = Report()
    for rel in text_files():
        try:
            text = (ROOT / rel).read_text()
        except UnicodeDecodeError:
            continue
        if rewrite_text(text, rel, True, report) != text:
            problems.append(f"old references in {rel}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if anything of the old layout remains")
    ap.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    args = ap.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or "restructure: the new layout, nothing of the old one")
        return 1 if problems else 0
    report = apply(args.dry_run)
    for rel, n in sorted(report.changed.items()):
        print(f"{'would rewrite' if args.dry_run else 'rewrote'} {rel} ({n})")
    if report.unresolved:
        print("\nnot rewritten (prose or code to edit by hand):")
        for rel, whats in sorted(report.unresolved.items()):
            for w in whats:
                print(f"  {rel}: {w}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
