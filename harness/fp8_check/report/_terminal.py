"""Outcomes on the terminal: one line per result, then a summary."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import TextIO

from fp8_check.signature import Signature, attributed, coverage, layer_table, summary
from fp8_check.targets import PROFILES, load_target, profile_label
from fp8_check.verdict import CODES, FAIL, PASS, UNRESOLVED, XFAIL, Outcome, answer, lost_layers


def gemm_summary(sig: Signature | None) -> str:
    """`3 kernels; __cublas$lt$matmul$f8 f8e4m3fnxf8e4m3fn->f8e4m3fn RELU +amax`."""
    if sig is None:
        return ""
    parts = []
    for g in sig.gemms:
        text = f"{g.target} {'x'.join(g.operand_dtypes)}->{g.output or '?'}"
        if g.epilogue and g.epilogue != "DEFAULT":
            text += f" {g.epilogue}"
        if g.amax:
            text += " +amax"
        parts.append(text)
    if len(parts) > 4:  # a model: identical gemms once, counted
        counts: dict[str, int] = {}
        for text in parts:
            counts[text] = counts.get(text, 0) + 1
        parts = [(f"{n}x " if n > 1 else "") + text for text, n in counts.items()]
    if sig.collectives:  # a sharded compile (harness/fp8_check/signature/_collectives.py)
        parts.append("collectives: " + summary(sig.collectives))
    return f"{sig.kernels} kernel{'s' if sig.kernels != 1 else ''}; " + ("; ".join(parts) if parts else "no gemm")


def kernels_text(sig: Signature | None) -> str:
    """`178 kernels` (a model's gemms are in its coverage line and layer table; all of them with -v)."""
    return "" if sig is None else f"{sig.kernels} kernel{'s' if sig.kernels != 1 else ''}"


def saving_from_loss(out: Outcome) -> bool:
    """A regression that lost FP8 and is priced as a saving (at small case shapes a bf16 gemm can be estimated
    faster than an FP8 one plus its quantization): never headlined as a gain."""
    v = out.verdict
    return (v is not None and v.is_regression and v.cost is not None and v.cost.shown_us < 0
            and any("FP8" in x.why or "fp8" in x.path for x in v.regressions))


def price_hint(out: Outcome) -> str:
    """What a lost-FP8 regression priced as a saving says instead of the saving."""
    assert out.verdict is not None and out.verdict.cost is not None
    return (f"cost: at the case shapes the wider gemm is estimated faster ({out.verdict.cost.short()}), which FP8 pays "
            "back only at production sizes; give the case `price_at` to price it there (a python case: "
            "`price_at: {args: module:factory}` returning production-size arguments; a pattern: `price_at: {m, n, k}`; "
            "docs/cost.md)")


def lost_text(out: Outcome) -> list[str]:
    """The layers a FAIL (or XFAIL) says lost FP8, one text each: `Block/mlp/down: FP8 -> bf16 (fwd, bwd-in, bwd-wt)`."""
    v = out.verdict
    return lost_layers(x.why for x in v.regressions) if v is not None and out.code in (FAIL, XFAIL) else []


def cost_lines(out: Outcome) -> list[str]:
    """What a FAIL or XFAIL says about its cost, in the words every output uses: a lost FP8 priced as a saving says
    why instead of headlining the saving; otherwise the estimate and the totals behind it."""
    v = out.verdict
    if v is None or v.cost is None or out.code not in (FAIL, XFAIL):
        return []
    if saving_from_loss(out):
        return [price_hint(out)]
    known = "known issue's " if out.code is XFAIL else ""
    return [f"{known}cost: {v.cost.text()} ({v.cost.detail()})"]


def estimate_line(est) -> str:
    """`1234.5 µs per call on H100 SXM at x=[8, 2048, 1024]; FP8 gemms 61.0 % of it` (a model's step time)."""
    share = f"; FP8 gemms {est.fp8_us / est.total_us * 100:.1f} % of it" if est.total_us > 0 else ""
    return f"{est.total_us:.1f} µs per call on {est.hardware} at {est.shape or 'the case shapes'}{share}"


def unsharded_note(out: Outcome) -> str:
    """One line for a multi-device target whose program is not partitioned (no `num_partitions` above 1 in the
    optimized HLO's module line): nothing is sharded, so the result is the single-device one ('' otherwise)."""
    try:
        devices = load_target(out.target).devices
    except Exception:  # a results file from elsewhere may name a target this checkout lacks
        return ""
    header = (out.hlo or "").lstrip().split("\n", 1)[0]
    if devices <= 1 or not header.startswith("HloModule"):
        return ""
    counts = [int(n) for n in re.findall(r"\bnum_(?:partitions|replicas)=(\d+)", header)]
    if max(counts, default=1) > 1:
        return ""
    return (f"no sharding: {out.target} has {devices} devices but the program is not partitioned (its inputs carry no "
            "sharding), so this is the one-device result; shard its inputs (a case's `mesh` and `sharding`, "
            "docs/sharded.md) to check the multi-device program")


def _tty(stream: TextIO) -> bool:
    return bool(getattr(stream, "isatty", None) and stream.isatty())


def print_outcome(out: Outcome, stream: TextIO | None = None, verbose: bool = False) -> None:
    stream = stream or sys.stdout
    name = out.code.paint(_tty(stream))
    pad = " " * max(0, 11 - len(out.code.name))
    line = f"{name}{pad} {out.target}/{_profile(out):<7} {out.case}"
    fp8 = answer(out)
    if fp8.headline:
        line += f"  {fp8.headline}"
    model = attributed(out.signature)
    detail = gemm_summary(out.signature) if not model or verbose else kernels_text(out.signature)
    if detail:
        line += f"  ({detail})"
    if out.compile_seconds:
        line += f" {out.compile_seconds:.2f}s" + (" (cached)" if out.cached else "")
    if out.autotune is not None:  # deviceless `default`: which decisions a results file made, which XLA's defaults
        line += f"  [{out.autotune.line()}]"
    if out.code is FAIL and out.verdict is not None:
        line += f"  [{out.verdict.cls}]" + (f"  estimated {out.verdict.cost.short()}"
                                            if out.verdict.cost is not None and not saving_from_loss(out) else "")
    print(line, file=stream)
    if fp8.line():
        print(f"      {'warning: ' if fp8.warns else ''}{fp8.line()}", file=stream)
    if unsharded_note(out):
        print(f"      {unsharded_note(out)}", file=stream)
    if out.not_representative:
        print(f"      NOT REPRESENTATIVE: {out.not_representative}", file=stream)
    for lost in lost_text(out):
        print(f"      lost FP8: {lost}", file=stream)
    for text in cost_lines(out):
        print(f"      {text}", file=stream)
    if out.estimate is not None and out.estimate.shape:  # priced at production shapes (`price_at`)
        print(f"      estimate: {estimate_line(out.estimate)}", file=stream)
    if out.code is FAIL or (verbose and out.diffs):
        for d in out.diffs:
            print(f"      {d}{_classes(out, d.path)}", file=stream)
        if out.code is FAIL and out.verdict is not None:
            shown = {d.path for d in out.diffs}
            for x in out.verdict.lines:  # fields only a two-way comparison sees (e.g. a new operand role)
                if x.path not in shown:
                    print(f"      {x.path}: {x.why}  [{x.cls}]", file=stream)
            if not out.verdict.is_regression:
                print(f"      {out.verdict.cls}: not a regression; update the golden: fp8-check bless -k {out.case} "
                      f"--target {out.target} --profile {out.profile}", file=stream)
    if out.code is FAIL and "; tolerated: " in out.reason:  # a contract's notes (rows left unpaired...): never dropped
        print(f"      also, tolerated: {out.reason.split('; tolerated: ', 1)[1]}", file=stream)
    if out.code is PASS and out.reason.startswith("within the contract"):  # a model's tolerated change, once
        print(f"      {out.reason}", file=stream)
    if out.code is not FAIL and out.code is not PASS and out.reason:
        text = out.reason if verbose or out.code is not UNRESOLVED else out.reason.strip().splitlines()[0]
        print(f"      {text}", file=stream)
    _print_coverage(out, stream, verbose)
    if out.autotune is not None and (verbose or (out.autotune.results and not out.autotune.complete)):
        print(f"      {out.autotune.summary()}", file=stream)
    if out.numerics is not None and out.code is not FAIL:
        print(f"      {out.numerics.summary()}", file=stream)
    stream.flush()


def _print_coverage(out: Outcome, stream: TextIO, verbose: bool) -> None:
    """A model's coverage line (matmuls attributed to layers); with -v the per-layer table too."""
    if out.signature is None or not attributed(out.signature):
        return
    print(f"      {coverage(out.signature).line()}", file=stream)
    if verbose:
        for row in layer_table(out.signature):
            print(f"        {row}", file=stream)


def _classes(out: Outcome, path: str) -> str:
    """`  [regression: why; ...]` for one diff line of a FAIL."""
    if out.code is not FAIL or out.verdict is None:
        return ""
    lines = out.verdict.for_path(path)
    return ("  [" + "; ".join(f"{x.cls}: {x.why}" for x in lines) + "]") if lines else ""


def _profile(out: Outcome) -> str:
    """The profile as the target's rows show it (`hipblaslt` on AMD: targets.profile_label)."""
    try:
        return profile_label(out.target, out.profile)
    except Exception:  # a results file from elsewhere may name a target this checkout lacks
        return out.profile


def plain(out: Outcome) -> bool:
    """A plain expected PASS: it matches its golden and warns of nothing new (no missing FP8 that is news). The
    main run's terminal leaves these to one summary line per group (`print_groups`); `-v` prints each."""
    return (out.code is PASS and not answer(out).warns and out.numerics is None and not out.reason.startswith("warning")
            and not out.not_representative)


def groups_lines(outcomes: list[Outcome]) -> list[str]:
    """One line per group of plain expected results that `run` did not print: `88 PASS not shown ...; 76 of them no
    FP8 by design: ...`, grouped by target/profile with the case files they come from, and what a profile shows
    where its rows read no FP8 by design (the Triton profile)."""
    shown = [o for o in outcomes if plain(o)]
    if not shown:
        return []
    out = []
    for where, rows in _by(shown, lambda o: f"{o.target}/{_profile(o)}").items():
        design = [o for o in rows if answer(o).by_design]
        line = f"{len(rows)} PASS on {where}"
        if design:
            files = Counter(Path(o.file).stem if o.file else "?" for o in design)
            line += (f"; {len(design)} of them no FP8 by design ("
                     + ", ".join(f"{n} {f}" for f, n in files.most_common(4))
                     + (f", {len(files) - 4} more files" if len(files) > 4 else "") + ")")
            shows = getattr(PROFILES.get(rows[0].profile), "shows", "")
            if shows:  # the header says why in full
                line += f": {shows.split(': ', 1)[0]}"
            else:
                line += ": the golden states no FP8 gemm for this target"
        out.append(line)
    return out


def _by(items, key) -> dict:
    groups: dict = {}
    for it in items:
        groups.setdefault(key(it), []).append(it)
    return groups


def print_summary(outcomes: list[Outcome], stream: TextIO | None = None, verbose: bool = True) -> None:
    stream = stream or sys.stdout
    counts = Counter(o.code.name for o in outcomes)
    parts = [f"{counts[c.name]} {c.name}" for c in CODES if counts[c.name]]
    hidden = [] if verbose else groups_lines(outcomes)
    if hidden:
        print("\nnot shown (plain expected PASS; -v prints every result):", file=stream)
        for line in hidden:
            print(f"  {line}", file=stream)
    print(f"\n{len(outcomes)} results: " + (", ".join(parts) if parts else "nothing ran"), file=stream)
    bad = [o for o in outcomes if o.code.is_failure]
    if bad:
        print("Not OK:", file=stream)
        for o in bad:
            print(f"  {o.code.name:<10} {o.target}/{o.profile} {o.case}", file=stream)
