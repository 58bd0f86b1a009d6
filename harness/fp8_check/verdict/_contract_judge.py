"""Judging a compiled model against its contract (harness/fp8_check/verdict/_contract.py) and blessing one.

`judge` is the contract branch of `runner.judge_signature`: PASS when no FP8 fact changed (the
tolerated changes, if any, are its reason: reported once), FAIL with a verdict whose lines name
layer and pass when one did, XFAIL/XPASS under an active known issue. The estimated step cost is
read from the existing cost API (`cost.estimate` of the compiled HLO), never stored per kernel.
"""

from __future__ import annotations

from fp8_check import cost
from fp8_check.signature import Signature, attributed
from fp8_check.verdict import _contract
from fp8_check.verdict._classify import Line, Verdict, classify, overall
from fp8_check.verdict._comparator import FieldDiff, compare
from fp8_check.verdict._contract_schema import options_from
from fp8_check.verdict._golden import Expectation, Golden, load, path_for
from fp8_check.verdict._outcome import FAIL, PASS, XFAIL, XPASS, Outcome
from fp8_check.verdict.rules import layers

KEY = "contract"  # out.expected of a contract outcome is {"contract": {...}}


def estimate(out: Outcome) -> cost.Estimate | None:
    """The judged program's estimate, at the shapes it was compiled at (a contract's `cost_us` compares like with
    like: `out.estimate` may be priced at the case's production shapes); None when it cannot be priced."""
    if not out.hlo:
        return None
    try:
        return cost.estimate(out.hlo, cost.hardware(out.target))
    except (ValueError, KeyError, TypeError, IndexError, ZeroDivisionError, OSError):
        return None


def judge(out: Outcome, sig: Signature, g: Golden, exp: Expectation, gpath, issue,
          rule_diffs: list[FieldDiff] | None = None) -> Outcome:
    """`rule_diffs`: the golden's layer rules (`layers:`) broken by `sig`, judged with the contract's facts."""
    options = options_from(g.contract_options)
    est = estimate(out)
    out.estimate = est
    assert exp.contract is not None
    j = _contract.check(exp.contract, sig, est.total_us if est else None, options)
    named = {c.path for c in j.changes}  # `LAYER PASS`: a rule broken at a layer the contract names already says nothing new
    for d in rule_diffs or []:
        if any(f" at {where.rsplit(' ', 1)[0]} ({where.rsplit(' ', 1)[-1]})" in str(d.found) for where in named):
            continue
        cls, why = layers.classify(d.path, d.expected, d.found)
        j.add(d.path, d.expected, d.found, cls, why)
    out.expected, out.expected_range = {KEY: exp.contract}, exp.jax or ""
    out.diffs = [FieldDiff(c.path, c.expected, c.found) for c in j.changes]
    tolerated = "; ".join(j.notes)
    changed = bool(j.changes)
    delta = None
    if j.cost_before is not None and j.cost_after is not None and est is not None:
        delta = cost.CostDelta(j.cost_before, j.cost_after, est.hardware, "contract", est.shape)
    if issue:
        name = issue.url or "(no upstream issue)"
        out.code = XFAIL if changed else XPASS
        out.reason = (f"known issue {name}" + (f": {issue.summary}" if issue.summary else "") if changed else
                      f"known issue {name} ({issue.jax}) no longer reproduces: every FP8 fact of the contract holds")
    elif changed:
        out.code = FAIL
        lines = tuple(Line(c.path, c.expected, c.found, c.cls, c.why) for c in j.changes)
        out.verdict = Verdict(overall(x.cls for x in lines), lines, delta)
        whys = [c.why for c in sorted(j.changes, key=lambda c: c.cls != _contract.REGRESSION)]
        out.reason = "; ".join(whys[:3]) + (f"; and {len(whys) - 3} more" if len(whys) > 3 else "") + \
            f" (against the contract in {gpath})" + (f"; tolerated: {tolerated}" if tolerated else "")
    else:
        out.code = PASS
        out.reason = f"within the contract: {tolerated}" if tolerated else ""
    if changed and issue:
        out.verdict = Verdict(overall(c.cls for c in j.changes),
                              tuple(Line(c.path, c.expected, c.found, c.cls, c.why) for c in j.changes), delta)
    return out


def is_contract(out: Outcome) -> bool:
    return isinstance(out.expected, dict) and KEY in out.expected


