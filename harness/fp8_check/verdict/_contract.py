"""Contracts: what a model's golden states — per layer x pass, the facts that cost time — and how they are judged.

A pattern case's golden is its exact signature. A model's signature (a train step: ~200 kernels,
27 matmuls) changes at nearly every JAX release in ways that do not matter for FP8: one more
elementwise kernel, the same gemms in another order. Its golden is a contract instead
(docs/contracts.md):

    expect:
    - blessed_with: jax 0.12.0.1 (fp8-check matrix, 1 version)
      contract:
        matmuls:                       # one row per layer x pass x engine (layer: a glob)
        - {layer: DecoderBlock/mlp/up/*, pass: backward-weight, engine: cuBLASLt FP8, operands: f8e5m2 x f8e4m3fn}
        collectives: [{layer: ..., op: all-gather, dtype: f8e4m3fn}]    # sharded models only
        fp8_flops: 98.5                # % of matmul FLOPs in FP8/FP4
        cost_us: 812.4                 # the estimated step cost (harness/fp8_check/cost/_model.py)
        kernels: 194                   # only with `contract_options: {kernels: true}`

Judging (`check`) sorts every difference into one of two kinds:

- an FP8 fact changed — a layer x pass runs on another engine or dtype, an FP8 collective moves
  another type, the FP8 share of FLOPs moved, the estimated cost moved by at least the tolerance,
  or (opted in) the kernel count changed: a `Change` (a field diff: the case FAILs) with its class: a layer
  losing FP8, a gemm leaving the library for a loop fusion, an FP8 collective moving a wider type,
  a lower FP8 FLOP share are regressions whatever the cost model says; the reverse improvements;
  another engine or dtype of the same precision neutral;
- anything else — the estimated cost within the tolerance, a matmul attributed to no stated layer
  running wide, a stated layer whose matmul XLA merged into another's: a note (the case PASSes and
  the note is reported once).

Pure: a Signature and an Estimate in, diffs and notes out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from fp8_check.core import FP4, bits, dtype_class, is_narrow, upcast
from fp8_check.signature import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    Gemm,
    Signature,
    coverage,
    engine,
    is_low_engine,
    layer_matches,
    pass_matches,
)
from fp8_check.verdict._contract_schema import (
    Options,
)
from fp8_check.verdict.rules.collectives import core_change

REGRESSION, IMPROVEMENT, NEUTRAL = "regression", "improvement", "neutral"

FLOP_SHARE_SLACK = 0.1  # percentage points: rounding of the stated share
DEFAULT_OPTIONS = Options()


# ------------------------------------------------------------------ facts of a signature


def glob_escape(text: str) -> str:
    """A layer path as a glob matching exactly itself."""
    return "".join(f"[{ch}]" if ch in "*?[" else ch for ch in text)


def operands(g: Gemm) -> str:
    return " x ".join(g.operand_dtypes) or "?"


def is_low(eng: str) -> bool:
    """FP8/FP4 engines of every platform, from the platforms' data (a TPU's `TPU matmul FP8` too; this was a GPU
    list, so a TPU contract wrote no layer rules and a TPU layer that lost FP8 was no regression)."""
    return is_low_engine(eng) or eng == "cuDNN block-scaled"


def is_loop_fusion(eng: str) -> bool:
    return eng.endswith("(no gemm emitter)")


def engine_text(eng: str, ops: str) -> str:
    """`cuBLAS bf16`, or `f16 loop fusion` for a dot XLA left in a fusion (no gemm emitter)."""
    if is_loop_fusion(eng):
        kind = "loop" if "kLoop" in eng else "input" if "kInput" in eng else "plain"
        return f"{'/'.join(sorted({d for d in ops.split(' x ') if d})) or '?'} {kind} fusion"
    return eng


def facts(sig: Signature, cost_us: float | None, options: Options = DEFAULT_OPTIONS) -> dict:
    """The contract a signature satisfies exactly (what `bless` writes)."""
    rows: dict[tuple, dict] = {}
    for g in sig.gemms:
        row = rows.setdefault((g.layer or "", g.pass_ or FORWARD, engine(g), operands(g)), {})
        if g.amax or g.damax_output:  # where they matter: the gemm computes the abs-max of its output
            row["amax"] = True
        if g.epilogue and g.epilogue != "DEFAULT":
            row["epilogue"] = g.epilogue
    order = {"forward": 0, "backward-input": 1, "backward-weight": 2, "backward": 3}
    out: dict[str, Any] = {"matmuls": [
        {"layer": glob_escape(layer) if layer else "", "pass": pass_, "engine": eng, "operands": ops, **extra}
        for (layer, pass_, eng, ops), extra in sorted(rows.items(), key=lambda r: (r[0][0], order.get(r[0][1], 9),
                                                                                   r[0][2], r[0][3]))]}
    colls = sorted({(c.layer, c.op, c.dtype, c.core) for c in sig.collectives})
    if colls:  # `core` only where it runs on an offload core (the SparseCore): GPU contracts state none
        out["collectives"] = [{"layer": glob_escape(layer), "op": op, "dtype": dt, **({"core": core} if core else {})}
                              for layer, op, dt, core in colls]
    share = coverage(sig).flop_fraction
    if share is not None:
        out["fp8_flops"] = round(100 * share, 1)
    if cost_us is not None:
        out["cost_us"] = round(cost_us, 1)
    if options.kernels:
        out["kernels"] = sig.kernels
    return out


def fp8_layer_rules(sig: Signature) -> list[dict]:
    """The layer rules `bless` writes next to a contract: every layer seen in FP8 must stay FP8 (all its passes,
    or each pass that ran in FP8). The glob covers the layer with its FP8 op's component stripped
    (`Model/block1/down/*` matches `Model/block1/down/Fp8DotGeneralOp_0` and a plain `Model/block1/down`)."""
    passes: dict[str, dict[str, bool]] = {}
    for g in sig.gemms:
        if g.layer:
            at = passes.setdefault(g.layer, {})
            at[g.pass_ or FORWARD] = at.get(g.pass_ or FORWARD, True) and is_low(engine(g))
    rules: list[dict] = []
    for layer, by_pass in sorted(passes.items()):
        stripped = fp8_op_stripped(layer)
        glob = glob_escape(stripped) + "/*" if stripped != layer else glob_escape(layer)
        fp8 = [p for p, low in by_pass.items() if low]
        if any(not all(at.values()) for other, at in passes.items()
               if other != layer and layer_matches(glob, other)):
            glob = glob_escape(layer)  # the stripped glob covers a sibling that is not FP8 (MaxText's
            # `eval_jaxpr/Fp8DirectDotGeneralOp` beside `eval_jaxpr/<einsum>`): a rule must hold where it was blessed
        if fp8 and len(fp8) == len(by_pass):
            rule = {"layer": glob, "fp8": True}
            if rule not in rules:
                rules.append(rule)
        else:
            rules += [r for r in ({"layer": glob, "pass": p, "fp8": True} for p in sorted(fp8)) if r not in rules]
    return rules


def fp8_facts(c: dict) -> dict:
    """What must be equal for two versions to share one contract: everything but the cost."""
    return {k: v for k, v in c.items() if k != "cost_us"}


# ------------------------------------------------------------------ judging


@dataclass(frozen=True)
class Change:
    """One FP8 fact that differs: `path` names the layer and pass (`DecoderBlock/mlp/up backward-weight`)."""

    path: str
    expected: Any
    found: Any
    cls: str
    why: str


@dataclass
class Judgement:
    changes: list[Change] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # tolerated changes (the case passes)
    cost_before: float | None = None
    cost_after: float | None = None

    def add(self, path: str, expected: Any, found: Any, cls: str, why: str) -> None:
        self.changes.append(Change(path, expected, found, cls, why))


def _where(layer: str, pass_: str) -> str:
    return f"{layer or '(no layer)'} {pass_}"


def _precision(eng: str, ops: str) -> str:
    if is_low(eng):
        kinds = {dtype_class(d) for d in ops.split(" x ")}
        return "FP4" if FP4 in kinds else "FP8"
    return "/".join(sorted({d for d in ops.split(" x ") if d})) or "?"


def _matches(row_layer: str, row_pass: str, g: Gemm) -> bool:
    if row_layer == "":
        return not g.layer
    return layer_matches(row_layer, g.layer) and pass_matches(row_pass, g.pass_)


def lost_fp8(c: dict, sig: Signature) -> tuple[int, ...]:
    """Indices of `sig`'s gemms at a layer and pass the contract states in FP8/FP4 that no longer run so (what
    the cost model prices as the loss)."""
    rows = [(str(r.get("layer", "")), str(r.get("pass", "*") or "*")) for r in c.get("matmuls") or []
            if isinstance(r, dict) and is_low(str(r.get("engine", "")))]
    return tuple(i for i, g in enumerate(sig.gemms) if not is_low(engine(g)) and any(_matches(lay, pas, g) for lay, pas in rows))


def check(c: dict, sig: Signature, cost_us: float | None, options: Options = DEFAULT_OPTIONS) -> Judgement:
    """Judge `sig` (and its estimated cost) against the contract `c`."""
    j = Judgement()
    _check_matmuls(c.get("matmuls") or [], sig, j)
    _check_collectives(c.get("collectives") or [], sig, j)
    _check_share(c.get("fp8_flops"), sig, j)
    _check_cost(c.get("cost_us"), cost_us, options, j)
    if "kernels" in c:
        want, have = c["kernels"], sig.kernels
        if want != have:
            cls = REGRESSION if have > want else IMPROVEMENT
            j.add("kernels", want, have, cls, f"{abs(have - want)} {'more' if have > want else 'fewer'} kernel launch(es) "
                                              f"({want} -> {have}; the contract states the count)")
    return j


_FP8_OP = re.compile(r"(?i)^[A-Za-z_]*fp8[A-Za-z_]*?(_\d+)?$")


def fp8_op_stripped(layer: str) -> str:
    """A layer path without its FP8 op's own component (`block1/down/Fp8DotGeneralOp_0` -> `block1/down`): the
    layer a plain matmul has when the FP8 op was taken out of it."""
    parts = layer.split("/")
    return "/".join(p for p in parts if not _FP8_OP.match(p)) if len(parts) > 1 else layer


def _same_layer(row_layer: str, row_pass: str, g: Gemm) -> bool:
    """`g` runs at the stated row's layer once both have their FP8 op's component stripped."""
    if not row_layer or not g.layer:
        return False
    stripped = fp8_op_stripped(row_layer)
    return (stripped != row_layer or fp8_op_stripped(g.layer) != g.layer) and \
        layer_matches(stripped, fp8_op_stripped(g.layer)) and pass_matches(row_pass, g.pass_)


def _pair(rows: list[dict], sig: Signature) -> tuple[dict, dict, dict, list[Gemm]]:
    """The contract's matmul rows grouped by (layer, pass), each with the gemms found there: matched by the stated
    layer, or else by the layer with its FP8 op's component stripped (a layer that lost its FP8 op); and the gemms
    no row states. One pairing for the judge and the report."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = {}
    extras: dict[tuple[str, str], dict] = {}
    for row in rows:
        key = (str(row.get("layer", "")), str(row.get("pass", "*") or "*"))
        groups.setdefault(key, []).append((str(row["engine"]), str(row.get("operands", ""))))
        if row.get("amax"):
            extras.setdefault(key, {})["amax"] = True
        if row.get("epilogue"):
            extras.setdefault(key, {})["epilogue"] = str(row["epilogue"])
    found: dict[tuple[str, str], list[Gemm]] = {k: [] for k in groups}
    unstated: list[Gemm] = []
    for g in sig.gemms:
        at = next((k for k in groups if _matches(k[0], k[1], g)), None)
        (found[at] if at else unstated).append(g)
    for key in [k for k, v in found.items() if not v]:  # a layer that lost its FP8 op: paired by the layer itself
        paired = [g for g in unstated if _same_layer(key[0], key[1], g)]
        found[key] = paired
        unstated = [g for g in unstated if g not in paired]
    return groups, extras, found, unstated


