"""Issue 52: the nightly across releases tells the truth.

- a target whose canary fails is broken on that release: its rows say why, the other targets go on;
- an older libtpu gets the chips-per-host bounds a TPU layout needs (one chip and multi-chip);
- the closing verdict counts regressions, errors (UNRESOLVED) and rows to review apart, and never says
  "no regressions" when a release did not run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from fp8_check.cases import _load as case_mod
from fp8_check.compile import Compiler
from fp8_check.matrix import closing_line, not_run, plan_release
from fp8_check.matrix._document import Matrix, Status, VersionEntry, entry_from_json, entry_to_json
from fp8_check.platforms.tpu import TPU, host_bounds
from fp8_check.run import _runner as runner
from fp8_check.signature._extract import Gemm, Signature
from fp8_check.targets import PROFILES, all_target_names, load_target, profile_applies
from fp8_check.verdict import _outcome as outcome
from fp8_check.verdict._classify import classify
from fp8_check.verdict._outcome import Outcome
from fp8_check.versions import sort_versions, xla_commits

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ TPU layouts on an older libtpu


@pytest.mark.parametrize("layout, bounds", [
    ("1x1x1", [1, 1, 1]), ("1x1", [1, 1, 1]),  # one chip: as before
    ("2x1x1", [2, 1, 1]),  # multi-chip: libtpu 0.8.1-0.11.2 refused tpu7x:2x1x1 against its default 2x2x1
    ("2x2x1", None), ("4x4x1", None), ("2x2", None), ("4x8", None),  # divisible by the default: nothing added
])
def test_a_layout_the_default_chips_per_host_does_not_divide_gets_bounds_that_do(layout, bounds):
    assert host_bounds(layout) == bounds


def test_tpu7x_2x1x1_gets_its_bounds_before_0_12_only():
    spec = TPU.spec_for("tpu7x-2x1x1")
    assert TPU.topology_arguments(spec, "", "0.10.0") == {"topology_name": "tpu7x:2x1x1", "chips_per_host_bounds": [2, 1, 1]}
    assert TPU.topology_arguments(spec, "", "0.12.0") == {"topology_name": "tpu7x:2x1x1"}
    assert "chips_per_host_bounds" not in TPU.topology_arguments(TPU.spec_for("tpu7x-2x2x1"), "", "0.8.2")


# ------------------------------------------------------------------ the closing verdict


def _sig(kernels: int, out: str = "f8e4m3fn") -> Signature:
    return Signature(kernels, [], [Gemm("__cublas$lt$matmul$f8", ["f8e4m3fn", "f8e4m3fn"], output=out)], [])


def _fail(case: str, jax: str) -> Outcome:
    o = Outcome(case, "h100", "cublas", "deviceless", jax, outcome.FAIL, "1 field(s) differ", signature=_sig(3, "f32"))
    o.verdict = classify(_sig(3).to_dict(), _sig(3, "f32"))
    return o


def _row(case: str, jax: str, code: str, reason: str = "") -> Outcome:
    return Outcome(case, "h100", "cublas", "deviceless", jax, outcome.code(code), reason, signature=_sig(3))


def test_the_verdict_counts_regressions_errors_and_rows_to_review_apart():
    """Before: `verdict: 3 regressions against goldens` where two rows were import errors (UNRESOLVED)."""
    err = "ImportError: cannot import name 'scaled_dot' from 'jax.lax'"
    m = Matrix([VersionEntry("0.7.0", outcomes=[_fail("lost", "0.7.0"), _row("user_a", "0.7.0", "UNRESOLVED", err),
                                                _row("user_b", "0.7.0", "UNRESOLVED", err),
                                                _row("fresh", "0.7.0", "NEW", "no golden yet"),
                                                _row("ok", "0.7.0", "PASS")])])
    assert m.versions[0].outcomes[0].verdict.is_regression
    line = closing_line(m)
    assert line.startswith("verdict: 1 regression against goldens, 2 errors (UNRESOLVED: a case that does not "
                           "compile or import; user_a on jax 0.7.0: ImportError: cannot import name 'scaled_dot'"), line
    assert ", 1 row to review (" in line and "no regressions" not in line


def test_the_verdict_never_says_no_regressions_when_a_release_did_not_run():
    """Before: `verdict: no regressions against goldens (nothing ran on 0 JAX versions)`, and with one release
    that ran, `no regressions` beside the install-failed ones."""
    why = "uv could not install jax==0.6.2: no matching distribution"
    failed = [VersionEntry(v, Status.INSTALL_FAILED, why) for v in ("0.6.2", "0.7.0")]
    line = closing_line(Matrix(failed))
    assert line.startswith(f"verdict: nothing ran on 0.6.2, 0.7.0: install-failed: {why}"), line
    assert "no regressions" not in line and Matrix(failed).exit_code("regression") == 3
    ran = VersionEntry("0.12.0", outcomes=[_row("ok", "0.12.0", "PASS")])
    m = Matrix([*failed, ran])
    assert closing_line(m).startswith("verdict: nothing ran on 0.6.2, 0.7.0: install-failed") and "no regressions" \
        not in closing_line(m)
    assert m.exit_code("regression") == 3 and m.exit_code("newest") == 3 and m.exit_code("any") == 3
    assert closing_line(Matrix([ran])).startswith("verdict: no regressions against goldens (1 PASS")
    # a release whose one target is broken: said, never a pass, and kept in the matrix JSON
    ran.broken_targets = {"tpu7x-2x1x1": "the canary did not compile: Topology layout ... not divisible"}
    m = Matrix([ran])
    assert "nothing ran for tpu7x-2x1x1 on 0.12.0: broken target: the canary" in closing_line(m)
    assert m.exit_code("regression") == 3
    assert entry_from_json(json.loads(json.dumps(entry_to_json(ran)))).broken_targets == ran.broken_targets
    assert any(n.line().startswith("broken target tpu7x-2x1x1 on jax 0.12.0: the canary") for n in not_run(m))


# ------------------------------------------------------------------ canaries per target (real compiles)


@pytest.mark.slow
def test_a_target_whose_canary_fails_is_broken_and_the_other_targets_go_on(tmp_path):
    """Before: the first failing canary raised CanaryError and every other target of the release was discarded."""
    h100 = load_target("h100")
    no_runtime = dataclasses.replace(h100, name="h100_no_runtime",
                                     versions=dataclasses.replace(h100.versions, runtime=None))
    cases = [c for c in case_mod.load([REPO / "cases" / "seed.yaml"]) if c.id == "seed_plain_f32"]
    broken: dict[str, str] = {}
    with Compiler("deviceless") as compiler:
        outs = runner.run(cases, [h100, no_runtime], ["cublas"], "deviceless", compiler, REPO / "goldens",
                          canary=True, broken_targets=broken)
        by_target = {o.target: o for o in outs}
        assert by_target["h100"].code is outcome.PASS, by_target["h100"].reason
        bad = by_target["h100_no_runtime"]
        assert bad.code is outcome.UNRESOLVED and bad.reason.startswith("target h100_no_runtime is broken on jax ")
        assert "did not become an FP8 gemm" in bad.reason and list(broken) == ["h100_no_runtime"]
        with pytest.raises(runner.CanaryError):  # every target broken: the environment is
            runner.run(cases, [no_runtime], ["cublas"], "deviceless", compiler, REPO / "goldens", canary=True)


@pytest.mark.slow
def test_tpu7x_2x1x1_compiles_on_an_older_libtpu_beside_v6e(tmp_path, run_cli):
    """`matrix cases/tpu.yaml --jax 0.8.2 --target tpu7x-2x1x1,v6e`: before, tpu7x-2x1x1's canary failed
    (`Topology layout "tpu7x:2x1x1" is not divisible by ... chips_per_host_bounds "2x2x1"`) and the release was broken.
    A case of our own runs on tpu7x-2x1x1 (the library has none for that topology): it compiles (NEW: no golden)."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("cases:\n- id: mine_fp8_dot\n  kind: python\n  callable: mod:step\n  profiles: [tpu]\n"
                    "  targets: [tpu7x-2x1x1]\n  args: [{name: a, shape: [256, 256], dtype: float8_e4m3fn},"
                    " {name: b, shape: [256, 256], dtype: float8_e4m3fn}]\n")
    (tmp_path / "mod.py").write_text("import jax, jax.numpy as jnp\n\ndef step(a, b):\n"
                                     "    return jnp.dot(a, b, preferred_element_type=jnp.float32)\n")
    code, out, err = run_cli("matrix", REPO / "cases" / "tpu.yaml", mine, "--jax", "0.8.2", "--target",
                             "tpu7x-2x1x1,v6e", "--out", tmp_path / "m.json", "--no-html", "--goldens",
                             REPO / "goldens", "--fail-on", "regression", cwd=tmp_path)
    [entry] = json.loads((tmp_path / "m.json").read_text())["versions"]
    assert entry["status"] == "ran" and not entry.get("broken_targets"), entry["error"] or entry.get("broken_targets")
    rows = {(r["case"], r["target"]): r["outcome"] for r in entry["results"]}
    assert rows[("mine_fp8_dot", "tpu7x-2x1x1")] == "NEW"
    assert {o for (c, t), o in rows.items() if t == "v6e"} == {"PASS"}
    assert code == 0, out + err


