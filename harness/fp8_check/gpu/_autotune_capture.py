"""The GPU session's `autotune` step: capture the device's autotune results for replay by deviceless compiles.

Every selected case is compiled on the device with XLA's defaults (`default`, autotuned) at its library shapes
and, where it has them, at its production shapes (`price_at`, else 4096³ for a pattern case), each with
`--xla_gpu_dump_autotune_results_to` in XLA's AutotuneResults text format (fp8_check.targets.autotune_results).
The per-compile files are merged into `autotune/<target>/<jax>.txt` under the session's folder: copied to
`goldens/<target>/autotune/<jax>.txt`, deviceless `default` compiles replay it. `autotune.json` lists every
compile: its case, shapes, how many entries it dumped, or its error.

The dry run compiles the same cases deviceless, replaying nothing, and records the keys XLA looked up:
what a capture must hold for those programs (nothing is captured; every file says "dry run").
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from fp8_check.cases import Shape
from fp8_check.compile import Compiler, ReplayCompiler, render
from fp8_check.run import selection
from fp8_check.targets import Profile, autotune_results as ar, load_target

PRODUCTION = (4096, 4096, 4096)


def _variants(cases):
    """(label, case) pairs to compile: every case at its library shapes first (what fidelity replays), then at
    its production shapes where they differ (what a model runs), so a step cut short has the first."""
    for case in cases:
        yield case.id, "library", case
    for case in cases:
        at = case.timed_at(None if case.priced_elsewhere else Shape(*PRODUCTION))
        if at is not None and at is not case:
            yield case.id, "production", at


def capture(out: Path, cases_filter: str, target_name: str, dry: bool) -> dict:
    target = load_target(target_name)
    rows: list[dict] = []
    entries: dict[ar.ReplayKey, ar.Entry] = {}
    cases = selection.load_cases([], cases_filter)
    doc: dict = {"schema": "fp8-check/autotune-capture/1", "dry_run": dry, "target": target_name, "rows": rows}
    if dry:
        with ReplayCompiler() as rc:
            doc["jax"] = rc.environment().get("jax")
            for case in cases:
                try:
                    got = rc.compile(render.render(case), target, None, render.case_options(case))
                    rows.append({"case": case.id, "shapes": "library", "decisions": got.coverage.decisions,
                                 "keys": [m.to_json() for m in got.coverage.missing]} if got.compilation.ok else
                                {"case": case.id, "shapes": "library", "error": (got.compilation.error or "")[:300]})
                except Exception as exc:  # one case never stops the others
                    rows.append({"case": case.id, "error": f"{type(exc).__name__}: {exc}"[:300]})
                _write(out, doc)
        return doc
    dumps = Path(tempfile.mkdtemp(prefix="fp8-check-autotune-dumps-"))
    with Compiler("device") as device:
        jax_version = doc["jax"] = device.environment().get("jax")
        for case_id, label, variant in _variants(cases):
            path = dumps / f"{case_id}-{label}.txt"
            row: dict = {"case": case_id, "shapes": label}
            try:
                comp = device.compile(render.render(variant), target, Profile("default", ar.capture_options(path),
                                                                              deviceless=False),
                                      optional_options=render.case_options(variant))
                if not comp.ok:
                    row["error"] = (comp.error or "")[:300]
                elif path.is_file():
                    dumped = ar.load_results(path).entries
                    kept = [e for e in dumped if e.choice.backend in ar.WRITTEN_BACKENDS]
                    entries.update((e.key, e) for e in kept)
                    row["entries"] = len(kept)
                    if len(kept) < len(dumped):  # cuDNN and other backends: not the gemm engines replay is for
                        row["not_kept"] = len(dumped) - len(kept)
                else:
                    row["error"] = "XLA wrote no autotune results file"
            except Exception as exc:  # one case never stops the others
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            merged = out / ar.AUTOTUNE_DIR / target_name / f"{jax_version}.txt"
            merged.parent.mkdir(parents=True, exist_ok=True)
            merged.write_text(ar.format_results(sorted(entries.values(), key=lambda e: e.key)))
            doc["results"], doc["entries"] = str(merged), len(entries)
            _write(out, doc)
    return doc


def _write(out: Path, doc: dict) -> None:
    (out / "autotune.json").write_text(json.dumps(doc, indent=1) + "\n")