def matmul_rows(c: dict, sig: Signature) -> list[tuple[str, str, str]]:
    """(layer pass, expected, found) per stated layer x pass, then per unstated matmul, paired as the judge pairs
    them: what the report shows for a contract golden."""
    groups, _, found, unstated = _pair(c.get("matmuls") or [], sig)
    out = []
    for (layer, pass_), want in groups.items():
        have = found[(layer, pass_)]
        where = _where(layer if not have or all(_matches(layer, pass_, g) for g in have) else fp8_op_stripped(layer), pass_)
        expected = "; ".join(f"{engine_text(e, o)} {o}" for e, o in want)
        got = "; ".join(f"{engine_text(e, o)} {o}" for e, o in dict.fromkeys((engine(g), operands(g)) for g in have))
        out.append((where, expected, got or "(no matmul of its own)"))
    for g in unstated:
        out.append((_where(g.layer or "", g.pass_ or FORWARD), "(not stated)",
                    f"{engine_text(engine(g), operands(g))} {operands(g)}"))
    return out


def _check_matmuls(rows: list[dict], sig: Signature, j: Judgement) -> None:
    groups, extras, found, unstated = _pair(rows, sig)
    for (layer, pass_), want in groups.items():
        have = found[(layer, pass_)]
        where = _where(layer if not have or all(_matches(layer, pass_, g) for g in have) else fp8_op_stripped(layer), pass_)
        if not have:
            j.notes.append(f"{where}: no matmul of its own (merged into another layer's gemm, or gone; "
                           "the FP8 FLOP share says whether FP8 work was lost)")
            continue
        for eng, ops in dict.fromkeys((engine(g), operands(g)) for g in have):
            if (eng, ops) in want:
                continue
            _engine_change(j, where, want, eng, ops)
        extra = extras.get((layer, pass_), {})
        if extra.get("amax") and not any(g.amax or g.damax_output for g in have):
            j.add(f"{where} amax", "computed by the gemm", "not by the gemm", REGRESSION,
                  f"{where}: abs-max no longer computed by the gemm")
        want_epi = extra.get("epilogue")
        if want_epi and not any(g.epilogue == want_epi for g in have):
            found_epi = ", ".join(sorted({g.epilogue or "DEFAULT" for g in have}))
            j.add(f"{where} epilogue", want_epi, found_epi, REGRESSION,
                  f"{where}: epilogue {want_epi} -> {found_epi} (moved out of the gemm)")
    for g in unstated:
        eng, where = engine(g), _where(g.layer or "", g.pass_ or FORWARD)
        if is_low(eng):
            j.add(where, "(no matmul stated)", f"{eng} {operands(g)}", IMPROVEMENT,
                  f"{where}: a new {_precision(eng, operands(g))} matmul ({eng})")
        else:
            j.notes.append(f"{where}: a matmul the contract does not state ({eng} {operands(g)})")


