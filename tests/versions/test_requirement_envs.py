"""A case's `requirements:` (a named set or a requirements file): read at load time, bad values are one line
(exit 2), a JAX outside the set's range makes the case UNSUPPORTED without building anything.

The environment itself (built with uv on first use, MaxText compiled there) is exercised by the slow test in
tests/models/test_maxtext.py."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import pytest

from fp8_check.cases import _load as case_mod
from fp8_check.cases._requirement_sets import NAMED, read_set
from fp8_check.cli import _options, main as cli
from fp8_check.matrix import needed_sets
from fp8_check.run import _selection as selection
from fp8_check.verdict import _outcome as outcome
from fp8_check.versions import _requirements as requirements
from tests.conftest import write_cases

CASE = """
cases:
- id: needs_more
  kind: python
  callable: mod:step
  args: [{name: x, shape: [16, 16], dtype: bfloat16}]
  requires: [somepkg]
  requirements: %s
"""
MODULE = "import jax.numpy as jnp\n\ndef step(x):\n    return jnp.dot(x, x)\n"


def _write(tmp_path, value: str, reqs: str | None = None):
    (tmp_path / "mod.py").write_text(MODULE)
    if reqs is not None:
        (tmp_path / "reqs.txt").write_text(reqs)
    return write_cases(tmp_path / "cases.yaml", CASE % value)


def test_the_named_maxtext_set_states_its_jax_range_and_excludes_jax():
    found = read_set(NAMED["maxtext"])
    assert found.jax == ">=0.11.1"
    assert "maxtext==0.2.5" in found.requirements
    assert not any(r.split("=")[0].split(">")[0] == "jax" for r in found.requirements)


def test_a_case_reads_its_requirements_file_relative_to_the_case_file(tmp_path):
    path = _write(tmp_path, "reqs.txt", "# ours\nsomepkg>=1.0  # the layers\njax>=0.9\n")
    [case] = case_mod.load([path])
    assert case.requirements and case.requirements.requirements == ("somepkg>=1.0",) and case.requirements.jax == ">=0.9"
    assert case.requirements.name == "reqs.txt"


@pytest.mark.parametrize("value, reqs, message", [
    ("nothere.txt", None, "neither a named set (maxtext, qwix) nor a file next to the case file"),
    ("reqs.txt", "-e .\n", "reqs.txt:1: options ('-e') are not supported"),
    ("reqs.txt", "flax>>1\n", "not a requirement"),
    ("reqs.txt", "jaxlib==0.7.0\n", "chosen per version"),
    ("[1, 2]", None, "expected a named set (maxtext, qwix) or a requirements file"),
])
def test_a_bad_requirements_field_is_one_line_naming_file_case_and_field(tmp_path, run_cli, value, reqs, message):
    path = _write(tmp_path, value, reqs)
    code, out, err = run_cli("list", path)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert f"{path}" in err and "case 'needs_more'" in err and "field 'requirements'" in err


def test_every_versions_environment_gets_the_command_lines_requirements_only(tmp_path):
    """`--with`/`--with-requirements` go into every version's environment; a case's `requirements:` never do
    (the matrix builds one environment per set, for that set's cases: `needed_sets`)."""
    path = _write(tmp_path, "reqs.txt", "somepkg\njax>=0.11.1\n")
    (tmp_path / "mine.txt").write_text("other\njax>=0.9\n")
    case_mod.load([path])

    parser, _ = cli.build_parser()
    args = parser.parse_args(["matrix", "--jax", "0.12.0.1", "--with", "flax", "--with-requirements", str(tmp_path / "mine.txt")])
    assert requirements.extras_of(_options.requirement_options(args)) == (["flax", "other"], ">=0.9")


def test_only_the_sets_of_cases_planned_on_the_selected_targets_are_needed():
    """The shipped library: qwix's cases run on v6e and tpu7x only, so an h100 matrix needs no requirement set
    (before, its JAX >= 0.12 range made every older release install-failed); a v6e one needs qwix alone."""
    cases = case_mod.load(sorted(p for p in Path("cases").glob("*.yaml") if p.name != "models.yaml"))
    h100 = selection.targets_from("h100")
    assert needed_sets(cases, h100, ["cublas", "triton"]) == {}
    [(name, jax_range, count)] = needed_sets(cases, selection.targets_from("v6e"), ["tpu"]).values()
    assert name == "qwix" and jax_range == ">=0.12.0" and count >= 1


@pytest.mark.slow
def test_a_jax_outside_the_sets_range_is_unsupported_naming_the_range(tmp_path, run_cli):
    path = _write(tmp_path, "reqs.txt", "somepkg\njax>=99\n")
    code, out, err = run_cli("run", path, "--target", "h100", "--profile", "cublas", "--json", tmp_path / "r.json",
                             "--goldens", tmp_path / "g", cwd=tmp_path)
    [row] = json.loads((tmp_path / "r.json").read_text())["results"]
    assert row["outcome"] == outcome.UNSUPPORTED.name
    assert row["reason"].startswith(f"requirements reqs.txt need jax>=99; this is jax {jax.__version__}"), row["reason"]
    assert "fp8-check matrix --jax" in row["reason"]
    assert "the environment for jax" not in out  # nothing was built for it
    assert code == 0


@pytest.mark.slow
def test_a_sets_range_excluding_a_release_makes_its_cases_unsupported_and_the_release_runs_the_rest(tmp_path,
                                                                                                     run_cli):
    """Before, the set's `jax>=99` applied to the whole matrix: the release was install-failed (exit 3)."""
    path = _write(tmp_path, "reqs.txt", "somepkg\njax>=99\n")
    with path.open("a") as f:
        f.write("- id: plain_one\n  kind: python\n  callable: mod:step\n"
                "  args: [{name: x, shape: [16, 16], dtype: bfloat16}]\n")
    code, out, err = run_cli("matrix", path, "--jax", jax.__version__, "--target", "h100", "--profile", "cublas",
                             "--out", tmp_path / "m.json", "--no-html", "--goldens", tmp_path / "g", "--fail-on",
                             "regression", cwd=tmp_path)
    doc = json.loads((tmp_path / "m.json").read_text())
    [entry] = doc["versions"]
    assert entry["status"] == "ran", entry["error"]
    rows = {r["case"]: r for r in entry["results"]}
    assert rows["needs_more"]["outcome"] == outcome.UNSUPPORTED.name
    assert rows["needs_more"]["reason"].startswith(f"requirements reqs.txt need jax>=99; this is jax {jax.__version__}")
    assert rows["plain_one"]["outcome"] == outcome.NEW.name
    assert "install-failed" not in out + err and code == 0, out + err
