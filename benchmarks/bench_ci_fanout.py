"""The fanned-out reusable workflow (resolve, one job per JAX version x target group, merge) against one job running
every version and target, measured in the same run on the same project: what each job costs, the run's critical path
and its runner time.

    python benchmarks/bench_ci_fanout.py [--jax 0.10.1,0.12.0] [--targets h100,mi300x] [--out NAME]

With targets of two platforms (NVIDIA h100, AMD mi300x: two target groups, each its own environment) each version
gets two jobs; `--targets h100` measures the version fan-out alone. The project also holds a pattern case without
`profiles:` (it runs on every target's profiles; the model case is cuBLAS-only, so UNSUPPORTED on AMD). The pytest
job is left out (`tests: ""`): init's example test is NVIDIA's; its cost is one install plus the test's compiles.

The project: a fresh git repository holding the flax model case of tests/fixtures/ci_project (`requires: [flax,
optax]`), `fp8-check init`, goldens blessed from a local matrix (`bless --from-matrix`), committed.
- fan-out: scripts/replay_ci.py replays the workflow `init` wrote (each job in a fresh clone, its own fp8-check
  install, a fresh FP8_CHECK_CACHE: empty compile cache, per-version environments rebuilt from uv's cache);
- baseline, one job: the steps the reusable workflow ran before the fan-out — one fresh install of the same wheel,
  `fp8-check matrix` over every version with a fresh FP8_CHECK_CACHE, `ci summary`.
uv's cache is the machine's (warm, as setup-uv restores it) for both. Critical path = resolve + the slowest
version's job + merge (the versions' jobs run side by side on GitHub); runner time = every job's time added.
Writes benchmarks/out/bench_ci_fanout.json and .md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
FIXTURE = REPO / "tests" / "fixtures" / "ci_project"


EVERY_TARGET = """\
# a pattern case without `profiles:`: every profile the mode supports, on every target (NVIDIA and AMD)
cases:
  - id: every_target_relu
    description: scaled E4M3 inputs, relu, E4M3 output
    dequant: float32
    input_scales: both
    output_scale: divide
    clamp: true
    out_dtype: float8_e4m3fn
    epilogue: relu