def _engine_change(j: Judgement, where: str, want: list[tuple[str, str]], eng: str, ops: str) -> None:
    expected = "; ".join(f"{e} {o}" for e, o in want)
    found = f"{eng} {ops}"
    was_low = any(is_low(e) for e, _ in want)
    prec_before = _precision(*want[0]) if len(want) == 1 else ("FP8" if was_low else "wide")
    prec_after = _precision(eng, ops)
    if was_low and not is_low(eng):
        j.add(where, expected, found, REGRESSION, f"{where}: {prec_before} -> {prec_after} ({engine_text(eng, ops)})")
    elif is_low(eng) and not was_low:
        j.add(where, expected, found, IMPROVEMENT, f"{where}: {prec_before} -> {prec_after} ({eng})")
    elif is_loop_fusion(eng) and not any(is_loop_fusion(e) for e, _ in want):
        j.add(where, expected, found, REGRESSION, f"{where}: the gemm left the library for a loop fusion ({found})")
    elif any(e == "cuBLASLt FP8" for e, _ in want) and is_low(eng) and eng != "cuBLASLt FP8":
        j.add(where, expected, found, REGRESSION, f"{where}: cuBLASLt FP8 -> {eng}")
    elif _wider(want, ops):
        j.add(where, expected, found, REGRESSION, f"{where}: operands wider ({'; '.join(o for _, o in want)} -> {ops})")
    else:
        j.add(where, expected, found, NEUTRAL, f"{where}: {expected} -> {found} (same precision)")


