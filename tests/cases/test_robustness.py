"""Hardening (issue 10): nothing in a case file, golden or path may run code, crash the run, or turn a broken case green.

Fast tests here use no compiler; the ones marked `slow` compile deviceless for real.
"""

from __future__ import annotations

import ast
import dataclasses

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from fp8_check.cases import _load as case_mod, py_text
from fp8_check.cases._load import Case, KnownIssue, PatternSpec
from fp8_check.cases.kinds.python import PythonSpec
from fp8_check.compile import _render as render
from fp8_check.targets import PROFILES, TARGET_DIR, Target, parse_target

PLACEHOLDER = "PLACEHOLDER_q7Zx"


def _dump(source: str, replace: str | None = None) -> str:
    """The syntax tree of `source`; with `replace`, PLACEHOLDER inside string literals is replaced by it."""
    tree = ast.parse(source)
    if replace is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                node.value = node.value.replace(PLACEHOLDER, replace)
    return ast.dump(tree)


H100 = parse_target("h100", (TARGET_DIR / "h100.txtpb").read_text())
PATTERN = Case(id="c", file="cases/x.yaml", line=1, spec=PatternSpec(
    input_scales="both", output_scale="divide", clamp=True, out_dtype="float8_e4m3fn", epilogue="bias_relu",
    bias_dtype="bfloat16", amax="pre_scale"))
PYTHON_INLINED = Case(id="p", file="cases/x.yaml", line=1, spec=PythonSpec(
    callable="tests.casefns:plain", args=(("a", (4, 8), "float8_e4m3fn"), ("b", (8, 2), "float8_e4m3fn"))))
PYTHON_IMPORTED = dataclasses.replace(PYTHON_INLINED, spec=PythonSpec(callable="some_pkg.layers:dense",
                                                                      args=PYTHON_INLINED.spec.args))


def _full_source(case: Case, target: Target = H100, jax_version: str = "0.12.0.1") -> str:
    """The rendered module and the standalone repro around it: all the source user text can reach."""
    return render.repro(case, target, PROFILES["cublas"], jax_version)


# (name, how to put text into the inputs of the render) for every text that reaches rendered source
TEXT_FIELDS = {
    "description": lambda t: (dataclasses.replace(PATTERN, description=t), H100, "0.12.0.1"),
    "file": lambda t: (dataclasses.replace(PATTERN, file=t), H100, "0.12.0.1"),
    "python description": lambda t: (dataclasses.replace(PYTHON_INLINED, description=t), H100, "0.12.0.1"),
    "python file": lambda t: (dataclasses.replace(PYTHON_IMPORTED, file=t), H100, "0.12.0.1"),
    "known issue url and summary": lambda t: (dataclasses.replace(
        PATTERN, known_issues=(KnownIssue(url=t, jax="<0.1", summary=t),)), H100, "0.12.0.1"),
    "target name": lambda t: (PATTERN, dataclasses.replace(H100, name=t), "0.12.0.1"),
    "target spec text": lambda t: (PATTERN, dataclasses.replace(H100, config_text=H100.config_text + t), "0.12.0.1"),
    "jax version": lambda t: (PATTERN, H100, t),
}


@pytest.mark.parametrize("field", list(TEXT_FIELDS))
@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=1, max_size=40) | st.sampled_from(['"""', "\\N", "\\", '"', "'''", "\r\n", "\x00", "\u2028",
                                                     '"""; import os; os.system("false"); """', "{{ x }}", "\\N{BULLET}"]))
def test_user_text_is_only_ever_a_literal(field, text):
    """For any text, the rendered program is the one rendered with a placeholder, but for that literal."""
    make = TEXT_FIELDS[field]
    with_placeholder = _full_source(*make(PLACEHOLDER))
    with_text = _full_source(*make(text))
    assert _dump(with_text) == _dump(with_placeholder, replace=text)


@pytest.mark.parametrize("field", ["description", "file", "python description", "target name", "jax version"])
def test_the_placeholder_reaches_the_source(field):
    """The property above is not vacuous: these texts do appear in the rendered source."""
    assert PLACEHOLDER in _full_source(*TEXT_FIELDS[field](PLACEHOLDER))


