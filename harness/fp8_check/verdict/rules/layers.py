"""Expectations by layer: "every matmul under `*/Dense_[01]/*` runs in FP8, the head stays wide".

A rule names a layer glob (matched against the layer path, `*` crossing `/`; see
`_attribution.layer_matches`), optionally a pass (`forward`, `backward` = every backward pass,
`backward-input`, `backward-weight`, or a glob) and what the matmuls it matches must be:
`fp8: true` (FP8/FP4 operands) or `fp8: false` (wider). Written in a golden's expectation

    expect:
    - signature: {...}
      layers:
      - {layer: "*/Dense_[01]/*", fp8: true}
      - {layer: "*/Dense_2/*", pass: backward, fp8: false}

as `fp8-check check --expect-layer '*/Dense_[01]/*=fp8'` (`PATTERN[@PASS]=fp8|wide`), or as
`assert_fusion(..., layers=[...])`. Each matmul that breaks a rule is one `FieldDiff` at
`layers[PATTERN@PASS].gemms[i]`; a rule that matches no matmul is one at `layers[PATTERN@PASS]`. Verdicts: a layer that
should be FP8 and is not is a regression; one that should stay wide and is FP8 an improvement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fp8_check.signature import PASSES, Signature, engine, layer_matches, pass_matches
from fp8_check.verdict._comparator import FieldDiff
from fp8_check.verdict.rules.findings import Findings, explained

LOW, WIDE = "FP8/FP4", "wider than FP8"
_KEYS = ("layer", "pass", "fp8")


class LayerRuleError(ValueError):
    """A malformed rule: the message names the field."""


@dataclass(frozen=True)
class LayerRule:
    layer: str
    pass_: str = "*"
    fp8: bool = True

    @property
    def label(self) -> str:
        return self.layer + ("" if self.pass_ == "*" else f"@{self.pass_}")

    def to_dict(self) -> dict:
        return {"layer": self.layer, **({} if self.pass_ == "*" else {"pass": self.pass_}), "fp8": self.fp8}


def from_dicts(items, where: str = "layers") -> list[LayerRule]:
    if not isinstance(items, list):
        raise LayerRuleError(f"{where}: expected a list of {{layer, pass, fp8}} rules")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise LayerRuleError(f"{where}[{i}]: expected a mapping with keys {', '.join(_KEYS)}")
        unknown = sorted(set(item) - set(_KEYS))
        if unknown:
            raise LayerRuleError(f"{where}[{i}].{unknown[0]}: unknown key; allowed: {', '.join(_KEYS)}")
        if not isinstance(item.get("layer"), str) or not item["layer"].strip():
            raise LayerRuleError(f"{where}[{i}].layer: expected a layer glob such as '*/Dense_[01]/*'")
        if not isinstance(item.get("fp8", True), bool):
            raise LayerRuleError(f"{where}[{i}].fp8: expected true or false")
        pass_ = str(item.get("pass", "*") or "*")
        _check_pass(pass_, f"{where}[{i}].pass")
        out.append(LayerRule(item["layer"].strip(), pass_, item.get("fp8", True)))
    return out


def parse(text: str) -> LayerRule:
    """`PATTERN[@PASS]=fp8|wide` (the CLI form)."""
    spec, sep, want = text.rpartition("=")
    want = want.strip().lower()
    if not sep or want not in ("fp8", "fp4", "wide", "true", "false") or not spec.strip():
        raise LayerRuleError(f"--expect-layer {text!r}: expected PATTERN[@PASS]=fp8|wide, e.g. '*/Dense_[01]/*=fp8'")
    layer, _, pass_ = spec.partition("@")
    pass_ = pass_.strip() or "*"
    _check_pass(pass_, f"--expect-layer {text!r}")
    return LayerRule(layer.strip(), pass_, want in ("fp8", "fp4", "true"))


def _check_pass(pass_: str, where: str) -> None:
    if not any(ch in pass_ for ch in "*?[") and pass_ not in PASSES:
        raise LayerRuleError(f"{where}: unknown pass {pass_!r}; one of {', '.join(PASSES)} or a glob")


def check_layers(rules: list[LayerRule], sig: Signature) -> list[FieldDiff]:
    """The differences between the rules and the signature's attributed matmuls."""
    out = []
    for rule in rules:
        path = f"layers[{rule.label}]"
        matched = [g for g in sig.gemms
                   if layer_matches(rule.layer, g.layer) and pass_matches(rule.pass_, g.pass_)]
        if not matched:
            layers = sorted({g.layer for g in sig.gemms if g.layer})
            out.append(FieldDiff(path, f"matmuls {LOW if rule.fp8 else WIDE}",
                                 "no matmul matches (layers: " + (", ".join(layers[:8]) or "none") + ")"))
            continue
        for g in matched:
            if g.fp8 != rule.fp8:
                found = f"{engine(g)} {'x'.join(g.operand_dtypes)} at {g.layer} ({g.pass_})"
                out.append(FieldDiff(f"{path}.gemms[{sig.gemms.index(g)}]", LOW if rule.fp8 else WIDE, found))
    return out


def classify(path: str, before, after) -> tuple[str, str]:
    """(class, why) of one layer-rule diff, in the vocabulary of fp8_check.verdict.rules.findings."""
    text = str(after)
    if text.startswith("no matmul matches"):
        return "neutral", "the pattern matches no matmul"
    if before == LOW:
        return "regression", f"a layer fell back from FP8/FP4 to a wider type ({text})"
    return "improvement", f"a layer now runs in FP8/FP4 ({text})"


@explained('a layer that should run in FP8/FP4 fell back to a wider type',
           'a layer that should stay wide runs in FP8/FP4 (a rule matching no matmul is neutral)')
def judge(m: re.Match, before: Any, after: Any, b_sig: dict, a_sig: dict) -> Findings:
    """The table's entry (`layers[PATTERN@PASS]…`, outside the signature: classify_extra judges it)."""
    return [classify(m.string, before, after)]
