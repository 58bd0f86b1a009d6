"""Golden expectations — load, bless atomically (compared by harness/fp8_check/verdict/_comparator.py).

A golden is one small YAML file per case x target x profile x mode:
`goldens/<target>/<profile>/<mode>/<case>.yaml`. It holds one or more
expectations, each for a JAX version range, so that a deliberate change in XLA is
recorded once instead of breaking older versions:

    case: relu_amax_f32
    target: h100
    profile: cublas
    mode: deviceless
    expect:
    - jax: ">=0.6.1"            # optional; absent means every version
      blessed_with: jax 0.12.0.1
      signature: {...}
      autotune: {decisions: 1, from_results: 0, choices: []}   # deviceless `default` only

`autotune` records what the replayed autotune results file decided when the golden was blessed
(fp8_check.compile._autotune_replay): a later capture that covers more decisions, or decides one differently,
is then a visible change (`autotune.from_results`, `autotune.choices`), never a silent one.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from fp8_check import core
from fp8_check.core import BadInput, atomic_write, check, inside
from fp8_check.verdict._contract_schema import ContractError, options_from, validate


class GoldenError(BadInput, ValueError):
    pass


MAX_BYTES = core.MAX_BYTES  # the one limit: `load` reads a golden under it, `Golden.to_text` writes under it


@dataclass
class Expectation:
    signature: dict  # {} for a contract
    jax: str = ""  # PEP 440 specifier set; empty: every version
    blessed_with: str = ""
    contract: dict | None = None  # a model's contract instead of a signature (harness/fp8_check/verdict/_contract.py)
    # deviceless `default`: what the autotune results file decided at bless time (`autotune_results.Coverage.record`)
    autotune: dict | None = None

    def covers(self, jax_version: str) -> bool:
        return not self.jax or Version(jax_version) in SpecifierSet(self.jax)


@dataclass
class Golden:
    case: str
    target: str
    profile: str
    mode: str
    expect: list[Expectation] = field(default_factory=list)
    layers: list[dict] = field(default_factory=list)  # layer rules for every version (harness/fp8_check/verdict/rules/layers.py)
    contract_options: dict | None = None  # a contract golden's options (cost_tolerance, kernels); kept by bless

    @property
    def is_contract(self) -> bool:
        return self.contract_options is not None or any(e.contract is not None for e in self.expect)

    def expected_for(self, jax_version: str) -> Expectation | None:
        for exp in self.expect:
            if exp.covers(jax_version):
                return exp
        return None

    def nearest(self, jax_version: str) -> tuple[Expectation, str] | None:
        """For a release no expectation covers: the expectation blessed on the nearest release, and that release —
        the newest blessed release before `jax_version`, else the oldest after it (None: nothing blessed). A release
        with no golden of its own is judged against it (runner.judge_signature: NEW never hides a regression)."""
        v = Version(jax_version)
        blessed = [(Version(r), r, e) for e in self.expect for r in blessed_releases(e)]
        before = [b for b in blessed if b[0] < v]
        after = [b for b in blessed if b[0] > v]
        if before:
            _, release, exp = max(before, key=lambda b: b[0])
        elif after:
            _, release, exp = min(after, key=lambda b: b[0])
        else:
            return None
        return exp, release

    def to_yaml(self, shared: bool = False) -> str:
        """The golden's YAML; with `shared`, a signature (or contract) equal to an earlier expectation's is written
        once and referred to (a YAML alias): a range that flaps between two signatures does not repeat them."""
        seen: dict[str, dict] = {}

        def once(value: dict) -> dict:
            return seen.setdefault(json.dumps(value, sort_keys=True, default=str), value) if shared else value

        doc = {
            "case": self.case,
            "target": self.target,
            "profile": self.profile,
            "mode": self.mode,
            **({"contract_options": self.contract_options} if self.contract_options else {}),
            "expect": [
                {**({"jax": e.jax} if e.jax else {}), "blessed_with": e.blessed_with,
                 **({"contract": once(e.contract)} if e.contract is not None else {"signature": once(e.signature)}),
                 **({"autotune": e.autotune} if e.autotune is not None else {})}
                for e in self.expect
            ],
        }
        if self.layers:
            doc["layers"] = self.layers
        return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100)

    def to_text(self, path: Path) -> str:
        """The text to write at `path`: what `load` reads back (MAX_BYTES, the alias limits), never one it refuses.
        Over MAX_BYTES, identical signatures are written once (`to_yaml(shared=True)`); still over, or more than the
        reader expands, GoldenError: one line naming the golden and the size, nothing written."""
        text = self.to_yaml()
        if len(text.encode()) <= MAX_BYTES:
            return text
        plain = len(text.encode())
        text = self.to_yaml(shared=True)
        try:
            if len(text.encode()) > MAX_BYTES:
                raise core.LimitError(None, None, f"still {_mib(len(text.encode()))}")
            core.load(text, core.UniqueKeyLoader)
        except core.LimitError as exc:
            why = (exc.problem or "").replace(" (an alias bomb?)", "")
            raise GoldenError(f"{path}: not written: its {len(self.expect)} expectations make {_mib(plain)}, over the "
                              f"{MAX_BYTES // 2**20} MiB limit a golden is read with (each signature written once: "
                              f"{why}); bless it from fewer versions") from None
        return text


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


_BLESSED = re.compile(r"jax ([0-9][0-9A-Za-z.+-]*?)(?:\.\.([0-9][0-9A-Za-z.+-]*))?(?=[\s,;()]|$)")


def blessed_releases(e: Expectation) -> list[str]:
    """The releases `e` was blessed from: its `blessed_with` (`jax 0.11.2`, `jax 0.10.0..0.11.2 (fp8-check matrix,
    3 versions)`: the first and the last), else the bounds its range names (`>=0.10.0,<0.11.0`: 0.10.0; `==0.11.2`)."""
    m = _BLESSED.match(e.blessed_with.strip())
    found = [x for x in (m.groups() if m else ()) if x]
    if not found and e.jax:
        found = [s.version for s in SpecifierSet(e.jax) if s.operator in (">=", "==", "~=", "===")]
    out = []
    for x in found:
        try:
            out.append(str(Version(x)))
        except InvalidVersion:
            continue
    return out


class _Dumper(yaml.SafeDumper):
    """Block style for structure, flow style for short lists of scalars: `operand_dtypes: [f8e4m3fn, f8e4m3fn]`."""


def _represent_list(dumper: yaml.SafeDumper, items: list):
    flow = all(not isinstance(x, (dict, list)) and " " not in str(x) for x in items)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", items, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def path_for(root: Path, case: str, target: str, profile: str, mode: str) -> Path:
    """`root/<target>/<profile>/<mode>/<case>.yaml`; every name is checked (_names.UnsafeName): never outside `root`."""
    check("case", case)
    return inside(root, ("target", target), ("profile", profile), ("mode", mode)) / f"{case}.yaml"


def load(path: Path) -> Golden | None:
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None

    try:
        # a golden lives under its root (<root>/<target>/<profile>/<mode>/<case>.yaml): a link out of it is refused
        home = path.absolute().parents[3]
        doc = core.load(core.read_text(path, MAX_BYTES, home=home, home_name="the goldens folder"),
                             core.UniqueKeyLoader)
    except core.ReadError as exc:
        raise GoldenError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise GoldenError(f"{path}: invalid YAML: {core.problem_line(exc)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("expect"), list):
        raise GoldenError(f"{path}: field 'expect': expected a list of expectations")
    expect = []
    for i, item in enumerate(doc["expect"]):
        contract = item.get("contract") if isinstance(item, dict) else None
        if isinstance(item, dict) and "contract" in item and "signature" in item:
            raise GoldenError(f"{path}: field 'expect[{i}]': both a signature and a contract; an expectation states one")
        if not isinstance(item, dict) or not (isinstance(item.get("signature"), dict) or contract is not None):
            raise GoldenError(f"{path}: field 'expect[{i}].signature': expected a mapping (or a model's `contract`)")
        unknown = sorted(set(item) - {"jax", "blessed_with", "signature", "contract", "autotune"})
        if unknown:
            raise GoldenError(f"{path}: field 'expect[{i}].{unknown[0]}': unknown key; allowed: jax, blessed_with, "
                              "signature, contract, autotune")
        autotune = item.get("autotune")
        if autotune is not None and not (isinstance(autotune, dict) and isinstance(autotune.get("decisions"), int)
                                         and isinstance(autotune.get("from_results"), int)
                                         and isinstance(autotune.get("choices", []), list)):
            raise GoldenError(f"{path}: field 'expect[{i}].autotune': expected {{decisions, from_results, choices}}")
        if contract is not None:
            try:
                validate(contract, f"expect[{i}].contract")
            except ContractError as exc:
                raise GoldenError(f"{path}: field '{exc}'") from None
        spec = str(item.get("jax", "") or "")
        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            raise GoldenError(f"{path}: field 'expect[{i}].jax': not a version range: {spec!r}") from None
        expect.append(Expectation(item.get("signature") or {}, spec, str(item.get("blessed_with", "")), contract,
                                  autotune))
    for key in ("case", "target", "profile", "mode"):
        if key not in doc:
            raise GoldenError(f"{path}: field '{key}': missing")
    layers = doc.get("layers") or []
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise GoldenError(f"{path}: field 'layers': expected a list of {{layer, pass, fp8}} rules")
    options = doc.get("contract_options")
    if options is not None:
        try:
            options_from(options)
        except ContractError as exc:
            raise GoldenError(f"{path}: field '{exc}'") from None
    return Golden(doc["case"], doc["target"], doc["profile"], doc["mode"], expect, list(layers), options)


def check_identity(g: Golden, path: Path, case: str, target: str, profile: str, mode: str) -> None:
    """A golden's `case`/`target`/`profile`/`mode` must be the ones its path says; raise GoldenError if not."""
    for key, want in (("case", case), ("target", target), ("profile", profile), ("mode", mode)):
        got = getattr(g, key)
        if got != want:
            raise GoldenError(f"{path}: field '{key}': says {got!r}, but this file is the golden of {key} {want!r} "
                              f"(goldens/<target>/<profile>/<mode>/<case>.yaml); fix the field or move the file")