def _wider(want: list[tuple[str, str]], ops: str) -> bool:
    after = [d for d in ops.split(" x ") if d]
    return all(upcast([d for d in o.split(" x ") if d], after) > 0 for _, o in want if o)


def _narrow(dtype: str) -> bool:
    """A collective's dtype moves FP8/FP4 data (a variadic one names each operand: `f8e4m3fn+f8e8m0fnu`)."""
    return all(is_narrow(d) for d in str(dtype).split("+"))


def _width(dtype: str) -> int | None:
    widths = [bits(d) for d in str(dtype).split("+")]
    return max(w for w in widths if w) if any(widths) else None


def _check_collectives(rows: list[dict], sig: Signature, j: Judgement) -> None:
    """Per layer x op, the dtypes the contract states (one op may move several: E4M3 activations and E5M2
    gradients); a found dtype the contract does not state is judged against them."""
    wanted: dict[tuple[str, str], list[str]] = {}
    cores: dict[tuple[str, str], set[str]] = {}  # where the contract says they run ('' : the TensorCore)
    for row in rows:
        wanted.setdefault((str(row.get("layer", "")), str(row["op"])), []).append(str(row["dtype"]))
        cores.setdefault((str(row.get("layer", "")), str(row["op"])), set()).add(str(row.get("core", "") or ""))
    for (layer, op), wants in wanted.items():
        found = [c for c in sig.collectives if c.op == op
                 and (layer_matches(layer, c.layer) if layer else not c.layer)]
        have = sorted({c.dtype for c in found})
        where = f"{layer or '(no layer)'} {op}"
        if not have:
            j.notes.append(f"{where}: no such collective any more")
            continue
        for core in sorted({c.core for c in found} - cores[(layer, op)]):
            want_core = "/".join(sorted(cores[(layer, op)]))
            for cls, why in core_change(want_core, core):
                j.add(f"{where} core", want_core or "tensorcore", core or "tensorcore", cls, f"{where}: {why}")
        want = " / ".join(wants)
        widths = [w for w in (_width(x) for x in wants) if w]
        for dt in have:
            if dt in wants:
                continue
            wa = _width(dt)
            if any(_narrow(x) for x in wants) and not _narrow(dt):
                j.add(where, want, dt, REGRESSION, f"{where}: FP8 collective now moves {dt} instead of {want}")
            elif _narrow(dt) and not any(_narrow(x) for x in wants):
                j.add(where, want, dt, IMPROVEMENT, f"{where}: collective moves {dt} again")
            elif widths and wa and (wa > max(widths) or wa < min(widths)):
                j.add(where, want, dt, REGRESSION if wa > max(widths) else IMPROVEMENT, f"{where}: collective moves {want} -> {dt}")
            else:
                j.add(where, want, dt, NEUTRAL, f"{where}: collective dtype {want} -> {dt} (same width)")


