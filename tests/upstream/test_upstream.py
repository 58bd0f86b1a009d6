"""From a regression to an upstream bug (fp8_check.upstream): XLA commit table, first diverging pass,
minimal repro, case reduction, XLA-style FileCheck test, and the issue body parts.

Fast tests use recorded optimized HLO (tests/fixtures/hlo) and the shipped commit table;
`slow` ones compile for real, deviceless, in clean interpreters and per-version environments.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fp8_check.cases import _load as case_mod
from fp8_check.signature._extract import extract
from fp8_check.signature._filecheck import run_filecheck
from fp8_check.targets import PROFILES, load_target
from fp8_check.upstream import (
    _explain as explain,
    _issue as issue,
    _passes as passes,
    _reduce as reduce,
    _repro as repro,
    _xla_test as xla_test,
)
from fp8_check.verdict import _comparator as comparator, _golden as golden
from fp8_check.versions import xla_commits

REPO = Path(__file__).resolve().parents[2]
HLO = REPO / "tests" / "fixtures" / "hlo"
HEX40 = re.compile(r"[0-9a-f]{40}")
LIBRARY = case_mod.load([REPO / "cases"])


def _case(case_id: str) -> case_mod.Case:
    return next(c for c in LIBRARY if c.id == case_id)


def _hlo(version: str, name: str) -> str:
    return (HLO / f"jax-{version}" / name).read_text()


# ---------------------------------------------------------------- XLA commit table

RELEASES = ["0.6.1", "0.6.2", "0.7.0", "0.7.1", "0.7.2", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.9.0", "0.9.0.1",
            "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2", "0.12.0", "0.12.0.1"]


def test_the_shipped_table_covers_every_release_with_real_commits_or_null():
    table = xla_commits.load()
    assert set(RELEASES) <= set(table)
    for v in RELEASES:
        e = table[v]
        assert e.jax_commit and HEX40.fullmatch(e.jax_commit), v
        assert e.xla_commit is None or HEX40.fullmatch(e.xla_commit), v
        if e.xla_commit:
            # revision.bzl exists from 0.7.0 on, workspace.bzl names XLA_COMMIT before.
            want = "third_party/xla/workspace.bzl" if v in ("0.6.1", "0.6.2") else "third_party/xla/revision.bzl"
            assert e.xla_commit_from == want, v
    # Up to 0.11.0 every XLA commit was found (after it the stored JAX history ends: null, not guessed).
    assert all(table[v].xla_commit for v in RELEASES[:RELEASES.index("0.11.0") + 1])


def test_the_xla_range_links_the_two_versions_commits():
    table = xla_commits.load()
    rng = xla_commits.xla_range("0.6.2", "0.7.0")
    g, b = table["0.6.2"].xla_commit, table["0.7.0"].xla_commit
    assert g != b
    assert rng.url == f"https://github.com/openxla/xla/compare/{g}...{b}"
    assert rng.text().startswith(f"XLA {g[:12]}..{b[:12]} (") and rng.url in rng.text()
    assert f"[`{g[:12]}..{b[:12]}`]({rng.url})" in rng.markdown()


def test_an_unknown_or_unchanged_xla_commit_is_said_so():
    table = xla_commits.load()
    same = [(a, b) for a, b in zip(RELEASES, RELEASES[1:]) if table[a].xla_commit and table[a].xla_commit == table[b].xla_commit]
    assert same  # patch releases that kept XLA (e.g. 0.8.2 -> 0.8.3)
    assert "ship the same XLA" in xla_commits.xla_range(*same[0]).text()
    missing = next(v for v in RELEASES if not table[v].xla_commit)
    rng = xla_commits.xla_range("0.8.0", missing)
    assert not rng.known and rng.url is None and f"no XLA commit recorded for jax {missing}" in rng.text()
    assert xla_commits.entry("0.7").version == "0.7.0" and xla_commits.entry("9.9.9") is None


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_regeneration_reads_xla_commit_at_each_release_tag(tmp_path):
    """The update script on a local clone: revision.bzl first, workspace.bzl before it, annotated tags peeled."""
    repo = tmp_path / "jax"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    xla = {"0.1.0": "a" * 40, "0.2.0": "b" * 40}
    (repo / "third_party/xla").mkdir(parents=True)
    (repo / "third_party/xla/workspace.bzl").write_text(f'XLA_COMMIT = "{xla["0.1.0"]}"\nXLA_SHA256 = "x"\n')
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    subprocess.run(git + ["tag", "jax-v0.1.0"], check=True)
    (repo / "third_party/xla/revision.bzl").write_text(f'# comment\nXLA_COMMIT = "{xla["0.2.0"]}"\n')
    (repo / "third_party/xla/workspace.bzl").write_text('load("//third_party/xla:revision.bzl", "XLA_COMMIT")\n')
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "two"], check=True)
    subprocess.run(git + ["tag", "-a", "-m", "release", "jax-v0.2.0"], check=True)
    heads = {v: subprocess.run(git + ["rev-list", "-n1", f"jax-v{v}"], capture_output=True, text=True).stdout.strip()
             for v in xla}
    out = tmp_path / "table.json"
    out.write_text(json.dumps({"versions": {"0.3.0": {"jax_commit": None, "xla_commit": "c" * 40}}}))
    xla_commits.update(["0.1.0", "0.2.0", "0.3.0"], git_dir=str(repo / ".git"), path=out, log=lambda s: None)
    table = xla_commits.load(out)
    for v in xla:
        assert table[v].jax_commit == heads[v] and table[v].jax_commit_from == f"release tag jax-v{v}"
        assert table[v].xla_commit == xla[v]
    assert table["0.1.0"].xla_commit_from.endswith("workspace.bzl")
    assert table["0.2.0"].xla_commit_from.endswith("revision.bzl")
    assert table["0.3.0"].xla_commit == "c" * 40  # no tag: the previous value is kept


# ---------------------------------------------------------------- XLA-style FileCheck test

def test_filecheck_lines_from_the_good_signature_pass_on_good_and_fail_on_a_split():
    good_hlo, bad_hlo = _hlo("0.6.1", "scaled_bf16.h100.cublas.txt"), _hlo("0.8.0", "scaled_bf16.h100.cublas.txt")
    good = extract(good_hlo)
    assert good.kernels != extract(bad_hlo).kernels
    ver = xla_test.verify(good, good_hlo, bad_hlo)
    assert ver.good_errors == [] and ver.bad_errors and ver.ok
    assert "CHECK-NOT" in ver.bad_errors[0] and ".check:" not in ver.bad_errors[0]


def test_filecheck_gemm_lines_catch_a_lost_epilogue_or_damax():
    """Mutations of the good HLO: the epilogue or the damax flag changed -> the gemm pattern fails on that line."""
    good_hlo = _hlo("0.8.0", "relu_amax.h100.cublas.txt")
    relu = extract(good_hlo)
    checks = xla_test.gemm_checks(relu)
    assert '"epilogue":"RELU"' in checks and '"damax_output":true' in checks
    assert run_filecheck(checks, good_hlo) is None
    no_relu = good_hlo.replace('"epilogue":"RELU"', '"epilogue":"DEFAULT"')
    no_damax = good_hlo.replace('"damax_output":true', '"damax_output":false')
    assert no_relu != good_hlo and no_damax != good_hlo
    assert "RELU" in run_filecheck(checks, no_relu)
    assert "damax_output" in run_filecheck(checks, no_damax)


def test_the_export_is_shaped_like_xlas_gemm_rewriter_tests():
    good = extract(_hlo("0.6.1", "scaled_bf16.h100.cublas.txt"))
    before = 'HloModule m\n\nENTRY e {\n  p = f32[] parameter(0), metadata={op_name="a{b}"}\n}\n'
    cc = xla_test.export("seed_scaled_bf16", before, good, "0.6.1", "0.8.0", "h100", PROFILES["cublas"].compiler_options)
    assert "TEST_P(ParameterizedFp8GemmRewriteTest, Fp8CheckSeedScaledBf16) {" in cc
    assert 'const char* hlo_text = R"(\nHloModule m' in cc and "metadata" not in cc
    assert cc.count("MatchOptimizedHlo(hlo_text, R\"(") == 2
    assert f"; CHECK-COUNT-{good.kernels}: " in cc


# ---------------------------------------------------------------- first diverging pass

def _dump(root: Path, steps: list[tuple[str, str, str]]) -> list[passes.Step]:
    """Write per-pass dumps named like XLA's: (pipeline, pass, module text)."""
    root.mkdir(parents=True)
    for i, (pipe, name, text) in enumerate(steps):
        (root / f"module_0001.jit_f.{i:04d}.{pipe}.after_{name}.before_next.txt").write_text(text)
    (root / "module_0001.jit_f.before_optimizations.txt").write_text("not a pass")
    return passes.steps(root)