# ------------------------------------------------------------------ CI guards: the nightly's plan, offline


LIBRARY = sorted((REPO / "cases").glob("*.yaml"))
RELEASES = [v for v in sort_versions(xla_commits.load()) if not runner.deviceless_unsupported(v)]


def test_the_whole_library_plans_on_every_supported_release_for_every_shipped_target():
    """Nothing installed or compiled: requirement ranges resolved per release, the same rules the matrix runs by
    (`plan_release`). Each release runs its cases on every shipped target its platform and chips exist for; a
    requirement set's cases are UNSUPPORTED only where its range excludes the release, and its environment is
    built only where a selected target runs them (before: qwix's JAX >= 0.12 made every older release
    install-failed, for an h100 run too)."""
    cases = case_mod.load(LIBRARY)
    sets = {c.requirements.name: c.requirements.jax for c in cases if c.requirements}
    assert sets == {"qwix": ">=0.12.0"}  # what the shipped library needs (a new set: extend the assertions)
    for name in all_target_names():
        target = load_target(name)
        profiles = [p for p in PROFILES if PROFILES[p].deviceless and profile_applies(p, target)]
        planned = [c for c, _t, _p in runner.plan(cases, [target], profiles)]
        if not planned:
            continue
        for v in RELEASES:
            plan = plan_release(v, cases, [target], profiles)
            if target.platform.unsupported_reason(v, target.arch):  # no plugin, or no such chip in this release
                assert plan.runs == 0 and plan.sets == (), (name, v, plan)
                continue
            assert plan.reason == "" and plan.runs > 0, (name, v, plan)
            for why in plan.unsupported:
                assert why.startswith("requirements qwix need jax>=0.12.0; this is jax "), (name, v, why)
            qwix = any(c.requirements and c.requirements.name == "qwix" for c in planned)
            assert plan.sets == (("qwix",) if qwix and Version(v) >= Version("0.12.0") else ()), (name, v, plan)
            assert plan.runs + sum(plan.unsupported.values()) == len(planned)


