"""Prove that the slim deviceless environments compile exactly as the full ones, per JAX version.

    python scripts/slim_check.py                       # every supported version (0.6.1 .. newest)
    python scripts/slim_check.py --jax 0.6.1,0.12.0.1  # some versions
    python scripts/slim_check.py --table               # only rewrite the table from the saved results

For each version it builds two environments with uv in a scratch directory: the full
`jax[cuda12]==V` (device mode's set) and the slim set (`fp8_check.versions._wheels`:
`jax[cuda12-local]==V` plus SLIM_EXTRAS, or the candidate extras given with --extras), then
compiles the whole case library (every case x --target x cublas/triton, deviceless, no compile
cache) in each and compares, request by request, the optimized HLO text (or, where a compile
fails, the error). If the bare slim set differs, it tries the candidate extra wheels in order
(CANDIDATES) and records the first set that is identical.

Incremental and resumable: one JSON per version under docs/slim_envs.d/ is written as soon
as that version is done (a version with a result is skipped unless --redo); the table
docs/slim_envs.md and docs/slim_envs.json are rewritten from those files after each
version. Run it under `nice -n 10`: it compiles the library twice per version.

A CUDA toolkit installed on the machine (/usr/local/cuda…, ptxas on PATH) would lend the slim
environments its ptxas and hide a missing wheel, so the script re-runs itself in a private
mount namespace (`unshare -m`, root) with empty directories over those installations and
PATH without them; each result records what was hidden and what stayed visible.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fp8_check.compile import _render as render  # noqa: E402
from fp8_check.compile._pool import CompilerPool  # noqa: E402
from fp8_check.compile._service import CompileRequest  # noqa: E402
from fp8_check.run import (
    _runner as runner,  # noqa: E402
    _selection as selection,  # noqa: E402
)
from fp8_check.versions import _envs as envs, _wheels as wheels, releases  # noqa: E402
from fp8_check.versions._envs import InstallError, Manager  # noqa: E402

OUT = REPO / "docs"
RESULTS_DIR = OUT / "slim_envs.d"
# extra wheels tried, in order, when the bare slim set compiles differently
CANDIDATES: list[list[str]] = [["nvidia-cuda-nvcc-cu12"], ["nvidia-cuda-nvcc-cu12", "nvidia-cuda-runtime-cu12"]]


def installed(python: Path) -> dict[str, str]:
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m, json; print(json.dumps("
                          "{d.metadata['Name'].lower(): d.version for d in m.distributions()}))"],
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout) if out.returncode == 0 else {}


def compile_all(python: Path, requests: list[CompileRequest]) -> list[dict]:
    rows = []
    env_dir = str(python.parent.parent)
    with CompilerPool("deviceless", jobs=1, python=str(python), cache=None) as pool:
        for r, comp in zip(requests, pool.imap(requests)):
            # an error names files in its environment: compared with that directory written <env>
            error = comp.error.replace(env_dir, "<env>") if comp.error else None
            rows.append({"case": comp.case_id,
                         "target": r.target.name, "profile": r.profile.name,
                         "hlo": comp.hlo, "error": error, "seconds": round(comp.seconds, 3)})
    return rows


def compare(full: list[dict], slim: list[dict]) -> list[dict]:
    """The requests whose optimized HLO (or error) differs between the two environments."""
    diffs = []
    for f, s in zip(full, slim, strict=True):
        if f["hlo"] != s["hlo"] or f["error"] != s["error"]:
            diffs.append({"case": f["case"], "target": f["target"], "profile": f["profile"],
                          "full": (f["error"] or "")[:400] or f"hlo {len(f['hlo'] or '')} chars",
                          "slim": (s["error"] or "")[:400] or f"hlo {len(s['hlo'] or '')} chars"})
    return diffs


def build(manager: Manager, version: str) -> tuple[Path, dict]:
    t = time.perf_counter()
    env = manager.ensure(version)
    seconds = time.perf_counter() - t
    return env.path, {"build_s": round(seconds, 1), "bytes": envs.disk_bytes(env.path), "requirement": env.info.get("requirement"),
                      "wheels": sorted(f"{k}=={v}" for k, v in installed(env.python).items())}


def check_version(version: str, requests: list[CompileRequest], scratch: Path, log) -> dict:
    """Full and bare slim compile at once, each on ONE worker: XLA numbers some HLO names by what
    its process compiled before, so both environments must compile the same requests in the
    same order in one process each (with two workers per pool the split is racy)."""
    result: dict = {"jax": version, "requests": len(requests), "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "platform": platform.platform(),
                    "system_cuda_hidden": os.environ.get("FP8_SLIM_CHECK_ISOLATED", "").split(),
                    "system_cuda_visible": _system_cuda()}
    first_extras = wheels.slim_extras(version)
    full_mgr = Manager(scratch / "full", reuse_self=False, kind=wheels.DEVICE)
    slim_mgr = Manager(scratch / "slim", reuse_self=False, kind=wheels.DEVICELESS, slim_extras=first_extras)
    try:
        full_path, result["full"] = build(full_mgr, version)
        slim_path, slim_info = build(slim_mgr, version)
    except InstallError as exc:
        result["error"] = str(exc)
        return result
    log(f"  full: {result['full']['bytes'] / 1e6:.0f} MB in {result['full']['build_s']} s; "
        f"slim: {slim_info['bytes'] / 1e6:.0f} MB in {slim_info['build_s']} s; compiling {len(requests)} in each")
    t = time.perf_counter()
    with ThreadPoolExecutor(2) as ex:
        ff = ex.submit(compile_all, full_path / "bin" / "python", requests)
        sf = ex.submit(compile_all, slim_path / "bin" / "python", requests)
        full, slim = ff.result(), sf.result()
    result["compile_s"] = round(time.perf_counter() - t, 1)
    result["full"]["errors"] = sum(1 for r in full if r["error"])
    result["errors"] = {f"{r['case']}/{r['target']}/{r['profile']}": r["error"].strip().splitlines()[-1][:300]
                        for r in full if r["error"]}
    shutil.rmtree(full_path, ignore_errors=True)  # the wheels stay in uv's cache (hard links)
    shutil.rmtree(slim_path, ignore_errors=True)
    attempts = [_attempt(slim_info, first_extras, full, slim, len(requests), log)]
    for extras in [c for c in CANDIDATES if c != first_extras]:
        if not attempts[-1].get("differing"):
            break
        mgr = Manager(scratch / ("slim-" + "+".join(extras)), reuse_self=False, kind=wheels.DEVICELESS,
                      slim_extras=extras)
        try:
            path, info = build(mgr, version)
        except InstallError as exc:
            attempts.append({"extras": extras, "error": str(exc)})
            continue
        slim = compile_all(path / "bin" / "python", requests)
        shutil.rmtree(path, ignore_errors=True)
        attempts.append(_attempt(info, extras, full, slim, len(requests), log))
    result["attempts"] = attempts
    # what the full environment compiled, per request: matrix compiles once for versions that
    # ship the same XLA, and these show whether their HLO is the same (benchmarks/bench_matrix.py)
    result["hlo_sha256"] = {f"{r['case']}/{r['target']}/{r['profile']}":
                            hashlib.sha256((r["hlo"] or "error: " + (r["error"] or "")).encode()).hexdigest()[:16]
                            for r in full}
    good = [a for a in attempts if "differing" in a and not a["differing"]]
    result["slim"] = good[0] if good else None
    result["identical"] = bool(good)
    return result


def _attempt(info: dict, extras: list[str], full: list[dict], slim: list[dict], n: int, log) -> dict:
    info = {**info, "extras": extras, "errors": sum(1 for r in slim if r["error"]), "differing": compare(full, slim)}
    info["identical"] = n - len(info["differing"])
    log(f"  slim{' + ' + ', '.join(extras) if extras else ''}: {info['identical']}/{n} identical")
    return info


def write_table(versions: list[str]) -> None:
    rows, unchecked = [], []
    for v in versions:
        p = RESULTS_DIR / f"{v}.json"
        if p.exists():
            rows.append(json.loads(p.read_text()))
        else:
            unchecked.append(v)
    doc = {"about": "slim vs full per-version environments: optimized HLO compared per request (scripts/slim_check.py)",
           "versions": [{k: r.get(k) for k in ("jax", "requests", "identical", "checked", "error")}
                        | {"full_bytes": (r.get("full") or {}).get("bytes"),
                           "slim_bytes": (r.get("slim") or {}).get("bytes"),
                           "slim_extras": (r.get("slim") or {}).get("extras"),
                           "slim_requirement": (r.get("slim") or {}).get("requirement"),
                           "full_build_s": (r.get("full") or {}).get("build_s"),
                           "slim_build_s": (r.get("slim") or {}).get("build_s"),
                           "compile_errors": (r.get("full") or {}).get("errors"),
                           "attempts": [{"extras": a.get("extras"), "identical": a.get("identical"),
                                         "differing": a.get("differing", [])[:20], "error": a.get("error")}
                                        for a in r.get("attempts", [])]}
                        for r in rows]}
    (OUT / "slim_envs.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = ["# Slim deviceless environments vs full ones",
             "",
             "Written by `scripts/slim_check.py`. Per JAX version: the whole case library (every case x "
             "h100, b200 x cublas, triton, deviceless) compiled in the full environment (`jax[cuda12]`) and in the "
             "slim one (`jax[cuda12-local]` = jax, jaxlib, jax-cuda12-plugin, jax-cuda12-pjrt, plus the extra wheels "
             "listed), and the optimized HLO text compared request by request (a compile error must be an error in "
             "both). Sizes are the environments' files (apparent size, hard links counted once). \"errors\": requests that "
             "compiled in neither environment, with the same error text in both: 32 are the flax cases (8 cases x 4; "
             "per-version environments hold no flax, so they are UNSUPPORTED there, as in `matrix`), the rest are "
             "block-scaled cases that older versions cannot compile.",
             "",
             "| jax | compiles | identical | slim extras | slim env (MB) | full env (MB) | slim / full | errors | checked |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        full, slim = r.get("full") or {}, r.get("slim") or {}
        if r.get("error"):
            lines.append(f"| {r['jax']} | – | error: {r['error'][:80]} | | | | | | {r['checked']} |")
            continue
        last = (r.get("attempts") or [{}])[-1]
        ident = "yes" if r.get("identical") else f"NO ({last.get('identical')}/{r['requests']})"
        sb, fb = slim.get("bytes") or last.get("bytes"), full.get("bytes")
        lines.append(f"| {r['jax']} | {r['requests']} | {ident} | {', '.join(slim.get('extras') or []) or 'none'} | "
                     f"{sb / 1e6:.0f} | {fb / 1e6:.0f} | {sb / fb:.2f} | {full.get('errors')}{'' if 'errors' in r else ' †'} | "
                     f"{r['checked'][:10]} |")
    if any("errors" not in r for r in rows if not r.get("error")):
        lines += ["", "† checked by an earlier revision of the script, which compared the HLO of every request that "
                  "compiled and, for the others, that both environments failed, not the error texts."]
    if unchecked:
        lines += ["", f"Not checked yet: {', '.join(unchecked)} (run `python scripts/slim_check.py`: it resumes)."]
    twins = _same_hlo_twins(rows)
    if twins:
        lines += ["", "Versions that ship the same XLA commit (the matrix compiles them once): " + "; ".join(twins) + "."]
    (OUT / "slim_envs.md").write_text("\n".join(lines) + "\n")


def _same_hlo_twins(rows: list[dict]) -> list[str]:
    """For the checked versions sharing an XLA commit: whether their full environments compiled the same."""
    from fp8_check.versions import _shared_xla as shared_xla

    by = {r["jax"]: r for r in rows if r.get("hlo_sha256")}
    out = []
    for twin, rep in shared_xla.twins(list(by)).items():
        a, b = by[twin], by[rep]
        same_hlo = same_error = 0
        for k, h in a["hlo_sha256"].items():
            ea, eb = a.get("errors", {}).get(k), b.get("errors", {}).get(k)
            if ea is None and eb is None and h == b["hlo_sha256"].get(k):
                same_hlo += 1
            elif ea is not None and eb is not None and ea.replace(twin, "<jax>") == eb.replace(rep, "<jax>"):
                same_error += 1  # e.g. "this JAX (0.9.0) has no jax.lax.scaled_dot": the same but for the version
        n = len(a["hlo_sha256"])
        out.append(f"jax {twin} and {rep}: {same_hlo}/{n} with the same optimized HLO, {same_error} failing in both "
                   f"with the same error (the version named in it aside), {n - same_hlo - same_error} different")
    return out


SYSTEM_CUDA = ["/usr/local/cuda", "/opt/cuda", "/usr/lib/cuda"]  # where XLA looks for ptxas besides PATH and the wheels


def _system_cuda() -> tuple[list[str], list[str]]:
    """CUDA installations XLA would find outside the environments: (directories, PATH entries with ptxas/nvlink)."""
    import glob

    dirs = {os.path.realpath(d) for pat in SYSTEM_CUDA for d in glob.glob(pat + "*") if os.path.isdir(d)}
    path_dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
                 if d and any(os.path.exists(os.path.join(d, x)) for x in ("ptxas", "nvlink"))]
    return sorted(dirs), path_dirs


def _rerun_without_system_cuda(argv: list[str]) -> int | None:
    """Re-run this script where no system CUDA is visible (a private mount namespace: empty directories
    mounted over the CUDA installations, for this process tree only; PATH without ptxas): on a machine with
    a CUDA toolkit XLA would otherwise take its ptxas, and the slim set would look complete when it is not."""
    if os.environ.get("FP8_SLIM_CHECK_ISOLATED"):
        return None
    dirs, path_dirs = _system_cuda()
    if not dirs and not path_dirs:
        return None
    import shlex

    empty = tempfile.mkdtemp(prefix="slim-check-empty-")
    mounts = " && ".join(f"mount --bind {shlex.quote(empty)} {shlex.quote(d)}" for d in dirs) or "true"
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if d not in path_dirs)
    env = {**os.environ, "FP8_SLIM_CHECK_ISOLATED": " ".join(dirs + path_dirs), "PATH": path}
    cmd = ["unshare", "-m", "sh", "-c", f"{mounts} && exec \"$0\" \"$@\"", sys.executable, __file__, *argv]
    print(f"slim_check: hiding the system CUDA ({', '.join(dirs + path_dirs)}) in a private mount namespace", flush=True)
    try:
        return subprocess.run(cmd, env=env).returncode
    except FileNotFoundError:
        print("slim_check: cannot hide the system CUDA (needs unshare and root); --system-cuda checks with it visible",
              file=sys.stderr)
        return 2
    finally:
        os.rmdir(empty)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jax", help="versions, comma-separated (default: every released version from 0.6.1)")
    ap.add_argument("--target", default="h100,b200")
    ap.add_argument("--profile", default="cublas,triton")
    ap.add_argument("-k", dest="filter", help="only the cases whose id contains this (a partial check)")
    ap.add_argument("--redo", action="store_true", help="check versions that already have a result")
    ap.add_argument("--table", action="store_true", help="only rewrite the table from the saved results")
    ap.add_argument("--system-cuda", action="store_true",
                    help="leave a CUDA toolkit installed on this machine visible (by default it is hidden: see below)")
    args = ap.parse_args(argv)
    if not args.table and not args.system_cuda:
        code = _rerun_without_system_cuda(sys.argv[1:] if argv is None else argv)
        if code is not None:
            return code
    supported = releases.select_range(f"{runner.MIN_DEVICELESS_JAX}..", "all")
    # --jax: checked in the order given (on a loaded machine: spread over the range first)
    versions = [v.strip() for v in args.jax.split(",") if v.strip()] if args.jax else supported
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if args.table:
        write_table(supported)
        return 0
    cases = selection.load_cases(None, args.filter)
    targets = selection.targets_from(args.target)
    requests = [CompileRequest(render.render(c), t, p, None, runner.case_options(c))
                for c, t, p in runner.plan(cases, targets, selection.comma_list(args.profile))]
    scratch_root = releases.cache_dir()
    scratch_root.mkdir(parents=True, exist_ok=True)
    status = 0
    for v in versions:
        path = RESULTS_DIR / f"{v}.json"
        if path.exists() and not args.redo:
            print(f"jax {v}: done before ({path.relative_to(REPO)})", flush=True)
            continue
        print(f"jax {v}: {len(requests)} compiles per environment", flush=True)
        with tempfile.TemporaryDirectory(prefix="slim-check-", dir=str(scratch_root)) as scratch:
            res = check_version(v, requests, Path(scratch), lambda m: print(m, flush=True))
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1) + "\n")
        os.replace(tmp, path)
        write_table(sorted(set(supported) | set(versions), key=releases.parse_version))
        print(f"jax {v}: {'IDENTICAL' if res.get('identical') else 'DIFFERS'}", flush=True)
        status |= 0 if res.get("identical") else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