def test_structure_ignores_names_but_not_kernels():
    a = _hlo("0.6.1", "scaled_bf16.h100.cublas.txt")
    renamed = re.sub(r"%([A-Za-z_][\w.\-]*)", lambda m: "%x_" + m.group(1)[::-1], a)
    assert passes.structure(renamed) == passes.structure(a)
    assert passes.structure(_hlo("0.8.0", "scaled_bf16.h100.cublas.txt")) != passes.structure(a)
    assert any(line.startswith("custom-call __cublas$lt$matmul$f8(") for line in passes.structure(a))


def test_the_first_diverging_pass_is_found_across_different_pass_lists(tmp_path):
    s1, s2 = _hlo("0.6.1", "scaled_bf16.h100.cublas.txt"), _hlo("0.8.0", "scaled_bf16.h100.cublas.txt")
    good = _dump(tmp_path / "good", [("opt", "pipeline-start", s1), ("opt", "algsimp", s1), ("fusion", "old-pass", s1),
                                     ("fusion", "priority-fusion", s1)])
    bad = _dump(tmp_path / "bad", [("opt", "pipeline-start", s1), ("opt", "algsimp", s1),
                                   ("fusion", "priority-fusion", s2)])
    d = passes.first_divergence(good, bad, "1", "2")
    assert (d.pass_name, d.pipeline, d.changed_in) == ("priority-fusion", "fusion", None)
    assert d.before == passes.structure(s1) and d.after_bad == passes.structure(s2)
    assert any(line.startswith("+") for line in d.diff()) and "priority-fusion" in d.text() and "`priority-fusion`" in d.markdown()
    assert d.hlo_good.startswith("ENTRY") and d.hlo_bad.startswith("ENTRY") and "metadata=" not in d.hlo_bad
    # A pass that changed the module in one version only (XLA dumps only changing passes).
    bad2 = _dump(tmp_path / "bad2", [("opt", "pipeline-start", s1), ("fusion", "new-pass", s2)])
    d2 = passes.first_divergence(good, bad2, "1", "2")
    assert (d2.pass_name, d2.changed_in) == ("new-pass", "2")
    same = passes.first_divergence(good, _dump(tmp_path / "same", [("opt", "pipeline-start", s1)]), "1", "2")
    assert not same.found and "same structure" in same.message


