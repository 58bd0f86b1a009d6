"""Untrusted text escaped wherever fp8-check prints it: a crafted results file / matrix (case id, reason, target,
profile, known-issue fields holding links, images, @mentions, HTML and `::` workflow commands) through
`ci summary` (to stdout and to the summary file), `ci issues` and `report --markdown`. No stdout line starts with
`::` unless fp8-check wrote that command (`::error` annotations, their data escaped); no markup gets through."""

from __future__ import annotations

import json
import re

from fp8_check.cli import main as cli
from fp8_check.matrix import _document as matrix_document
from fp8_check.report._markup import md_inline, no_commands

from ..ci.test_issue_filing import _calls, _gh
from ..conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "results" / "jax-0.12.0.1.json"
EVIL_CASE = "x [click](https://evil.example/a) ![i](https://evil.example/i.png) @octocat <b>b</b> #12"
EVIL_REASON = "boom\n::add-mask::secret\n  ::set-output name=a::b\r::stop-commands::tok\n[l](https://evil.example) @octocat"
EVIL_TARGET = "h100<img src=x>"
EVIL_PROFILE = "cublas](https://evil.example)"


def _crafted(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    for r in doc["results"]:
        if r["outcome"] in ("FAIL", "UNRESOLVED"):
            r["reason"] = EVIL_REASON
        if r["outcome"] == "UNRESOLVED":
            r["case"] = EVIL_CASE
            r["known_issue"] = None
    path = tmp_path / "jax-0.12.0.1.json"
    path.write_text(json.dumps(doc))
    return path


def _matrix(tmp_path):
    m = matrix_document.merge([str(REPO / "tests" / "fixtures" / "results" / "jax-0.8.0.json"), str(_crafted(tmp_path))])
    path = tmp_path / "matrix.json"
    matrix_document.write(path, m)
    doc = json.loads(path.read_text())
    for e in doc["versions"]:
        for r in e.get("results") or []:
            if r["case"] == EVIL_CASE:
                r["target"], r["profile"] = EVIL_TARGET, EVIL_PROFILE
    path.write_text(json.dumps(doc))
    return path


def _commands_are_ours(out: str):
    for line in out.splitlines():
        if line.lstrip().startswith("::"):
            assert re.match(r"::error file=[^\n]*::", line), line  # an annotation fp8-check writes
            assert "add-mask" not in line.split("::", 2)[1] and "%0A" in line or "add-mask" not in line, line


def _inert(text: str):
    """No link, image, raw HTML or live mention of the crafted values in Markdown."""
    assert "](https://evil" not in text and "<img" not in text and "<b>" not in text
    assert "@octocat" not in text and "https://evil" not in text


def test_ci_summary_to_stdout_and_file_prints_no_foreign_command_and_no_markup(tmp_path, monkeypatch, capsys):
    mpath = _matrix(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert cli.main(["ci", "summary", str(mpath), "--cases", str(tmp_path / "none"), "--issues-dir", str(tmp_path / "i")]) == 0
    out = capsys.readouterr().out
    _commands_are_ours(out)
    summary = out.split("### Grid")[0]
    _inert(summary)
    assert md_inline(EVIL_TARGET) in out and md_inline(EVIL_PROFILE) in out
    assert cli.main(["ci", "summary", str(mpath), "--cases", str(tmp_path / "none"), "--issues-dir", str(tmp_path / "i"),
                     "--summary-file", str(tmp_path / "s.md")]) == 0
    _commands_are_ours(capsys.readouterr().out)
    _inert((tmp_path / "s.md").read_text())


def test_report_markdown_prints_no_line_starting_with_a_command(tmp_path, capsys):
    path = _crafted(tmp_path)
    assert cli.main(["report", str(path), "--markdown", EVIL_CASE]) == 0
    out = capsys.readouterr().out
    assert "add-mask" in out  # the reason is shown …
    assert not any(line.lstrip().startswith("::") for line in out.splitlines())  # … but no line is a command
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", out, flags=re.S))  # code blocks and spans are inert
    assert "@octocat" not in prose.split("\n", 1)[1] and "<img" not in prose


def test_ci_issues_prints_no_line_starting_with_a_command(tmp_path, monkeypatch, capsys):
    issues = tmp_path / "issues"
    issues.mkdir()
    (issues / "a.md").write_text("# ::add-mask::secret\n\n<!-- fp8-check-issue: 0123456789abcdef -->\n")
    (issues / "::b.md").write_text("x\n::stop-commands::tok\n")
    log = _gh(tmp_path, monkeypatch, [])
    assert cli.main(["ci", "issues", "--issues-dir", str(issues)]) == 0
    out = capsys.readouterr().out
    assert out and not any(line.lstrip().startswith("::") for line in out.splitlines()), out
    assert len([c for c in _calls(log) if c[:2] == ["issue", "create"]]) == 1


def test_markup_helpers():
    assert no_commands("a\n::x::y\n  ::z\r::w") == "a\n\u200b::x::y\n  \u200b::z\n\u200b::w"
    text = md_inline(EVIL_CASE)
    assert "](" not in text.replace("\\](", "") and "<" not in text and "@octocat" not in text and "://" not in text
    assert re.search(r"(?<!\\)\[", text) is None  # every bracket escaped: no link, no image
