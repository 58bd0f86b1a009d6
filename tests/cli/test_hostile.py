"""A data-driven corpus of hostile inputs (tests/hostile/*.yaml), through the real CLI, in-process.

Each file is one input: what it is (`about`), the command that meets it (`command`; INPUT is the
input's path, INPUT_DIR its folder, OUT a scratch folder, REPO this checkout), the exit code
and the message that command must give, optional `env`, and the input itself (`input` text, or
`repeat`: [[chunk, times], …] concatenated). Every input must end with one line on stderr, no
traceback, the expected code; and every file input is also given to EVERY subcommand, in the
place where that subcommand reads a file: none may answer with a traceback or anything but
2 (bad input) or 3 (broken environment) — `bisect` answers bad input with 128 (`git bisect run`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

CORPUS = sorted((Path(__file__).parents[1] / "hostile").glob("*.yaml"))


def _entry(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _materialize(entry: dict, tmp: Path) -> Path:
    """Write the input under tmp/in/ and return its path."""
    path = tmp / "in" / entry.get("input_name", "input")
    path.parent.mkdir(parents=True, exist_ok=True)
    if "repeat" in entry:
        path.write_text("".join(chunk * times for chunk, times in entry["repeat"]))
    elif "input" in entry:
        path.write_text(entry["input"])
    return path


def _argv(items: list[str], inp: Path, out: Path) -> list[str]:
    def one(a: str) -> str:
        for key, value in (("INPUT_DIR", inp.parent), ("INPUT", inp), ("OUT", out), ("REPO", REPO)):
            a = a.replace(key, str(value))
        return a

    return [one(str(a)) for a in items]


def _no_traceback(out: str, err: str) -> None:
    assert "Traceback" not in out + err and 'File "' not in err, err[-2000:]


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_hostile_input_gets_one_line_and_its_exit_code(path, run_cli, tmp_path, monkeypatch):
    entry = _entry(path)
    inp = _materialize(entry, tmp_path)
    for key, value in (entry.get("env") or {}).items():
        monkeypatch.setenv(key, str(value))
    cwd = Path(_argv([entry["cwd"]], inp, tmp_path)[0]) if entry.get("cwd") else tmp_path
    code, out, err = run_cli(*_argv(entry["command"], inp, tmp_path / "out"), cwd=cwd)
    _no_traceback(out, err)
    assert code == entry["exit"], (code, out[-1000:], err[-1000:])
    assert entry["message"] in err, err
    assert len(err.strip().splitlines()) == 1, err
    # nothing was written outside the scratch folder the command was given
    assert not any((tmp_path / "out").rglob("*.yaml")), "a golden was written for a refused input"


# Where each subcommand reads a file (F: the input; T: the input under a *.txtpb name; O: scratch).
SUBCOMMANDS = {
    "run": ["run", "F", "--mode", "deviceless", "--json", "O/r.json"],
    "run --target": ["run", "REPO/cases/seed.yaml", "--target", "T", "--mode", "deviceless", "--json", "O/r.json"],
    "list": ["list", "F"],
    "show": ["show", "x", "F", "--mode", "deviceless"],
    "bless": ["bless", "F", "--mode", "deviceless", "--goldens", "O/g"],
    "bless --from-matrix": ["bless", "--from-matrix", "F", "--goldens", "O/g"],
    "matrix": ["matrix", "F", "--jax", "0.7.0", "--out", "O/m.json"],
    "matrix --merge": ["matrix", "--merge", "F", "--out", "O/m.json"],
    "report": ["report", "F", "-o", "O/r.html"],
    "report --markdown": ["report", "F", "--markdown", "x"],
    "fidelity": ["fidelity", "--from", "F", "F", "--out", "O/f.md", "--json", "O/f.json"],
    "bisect": ["bisect", "x", "F", "--good", "0.6.1", "--bad", "0.7.0"],
    "reduce": ["reduce", "x", "F", "--jax", "0.7.0"],
    "target check": ["target", "check", "T"],
    "target capture": ["target", "capture", "F"],
    "check": ["check", "os:getcwd", "--arg", "x=float32[2]", "--target", "T"],
    "init": ["init", "F"],
    "calibrate": ["calibrate", "F"],
    "ci summary": ["ci", "summary", "F", "--summary-file", "O/summary.md", "--issues-dir", "O/issues"],
}


def test_every_subcommand_is_listed():
    from fp8_check.cli import main as cli

    parser, handlers = cli.build_parser()
    assert set(handlers) == {c.split()[0] for c in SUBCOMMANDS}


FILE_INPUTS = [p for p in CORPUS if _entry(p).get("every", True)]


@pytest.mark.parametrize("path", FILE_INPUTS, ids=lambda p: p.stem)
def test_every_subcommand_refuses_every_hostile_file(path, run_cli, tmp_path):
    entry = _entry(path)
    inp = _materialize(entry, tmp_path)
    spec = inp if inp.suffix == ".txtpb" else inp.with_name(inp.name + ".txtpb")
    if spec != inp:
        shutil.copyfile(inp, spec)
    for name, argv in SUBCOMMANDS.items():
        out_dir = tmp_path / "out" / name.replace(" ", "_")
        args = [a.replace("REPO", str(REPO)).replace("O/", f"{out_dir}/") for a in argv]
        args = [str(spec) if a == "T" else str(inp) if a == "F" else a for a in args]
        code, out, err = run_cli(*args, cwd=tmp_path)
        _no_traceback(out, err)
        allowed = (128,) if name == "bisect" else (2, 3)
        assert code in allowed, f"{name}: exit {code}\n{out[-1000:]}\n{err[-1000:]}"
        assert len(err.strip().splitlines()) == 1, f"{name}: {err}"
    assert not any((tmp_path / "out").rglob("*.yaml")), "a golden was written for a refused input"
