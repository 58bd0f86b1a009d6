"""The docs site builds with warnings as errors, its generated pages come from the code, and the
code examples of README.md and docs/*.md run.

Every fenced block in `yaml`, `python` or `sh` is an example. What the test does with it:

- `python`: run as a script (in a scratch directory, with the environment's interpreter);
- `sh`: every line run with bash in a scratch directory holding links to the checkout's `cases/`
  and `goldens/` (`fp8-check` is the environment's); each must exit 0;
- `yaml`: a case file (`cases:`, or a fragment of one: a list of `- id:` items) is loaded and
  validated by `fp8-check list` and, in the slow part, compiled deviceless by `fp8-check run`
  (no result UNRESOLVED); a GitHub workflow (`jobs:`) is checked by actionlint.

Comment lines at the top of a block change that (the reader sees them; they say why):

    # example: skip REASON          not run, the test is skipped with REASON (a GPU, the network, ...);
    #   more of the reason          (a line indented by three spaces continues it)
    # example: with PATH            first copy PATH (in the checkout) into the scratch directory
    # example: file NAME            the block is written to NAME in the scratch directory, not run
    # example: run COMMAND          then COMMAND runs there (bash; several allowed), exit 0 required
    # example: output-of COMMAND    every line of the block must appear in COMMAND's output
    # example: fails-with TEXT      (python) the script must fail, TEXT in its error output
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from ..conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LANGS = ("yaml", "python", "sh")
FENCE = re.compile(r"^(`{3,})(\S*)[ \t]*$")  # a longer fence (````markdown) holds ``` blocks that are text
MARK = re.compile(r"^#\s*example:\s*(skip|with|file|run|output-of|fails-with)\b\s*[—-]?\s*(.*)$")
# Commands whose examples compile (worker start, XLA): the slow part.
COMPILING = re.compile(r"\bfp8-check\s+(run|show|check|bless|matrix|bisect|reduce)\b|\bpython\b|\bpytest\b")
TIMEOUT = 600


@dataclass
class Example:
    page: str
    line: int
    lang: str
    body: str  # without the marker lines
    marks: list[tuple[str, str]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def mark(self, key: str) -> list[str]:
        return [v for k, v in self.marks if k == key]


def examples(paths=PAGES, root: Path = REPO) -> list[Example]:
    out = []
    for path in paths:
        lines = path.read_text().split("\n")
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            j = i + 1
            while j < len(lines) and lines[j].strip() != m.group(1):
                j += 1
            lang, block = m.group(2), lines[i + 1:j]
            if lang in LANGS:
                marks, k = [], 0
                while k < len(block):
                    mk = MARK.match(block[k].strip())
                    if mk:
                        marks.append((mk.group(1), mk.group(2).strip()))
                    elif block[k].startswith("#   ") and marks and marks[-1][0] == "skip":
                        marks[-1] = ("skip", marks[-1][1] + " " + block[k][2:].strip())  # a reason on two lines
                    else:
                        break
                    k += 1
                out.append(Example(str(path.relative_to(root)), i + 1, lang, "\n".join(block[k:]) + "\n", marks))
            i = j + 1
    return out


def _slow(ex: Example) -> bool:
    if ex.mark("skip"):
        return False
    if ex.lang == "python":
        return True
    commands = ex.mark("run") + ex.mark("output-of") + ([ex.body] if ex.lang == "sh" else [])
    return any(COMPILING.search(c) for c in commands) or (ex.lang == "yaml" and _is_cases(ex))


def _params(slow: bool):
    out = []
    for ex in examples():
        if _slow(ex) != slow:
            continue
        out.append(pytest.param(ex, id=ex.id))
    return out


# ------------------------------------------------------------------ running one example


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _scratch(tmp_path: Path) -> Path:
    for name in ("cases", "goldens"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def _bash(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)


def _ok(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def _yaml(ex: Example):
    return yaml.safe_load(textwrap.dedent(ex.body))


def _is_cases(ex: Example) -> bool:
    try:
        doc = _yaml(ex)
    except yaml.YAMLError:
        return False
    return (isinstance(doc, dict) and "cases" in doc) or \
        (isinstance(doc, list) and all(isinstance(x, dict) and "id" in x for x in doc))


def run_example(ex: Example, tmp_path: Path, compile_cases: bool) -> None:
    skip = ex.mark("skip")
    if skip:
        pytest.skip(f"{ex.id}: {skip[0]}")
    cwd = _scratch(tmp_path)
    for rel in ex.mark("with"):
        shutil.copy(REPO / rel, cwd / Path(rel).name)
    files = ex.mark("file")
    assert not any(f.startswith(("cases", "goldens")) for f in files), f"{ex.id}: those folders are the checkout's"
    if files:
        (cwd / files[0]).parent.mkdir(parents=True, exist_ok=True)
        (cwd / files[0]).write_text(ex.body)
    elif ex.lang == "python":
        (cwd / "example.py").write_text(ex.body)
        proc = subprocess.run([sys.executable, "example.py"], cwd=cwd, env=_env(), capture_output=True, text=True,
                              timeout=TIMEOUT)
        for text in ex.mark("fails-with"):
            assert proc.returncode != 0 and text in proc.stderr, f"{ex.id}: expected to fail with {text}\n{proc.stderr[-3000:]}"
        if not ex.mark("fails-with"):
            _ok(proc, ex.id)
    elif ex.lang == "sh":
        for line in ex.body.splitlines():
            cmd = line.split("  #")[0].strip()
            if cmd and not cmd.startswith("#"):
                _ok(_bash(cmd, cwd), f"{ex.id}: {cmd}")
    elif ex.lang == "yaml":
        doc = _yaml(ex)
        if _is_cases(ex):
            text = textwrap.dedent(ex.body) if isinstance(doc, dict) else "cases:\n" + textwrap.dedent(ex.body)
            (cwd / "example_cases.yaml").write_text(text)
            proc = _bash("fp8-check list example_cases.yaml", cwd)
            _ok(proc, f"{ex.id}: fp8-check list")
            if compile_cases:
                results = cwd / "results.json"
                cases = yaml.safe_load(text)["cases"]
                targets = sorted({t for c in cases for t in c.get("targets", [])})  # the targets the cases ask for
                where = f"--target {','.join(targets)} " if targets else ""
                proc = _bash(f"fp8-check run example_cases.yaml {where}--mode deviceless --goldens empty --json {results}", cwd)
                assert proc.returncode in (0, 1), f"{ex.id}: {proc.stderr[-3000:]}"
                outcomes = [r["outcome"] for r in json.loads(results.read_text())["results"]]
                assert outcomes and "UNRESOLVED" not in outcomes, f"{ex.id}: {proc.stdout[-3000:]}"
        elif isinstance(doc, dict) and "jobs" in doc:
            workflow = cwd / ".github" / "workflows" / "example.yml"
            workflow.parent.mkdir(parents=True)
            head = "" if "on" in doc or True in doc else "name: example\non: pull_request\n"
            workflow.write_text(head + textwrap.dedent(ex.body))
            _ok(_bash(f"actionlint -no-color {workflow}", cwd), f"{ex.id}: actionlint")
        else:
            pytest.fail(f"{ex.id}: a yaml example that is neither a case file nor a workflow: "
                        "mark it (# example: file NAME / skip REASON)")
    for cmd in ex.mark("run"):
        _ok(_bash(cmd, cwd), f"{ex.id}: {cmd}")
    for cmd in ex.mark("output-of"):
        proc = _bash(cmd, cwd)
        _ok(proc, f"{ex.id}: {cmd}")
        missing = [x for x in ex.body.splitlines() if x.strip() and x.strip() not in proc.stdout]
        assert not missing, f"{ex.id}: not in the output of `{cmd}`: {missing[:5]}"


@pytest.mark.parametrize("ex", _params(slow=False))
def test_doc_example(ex: Example, tmp_path: Path):
    run_example(ex, tmp_path, compile_cases=False)


@pytest.mark.slow
@pytest.mark.parametrize("ex", _params(slow=True))
def test_doc_example_compiles(ex: Example, tmp_path: Path):
    run_example(ex, tmp_path, compile_cases=True)


def test_the_docs_have_examples_and_every_skip_says_why():
    found = examples()
    assert len([ex for ex in found if not ex.mark("skip")]) >= 10, [ex.id for ex in found]
    for ex in found:
        for reason in ex.mark("skip"):
            assert len(reason) > 15, f"{ex.id}: a skip must say why"


def test_the_readme_keeps_the_two_commands_and_stays_short():
    text = (REPO / "README.md").read_text()
    assert "bash scripts/env.sh fp8-check run" in text and "bash scripts/test.sh" in text
    assert len(text.encode()) < 25_000
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / target).exists(), target


def test_a_marked_block_is_read(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```sh\n# example: skip needs an NVIDIA GPU here\n#   and more words\nfp8-check x\n```\n\n"
                    "```python\n# example: file m.py\n# example: run python -c 'import m'\nX = 1\n```\n")
    (skip, module) = examples([page], root=tmp_path)
    assert skip.mark("skip") == ["needs an NVIDIA GPU here and more words"] and skip.body == "fp8-check x\n"
    assert module.mark("file") == ["m.py"] and module.mark("run") == ["python -c 'import m'"] and module.body == "X = 1\n"


# ------------------------------------------------------------------ the site


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mkdocs_build_strict(tmp_path):
    """The site builds offline with warnings as errors (what CI runs: this test)."""
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-5000:]
    page = (site / "verdicts" / "index.html").read_text()
    assert "generated:" not in page and "gemms[i].epilogue" in page
    assert (site / "benchmarks" / "bench_run" / "index.html").exists()
    assert "fp8-check matrix" in (site / "cli" / "index.html").read_text()


def test_the_verdict_table_covers_every_rule_of_the_code():
    import dataclasses

    from fp8_check.signature._collectives import Collective
    from fp8_check.signature._extract import BlockScaling, Gemm
    from fp8_check.verdict import rules as verdict_rules

    table = _hooks().verdict_rules_markdown()
    for record, cls in (("gemms[i]", Gemm), ("block_scaled", BlockScaling), ("collectives[i]", Collective)):
        for f in dataclasses.fields(cls):
            assert f"`{record}.{f.name.rstrip('_')}`" in table, (record, f.name)
    for key in verdict_rules.FIELD_RULES:
        assert key in table


def test_a_rule_without_a_statement_fails_the_build(monkeypatch):
    from fp8_check.verdict import rules as verdict_rules

    def new_rule(before, after):  # a rule nobody explained (@explained)
        return []

    monkeypatch.setitem(verdict_rules.FIELD_RULES, "cost", new_rule)
    with pytest.raises(ValueError, match="`cost` states nothing"):
        _hooks().verdict_rules_markdown()


def test_an_unknown_generated_block_fails_the_build():
    with pytest.raises(ValueError, match="unknown generated block 'verdict-rulez'"):
        _hooks().expand("x\n<!-- generated: verdict-rulez -->\n", "page.md")


def test_the_rules_table_is_not_retyped():
    # the table lives in the code (@explained) and is generated into docs/verdicts.md: no page or docstring repeats it
    row = re.compile(r"^\|\s*`gemms\[i\]\.epilogue`", re.M)
    for path in [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "harness").rglob("*.py")]:
        assert not row.search(path.read_text()), path