def _check_share(want: Any, sig: Signature, j: Judgement) -> None:
    share = coverage(sig).flop_fraction
    if not isinstance(want, (int, float)) or share is None:
        return
    have = round(100 * share, 1)
    if abs(have - want) <= FLOP_SHARE_SLACK:
        return
    cls = REGRESSION if have < want else IMPROVEMENT
    j.add("fp8_flops", f"{want:g} %", f"{have:g} %", cls, f"FP8/FP4 share of matmul FLOPs {want:g} % -> {have:g} %")


def _check_cost(want: Any, have: float | None, options: Options, j: Judgement) -> None:
    if not isinstance(want, (int, float)) or want <= 0:
        return
    if have is None:
        j.notes.append("estimated cost: not priced")
        return
    j.cost_before, j.cost_after = float(want), float(have)
    pct = (have - want) / want * 100
    text = f"estimated cost {want:.1f} -> {have:.1f} µs ({pct:+.1f} %)"
    # bless writes cost_us rounded to 0.1 µs: the same cost at that precision never moved (a 0 % tolerance passes)
    if round(have, 1) == round(float(want), 1) or abs(pct) < options.cost_tolerance:
        if round(pct, 1):
            j.notes.append(f"{text}, within the contract's {options.cost_tolerance:g} % tolerance")
        return
    j.add("cost_us", round(float(want), 1), round(float(have), 1), REGRESSION if pct > 0 else IMPROVEMENT,
          f"{text}: beyond the contract's {options.cost_tolerance:g} % tolerance")



# ------------------------------------------------------------------ what a person reads first: the lost layers

_SHORT_PASS = {FORWARD: "fwd", BACKWARD_INPUT: "bwd-in", BACKWARD_WEIGHT: "bwd-wt",
               BACKWARD: "bwd", "*": "every pass"}
_LOST = re.compile(r"^(?P<layer>.+) (?P<pass>" + "|".join(re.escape(p) for p in sorted(_SHORT_PASS, key=len, reverse=True))
                   + r"): (?P<before>FP8|FP4) -> (?P<after>[^\s(]+)")


def lost_layers(whys) -> list[str]:
    """The layers a verdict's regression lines say lost FP8/FP4, one text per layer and precision change with the
    passes that lost it, in the lines' order: `Block/mlp/down: FP8 -> bf16 (fwd, bwd-in, bwd-wt)`. The layer is
    the one the lines name (the judge already names a layer that lost its FP8 op without that op's component)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for why in whys:
        m = _LOST.match(str(why))
        if m:
            key = (m["layer"], m["before"], m["after"])
            short = _SHORT_PASS[m["pass"]]
            if short not in groups.setdefault(key, []):
                groups[key].append(short)
    return [f"{layer}: {before} -> {after} ({', '.join(passes)})" for (layer, before, after), passes in groups.items()]