@settings(max_examples=40, deadline=None)
@given(module=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}(\.[A-Za-z_][A-Za-z0-9_]{0,8}){0,2}", fullmatch=True),
       function=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
       name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True),
       cid=st.from_regex(case_mod.ID_RE, fullmatch=True))
def test_ids_callables_and_argument_names_are_literals(module, function, name, cid):
    case = dataclasses.replace(PYTHON_IMPORTED, id=cid, spec=PythonSpec(callable=f"{module}:{function}",
                                                                        args=((name, (2,), "float32"),)))
    ph = dataclasses.replace(PYTHON_IMPORTED, id=PLACEHOLDER + "i", spec=PythonSpec(
        callable=f"{PLACEHOLDER}m:{PLACEHOLDER}f", args=((PLACEHOLDER + "n", (2,), "float32"),)))
    got = ast.parse(_full_source(case))
    want = ast.parse(_full_source(ph))
    for node in ast.walk(want):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = (node.value.replace(PLACEHOLDER + "i", cid).replace(PLACEHOLDER + "m", module)
                          .replace(PLACEHOLDER + "f", function).replace(PLACEHOLDER + "n", name))
    assert ast.dump(got) == ast.dump(want)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_py_text_is_one_literal_holding_exactly_the_text(text):
    tree = ast.parse(py_text(text), mode="eval")
    assert isinstance(tree.body, ast.Constant) and tree.body.value == text


def test_triple_quote_in_a_description_does_not_run():
    """The defect: a description was pasted into a docstring, so this ran code in the worker."""
    evil = 'x"""\nraise SystemExit("injected")\n"""'
    source = render.render(dataclasses.replace(PATTERN, description=evil)).source
    namespace: dict = {}
    exec(compile(source, "<rendered>", "exec"), namespace)
    assert evil in namespace["__doc__"] and "FN" in namespace


@pytest.mark.parametrize("text", ["\\N", "a \\N{BULLET} b", "\\x", "\\u12"])
def test_backslash_sequences_render_to_valid_python(text):
    source = render.render(dataclasses.replace(PATTERN, description=text)).source
    namespace: dict = {}
    exec(compile(source, "<rendered>", "exec"), namespace)
    assert text in namespace["__doc__"]


@pytest.mark.parametrize("cid", ["good\n", "good ", "good\t", " good"])
def test_id_with_surrounding_whitespace_is_rejected(tmp_path, cid):
    path = tmp_path / "c.yaml"
    import json

    path.write_text(f"cases:\n  - id: {json.dumps(cid)}\n")
    with pytest.raises(case_mod.CaseError) as info:
        case_mod.load_file(path)
    assert "field 'id'" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("callable_", ["mod:fn\n", "mod:f²", "mod.class:fn", "mod:fn()", "a..b:fn"])
def test_callable_must_be_dotted_identifiers(tmp_path, callable_):
    import json

    path = tmp_path / "c.yaml"
    path.write_text(f"cases:\n  - id: p\n    kind: python\n    callable: {json.dumps(callable_)}\n"
                    "    args: [{name: a, shape: [2], dtype: float32}]\n")
    with pytest.raises(case_mod.CaseError) as info:
        case_mod.load_file(path)
    assert "field 'callable'" in str(info.value)


# ---------------------------------------------------------------- python cases: import errors are errors

PY_DEFAULTS = """\
defaults:
  kind: python
  profiles: [cublas]
  args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
cases:
"""
PY_IMPORTS = PY_DEFAULTS + """\
  - id: typo_in_module
    callable: tests.casefnz:plain
  - id: missing_function
    callable: tests.casefns:no_such_function
  - id: failing_import_inside
    callable: user_broken:plain
  - id: declared_optional_missing
    callable: user_broken:plain
    requires: [no_such_dep_abc]
  - id: module_from_the_run_directory
    callable: user_fns:plain
"""