def golden_files(root: Path) -> list[Path]:
    """Every golden file under `root` (`<target>/<profile>/<mode>/<case>.yaml`)."""
    root = Path(root)
    return sorted(p for p in root.glob("*/*/*/*.yaml") if p.is_file()) if root.is_dir() else []


def golden_files_of(root: Path, target: str, profile: str) -> list[Path]:
    """The golden files of one target and profile (every mode)."""
    base = Path(root) / target / profile
    return sorted(p for p in base.glob("*/*.yaml") if p.is_file()) if base.is_dir() else []


def stale(root: Path, case_ids: set[str]) -> list[Path]:
    """Golden files whose case no longer exists among `case_ids`."""
    return [p for p in golden_files(root) if p.stem not in case_ids]


def bless(root: Path, case: str, target: str, profile: str, mode: str, jax_version: str, signature: dict,
          contract: dict | None = None, layers: list[dict] | None = None, autotune: dict | None = None) -> str:
    """Record `signature` (or, for a model, its `contract`) as expected for `jax_version`; returns the unified
    diff applied ('' if unchanged).

    The expectation covering `jax_version` is replaced, keeping its version range; when none covers it, a new one
    is added: without a range in a new golden, for `==jax_version` only where other expectations exist (a release
    between ranged ones: it claims no release it was not measured on, and none twice). `layers`: the layer rules
    a golden without rules gets (a model's: every layer seen in FP8 stays FP8); rules already there are the user's
    and stay. `autotune`: what a deviceless `default`'s results file decided (`Coverage.record`), recorded with it.
    """
    path = path_for(root, case, target, profile, mode)
    old = load(path)
    if old is not None:
        check_identity(old, path, case, target, profile, mode)
    golden = old or Golden(case, target, profile, mode)
    old_text = path.read_text() if path.exists() else ""
    current = golden.expected_for(jax_version)
    if current is None:
        spec = f"=={jax_version}" if golden.expect else ""
        golden.expect.append(Expectation({} if contract is not None else signature, spec, f"jax {jax_version}", contract,
                                         autotune))
    else:
        current.signature = {} if contract is not None else signature
        current.contract = contract
        current.autotune = autotune
        current.blessed_with = f"jax {jax_version}"
    if layers and not golden.layers:
        golden.layers = list(layers)
    new_text = golden.to_text(path)
    if same_expectations(old_text, new_text):
        return ""
    atomic_write(path, new_text)
    return "".join(
        difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True), f"a/{path}", f"b/{path}")
    )


def same_expectations(old_text: str, new_text: str) -> bool:
    """Equal but for the blessed_with line: re-blessing an identical signature is not a change."""
    if not old_text:
        return False

    def strip(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.lstrip("- ").startswith("blessed_with:")]

    return strip(old_text) == strip(new_text)
