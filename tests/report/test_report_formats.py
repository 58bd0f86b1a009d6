"""The report outputs are one registry (report/_formats.py): an output is one class and one option,
written in one loop, by `run`, `matrix` and `check` alike.

The runs written here are real results files (tests/fixtures/results/, written by `fp8-check run`),
read with the results reader; the parsers are the CLI's own.
"""

from __future__ import annotations

import json
from pathlib import Path

from fp8_check.cli import _options as cli_options, main as cli
from fp8_check.report import _formats as formats
from fp8_check.run import _results as results

from ..conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "results" / "jax-0.12.0.1.json"


def _options(command: str) -> set[str]:
    parser, _ = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    return {o for a in sub._actions for o in a.option_strings}


def test_run_matrix_and_check_take_their_outputs_from_the_registry():
    assert {f.option for f in formats.FORMATS} == {"--json", "--html"}
    assert {"--json", "--html"} <= _options("run")
    assert "--html" in _options("matrix")
    assert "--json" in _options("check")


class CaseList(formats.ReportFormat):
    """A new output, written for this test: one line per result."""

    option, what, announce = "--case-list", "case list", "cases: {path}"
    help = "one line per result"

    def write(self, runs, path):
        path.write_text("".join(f"{o.case} {o.target}/{o.profile} {o.code.name}\n" for r in runs for o in r.outcomes))


def test_a_new_output_is_one_class_in_the_registry(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(formats, "FORMATS", (*formats.FORMATS, CaseList))
    assert "--case-list" in _options("run") and "--case-list" in _options("matrix")  # no other edit
    parser, _ = cli.build_parser()
    args = parser.parse_args(["run", "--json", str(tmp_path / "r.json"), "--case-list", str(tmp_path / "cases.txt")])
    chosen = formats.chosen(cli_options.output_paths(args), lambda f: tmp_path / "report.html" if f is formats.HtmlReport else None)
    assert [type(f) for f, _ in chosen] == [formats.ResultsJson, formats.HtmlReport, CaseList]
    run = results.load(FIXTURE)
    written = formats.write(chosen, [run])
    assert written == [tmp_path / "r.json", tmp_path / "report.html", tmp_path / "cases.txt"]
    lines = (tmp_path / "cases.txt").read_text().splitlines()
    assert len(lines) == len(run.outcomes) and lines[0].split()[0] == run.outcomes[0].case
    assert results.load(tmp_path / "r.json").counts() == run.counts()
    assert f"cases: {tmp_path / 'cases.txt'}" in capsys.readouterr().out


def test_a_secondary_output_that_fails_only_warns_and_the_record_is_written(monkeypatch, tmp_path, capsys):
    class Broken(CaseList):
        option, what = "--broken", "broken list"

        def write(self, runs, path):
            raise RuntimeError("no space for lists")

    chosen = [(formats.ResultsJson(), tmp_path / "r.json"), (Broken(), tmp_path / "b.txt")]
    assert formats.write(chosen, [results.load(FIXTURE)]) == [tmp_path / "r.json"]
    assert "warning: could not write the broken list" in capsys.readouterr().err


def test_the_check_document_is_the_standard_results_file(tmp_path):
    run = results.load(FIXTURE)
    with open(tmp_path / "out.json", "w") as out:
        formats.print_results(run, out)
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["schema"] == results.SCHEMA and results.from_json(doc).counts() == run.counts()


def test_matrix_html_reads_the_runs_when_it_writes(tmp_path):
    chosen = [(formats.HtmlReport(), tmp_path / "m.html")]
    assert formats.write(chosen, lambda: [results.load(Path(FIXTURE))]) == [tmp_path / "m.html"]
    assert "<html" in (tmp_path / "m.html").read_text()[:2000].lower()