# ---------------------------------------------------------------- minimal repro

def test_every_pattern_case_has_a_minimal_repro_of_at_most_40_lines():
    targets = [load_target("h100"), load_target("b200")]
    for case in (c for c in LIBRARY if c.kind == "pattern"):
        for target in targets:
            for profile in ("cublas", "triton"):
                src = repro.minimal(case, target, PROFILES[profile], "0.12.0.1")
                assert src.count("\n") <= repro.MAX_LINES, (case.id, target.name)
                compile(src, "repro.py", "exec")
                assert "harness" not in src and repro.__name__.split(".")[0] not in src and 'jax[cuda12]==0.12.0.1' in src
    with pytest.raises(repro.ReproError, match="kind: python"):
        repro.minimal(next(c for c in LIBRARY if c.kind == "python"), targets[0], PROFILES["cublas"], "0.12.0.1")


@pytest.mark.slow
@pytest.mark.network
def test_the_minimal_repro_reproduces_the_golden_standalone(tmp_path):
    """In an environment that holds only JAX (this version's, fp8_check.versions._envs), with -I, from an empty directory."""
    import jax

    from fp8_check.versions._envs import Manager

    env = Manager(reuse_self=False).ensure(jax.__version__)
    package = repro.__name__.split(".")[0]
    probe = subprocess.run([str(env.python), "-I", "-c", f"import {package}"], cwd=tmp_path, capture_output=True, text=True)
    assert probe.returncode != 0 and f"No module named '{package}'" in probe.stderr  # no checkout on sys.path
    case, target = _case("epi_bias_relu"), load_target("h100")
    g = golden.load(golden.path_for(REPO / "goldens", case.id, "h100", "cublas", "deviceless"))
    expected = g.expected_for(jax.__version__)
    assert expected is not None
    run = passes.run_repro(repro.minimal(case, target, PROFILES["cublas"], jax.__version__), str(env.python),
                           tmp_path / "run", jax.__version__, pass_dumps=False)
    assert comparator.compare(expected.signature, extract(run.optimized_hlo).to_dict()) == []
    assert "__cublas$lt$matmul$f8" in run.printed and " fusion(" in run.printed