@pytest.mark.slow
def test_python_case_import_errors_are_unresolved(tmp_path, run_cli):
    import json
    import sys

    from ..conftest import write_cases

    write_cases(tmp_path / "cases" / "py.yaml", PY_IMPORTS)
    (tmp_path / "user_broken.py").write_text("import no_such_dep_abc\n\ndef plain(a, b):\n    return a\n")
    (tmp_path / "user_fns.py").write_text(
        "import jax.numpy as jnp\n\n\ndef plain(a, b):\n    return jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))\n")
    code, out, err = run_cli("run", "--mode", "deviceless", "--json", tmp_path / "r.json", cwd=tmp_path)
    assert code == 1, out + err
    got = {r["case"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert got["typo_in_module"]["outcome"] == "UNRESOLVED" and "tests.casefnz" in got["typo_in_module"]["reason"]
    assert got["missing_function"]["outcome"] == "UNRESOLVED" and "no_such_function" in got["missing_function"]["reason"]
    assert got["failing_import_inside"]["outcome"] == "UNRESOLVED" and "no_such_dep_abc" in got["failing_import_inside"]["reason"]
    optional = got["declared_optional_missing"]
    assert optional["outcome"] == "UNSUPPORTED" and "no_such_dep_abc" in optional["reason"] and "requires" in optional["reason"]
    local = got["module_from_the_run_directory"]
    assert local["outcome"] == "NEW" and local["signature"]["gemms"][0]["target"] == "__cublas$lt$matmul$f8"
    # the CLI process itself never imported the cases' modules
    assert not {"user_fns", "user_broken", "tests.casefnz"} & set(sys.modules)


# ---------------------------------------------------------------- bounded YAML, unreadable files

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)) + "cases: []\n"
DEEP_FLOW = "cases: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_BLOCK = "cases:\n" + "".join("  " * i + "- \n" for i in range(1, 300)) + "\n"
DEEP_BY_ALIASES = "".join(f"x{i}: &x{i} [{'*x' + str(i - 1) if i else 1}, [[[[[[[[1]]]]]]]]]\n" for i in range(80)) + "cases: []\n"
RECURSIVE = "defaults: &d {description: x, shape: *d}\ncases: []\n"

BAD_CASE_FILES = {
    "alias bomb": (ALIAS_BOMB.encode(), "alias bomb"),
    "deep flow nesting": (DEEP_FLOW.encode(), "nested deeper than"),
    "deep block nesting": (DEEP_BLOCK.encode(), "nested deeper than"),
    "deep through aliases": (DEEP_BY_ALIASES.encode(), "nested deeper than"),
    "recursive alias": (RECURSIVE.encode(), "recursive alias"),
    "not UTF-8": ("cases:\n  - id: x\n    description: caf\xe9\n".encode("latin-1"), "not UTF-8 text: byte 0xe9 on line 3"),
    "too large": (b"# " + b"x" * (3 * 1024 * 1024) + b"\ncases: []\n", "larger than the 2 MiB limit"),
}


@pytest.mark.parametrize("name", list(BAD_CASE_FILES))
def test_hostile_case_files_are_one_line_errors(tmp_path, name):
    data, needle = BAD_CASE_FILES[name]
    path = tmp_path / "bad.yaml"
    path.write_bytes(data)
    with pytest.raises(case_mod.CaseError) as info:
        case_mod.load_file(path)
    message = str(info.value)
    assert needle in message and message.startswith(str(path)) and "\n" not in message


def test_a_case_file_at_the_size_limit_nested_all_the_way_is_an_error_not_a_crash(tmp_path):
    # libyaml's own composer recurses in C per level: a million levels would crash the
    # interpreter. fp8-check composes in Python (scanning and parsing in C) and stops at MAX_DEPTH.
    path = tmp_path / "deep.yaml"
    path.write_bytes(b"cases: " + b"[" * 1_000_000 + b"]" * 1_000_000 + b"\n")
    with pytest.raises(case_mod.CaseError, match="nested deeper than"):
        case_mod.load_file(path)


def test_the_bounded_loader_reads_every_committed_file_like_pyyaml():
    from fp8_check.core import _safe_yaml as safe_yaml

    from ..conftest import REPO

    files = sorted((REPO / "goldens").rglob("*.yaml")) + sorted((REPO / "cases").rglob("*.yaml"))
    assert len(files) > 100
    for f in files:
        text = f.read_text()
        assert safe_yaml.load(text) == yaml.load(text, Loader=yaml.SafeLoader), f


@pytest.mark.parametrize("command", [("list",), ("run", "--mode", "deviceless"), ("show", "x", "--mode", "deviceless"),
                                     ("bless", "--mode", "deviceless"), ("matrix", "--jax", "0.12.0.1")])
