"""`ci summary` + `ci issues` as the reusable workflow's issues job runs them, against a stand-in `gh` (a real
program on PATH that records its calls and answers `issue list` from a file): one issue per upstream change
(grouped by first bad version and signature change), identity only from the body's own last-line marker (a
quoted marker is ignored), body files that never collide, a bounded wait on gh, and one line on each failure."""

from __future__ import annotations

import json
import os
import stat
import sys
import time

import pytest

from fp8_check.cli import main as cli
from fp8_check.report import _issue_filing as issue_filing

LOST = [{"path": "gemms[0].target", "expected": "__cublas$lt$matmul$f8", "found": "__cublas$gemm"}]
OTHER = [{"path": "kernels", "expected": 1, "found": 3}]
QUOTE = "<!-- fp8-check-issue: 0123456789abcdef -->"


def _row(case, jax, outcome="PASS", diffs=(), reason=""):
    return {"case": case, "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": jax, "outcome": outcome,
            "reason": reason, "signature": {"kernels": 1, "launches": ["gemm x"], "gemms": [], "unfused": []},
            "expected": None, "diffs": list(diffs), "known_issue": None, "compile_seconds": 0.0, "cached": False,
            "description": "", "file": ""}


def _matrix(tmp_path, bad: dict[str, tuple]) -> str:
    """Every case passes on 0.6.1; on 0.7.0 each case in `bad` FAILs with (diffs, reason)."""
    cases = sorted(bad)
    versions = [{"jax": "0.6.1", "status": "ran", "results": [_row(c, "0.6.1") for c in cases]},
                {"jax": "0.7.0", "status": "ran", "results": [_row(c, "0.7.0", "FAIL", *bad[c]) for c in cases]}]
    doc = {"schema": "fp8-check/matrix/2", "mode": "deviceless", "targets": ["h100"], "profiles": ["cublas"],
           "versions": versions}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _gh(tmp_path, monkeypatch, listed, *, sleep: float = 0, raw: str | None = None):
    """A stand-in gh on PATH: logs argv as JSON lines; `issue list` prints `listed` (or `raw`); sleeps first."""
    log = tmp_path / "gh.log"
    (tmp_path / "list.json").write_text(raw if raw is not None else json.dumps(listed))
    gh = tmp_path / "bin" / "gh"
    gh.parent.mkdir(exist_ok=True)
    gh.write_text(f"#!{sys.executable}\nimport json, sys, time\ntime.sleep({sleep})\n"
                  f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                  f"if sys.argv[1:3] == ['issue', 'list']: print(open({str(tmp_path / 'list.json')!r}).read())\n")
    gh.chmod(gh.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{gh.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def _calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _summary(tmp_path, bad, capsys):
    issues = tmp_path / "issues"
    assert cli.main(["ci", "summary", _matrix(tmp_path, bad), "--issues-dir", str(issues),
                     "--summary-file", str(tmp_path / "s.md")]) == 0
    return issues, capsys.readouterr().out


def test_one_issue_per_upstream_change_and_identity_only_from_the_own_marker(tmp_path, monkeypatch, capsys):
    bad = {"a_first": (LOST, ""), "b_second": (LOST, ""), "c_third": (LOST, ""),  # one XLA change, three cases
           "seed+x": (OTHER, "kernels went up, see " + QUOTE),  # another change; its reason quotes a marker
           "seed_x": (OTHER + LOST, "")}  # a third change, a case id that sanitises like the one above
    issues, _ = _summary(tmp_path, bad, capsys)
    bodies = sorted(issues.glob("*.md"))
    assert len(bodies) == 3, [b.name for b in bodies]  # a_first (+ b, c), seed+x, seed_x: no collision, none lost
    keys = {b.name: issue_filing.marker_of(b.read_text()) for b in bodies}
    assert all(keys.values()) and len(set(keys.values())) == 3
    grouped = next(b for b in bodies if b.name.startswith("a_first--"))
    assert "b\\_second" in grouped.read_text() or "b_second" in grouped.read_text()
    assert "c_third" in grouped.read_text()
    plus = next(b for b in bodies if b.read_text().lstrip("# ").startswith("fp8-check: FAIL of seed+x"))
    # GitHub holds: #7 quotes the plus body's marker in its text but is the a_first issue by its own last line;
    # #9 quotes its marker on its last line but inside other text (not the fixed form)
    a_key, plus_key = keys[grouped.name], keys[plus.name]
    listed = [{"number": 7, "body": f"text\n<!-- fp8-check-issue: {plus_key} -->\nmore\n\n<!-- fp8-check-issue: {a_key} -->\n"},
              {"number": 9, "body": f"> quoted: <!-- fp8-check-issue: {plus_key} -->"},
              {"number": 11, "body": f"old\n<!-- fp8-check-issue: {a_key} -->"}]  # a later duplicate: #7 wins
    log = _gh(tmp_path, monkeypatch, listed)
    assert cli.main(["ci", "issues", "--issues-dir", str(issues), "--repo", "me/proj"]) == 0
    calls = _calls(log)
    edits = [c for c in calls if c[:2] == ["issue", "edit"]]
    creates = [c for c in calls if c[:2] == ["issue", "create"]]
    assert edits == [["issue", "edit", "7", "--repo", "me/proj", "--body-file", str(grouped)]]
    assert sorted(c[c.index("--body-file") + 1] for c in creates) == sorted(str(b) for b in bodies if b != grouped)


def test_a_body_without_its_own_marker_is_skipped_not_filed(tmp_path, monkeypatch, capsys):
    issues = tmp_path / "issues"
    issues.mkdir()
    (issues / "x.md").write_text(f"# title\n{QUOTE}\nand a last line\n")
    log = _gh(tmp_path, monkeypatch, [])
    assert cli.main(["ci", "issues", "--issues-dir", str(issues)]) == 0
    assert [c[:2] for c in _calls(log)] == [["issue", "list"]]
    assert "skipped x.md: its last line is not an fp8-check marker" in capsys.readouterr().out


@pytest.mark.parametrize("raw", ["not json", "{}", "[1]", '[{"number": "7", "body": "x"}]', "::add-mask::x"])
def test_gh_printing_what_is_not_a_list_of_issues_is_one_line_exit_3(tmp_path, monkeypatch, capsys, raw):
    issues = tmp_path / "issues"
    issues.mkdir()
    _gh(tmp_path, monkeypatch, None, raw=raw)
    assert cli.main(["ci", "issues", "--issues-dir", str(issues)]) == 3
    captured = capsys.readouterr()
    [line] = captured.err.strip().splitlines()
    assert line.startswith("fp8-check ci issues: error: gh issue list printed") and captured.out == ""


def test_a_hanging_gh_is_stopped_in_one_line(tmp_path, monkeypatch, capsys):
    issues = tmp_path / "issues"
    issues.mkdir()
    _gh(tmp_path, monkeypatch, [], sleep=60)
    monkeypatch.setenv("FP8_CHECK_GH_TIMEOUT", "2")
    start = time.monotonic()
    assert cli.main(["ci", "issues", "--issues-dir", str(issues)]) == 3
    assert time.monotonic() - start < 30
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "fp8-check ci issues: error: gh issue list did not finish within 2 s (FP8_CHECK_GH_TIMEOUT)"


def test_a_summary_without_results_files_still_writes_bodies(tmp_path, capsys):
    """The matrix names no per-version results files (moved, or a crafted matrix): the bodies say so; no traceback."""
    issues, out = _summary(tmp_path, {"a": (LOST, "")}, capsys)
    [body] = issues.glob("*.md")
    assert "per-version results file is missing" in body.read_text()
