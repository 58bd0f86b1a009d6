"""The results file — the one place results JSON is written and read.

A `Results` document holds the run's environment and its typed `Outcome`s. Schema
`fp8-check/results/2` stores per result only the rendered case function; the target
specs and the repro template's inputs are stored once per run, and the standalone
repro script is rendered on demand (`repro_for`). Schema 1 files (which carried a full
repro per result) still load.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fp8_check.compile import repro_script
from fp8_check.core import BadInput, ReadError, atomic_write, load_json
from fp8_check.cost import Estimate
from fp8_check.platforms import Profile
from fp8_check.signature import Signature
from fp8_check.targets import PROFILES, Coverage, parse_target
from fp8_check.verdict import CODES, FieldDiff, NumericsResult, Outcome, Verdict, code

SCHEMA = "fp8-check/results/2"
READABLE = ("fp8-check/results/1", SCHEMA)


class ResultsError(BadInput, ValueError):
    """A results file that cannot be read: one line naming the file and what is wrong."""


@dataclass
class Results:
    environment: dict  # jax/jaxlib/plugin versions, device, mode, targets, profiles, compiler options
    outcomes: list[Outcome]
    target_specs: dict[str, str] = field(default_factory=dict)  # target name -> GpuTargetConfig text
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    path: str | None = None  # where it was read from (not stored)

    @property
    def jax(self) -> str:
        return str(self.environment.get("jax", "?"))

    def counts(self) -> Counter:
        return Counter(o.code.name for o in self.outcomes)


def outcome_to_json(o: Outcome, with_text: bool = True) -> dict:
    d = {
        "case": o.case, "target": o.target, "profile": o.profile, "mode": o.mode, "jax": o.jax,
        "outcome": o.code.name, "reason": o.reason,
        "signature": o.signature.to_dict(annotations=True) if o.signature else None,
        "expected": o.expected,
        "diffs": [x.to_json() for x in o.diffs],
        "known_issue": o.known_issue,
        "compile_seconds": round(o.compile_seconds, 4), "cached": o.cached,
        "description": o.description, "file": o.file,
    }
    if o.filecheck:
        d["filecheck"] = o.filecheck
    if o.not_representative:
        d["not_representative"] = o.not_representative
    if o.numerics is not None:
        d["numerics"] = o.numerics.to_dict()
    if o.verdict is not None:
        d["verdict"] = o.verdict.to_dict()
    if o.estimate is not None:
        d["estimate"] = o.estimate.to_dict(kernels=with_text)  # lean records: the total only
    if o.autotune is not None:  # deviceless `default`: what its autotune results file decided
        d["autotune"] = dict(o.autotune.to_json(), summary=o.autotune.summary())
    if with_text:
        d.update({"source": o.source, "yaml": o.yaml, "hlo": o.hlo, "stablehlo": o.stablehlo})
        if o.repro_needs:
            d["repro_needs"] = o.repro_needs
    return d


# The type of each field a reader relies on (None allowed wherever the field may be absent).
_TEXT_FIELDS = ("reason", "not_representative", "description", "source", "yaml", "file", "hlo", "stablehlo", "filecheck", "mode", "jax")
_MAP_FIELDS = ("expected", "known_issue", "signature", "numerics", "verdict", "autotune", "repro_needs")
_ENV_TYPES = {"jax": str, "jaxlib": str, "mode": str, "targets": list, "profiles": list, "compiler_options": dict,
              "target_versions": dict, "device": dict}


def _check_types(d: dict, where: str) -> None:
    """ValueError naming the field when one has the wrong type (a hand-edited or crafted file)."""
    for key in _TEXT_FIELDS:
        if d.get(key) is not None and not isinstance(d[key], str):
            raise ValueError(f"{where}: field '{key}': expected text, got {type(d[key]).__name__}")
    for key in _MAP_FIELDS:
        if d.get(key) is not None and not isinstance(d[key], dict):
            raise ValueError(f"{where}: field '{key}': expected a mapping, got {type(d[key]).__name__}")
    if d.get("diffs") is not None and not (isinstance(d["diffs"], list) and all(isinstance(x, dict) for x in d["diffs"])):
        raise ValueError(f"{where}: field 'diffs': expected a list of mappings")


def _check_environment(env: object, specs: object, where: str) -> None:
    if not isinstance(env, dict):
        raise ResultsError(f"{where}: field 'environment': expected a mapping")
    for key, typ in _ENV_TYPES.items():
        if env.get(key) is not None and not isinstance(env[key], typ):
            raise ResultsError(f"{where}: field 'environment.{key}': expected {typ.__name__}, got {type(env[key]).__name__}")
    for key in ("targets", "profiles"):
        if any(not isinstance(x, str) for x in env.get(key) or []):
            raise ResultsError(f"{where}: field 'environment.{key}': expected a list of names")
    if any(not isinstance(v, dict) for v in (env.get("compiler_options") or {}).values()):
        raise ResultsError(f"{where}: field 'environment.compiler_options': expected a mapping per profile")
    if not isinstance(specs, dict) or any(not isinstance(k, str) or not isinstance(v, str) for k, v in specs.items()):
        raise ResultsError(f"{where}: field 'target_specs': expected a mapping of target names to spec texts")


def outcome_from_json(d: dict) -> Outcome:
    if not isinstance(d, dict):
        raise ValueError(f"a result: expected a mapping, got {type(d).__name__}")
    _check_types(d, f"case {d.get('case')!r}")
    sig = d.get("signature")
    return Outcome(
        case=str(d["case"]), target=str(d["target"]), profile=str(d["profile"]), mode=str(d.get("mode", "")),
        jax=str(d.get("jax", "")), code=code(d["outcome"]), reason=d.get("reason") or "",
        not_representative=d.get("not_representative") or "",
        signature=Signature.from_dict(sig) if isinstance(sig, dict) and "kernels" in sig else None,
        expected=d.get("expected"),
        diffs=[FieldDiff.from_json(x) for x in d.get("diffs") or []],
        known_issue=d.get("known_issue"),
        compile_seconds=float(d.get("compile_seconds") or 0.0), cached=bool(d.get("cached", False)),
        hlo=d.get("hlo"), stablehlo=d.get("stablehlo"), source=_case_source(d.get("source") or ""),
        description=d.get("description") or "", yaml=d.get("yaml") or "", file=d.get("file") or "",
        filecheck=d.get("filecheck"),
        numerics=NumericsResult.from_dict(d["numerics"]) if d.get("numerics") else None,
        verdict=Verdict.from_dict(d.get("verdict")),
        estimate=Estimate.from_dict(d.get("estimate")),
        repro_needs=_repro_needs(d.get("repro_needs")),
        autotune=Coverage.from_json(d["autotune"]) if d.get("autotune") else None,
    )


def _repro_needs(d: dict | None) -> dict | None:
    """The repro's needs as stored (requirements: text; files: [name, relpath, is a package, text]); a malformed
    record raises ValueError naming the field."""
    if not d:
        return None
    reqs, files = d.get("requirements") or [], d.get("files") or []
    if not (isinstance(reqs, list) and all(isinstance(r, str) for r in reqs)):
        raise ValueError("field 'repro_needs.requirements': expected a list of text")
    if not (isinstance(files, list) and all(isinstance(f, list) and len(f) == 4 and isinstance(f[0], str)
                                            and isinstance(f[1], str) and isinstance(f[3], str) for f in files)):
        raise ValueError("field 'repro_needs.files': expected [name, relpath, is a package, text] lists")
    return {"requirements": reqs, "files": files, "incomplete": str(d.get("incomplete") or "")}


_CASE_BEGIN = "# ---- the case, exactly as fp8-check compiles it"
_CASE_END = "# ------------------------------------------------------------------"


def _case_source(text: str) -> str:
    """Schema 1 stored the whole repro script per result: keep only the case function from it."""
    if _CASE_BEGIN not in text:
        return text
    body = text.split(_CASE_BEGIN, 1)[1].split("\n", 1)[1]
    return body.split(_CASE_END, 1)[0].rstrip() + "\n"


def to_json(res: Results, with_text: bool = True) -> dict:
    counts = res.counts()
    return {
        "schema": SCHEMA,
        "created": res.created,
        "environment": res.environment,
        "target_specs": res.target_specs,
        "summary": {c.name: counts[c.name] for c in CODES},
        "results": [outcome_to_json(o, with_text) for o in res.outcomes],
    }


def from_json(doc: dict, path: str | None = None) -> Results:
    where = path or "results"
    if not isinstance(doc, dict) or doc.get("schema") not in READABLE:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise ResultsError(f"{where}: not an fp8-check results file (schema {found!r}; readable: {', '.join(READABLE)})")
    if not isinstance(doc.get("results") or [], list):
        raise ResultsError(f"{where}: field 'results': expected a list")
    try:
        outcomes = [outcome_from_json(r) for r in doc.get("results") or []]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ResultsError(f"{where}: malformed result: {type(exc).__name__}: {exc}") from None
    env = doc.get("environment") or {}
    specs = doc.get("target_specs") or {}
    _check_environment(env, specs, where)
    return Results(env, outcomes, dict(specs), str(doc.get("created", "")), path)


def write(path: Path, res: Results, with_text: bool = True) -> None:
    atomic_write(Path(path), json.dumps(to_json(res, with_text), indent=1) + "\n")


def load(path: Path) -> Results:
    path = Path(path)
    if not path.exists():
        raise ResultsError(f"{path}: no such results file")
    try:
        doc = load_json(path)
    except ReadError as exc:
        raise ResultsError(f"{path}: cannot read results JSON: {exc}") from None
    return from_json(doc, str(path))


NO_SPEC = ("# (no repro script: no spec recorded for target {target} in this results file; "
           "`fp8-check show CASE --target {target}` prints one)")


def repro_for(res: Results, o: Outcome) -> str:
    """The standalone repro script of one result, rendered from what the run stored."""
    if not o.source:
        return "# (no repro script recorded)"
    spec = res.target_specs.get(o.target, "")
    try:
        target = parse_target(o.target, spec)
    except Exception:  # an old file (schema results/1, `{}`) without the spec, or one that names no platform
        return NO_SPEC.format(target=o.target)
    options = (res.environment.get("compiler_options") or {}).get(o.profile)
    profile = PROFILES.get(o.profile) or Profile(o.profile, options or {}, True)
    if options is not None and options != profile.compiler_options:
        profile = Profile(o.profile, options, profile.deviceless)
    return repro_script(o.source, target, profile, o.jax, needs_of=o.repro_needs)
