"""The GPU session's `autotune` step: capture the device's autotune results for replay by deviceless compiles.

Every selected case is compiled on the device with XLA's defaults (`default`, autotuned) at its library shapes
and, where it has them, at its production shapes (`price_at`, else 4096³ for a pattern case), each with
`--xla_gpu_dump_autotune_results_to` in XLA's AutotuneResults text format (fp8_check.targets._autotune_results).
The per-compile files are merged into `autotune/<target>/<jax>.txt` under the session's folder: copied to
`goldens/<target>/autotune/<jax>.txt`, deviceless `default` compiles replay it. `autotune.json` lists every
compile: its case, shapes, how many entries it dumped, or its error.

Besides the library's cases, the step captures the examples' (`examples`: folders with a `cases/` folder and
the modules their python cases import, e.g. docs/examples/fp8first, the FP8-first train step), each in a worker
started in its folder, after every library case at its library shapes.

The dry run compiles the same cases deviceless, replaying nothing, and records the keys XLA looked up:
what a capture must hold for those programs (nothing is captured; every file says "dry run").
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fp8_check.cases import Shape
from fp8_check.compile import Compiler, ReplayCompiler, case_options, render
from fp8_check.platforms import Profile
from fp8_check.run import load_cases
from fp8_check.targets import (
    AUTOTUNE_DIR,
    WRITTEN_BACKENDS,
    Entry,
    ReplayKey,
    capture_options,
    format_results,
    load_results,
    load_target,
)

PRODUCTION = (4096, 4096, 4096)


def _variants(groups):
    """(folder, case id, label, case) to compile: every case at its library shapes first (what fidelity replays),
    the library's then each example's, then at its production shapes where they differ (what a model runs), so a
    step cut short has the first. `folder`: where the case's modules resolve (None: the checkout)."""
    for folder, cases in groups:
        for case in cases:
            yield folder, case.id, "library", case
    for folder, cases in groups:
        for case in cases:
            at = case.timed_at(None if case.priced_elsewhere else Shape(*PRODUCTION))
            if at is not None and at is not case:
                yield folder, case.id, "production", at


def _groups(cases_filter: str, examples) -> list:
    """(folder, cases): the library's selected cases, then every example's cases (its `cases/` folder)."""
    import contextlib

    groups: list = [(None, load_cases([], cases_filter))]
    for folder in examples:
        folder = Path(folder).resolve()
        with contextlib.chdir(folder):  # its python cases' modules resolve from the example's folder, as `run` there
            groups.append((folder, load_cases([folder / "cases"])))
    return groups


class _Workers:
    """One compiler per folder the cases' modules resolve from (a worker's PYTHONPATH is set when it starts)."""

    def __init__(self, make):
        self.make, self.by_folder = make, {}

    def __call__(self, folder):
        if folder not in self.by_folder:
            c = self.by_folder[folder] = self.make()
            worker = c.compiler.worker if isinstance(c, ReplayCompiler) else c.worker
            if folder is not None:
                worker.case_dir = str(folder)
        return self.by_folder[folder]

    def close(self) -> None:
        for c in self.by_folder.values():
            c.close()


def capture(out: Path, cases_filter: str, target_name: str, dry: bool, examples=()) -> dict:
    target = load_target(target_name)
    rows: list[dict] = []
    entries: dict[ReplayKey, Entry] = {}
    groups = _groups(cases_filter, examples)
    doc: dict = {"schema": "fp8-check/autotune-capture/1", "dry_run": dry, "target": target_name, "rows": rows,
                 "examples": [str(e) for e in examples]}
    if dry:
        workers = _Workers(ReplayCompiler)
        try:
            doc["jax"] = workers(None).environment().get("jax")
            for folder, case in ((f, c) for f, cases in groups for c in cases):
                rc = workers(folder)
                try:
                    got = rc.compile(render(case), target, None, case_options(case))
                    rows.append({"case": case.id, "shapes": "library", "decisions": got.coverage.decisions,
                                 "keys": [m.to_json() for m in got.coverage.missing]} if got.compilation.ok else
                                {"case": case.id, "shapes": "library", "error": (got.compilation.error or "")[:300]})
                except Exception as exc:  # one case never stops the others
                    rows.append({"case": case.id, "error": f"{type(exc).__name__}: {exc}"[:300]})
                _write(out, doc)
        finally:
            workers.close()
        return doc
    dumps = Path(tempfile.mkdtemp(prefix="fp8-check-autotune-dumps-"))
    devices = _Workers(lambda: Compiler("device"))
    try:
        jax_version = doc["jax"] = devices(None).environment().get("jax")
        for folder, case_id, label, variant in _variants(groups):
            path = dumps / f"{case_id}-{label}.txt"
            row: dict = {"case": case_id, "shapes": label}
            try:
                comp = devices(folder).compile(render(variant), target, Profile("default", capture_options(path),
                                                                              deviceless=False),
                                      optional_options=case_options(variant))
                if not comp.ok:
                    row["error"] = (comp.error or "")[:300]
                elif path.is_file():
                    dumped = load_results(path).entries
                    kept = [e for e in dumped if e.choice.backend in WRITTEN_BACKENDS]
                    entries.update((e.key, e) for e in kept)
                    row["entries"] = len(kept)
                    if len(kept) < len(dumped):  # cuDNN and other backends: not the gemm engines replay is for
                        row["not_kept"] = len(dumped) - len(kept)
                else:
                    row["error"] = "XLA wrote no autotune results file"
            except Exception as exc:  # one case never stops the others
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            merged = out / AUTOTUNE_DIR / target_name / f"{jax_version}.txt"
            merged.parent.mkdir(parents=True, exist_ok=True)
            merged.write_text(format_results(sorted(entries.values(), key=lambda e: e.key)))
            doc["results"], doc["entries"] = str(merged), len(entries)
            _write(out, doc)
    finally:
        devices.close()
    return doc


def _write(out: Path, doc: dict) -> None:
    (out / "autotune.json").write_text(json.dumps(doc, indent=1) + "\n")