def test_the_readmes_nightly_plans_every_release_through_the_cli(run_cli):
    """`matrix --plan` (the README's nightly, whole library, h100): every release runs its 170-odd rows, no
    requirement set is built for it."""
    code, out, err = run_cli("matrix", *LIBRARY, "--jax", ",".join(RELEASES), "--target", "h100", "--plan",
                             "--format", "json")
    assert code == 0, err
    plans = json.loads(out)
    assert [p["jax"] for p in plans] == RELEASES
    assert all(p["reason"] == "" and p["runs"] > 100 and not p["unsupported"] and not p["requirement_sets"]
               for p in plans), plans


def _step(job: dict, needle: str) -> str:
    return next(s["run"] for s in job["steps"] if needle in s.get("run", ""))


def test_the_nightlys_plan_step_runs_offline_and_every_release_it_lists_runs_its_cases(tmp_path, run_cli):
    """nightly.yml's `versions` job (the plan step) as written, with the shipped release table standing in for the
    index (FP8_CHECK_JAX_VERSIONS: nothing asked from the network), then each listed release planned as the
    `matrix` job would run it: every one runs the library's cases."""
    doc = yaml.safe_load((REPO / ".github" / "workflows" / "nightly.yml").read_text())
    listing = _step(doc["jobs"]["versions"], "fp8_check.versions.releases")
    command = shlex.split(listing.split(">>")[0].replace('"$JAX_RANGE"', "0.6.1.."))
    command = command[command.index("python"):]  # after `uv run --no-project --with packaging`
    command[0] = sys.executable
    table = ",".join(sort_versions(xla_commits.load()))
    env = {**os.environ, "PYTHONPATH": str(REPO / "harness"), "FP8_CHECK_JAX_VERSIONS": table}
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    [line] = [x for x in out.stdout.splitlines() if x.startswith("versions=")]
    listed = json.loads(line.split("=", 1)[1])
    assert listed == [v for v in sort_versions(xla_commits.load()) if Version(v) >= Version("0.6.1")]
    matrix = _step(doc["jobs"]["matrix"], "fp8-check matrix")
    args = shlex.split(matrix.replace("\\\n", " ").split("fp8-check", 1)[1])
    assert args[:2] == ["matrix", "--jax"] and "--with" not in args and not any(a.endswith(".yaml") for a in args)
    code, printed, err = run_cli("matrix", "--jax", ",".join(listed), "--mode", "deviceless", "--plan",
                                 "--format", "json")  # the job's cases (cases/) and target (h100), planned
    assert code == 0, err
    assert all(p["reason"] == "" and p["runs"] > 100 and not p["unsupported"] for p in json.loads(printed))