"""


def _replay_module():
    spec = importlib.util.spec_from_file_location("replay_ci", REPO / "scripts" / "replay_ci.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sh(cmd, cwd: Path, env: dict, timeout: float = 3600) -> subprocess.CompletedProcess:
    p = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{cmd} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jax", default="0.10.1,0.12.0")
    ap.add_argument("--targets", default="h100,mi300x")
    ap.add_argument("--out", default="bench_ci_fanout", help="output name under benchmarks/out/")
    args = ap.parse_args()
    versions = args.jax.split(",")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("FP8_CHECK_")}
    fp8 = Path(sys.executable).parent / "fp8-check"
    work = Path(tempfile.mkdtemp(prefix="bench-ci-fanout-"))
    try:
        project = work / "project"
        (project / "cases").mkdir(parents=True)
        (project / "goldens").mkdir()
        shutil.copy(FIXTURE / "fp8_mlp.py", project / "fp8_mlp.py")
        shutil.copy(FIXTURE / "cases_model.yaml", project / "cases" / "model.yaml")
        (project / "cases" / "every_target.yaml").write_text(EVERY_TARGET)
        git = dict(env, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@example.invalid", GIT_COMMITTER_NAME="b",
                   GIT_COMMITTER_EMAIL="b@example.invalid")
        sh(["git", "init", "-q"], project, git)
        sh([fp8, "init", "--no-goldens"], project, env)
        sh([fp8, "matrix", "cases", "--jax", args.jax, "--target", args.targets, "--with", "flax", "--with", "optax",
            "--no-html",
            "--out", work / "local" / "matrix.json", "--fail-on", "never"], project, env)
        sh([fp8, "bless", "--from-matrix", work / "local" / "matrix.json"], project, env)
        sh(["git", "add", "-A"], project, git)
        sh(["git", "commit", "-qm", "init"], project, git)

        # fan-out: the workflow replayed
        replay = _replay_module().Replay(project, work / "replay", {"jax": args.jax, "targets": args.targets, "tests": ""},
                                         log=lambda s: None)
        ok = replay.run()
        jobs = dict(replay.seconds)
        matrix_jobs = {k: v for k, v in jobs.items() if k.startswith(("matrix (", "pytest ("))}
        slowest = max(matrix_jobs, key=lambda k: matrix_jobs[k])
        critical = jobs.get("resolve", 0) + matrix_jobs[slowest] + jobs.get("merge", 0)
        groups = sorted({k.split("group=")[1].split(",")[0] for k in matrix_jobs if "group=" in k})
        per_group = {g: round(sum(v for k, v in matrix_jobs.items() if f"group={g}," in k), 1) for g in groups}
        runner = sum(jobs.values())

        # baseline: one job for every version
        one = work / "one-job"
        one.mkdir()
        wheel = next((project / ".github" / "fp8-check").glob("*.whl"))
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        job_env = dict(env, FP8_CHECK_NO_GPU="1", FP8_CHECK_CACHE=str(one / "fp8-check-cache"), UV_PYTHON_DOWNLOADS="never")
        start = time.perf_counter()
        base_python = getattr(sys, "_base_executable", sys.executable)
        sh([uv, "venv", "-q", "--python", base_python, one / "venv"], one, job_env)
        sh([uv, "pip", "install", "-q", "--compile-bytecode", "--python", one / "venv" / "bin" / "python", wheel], one, job_env)
        t_install = time.perf_counter() - start
        m = sh([one / "venv" / "bin" / "fp8-check", "matrix", "cases", "--jax", args.jax, "--with", "flax", "--with", "optax",
                "--mode", "deviceless", "--target", args.targets, "--fail-on", "newest",
                "--out", one / "reports" / "matrix.json"],
               project, job_env)
        sh([one / "venv" / "bin" / "fp8-check", "ci", "summary", one / "reports" / "matrix.json", "--cases", "cases",
            "--summary-file", one / "summary.md"], project, job_env)
        t_one = time.perf_counter() - start
    finally:
        shutil.rmtree(work, ignore_errors=True)

    result = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_average": os.getloadavg()},
        "versions": versions, "targets": args.targets, "groups": groups, "fan_out_ok": ok, "one_job_exit": m.returncode,
        "fan_out_runner_seconds_per_group": per_group, "fan_out_slowest_job": slowest,
        "fan_out_jobs_seconds": jobs, "fan_out_critical_path_seconds": round(critical, 1),
        "fan_out_runner_seconds": round(runner, 1),
        "one_job_seconds": round(t_one, 1), "one_job_install_seconds": round(t_install, 1),
        "critical_path_over_one_job": round(critical / t_one, 2), "runner_time_over_one_job": round(runner / t_one, 2),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{args.out}.json").write_text(json.dumps(result, indent=1) + "\n")
    rows = "\n".join(f"| {k} | {v} s |" for k, v in jobs.items())
    group_rows = "\n".join(f"| runner time of the {g} jobs | {v} | {v / t_one:.2f} |" for g, v in per_group.items())
    (OUT / f"{args.out}.md").write_text(f"""# {args.out}

The reusable workflow fanned out (replayed by scripts/replay_ci.py) against one job running every version and
target, same run, same project (a flax model case, two rows, cuBLAS only; a pattern case on every profile; init's
example case), targets {args.targets} (target groups: {', '.join(groups)}), JAX {', '.join(versions)};
{os.cpu_count()} CPUs, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end (shared machine).

| fan-out job | wall |
|---|---|
{rows}

| | seconds | over one job |
|---|---|---|
| one job (install {t_install:.1f} s, matrix over every version, summary) | {t_one:.1f} | 1.00 |
| fan-out critical path (resolve + slowest job, {slowest}, + merge) | {critical:.1f} | {critical / t_one:.2f} |
| fan-out runner time (every job added) | {runner:.1f} | {runner / t_one:.2f} |
{group_rows}

Every fan-out job succeeded: {ok}; the one job's exit: {m.returncode}.
""")
    print((OUT / f"{args.out}.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
