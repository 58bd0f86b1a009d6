"""GitHub CI output (`fp8-check ci`): the job summary written to $GITHUB_STEP_SUMMARY, `::error` annotations
on the case files, first-bad-version issue bodies, and `ci issues` against a stand-in `gh` on PATH that records
its arguments (a program of our own: GitHub's service is not reachable from tests)."""

from __future__ import annotations

import json
import os
import stat

from fp8_check.cli import main as cli
from fp8_check.matrix import _document as matrix_document
from fp8_check.report._markup import plain
from fp8_check.targets import PROFILES

from ..conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "results"


def _matrix(tmp_path):
    m = matrix_document.merge([str(FIXTURES / f"jax-{v}.json") for v in ("0.6.1", "0.8.0", "0.12.0.1")])
    path = tmp_path / "matrix.json"
    matrix_document.write(path, m)
    return path


def _line_of(case_id: str) -> int:
    text = (REPO / "cases" / "seed.yaml").read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if line.strip() == f"- id: {case_id}")


def test_job_summary_annotations_and_issue_bodies(tmp_path, monkeypatch, capsys):
    mpath = _matrix(tmp_path)
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.chdir(REPO)
    issues = tmp_path / "issues"
    assert cli.main(["ci", "summary", str(mpath), "--cases", "cases", "--issues-dir", str(issues)]) == 0
    out = capsys.readouterr().out
    text = summary.read_text()
    assert text.startswith("earlier step\n## fp8-check")  # appended, as GitHub expects of each step
    # the regression (seed_scaled_clamp_bf16 lost its FP8 gemm on the newest version) comes first in the table
    findings = text.split("### Differs from the golden")[1].split("### Grid")[0]
    table = [line for line in findings.splitlines() if line.startswith("| ") and "---" not in line][1:]
    row = next(line for line in table if line.startswith("| seed_scaled_clamp_bf16 |"))
    # (this recorded FAIL predates verdicts: a FAIL without one counts as a regression; its line is the reason's first)
    assert row.startswith("| seed_scaled_clamp_bf16 | h100/cublas | 0.12.0.1 | FAIL | ") and "field(s) differ" in row
    [body_file] = issues.glob("seed_scaled_clamp_bf16--*.md")  # the first case's id and the change's key
    assert f"`{issues}/{body_file.name}` (artifact)" in row
    xpass = next(i for i, line in enumerate(table) if "| XPASS |" in line)
    assert table.index(row) < xpass  # regressions first
    assert table[xpass].endswith("| none: the known issue is fixed, update the case |")  # nothing to file
    assert "<script>" not in text and "| &lt;script&gt;alert(1)&lt;/script&gt; |" in text  # a case id is not markup
    assert "regression" in text.split("\n")[3] and "against goldens" in text.split("\n")[3]
    assert "### Grid" in text and "| 0.6.1 | 0.8.0 | 0.12.0.1 |" in text
    # one ::error per finding, at the case's line in its YAML file
    line = _line_of("seed_scaled_clamp_bf16")
    assert (f"::error file=cases/seed.yaml,line={line},title=fp8-check FAIL%3A seed_scaled_clamp_bf16 on h100/cublas "
            "since jax 0.12.0.1::") in out
    assert out.rstrip().splitlines()[-1].startswith("verdict: ")
    # the issue body: the first bad version's, with the compiler options as compiled and the hidden marker
    body = body_file.read_text()
    assert body.startswith("# \\[XLA:GPU\\]") and "jax:             0.12.0.1" in body  # the title line is inert Markdown
    assert json.dumps(PROFILES["cublas"].compiler_options) in body
    key = body_file.stem.rsplit("--", 1)[1]
    assert body.rstrip().splitlines()[-1] == f"<!-- fp8-check-issue: {key} -->" and len(key) == 16


def test_issues_are_opened_once_and_updated_after(tmp_path, monkeypatch, capsys):
    mpath = _matrix(tmp_path)
    issues = tmp_path / "issues"
    monkeypatch.chdir(REPO)
    assert cli.main(["ci", "summary", str(mpath), "--issues-dir", str(issues), "--summary-file", str(tmp_path / "s.md")]) == 0
    bodies = sorted(issues.glob("*.md"))
    # one body per regression (the FAIL without a verdict, the UNRESOLVEDs), none for the XPASS
    assert len(bodies) >= 2 and not any("seed_relu_amax_f32" in b.name for b in bodies)
    # a stand-in gh: records its arguments; `issue list` answers with one open issue carrying a body's marker
    log = tmp_path / "gh.log"
    [clamp] = issues.glob("seed_scaled_clamp_bf16--*.md")
    existing = [{"number": 7, "body": "old text\n" + clamp.read_text().rstrip().splitlines()[-1]}]
    (tmp_path / "list.json").write_text(json.dumps(existing))
    gh = tmp_path / "bin" / "gh"
    gh.parent.mkdir()
    gh.write_text("#!/usr/bin/env python3\nimport json, sys\n"
                  f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                  f"if sys.argv[1:3] == ['issue', 'list']: print(open({str(tmp_path / 'list.json')!r}).read())\n")
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{gh.parent}{os.pathsep}{os.environ['PATH']}")
    capsys.readouterr()
    assert cli.main(["ci", "issues", "--issues-dir", str(issues), "--repo", "me/proj"]) == 0
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert calls[0][:2] == ["issue", "list"] and ["--label", "fp8-check"] == calls[0][calls[0].index("--label"):][:2]
    edits = [c for c in calls if c[:2] == ["issue", "edit"]]
    creates = [c for c in calls if c[:2] == ["issue", "create"]]
    assert edits == [["issue", "edit", "7", "--repo", "me/proj", "--body-file", str(clamp)]]
    assert len(creates) == len(bodies) - 1
    for c in creates:
        body = c[c.index("--body-file") + 1]
        title = c[c.index("--title") + 1]
        assert plain(open(body).read().splitlines()[0]) == f"# {title}"  # the heading, read back as plain text
        assert c[c.index("--label") + 1] == "fp8-check"