def test_rebless_plans_every_group_offline_and_each_release_runs():
    """scripts/rebless.sh --plan: each group's matrix, planned (nothing installed, the shipped release table):
    no release of any group is left with nothing to run (before, tpu_qwix.yaml's range made the nvidia group's
    releases before 0.12 install-failed)."""
    out = subprocess.run(["bash", "scripts/rebless.sh", "--plan"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=600, cwd=REPO)  # one stream: a group's heading before its lines
    assert out.returncode == 0, out.stdout[-2000:]
    per_group: dict[str, list[str]] = {}
    group = ""
    for line in out.stdout.splitlines():
        if line.startswith("rebless.sh: ") and ": targets " in line:
            group = line.split(":")[1].strip()
        elif line.startswith("jax ") and group:
            per_group.setdefault(group, []).append(line)
    assert sorted(per_group) == ["amd", "multi", "nvidia"], out.stdout
    for name, lines in per_group.items():
        assert lines and all(re.fullmatch(r"jax [\d.]+: \d+ runs", x) for x in lines), (name, lines)


@pytest.mark.slow
def test_the_readmes_nightly_runs_the_whole_library_on_the_oldest_and_a_middle_release(tmp_path, run_cli):
    """The README's nightly (`matrix ... --target h100 --fail-on regression`, the whole library, each case's own
    requirements and nothing added) on the oldest supported release and one in the middle: both run, zero FAIL,
    NEW and install-failed. Before: `install-failed: requirements ... need jax>=0.12.0` on both, exit 3."""
    oldest, middle = RELEASES[0], RELEASES[len(RELEASES) // 2]
    code, out, err = run_cli("matrix", "--jax", f"{oldest},{middle}", "--target", "h100", "--fail-on", "regression",
                             "--out", tmp_path / "matrix.json", "--no-html")
    doc = json.loads((tmp_path / "matrix.json").read_text())
    assert [(e["jax"], e["status"]) for e in doc["versions"]] == [(oldest, "ran"), (middle, "ran")], out + err
    for e in doc["versions"]:
        assert e["summary"]["PASS"] > 100 and e["summary"]["FAIL"] == e["summary"]["NEW"] == 0, (e["jax"], e["summary"])
        assert e["summary"]["UNRESOLVED"] == e["summary"]["XPASS"] == 0, (e["jax"], e["summary"])
    assert out.splitlines()[-1].startswith("verdict: no regressions against goldens ("), out[-500:]
    assert code == 0, out[-2000:] + err[-2000:]


@pytest.mark.slow
def test_a_requirement_sets_cases_compile_in_its_environment_only_where_its_range_includes_the_release(tmp_path,
                                                                                                      run_cli):
    """cases/tpu_qwix.yaml on v6e: on 0.11.2 the qwix case is UNSUPPORTED (the set needs JAX >= 0.12) and the
    release ran; on 0.12.0.1 it compiles in the qwix environment the matrix built for it, and PASSes."""
    code, out, err = run_cli("matrix", REPO / "cases" / "tpu_qwix.yaml", "--jax", "0.11.2,0.12.0.1", "--target", "v6e",
                             "--out", tmp_path / "m.json", "--no-html", "--goldens", REPO / "goldens")
    old, new = json.loads((tmp_path / "m.json").read_text())["versions"]
    assert old["status"] == new["status"] == "ran", (old["error"], new["error"])
    assert {r["outcome"] for r in old["results"]} == {"UNSUPPORTED"} and "requirements" not in old["env"]
    assert all(r["reason"].startswith("requirements qwix need jax>=0.12.0; this is jax 0.11.2") for r in old["results"])
    assert {r["outcome"] for r in new["results"]} == {"PASS"}
    assert "-with-" in new["env"]["requirements"]["qwix"]["path"]
    assert code == 0, out[-2000:] + err[-2000:]