def cost_reaches(out: Outcome, threshold) -> bool:
    """`--fail-on cost:X` on a contract outcome: an FP8 fact that got worse fails whatever it costs; otherwise
    the estimated cost against the contract's must reach X (a tolerated change too: X overrides the tolerance)."""
    if out.verdict is not None and any(x.cls == _contract.REGRESSION and x.path != "cost_us" for x in out.verdict.lines):
        return True
    want = (out.expected or {}).get(KEY, {}).get("cost_us")
    est = estimate(out)  # at the judged shapes, as the contract's cost_us (out.estimate may be at production shapes)
    if not isinstance(want, (int, float)) or est is None:
        return False
    return threshold.met_by(cost.CostDelta(float(want), est.total_us, est.hardware, "contract"))


def facts_of(out: Outcome, options: dict | None) -> dict:
    """The contract `out`'s signature satisfies, as bless writes it."""
    assert out.signature is not None
    est = estimate(out)
    return _contract.facts(out.signature, est.total_us if est else None, options_from(options))


def wants_contract(root, out: Outcome) -> tuple[bool, dict | None]:
    """(whether `out`'s golden is a contract, its options): an existing golden keeps its form; a new golden is a
    contract when the case's matmuls carry layer paths (a model), an exact signature otherwise (a pattern)."""
    old = load(path_for(root, out.case, out.target, out.profile, out.mode))
    if old is not None:
        return old.is_contract, old.contract_options
    return attributed(out.signature), None


def between(before: Outcome, after: Outcome, options: dict | None = None) -> tuple[list[FieldDiff], Verdict]:
    """The change of a model's FP8 facts from one version to the next (matrix, bisect): the contract `before`
    satisfies, judged on `after`; a change that alters no FP8 fact and stays within the tolerance is none."""
    assert before.signature is not None and after.signature is not None
    opts = options_from(options)
    eb, ea = estimate(before), estimate(after)
    facts = _contract.facts(before.signature, eb.total_us if eb else None, opts)
    j = _contract.check(facts, after.signature, ea.total_us if ea else None, opts)
    lines = tuple(Line(c.path, c.expected, c.found, c.cls, c.why) for c in j.changes)
    delta = cost.between(eb, ea) if eb is not None and ea is not None else None
    return [FieldDiff(c.path, c.expected, c.found) for c in j.changes], Verdict(overall(x.cls for x in lines), lines, delta)


def change(before: Outcome, after: Outcome) -> tuple[list[FieldDiff], Verdict]:
    """The change of one row from one release's result to a later one's: the one comparison and classification that
    matrix (its grid, news and job summary), the HTML report and bisect all use, so that they tell one story.
    A model judged against its contract (`is_contract(after)`): its FP8 facts by layer and pass, and the estimated
    cost beyond the tolerance (`between`); otherwise the signatures field by field, classified
    (harness/fp8_check/verdict/_classify.py) and priced when both programs were (`Outcome.estimate`).
    No change: ([], a verdict without lines)."""
    assert before.signature is not None and after.signature is not None
    if is_contract(after):
        return between(before, after)
    b, a = before.signature.to_dict(), after.signature.to_dict()
    diffs, v = compare(b, a), classify(b, a)
    if before.estimate is not None and after.estimate is not None:  # both compiled: priced exactly (cost.py)
        v = Verdict(v.cls, v.lines, cost.between(before.estimate, after.estimate))
    return diffs, v


def changed(change_of: tuple[list[FieldDiff], Verdict]) -> bool:
    """Whether `change(...)` found a change (a field differs or a line is classified)."""
    diffs, v = change_of
    return bool(diffs or v.lines)


def signature_change(before: Signature, after: Signature) -> tuple[list[FieldDiff], Verdict]:
    """`between` for two signatures without their programs (bisect): the FP8 facts only, not the cost."""
    facts = _contract.facts(before, None)
    j = _contract.check(facts, after, None)
    lines = tuple(Line(c.path, c.expected, c.found, c.cls, c.why) for c in j.changes)
    return [FieldDiff(c.path, c.expected, c.found) for c in j.changes], Verdict(overall(x.cls for x in lines), lines)


def is_model(sig: Signature | None) -> bool:
    """A model (its matmuls carry layer paths): matrix and bisect compare its FP8 facts by layer and pass."""
    return attributed(sig)
