"""One error hierarchy mapped to exit codes in one place; outputs written as peers with one failure policy."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from fp8_check.core import _errors as errors, _outputs as outputs

from ..conftest import REPO


@pytest.mark.parametrize("cls, code, prefix", [
    ("fp8_check.cases._load:CaseError", 2, "error: "),
    ("fp8_check.verdict._golden:GoldenError", 2, "error: "),
    ("fp8_check.run._results:ResultsError", 2, "error: "),
    ("fp8_check.core._outputs:OutputError", 2, "error: "),
    ("fp8_check.run._selection:UsageError", 2, "error: "),
    ("fp8_check.run._selection:BrokenEnvironment", 3, "broken environment: "),
    ("fp8_check.verdict._canary:CanaryError", 3, ""),
    ("fp8_check.targets:TargetSpecError", 3, "refused target spec: "),
])
def test_each_error_knows_its_exit_code(cls, code, prefix):
    import importlib

    module, name = cls.split(":")
    klass = getattr(importlib.import_module(module), name)
    assert issubclass(klass, errors.Fp8CheckError)
    assert klass.exit_code == code and klass.prefix == prefix


def test_exit_codes_are_defined_once():
    definition = re.compile(r"^\s*EXIT_\w+(?:\s*,\s*EXIT_\w+)*\s*=\s*\d", re.M)
    homes = sorted(str(p.relative_to(REPO)) for p in (REPO / "harness").rglob("*.py") if definition.search(p.read_text()))
    assert homes == ["harness/fp8_check/core/_errors.py"]


def test_cli_maps_an_error_to_its_line_and_code(tmp_path, run_cli):
    bad = tmp_path / "cases" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text("cases:\n  - id: x\n    epilogue: nope\n")
    code, _, err = run_cli("list", str(bad))
    assert code == 2 and err.startswith("fp8-check: error: ") and "field 'epilogue'" in err


def _output(path: Path, primary: bool, fail: bool) -> outputs.Output:
    def write(p: Path) -> None:
        if fail:
            raise OSError("disk full")
        p.write_text("ok")

    return outputs.Output("thing", path, write, primary=primary, announce="wrote: {path}")


def test_a_secondary_output_that_fails_only_warns(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    written = outputs.write_all([_output(tmp_path / "a", True, False), _output(tmp_path / "b", False, True)], out, err)
    assert written == [tmp_path / "a"]
    assert out.getvalue() == f"wrote: {tmp_path / 'a'}\n"
    assert "warning: could not write the thing" in err.getvalue() and "disk full" in err.getvalue()


def test_a_primary_output_that_fails_is_bad_input_after_the_others_were_written(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(outputs.OutputError, match="disk full") as info:
        outputs.write_all([_output(tmp_path / "a", True, True), _output(tmp_path / "b", False, False)], out, err)
    assert info.value.exit_code == 2
    assert (tmp_path / "b").read_text() == "ok"