# ---------------------------------------------------------------- reduce

def test_case_yaml_round_trips_through_the_loader(tmp_path):
    for case in (c for c in LIBRARY if c.kind == "pattern"):
        f = tmp_path / f"{case.id}.yaml"
        f.write_text(reduce.to_yaml(case))
        [back] = case_mod.load_file(f)
        assert reduce.case_fields(back) == reduce.case_fields(case), case.id


def test_reduction_candidates_drop_one_feature_each():
    case = _case("epi_bias_relu_amax")
    fields = reduce.case_fields(case)
    names = [what for what, _ in reduce.candidates(case, fields)]
    assert {"the epilogue", "the bias", "the relu activation", "the amax", "the input scales", "the clamp",
            "the output scale", "half of m"} <= set(names)
    for what, new in reduce.candidates(case, fields):
        changed = {k for k in set(fields) | set(new) if fields.get(k) != new.get(k)}
        assert changed and changed <= {"epilogue", "bias_dtype", "amax", "input_scales", "output_scale", "clamp",
                                       "out_dtype", "requantize", "scale_dtype", "transpose_b", "shape"}, what


# ---------------------------------------------------------------- the issue body

FIX = REPO / "tests" / "fixtures" / "results"


def _fail_body() -> str:
    from fp8_check.report import _issue as report_issue, _model as model

    [md] = report_issue.markdown_for(model.load(sorted(FIX.glob("jax-*.json"))).results, "seed_scaled_clamp_bf16",
                                     profile="cublas")
    return md


def test_the_issue_body_names_the_xla_range_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("FP8_CHECK_UPSTREAM_DIR", str(tmp_path))
    md = _fail_body()
    assert "(worked on 0.8.0)" in md.splitlines()[0]
    rng = xla_commits.xla_range("0.8.0", "0.12.0.1")
    assert "### XLA commit range" in md and f"jax 0.8.0 → 0.12.0.1: {rng.markdown()}." in md
    assert "--good 0.8.0 --bad 0.12.0.1" in md and "### Reproducer" in md


def test_a_saved_explanation_puts_every_part_in_the_issue_body(monkeypatch, tmp_path):
    s1, s2 = _hlo("0.8.0", "scaled_bf16.h100.cublas.txt"), _hlo("0.12.0.1", "scaled_bf16.h100.cublas.txt")
    div = passes.Divergence("0.8.0", "0.12.0.1", "fusion", "priority-fusion", None, passes.structure(s1),
                            passes.structure(s1), passes.structure(s2))
    case = _case("seed_scaled_clamp_bf16")
    src = repro.minimal(case, load_target("h100"), PROFILES["cublas"], "0.12.0.1")
    exp = explain.Explanation(case.id, "h100", "cublas", "0.8.0", "0.12.0.1", "a" * 40, "b" * 40, div, src,
                              {"0.8.0": "%g = f8e4m3fn[1] custom-call(), metadata={x}"}, {"0.8.0": True, "0.12.0.1": True},
                              ["kernels: 2 -> 4"], "TEST_P(ParameterizedFp8GemmRewriteTest, X) {}", [], ["CHECK-NOT"])
    path = explain.save(exp, tmp_path)
    assert explain.load(path) == exp
    monkeypatch.setenv("FP8_CHECK_UPSTREAM_DIR", str(tmp_path))
    md = _fail_body()
    order = ["### Minimal reproducer", "### Optimized HLO", "### Versions", "### First bad version and XLA commit range",
             "### First diverging XLA pass", "### XLA test", "### Environment"]
    at = [md.index(h) for h in order]
    assert at == sorted(at)
    assert "### Reproducer\n" not in md and src.rstrip() in md and "metadata" not in md.split("### Optimized HLO")[0]
    assert f"compare/{'a' * 40}...{'b' * 40}" in md and "`priority-fusion`" in md
    assert "passes; on the bad version's: fails" in md