@pytest.mark.parametrize("name", ["alias bomb", "deep flow nesting", "not UTF-8"])
def test_hostile_case_files_exit_2_in_every_command(tmp_path, run_cli, command, name):
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "bad.yaml").write_bytes(BAD_CASE_FILES[name][0])
    code, out, err = run_cli(*command, cwd=tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "bad.yaml" in err, err


def test_bisect_reports_a_hostile_case_file_in_one_line(tmp_path, run_cli):
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "bad.yaml").write_bytes(BAD_CASE_FILES["alias bomb"][0])
    code, out, err = run_cli("bisect", "x", "--test", "current", cwd=tmp_path)
    assert code == 128 and len(err.strip().splitlines()) == 1 and "alias bomb" in err  # git bisect's usage code


@pytest.mark.parametrize("kind", ["directory", "not UTF-8", "alias bomb", "deep"])
def test_unreadable_golden_is_a_golden_error(tmp_path, kind):
    from fp8_check.verdict import _golden as golden

    path = golden.path_for(tmp_path, "c", "h100", "cublas", "deviceless")
    path.parent.mkdir(parents=True)
    if kind == "directory":
        path.mkdir()
    elif kind == "not UTF-8":
        path.write_bytes(b"case: \xff\n")
    elif kind == "alias bomb":
        path.write_text(ALIAS_BOMB.replace("cases: []\n", "expect: []\n"))
    else:
        path.write_text("expect: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(golden.GoldenError) as info:
        golden.load(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- goldens: unreadable, contradictory, stale

def _whole_library(workspace):
    import shutil

    from ..conftest import REPO

    for f in (REPO / "cases").glob("*.yaml"):
        shutil.copy(f, workspace / "cases" / f.name)


@pytest.mark.slow
def test_broken_goldens_are_unresolved_and_the_run_goes_on(workspace, run_cli, monkeypatch):
    import json

    _whole_library(workspace)
    from fp8_check.report import _page as page
    from fp8_check.verdict import _golden as golden

    g = lambda case: golden.path_for(workspace / "goldens", case, "h100", "cublas", "deviceless")  # noqa: E731
    g("seed_plain_f32").unlink()
    g("seed_plain_f32").mkdir()  # unreadable: a directory
    g("seed_plain_bf16").write_text(g("seed_plain_bf16").read_text().replace("target: h100", "target: a100"))
    stale = g("a_case_that_was_removed")
    stale.write_text(g("seed_relu_f32").read_text().replace("case: seed_relu_f32", "case: a_case_that_was_removed"))

    def broken_report(*a, **k):
        raise RuntimeError("the report broke")

    monkeypatch.setattr(page, "write_report", broken_report)
    code, out, err = run_cli("run", "--mode", "deviceless", "-k", "seed_plain,seed_relu_f32", "--profile", "cublas",
                             "--json", workspace / "out" / "r.json", cwd=workspace)
    assert code == 1, out + err
    got = {r["case"]: r for r in json.loads((workspace / "out" / "r.json").read_text())["results"]}  # written anyway
    assert got["seed_plain_f32"]["outcome"] == "UNRESOLVED" and "is a directory" in got["seed_plain_f32"]["reason"]
    bf16 = got["seed_plain_bf16"]
    assert bf16["outcome"] == "UNRESOLVED" and "field 'target': says 'a100'" in bf16["reason"]
    assert got["seed_relu_f32"]["outcome"] == "PASS"
    assert "the report broke" in err
    assert "1 stale golden(s)" in err and "a_case_that_was_removed.yaml" in err


@pytest.mark.slow
def test_bless_prune_removes_stale_goldens_only(workspace, run_cli):
    from fp8_check.verdict import _golden as golden

    _whole_library(workspace)
    stale = golden.path_for(workspace / "goldens", "gone", "a100", "cublas", "deviceless")
    stale.write_text("case: gone\n")
    kept = golden.path_for(workspace / "goldens", "seed_plain_f32", "a100", "cublas", "deviceless")
    assert kept.exists()
    code, out, err = run_cli("bless", "--mode", "deviceless", "--prune", "-k", "seed_plain_f32", "--profile", "cublas",
                             cwd=workspace)
    assert code == 0, out + err
    assert not stale.exists() and kept.exists() and out.count("pruned ") == 1 and "gone.yaml: no case 'gone'" in out



def test_prune_over_a_single_case_file_refuses_and_run_does_not_warn(workspace, run_cli):
    from fp8_check.verdict import _golden as golden

    # the workspace holds cases/seed.yaml and the whole library's goldens
    other = golden.path_for(workspace / "goldens", "xla_17887_bf16_dequant", "h100", "cublas", "deviceless")
    assert other.exists()
    one_file = workspace / "cases" / "seed.yaml"
    code, out, err = run_cli("bless", "--mode", "deviceless", "--prune", str(one_file), cwd=workspace)
    assert code == 2 and "--prune needs case directories" in err and len(err.strip().splitlines()) == 1
    assert other.exists()  # nothing was removed
    code, out, err = run_cli("run", "--mode", "deviceless", "--profile", "cublas", "-k", "seed_plain_f32", str(one_file),
                             "--json", workspace / "r.json", cwd=workspace)
    assert "stale golden" not in err, err

def test_contradictory_golden_is_refused_by_bless(tmp_path):
    from fp8_check.verdict import _golden as golden

    path = golden.path_for(tmp_path, "c", "h100", "cublas", "deviceless")
    path.parent.mkdir(parents=True)
    path.write_text("case: other\ntarget: h100\nprofile: cublas\nmode: deviceless\nexpect: []\n")
    with pytest.raises(golden.GoldenError) as info:
        golden.bless(tmp_path, "c", "h100", "cublas", "deviceless", "0.12.0.1", {"kernels": 1})
    assert "field 'case': says 'other'" in str(info.value)
    assert "other" in path.read_text()  # untouched


# ---------------------------------------------------------------- fail early: output paths, duplicates

@pytest.mark.parametrize("args, needle", [
    (("run", "--json", "{file}/r.json"), "is not a directory"),
    (("run", "--json", "{dir}"), "is a directory"),
    (("run", "--html", "{dir}"), "is a directory"),
    (("run", "--json", "/proc/fp8-check-test/r.json"), "cannot write into /proc"),
    (("show", "seed_plain_f32", "--repro", "/proc/fp8-check-test/repro.py"), "cannot write into /proc"),
    (("show", "seed_plain_f32", "--repro", "{file}/repro.py"), "is not a directory"),
    (("bless", "--goldens", "/proc/fp8-check-goldens"), "cannot write into /proc"),
    (("bless", "--goldens", "{file}"), "not a directory"),
    (("run", "--timeout", "0"), "--timeout"),
])
def test_unwritable_outputs_fail_before_compiling(workspace, run_cli, args, needle):
    (workspace / "afile").write_text("x")
    (workspace / "adir").mkdir()
    args = [a.format(file=workspace / "afile", dir=workspace / "adir") for a in args]
    try:
        code, out, err = run_cli(*args, "--mode", "deviceless", cwd=workspace)
    except SystemExit as exc:  # argparse's own usage errors
        code, out, err = exc.code, "", needle
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert "fp8-check: jax" not in out  # no worker was started, nothing compiled


def test_repeated_targets_and_profiles_are_merged():
    from fp8_check.run import _selection as selection

    given = f"h100,h100, a100,{TARGET_DIR / 'h100.txtpb'}"
    assert [t.name for t in selection.targets_from(given)] == ["h100", "a100"]
    assert selection.profiles_from("cublas,cublas,triton", "deviceless") == ["cublas", "triton"]


# ---------------------------------------------------------------- timeouts, signals, target specs

SLEEPY = PY_DEFAULTS + """\
  - id: a_sleeps
    callable: tests.casefns:sleeps
  - id: b_after_the_timeout
    callable: tests.casefns:plain
"""


@pytest.mark.slow
def test_timeout_makes_the_case_unresolved_and_the_run_goes_on(tmp_path, run_cli):
    import json

    from ..conftest import REPO, write_cases

    write_cases(tmp_path / "cases" / "sleepy.yaml", SLEEPY)
    code, out, err = run_cli("run", "--mode", "deviceless", "--timeout", "15", "--json", tmp_path / "r.json",
                             tmp_path / "cases", cwd=REPO)
    assert code == 1, out + err
    got = {r["case"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert got["a_sleeps"]["outcome"] == "UNRESOLVED" and "no answer within 15 s (--timeout)" in got["a_sleeps"]["reason"]
    assert got["b_after_the_timeout"]["outcome"] == "NEW"  # a fresh worker compiled it


def _children(pid: int) -> list[int]:
    """The child processes of `pid`, whichever of its threads started them (workers are started by one)."""
    from pathlib import Path

    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(x) for x in (task / "children").read_text().split()]
        except OSError:  # the thread ended meanwhile
            pass
    return found


def _alive(pid: int) -> bool:
    from pathlib import Path

    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_signal_stops_the_run_and_its_worker(tmp_path, signame):
    """A real `fp8-check run` process, its worker busy in a case, gets SIGTERM/SIGHUP: both processes end."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from ..conftest import REPO, write_cases

    write_cases(tmp_path / "cases" / "sleepy.yaml", SLEEPY)
    scratch = tmp_path / "tmp"  # the temporary directory of both processes: nothing may be left in it
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "fp8_check.cli.main", "run", "--mode", "deviceless", "--json",
                             str(tmp_path / "r.json"), str(tmp_path / "cases")], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, TMPDIR=str(scratch)))
    try:
        header = proc.stdout.readline()  # printed once the worker is up; then it compiles a_sleeps
        assert header.startswith("fp8-check: jax"), header + proc.stderr.read()
        workers = _children(proc.pid)
        assert workers, "no worker process"
        time.sleep(2)  # let the worker enter the sleeping case
        proc.send_signal(getattr(signal, signame))
        code = proc.wait(timeout=120)  # a hang guard, not a speed claim
        assert code == 128 + getattr(signal, signame), proc.stderr.read()
        for _ in range(100):
            if not any(_alive(w) for w in workers):
                break
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "the worker outlived fp8-check"
        assert not list(scratch.glob("fp8-check-dump-*")), list(scratch.iterdir())  # killed, and cleaned up
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_malformed_target_spec_is_bad_input_not_a_broken_environment(tmp_path, run_cli):
    from ..conftest import REPO

    spec = tmp_path / "h100_typo.txtpb"
    spec.write_text((TARGET_DIR / "h100.txtpb").read_text().replace("core_count", "kore_count"))
    code, out, err = run_cli("run", "--mode", "deviceless", "--target", spec, "-k", "seed_plain_f32", cwd=REPO)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--target h100_typo: not a valid GpuTargetConfig" in err and "kore_count" in err


# ---------------------------------------------------------------- report: bad inputs, the 5 MB cap

def _results(**result):
    import json

    r = {"case": "a", "target": "h100", "profile": "cublas", "mode": "deviceless", "jax": "0.12.0.1", "outcome": "FAIL"}
    return json.dumps({"schema": "fp8-check/results/1", "environment": {"jax": "0.12.0.1"}, "results": [{**r, **result}]})


@pytest.mark.parametrize("content, needle", [
    (b'{"schema": "fp8-check/results/1", "results": [], "x": "\xff"}', "not UTF-8"),
    (None, "is a directory"),
    (b'{"schema": "fp8-check/results/1", "results": [1]}', "malformed result"),
    (b'{"schema": "fp8-check/results/1", "environment": "x", "results": []}', "field 'environment'"),
    (_results(diffs=[1]).encode(), "malformed result"),
    (b'{"schema": "fp8-check/matrix/1", "versions": "abc"}', "malformed version entry"),
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper"),
])
def test_malformed_results_given_to_report_exit_2(tmp_path, run_cli, content, needle):
    path = tmp_path / "r.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    code, out, err = run_cli("report", path, "-o", tmp_path / "r.html", cwd=tmp_path)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert str(path) in err


@pytest.mark.parametrize("field", [{"signature": "x"}, {"hlo": 5}, {"known_issue": "s"}, {"expected": [1]}])
def test_odd_field_types_in_results_do_not_crash_the_report(tmp_path, run_cli, field):
    (tmp_path / "r.json").write_text(_results(**field))
    code, out, err = run_cli("report", tmp_path / "r.json", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert code in (0, 2) and (code == 0 or len(err.strip().splitlines()) == 1), err


def test_report_into_an_unwritable_place_exits_2(tmp_path, run_cli):
    (tmp_path / "r.json").write_text(_results())
    code, out, err = run_cli("report", tmp_path / "r.json", "-o", "/proc/fp8-check-test/r.html", cwd=tmp_path)
    assert code == 2 and "cannot write into /proc" in err and len(err.strip().splitlines()) == 1


def test_report_stays_under_5_mb_with_huge_text_fields(tmp_path, run_cli):
    (tmp_path / "r.json").write_text(_results(description="<d>" * 2_700_000, reason="r" * 3_000_000,
                                              known_issue={"url": "https://x/" + "u" * 1_000_000, "summary": "s"}))
    code, out, err = run_cli("report", tmp_path / "r.json", "-o", tmp_path / "r.html", cwd=tmp_path)
    assert code == 0, err
    html = (tmp_path / "r.html").read_bytes()
    assert len(html) < 5_000_000
    assert b"long fields (descriptions, reasons, YAML, lists) are truncated" in html
    assert b"<d>" not in html  # still escaped


# ---------------------------------------------------------------- end to end: quotes and backslashes everywhere

QUOTES = r'''
defaults:
  profiles: [cublas]
cases:
  - id: quotes_pattern
    description: 'ends a docstring """ then \N and \N{BULLET} and \x and a trailing backslash \'
    dequant: float32
    out_dtype: float32
    known_issues:
      - url: 'https://example.org/"""\N'
        jax: "<0.1"
        summary: 'summary with """ and \N'
  - id: quotes_python
    kind: python
    description: "\"\"\"; raise SystemExit('injected') # \\N"
    callable: tests.casefns:plain
    args: [{name: a, shape: [16, 32], dtype: float8_e4m3fn}, {name: b, shape: [32, 16], dtype: float8_e4m3fn}]
'''


@pytest.mark.slow
def test_quotes_and_backslashes_in_every_text_field_compile_and_pass(tmp_path, run_cli):
    """The file name, description, known issue url and summary all hold a triple quote and a \\N."""
    import json

    from ..conftest import write_cases

    write_cases(tmp_path / "cases" / 'odd """ \\N name.yaml', QUOTES)
    code, out, err = run_cli("bless", "--mode", "deviceless", "--goldens", tmp_path / "goldens", cwd=tmp_path)
    assert code == 0 and "blessed: 2 golden(s) changed" in out, out + err
    code, out, err = run_cli("run", "--mode", "deviceless", "--goldens", tmp_path / "goldens", "--json",
                             tmp_path / "r.json", cwd=tmp_path)
    assert code == 0, out + err
    got = {r["case"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    assert {r["outcome"] for r in got.values()} == {"PASS"}
    assert got["quotes_pattern"]["signature"]["gemms"][0]["target"] == "__cublas$lt$matmul$f8"
    assert '\\"\\"" then \\\\N and' in got["quotes_pattern"]["source"]  # shown in the repro, escaped


def test_matrix_output_checked_before_building_environments(tmp_path, run_cli):
    from ..conftest import REPO

    (tmp_path / "afile").write_text("x")
    code, out, err = run_cli("matrix", "--jax", "0.12.0.1", "--out", tmp_path / "afile" / "m.json", cwd=REPO)
    assert code == 2 and "is not a directory" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_show_repro_into_a_missing_folder_creates_it(workspace, run_cli):
    repro = workspace / "new" / "folder" / "repro.py"
    code, out, err = run_cli("show", "seed_plain_f32", "--mode", "deviceless", "--profile", "cublas", "--repro", repro,
                             cwd=workspace)
    assert code == 0, err
    assert repro.read_text().startswith("#!/usr/bin/env python3")


@pytest.mark.slow
@pytest.mark.parametrize("command, exit_code", [(("matrix", "--jax", "0.12.0.1"), 2),
                                                (("bisect", "seed_plain_f32", "--test", "current", "--criterion", "golden"), 128)])
def test_malformed_target_spec_in_matrix_and_bisect_is_bad_input(tmp_path, run_cli, command, exit_code):
    from ..conftest import REPO

    spec = tmp_path / "h100_typo.txtpb"
    spec.write_text((TARGET_DIR / "h100.txtpb").read_text().replace("core_count", "kore_count"))
    code, out, err = run_cli(*command, "--target", spec, "--profile", "cublas", "--out" if command[0] == "matrix" else "--mode",
                             tmp_path / "m.json" if command[0] == "matrix" else "deviceless", cwd=REPO)
    assert code == exit_code and len(err.strip().splitlines()) == 1, err
    assert "not a valid GpuTargetConfig" in err and "kore_count" in err
