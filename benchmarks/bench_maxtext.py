"""Benchmark the MaxText llama2-7b FP8 case through fp8-check against a bare AOT compile of the same train step.

    python benchmarks/bench_maxtext.py                  # jax 0.12.0.1, h100x8, the scanned fp8 case
    python benchmarks/bench_maxtext.py --jax 0.12.0 --case maxtext_llama2_7b_qwix_fp8_full

In one run, on the same machine state, each a fresh process, interpreter start to exit:

- bare: MaxText's own path in the MaxText environment's Python, no fp8-check: `pyconfig`, a mesh from
  `jax.experimental.topologies` devices of the same target spec, `train_compile.get_shaped_inputs`,
  `jit(train_step, in_shardings, out_shardings, donate_argnums).lower().compile()` — what
  `train_compile` does — with the optimized-HLO dump fp8-check also writes;
- fp8-check: `fp8-check matrix docs/examples/maxtext/cases.yaml -k CASE --jax V --target h100x8 --no-cache`
  (the cases' `requirements: maxtext`; the environment already built).
The bare compile takes the case's MaxText overrides and XLA flags (the mapping in `main`).

Peak memory: the largest resident set among each command's processes (RUSAGE_CHILDREN). Writes
benchmarks/out/bench_maxtext.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
REQUIREMENTS = REPO / "harness" / "fp8_check" / "models" / "maxtext-requirements.txt"
CASES = REPO / "docs" / "examples" / "maxtext" / "cases.yaml"

BARE = r'''
import os, sys, time
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["JAX_SKIP_CUDA_CONSTRAINTS_CHECK"] = "1"
os.environ["XLA_FLAGS"] = "--xla_dump_to=%s --xla_dump_hlo_as_text %s" % (sys.argv[1], sys.argv[6])  # + the case's flags
recipe, scan, config_text = sys.argv[2], sys.argv[3], open(sys.argv[4]).read()
t0 = time.perf_counter()
import jax, maxtext
from jax.experimental import topologies
from jax.sharding import AxisType, Mesh
from flax.core.spmd import logical_axis_rules
from maxtext.configs import pyconfig
from maxtext.trainers.pre_train import train, train_compile
from maxtext.utils import maxtext_utils, sharding
import json
SHAPE = json.loads(sys.argv[5])  # the case's MaxText overrides (fp8_check.models.maxtext_llama): model, batch, remat
devices = topologies.get_topology_desc(platform="cuda", target_config=config_text, topology="1x1x8").devices
base = os.path.join(os.path.dirname(maxtext.__file__), "configs", "base.yml")
config = pyconfig.initialize(["bare", base, *SHAPE, "quantization=" + recipe, "scan_layers=" + scan,
                              "base_output_directory=" + sys.argv[1] + "-out", "run_name=bare"])
mesh = Mesh(maxtext_utils.create_device_mesh(config, devices), config.mesh_axes, axis_types=(AxisType.Auto,) * len(config.mesh_axes))
args, kwargs, state_sh, _, model = train_compile.get_shaped_inputs(mesh, config)
params_sh, state_sh = sharding.maybe_update_params_sharding_with_opt(config, state_sh)
in_state = sharding.build_zero1_input_state_mesh_shardings(config, state_sh, params_sh)
data = sharding.get_input_data_sharding(config, mesh)
fn, ins, outs, sa, da = maxtext_utils.get_functional_train_with_signature(train.train_step, data, in_state, model, config, params_sh)
t1 = time.perf_counter()
train_compile.jit_and_compile(fn, args, kwargs, mesh, ins, outs, sa, da, config, logical_axis_rules(config.logical_axis_rules))
print("BARE setup %.2f compile %.2f" % (t1 - t0, time.perf_counter() - t1), file=sys.stderr)
'''


def measured(cmd: list[str], env: dict | None = None, cwd: Path = REPO) -> dict:
    """Wall time and peak RSS (largest process) of `cmd`, run in a fresh child through a small wrapper."""
    wrapper = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
               "print(p.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
               "sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])")
    done = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, env=env, cwd=cwd, timeout=3600)
    code, wall, rss = done.stdout.split()
    return {"rc": int(code), "wall_s": round(float(wall), 1), "peak_rss_mib": round(int(rss) / 1024, 1), "tail": done.stderr[-1500:]}


def environment_python(version: str) -> Path:
    from fp8_check.versions.releases import cache_dir

    for marker in sorted((cache_dir() / "envs").glob(f"jax-{version}-slim-py*-with-*/fp8-check-env.json")):
        info = json.loads(marker.read_text())
        if "maxtext==0.2.5" in info.get("with", []):
            return marker.parent / "bin" / "python"
    raise SystemExit(f"no MaxText environment for jax {version}: run the fp8-check measurement first (it builds it)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jax", default="0.12.0.1")
    ap.add_argument("--case", default="maxtext_llama2_7b_fp8")
    args = ap.parse_args()
    from fp8_check.models.maxtext_llama import SHAPE, TEST

    # the case's recipe, MaxText overrides and XLA flags (docs/examples/maxtext/cases.yaml)
    test = [*TEST, "remat_policy=minimal_with_context"]
    no_remat = "--xla_disable_hlo_passes=rematerialization"
    qwix = ["use_qwix_quantization=true"]
    recipe, overrides, flags = {
        "maxtext_llama2_7b_fp8": ("fp8", test, no_remat),
        "maxtext_llama2_7b_full_remat_fp8": ("fp8", [*SHAPE, "remat_policy=full"], ""),
        "maxtext_llama2_7b_qwix_fp8_full": ("fp8_full", test + qwix, no_remat),
        "maxtext_llama2_7b_qwix_fp8_gpu": ("fp8_gpu", test + qwix, no_remat),
        "maxtext_llama2_7b_qwix_fp8_e4m3": ("fp8_e4m3", test + qwix, no_remat)}[args.case]
    work = Path(tempfile.mkdtemp(prefix="bench-maxtext-"))
    load_before = os.getloadavg()
    out = work / "m.json"
    fp8 = measured([str(REPO / ".venv" / "bin" / "fp8-check"), "matrix", str(CASES), "-k", args.case, "--jax", args.jax,
                    "--target", "h100x8", "--profile", "cublas", "--no-cache",  # the case's requirements: maxtext
                    "--goldens", str(work / "goldens"), "--out", str(out), "--no-html"])
    rows = [r for v in json.loads(out.read_text())["versions"] for r in v["results"]] if out.exists() else []
    row = next((r for r in rows if r["case"] == args.case), {})
    from fp8_check.targets import load_target
    from fp8_check.worker import _aot as aot

    target = load_target("h100x8")
    spec = work / "h100x8.txtpb"
    spec.write_text(aot.target_config_for(target.config_text, target.versions_dict(), args.jax))
    script = work / "bare.py"
    script.write_text(BARE)
    bare = measured([str(environment_python(args.jax)), str(script), str(work / "dump"), recipe, "true", str(spec),
                     json.dumps(overrides), flags])
    fp8_gemms = None
    dumps = sorted((work / "dump").glob("*jit_train_step*gpu_after_optimizations.txt"))
    if dumps:
        from fp8_check.signature._extract import extract

        fp8_gemms = extract(dumps[-1].read_text()).fp8_gemms
    result = {
        "benchmark": "bench_maxtext", "jax": args.jax, "case": args.case, "target": "h100x8",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_before": load_before,
                    "load_after": os.getloadavg()},
        "fp8_check": {**{k: v for k, v in fp8.items() if k != "tail"}, "outcome": row.get("outcome"),
                      "compile_seconds": row.get("compile_seconds"),
                      "fp8_gemms": sum(g["operand_dtypes"][0].startswith("f8") for g in (row.get("signature") or {}).get("gemms", []))},
        "bare": {**{k: v for k, v in bare.items() if k != "tail"}, "fp8_gemms": fp8_gemms,
                 "setup_and_compile_s": [float(x) for x in re.findall(r"BARE setup ([\d.]+) compile ([\d.]+)", bare["tail"])[-1:]
                                         for x in x] or None},
        "ratio_wall": round(fp8["wall_s"] / bare["wall_s"], 3) if bare["wall_s"] else None,
    }
    if fp8["rc"] not in (0, 1) or bare["rc"] != 0:
        result["tails"] = {"fp8_check": fp8["tail"], "bare": bare["tail"]}
    dest = REPO / "benchmarks" / "out"
    (dest / "bench_maxtext.json").write_text(json.dumps(result, indent=1) + "\n")
    md = [f"# bench_maxtext: {args.case} on h100x8, jax {args.jax} (deviceless, {os.cpu_count()} cores)", "",
          "| | wall s | peak RSS MiB | FP8 gemms |", "|---|---|---|---|",
          f"| bare AOT compile (MaxText's train_compile path) | {bare['wall_s']} | {bare['peak_rss_mib']} | {fp8_gemms} |",
          f"| fp8-check matrix --no-cache (1 version) | {fp8['wall_s']} | {fp8['peak_rss_mib']} | {result['fp8_check']['fp8_gemms']} |",
          "", f"ratio (fp8-check / bare, wall): **{result['ratio_wall']}**; load average before {load_before}, after {os.getloadavg()}",
          "", f"bare: setup (imports, config, abstract state) and lower+compile seconds {result['bare']['setup_and_compile_s']}; "
          f"fp8-check's worker: lower+compile {result['fp8_check']['compile_seconds']} s. The programs differ in one respect: "
          "MaxText's jit has out_shardings and donates the state, fp8-check's compiles the step on its sharded arguments "
          "(no out_shardings, no donation); the FP8 gemms are the same. The machine is shared (2 cores, other jobs): "
          "the load average is recorded."]
    (dest / "bench_maxtext.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