def test_neighbours_pick_the_adjacent_good_version():
    assert issue.neighbours("0.8.0", ["0.6.1", "0.7.0", "0.12.0"]) == ("0.7.0", "0.8.0")
    assert issue.neighbours("0.6.1", ["0.7.0", "0.12.0"]) == ("0.6.1", "0.7.0")
    assert issue.neighbours("0.6.1", []) is None


# ---------------------------------------------------------------- end to end across versions

@pytest.mark.slow
@pytest.mark.network
def test_bisect_explain_on_a_real_change(run_cli, tmp_path):
    """epi_bias_relu (bf16 scales), cublas: 3 kernels on jax 0.6.2, 5 on 0.7.0 (per-version environments)."""
    code, out, err = run_cli("bisect", "epi_bias_relu", "--good", "0.6.2", "--bad", "0.7.0", "--profile", "cublas",
                             "--explain", "--upstream-dir", tmp_path)
    assert code == 1, err
    table = xla_commits.load()
    assert "first bad version: jax 0.7.0 (last good: jax 0.6.2)" in out
    assert f"XLA {table['0.6.2'].xla_commit[:12]}..{table['0.7.0'].xla_commit[:12]}" in out
    exp = explain.load(explain.path_for(tmp_path, "epi_bias_relu", "h100", "cublas"))
    assert exp.divergence.found and f"first diverging pass: {exp.divergence.pass_name} (pipeline" in out
    assert exp.divergence.after_good != exp.divergence.after_bad
    assert exp.reproduces == {"0.6.2": True, "0.7.0": True}
    assert exp.repro_lines <= 40 and 'jax[cuda12]==0.7.0' in exp.repro
    assert exp.verification.ok  # the exported FileCheck test passes on good, fails on bad


@pytest.mark.slow
@pytest.mark.network
def test_reduce_keeps_the_regression_with_fewer_features():
    """The reduced case is checked independently: its signature still changes between the versions in the same fields."""
    from fp8_check.upstream._bisect import Tester

    case, target, profile = _case("epi_bias_relu"), load_target("h100"), PROFILES["cublas"]
    red = reduce.reduce(case, target, profile, "0.6.2", "0.7.0", log=lambda s: None)
    assert red.dropped and len(reduce.case_fields(red.reduced)) < len(reduce.case_fields(case))
    tester = Tester(red.reduced, target, profile, "deviceless", REPO / "goldens")
    (good, _), (bad, _) = tester.signature_on("0.6.2"), tester.signature_on("0.7.0")
    fields = sorted({d.path.split(".")[0].split("[")[0] for d in comparator.compare(good.to_dict(), bad.to_dict())})
    assert fields == red.fields and "kernels" in fields


def test_clean_line_keeps_the_gemm_fields_and_drops_the_noise():
    line = ('  %g = (f8e4m3fn[64,32]{1,0}, s8[4]{0}) custom-call(%a, %b), custom_call_target="__cublas$lt$matmul$f8", '
            'metadata={op_name="x{y}" source_line=3}, backend_config={"gemm_backend_config":{"alpha_real":1,'
            '"epilogue":"RELU","lhs_stride":"4096","damax_output":true},"reification_cost":[]}')
    out = passes.clean_line(line)
    assert out == ('  %g = (f8e4m3fn[64,32]{1,0}, s8[4]{0}) custom-call(%a, %b), custom_call_target="__cublas$lt$matmul$f8", '
                   'backend_config={..."epilogue":"RELU","damax_output":true...}')
    quoted = '  %f = f32[] fusion(%p), kind=kLoop, backend_config="{\\"kind\\":\\"__triton_gemm\\"}", frontend_attributes={a="[{}]"}'
    assert passes.clean_line(quoted) == "  %f = f32[] fusion(%p), kind=kLoop"


def test_reduce_usage_errors_are_one_line_and_exit_2(run_cli):
    for args, text in [(["nope", "--jax", "0.7.0", "--good", "0.6.2"], "no case with id 'nope'"),
                       (["epi_bias_relu", "--jax", "0.x", "--good", "0.6.2"], "not a version: '0.x'"),
                       (["epi_bias_relu", "--jax", "0.7.0", "--good", "0.6.2", "--profile", "default"], "not a deviceless profile"),
                       (["flax_dense_fp8_direct", "--jax", "0.7.0", "--good", "0.6.2"], "only pattern cases can be reduced")]:
        if args[0].startswith("flax") and not any(c.id == args[0] for c in LIBRARY):
            args[0] = next(c.id for c in LIBRARY if c.kind == "python")
        code, out, err = run_cli("reduce", *args)
        assert code == 2 and err.count("\n") == 1 and text in err, (args, err)


def test_modules_that_differ_before_the_first_pass_blame_the_input(tmp_path):
    s1, s2 = _hlo("0.6.1", "scaled_bf16.h100.cublas.txt"), _hlo("0.8.0", "scaled_bf16.h100.cublas.txt")
    d = passes.first_divergence(_dump(tmp_path / "g", [("opt", "pipeline-start", s1)]),
                                _dump(tmp_path / "b", [("opt", "pipeline-start", s2)]), "1", "2")
    assert d.found and d.pass_name.startswith("(input") and "JAX lowers the program differently" in d.message


def test_an_explanation_for_another_version_pair_is_not_used(tmp_path):
    div = passes.Divergence("0.6.2", "0.7.0", message="x")
    exp = explain.Explanation("c", "h100", "cublas", "0.6.2", "0.7.0", None, None, div, "print()\n")
    explain.save(exp, tmp_path)
    assert explain.find("c", "h100", "cublas", ("0.7.0", "0.6.2"), tmp_path) == exp
    assert explain.find("c", "h100", "cublas", ("0.6.2", "0.7.1"), tmp_path) is None
    assert explain.find("c", "h100", "triton", ("0.6.2", "0.7.0"), tmp_path) is None
    parts = issue.parts_for("c", "h100", "cublas", "0.7.1", ["0.6.2"])
    assert parts.repro == "" and "### XLA commit range" in parts.analysis


def test_titles_say_what_kind_of_change_it_is():
    g = "__cublas$lt$matmul$f8"
    D = comparator.FieldDiff
    assert issue.what_changed([D("kernels", 3, 5), D("launches", ["a"], ["a", "b"])], g) == \
        f"5 kernels instead of 3 around an unchanged {g}"
    assert issue.what_changed([D("gemms[0].epilogue", "RELU", "DEFAULT"), D("kernels", 1, 2)], g) == f"{g} changes its epilogue"
    assert issue.what_changed([D("gemms[0].target", g, "__cublas$lt$matmul")], g) is None
    assert issue.what_changed([D("gemms", [1], [])], g) is None and issue.what_changed([], g) is None


def test_text_from_a_case_file_never_becomes_repro_code():
    import dataclasses

    case = dataclasses.replace(_case("seed_plain_f32"), description='x\nimport os; os.system("echo pwned")')
    src = repro.minimal(case, load_target("h100"), PROFILES["cublas"], "0.12.0.1")
    assert [line for line in src.splitlines() if "pwned" in line] == [src.splitlines()[0]] and src.startswith("# ")
    with pytest.raises(repro.ReproError, match="not a JAX version"):
        repro.minimal(case, load_target("h100"), PROFILES["cublas"], '0.7.0"; import os #')


def test_a_lost_fp8_gemm_keeps_the_no_longer_fuses_title_and_summary():
    """Recorded results: seed_scaled_clamp_bf16 loses its FP8 gemm on 0.12.0.1 (gemm target changes), so the
    class-aware wording for an unchanged gemm must not be used."""
    from fp8_check.report import _issue as report_issue, _model as model

    [md] = report_issue.markdown_for(model.load(sorted(FIX.glob("jax-*.json"))).results, "seed_scaled_clamp_bf16",
                                     profile="cublas")
    assert "no longer fuses into __cublas$lt$matmul$f8" in md.splitlines()[0]
    assert "still emits" not in md and "around an unchanged" not in md
