"""What a result is: outcome codes (one home for them) and the typed `Outcome` of one case.

In LLVM lit's style each outcome code is a value that knows its name, whether it is a
failure, the one-character symbol the grids use, and its terminal/rich style. Every
stage, the terminal, the results JSON, the pytest plugin, matrix, bisect and the report
use these values and nothing else classifies outcome strings: `code("FAIL")` turns a
name read from a file back into its value.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from fp8_check.cost import Estimate
from fp8_check.signature import Signature
from fp8_check.targets import Coverage
from fp8_check.verdict._classify import Verdict
from fp8_check.verdict._comparator import FieldDiff


@dataclass(frozen=True)
class Code:
    name: str
    is_failure: bool  # makes `run` exit 1
    symbol: str  # one character in the terminal and HTML grids
    style: str  # rich style (terminal grids)
    ansi: str  # SGR parameters for a plain terminal line
    matches_golden: bool = False  # the signature equals the expectation
    file_upstream: bool = False  # the report offers a ready upstream issue body
    meaning: str = ""

    def __str__(self) -> str:
        return self.name

    def paint(self, on_tty: bool) -> str:
        return f"\033[{self.ansi}m{self.name}\033[0m" if on_tty else self.name


PASS = Code("PASS", False, "✓", "green", "32", matches_golden=True, meaning="the signature matches the golden")
XFAIL = Code("XFAIL", False, "x", "cyan", "36",
             meaning="differs, and the case has a known upstream issue for this JAX version")
UNSUPPORTED = Code("UNSUPPORTED", False, "-", "dim", "33",
                   meaning="cannot run here (JAX too old for deviceless, the autotuned profile without a GPU, "
                           "a missing optional dependency)")
FAIL = Code("FAIL", True, "✗", "bold red", "31;1", file_upstream=True,
            meaning="the signature differs from the golden")
XPASS = Code("XPASS", True, "X", "bold magenta", "35;1", matches_golden=True, file_upstream=True,
             meaning="matches although a known issue is declared for this version: the bug is fixed")
UNRESOLVED = Code("UNRESOLVED", True, "?", "bold red", "31;1", file_upstream=True,
                  meaning="compile error, crash, or an unreadable golden")
NEW = Code("NEW", True, "N", "bold blue", "34;1", meaning="no golden yet for this version")

CODES: tuple[Code, ...] = (PASS, XFAIL, UNSUPPORTED, FAIL, XPASS, UNRESOLVED, NEW)
_BY_NAME = {c.name: c for c in CODES}


def code(name: str | Code) -> Code:
    """The code called `name` (as read from a results file); ValueError for an unknown name."""
    if isinstance(name, Code):
        return name
    try:
        return _BY_NAME[str(name)]
    except KeyError:
        raise ValueError(f"unknown outcome '{name}'; known: {', '.join(_BY_NAME)}") from None


def any_failure(codes) -> bool:
    return any(code(c).is_failure for c in codes)


# ------------------------------------------------------------------ numerics (`run --numerics`, harness/fp8_check/gpu/_numerics.py)


@dataclass
class OutputCheck:
    name: str
    dtype: str
    shape: list[int]
    elements: int
    mismatches: int
    max_abs_err: float | str  # a number, or "inf"/"nan" as text (JSON has no infinities)
    max_rel_err: float | str
    max_err_over_tolerance: float | str
    first_mismatch: dict | None = None


@dataclass
class NumericsResult:
    status: str  # pass, fail, skipped, error
    reason: str = ""
    seed: int | None = None
    outputs: list[OutputCheck] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "NumericsResult":
        return cls(d["status"], d.get("reason", ""), d.get("seed"), [OutputCheck(**o) for o in d.get("outputs", [])])

    def summary(self) -> str:
        if not self.outputs:
            return f"numerics {self.status}" + (f": {self.reason}" if self.reason else "")
        def g(x, spec=".3g"):
            return format(x, spec) if isinstance(x, (int, float)) else str(x)

        parts = [f"{o.name} max abs {g(o.max_abs_err)}, rel {g(o.max_rel_err)} ({g(o.max_err_over_tolerance, '.2f')} of tolerance)"
                 for o in self.outputs]
        return f"numerics {self.status}: " + "; ".join(parts)


@dataclass
class Outcome:
    """The verdict for one case x target x profile x mode x JAX version."""

    case: str
    target: str
    profile: str
    mode: str
    jax: str
    code: Code
    reason: str = ""
    signature: Signature | None = None
    expected: dict | None = None  # the golden's expectation (may state only some fields)
    expected_range: str | None = None  # the jax range of that expectation ('' when it covers every version)
    diffs: list[FieldDiff] = field(default_factory=list)
    known_issue: dict | None = None  # {url, jax, summary} of the active known issue
    compile_seconds: float = 0.0
    hlo: str | None = None
    stablehlo: str | None = None
    source: str = ""  # the rendered case function (the repro script is rendered from it on demand)
    description: str = ""
    yaml: str = ""
    file: str = ""
    filecheck: str | None = None
    numerics: NumericsResult | None = None  # `run --numerics`: see harness/fp8_check/gpu/_numerics.py
    cached: bool = False  # the compilation came from the compile cache (harness/fp8_check/compile/_cache.py)
    verdict: Verdict | None = None  # FAIL: regression / improvement / neutral / mixed (harness/fp8_check/verdict/_classify.py)
    estimate: Estimate | None = None  # the compiled program's roofline price (harness/fp8_check/cost/_model.py)
    repro_needs: dict | None = None  # what the repro needs besides JAX: requirements, project files (compile/_render.py)
    # deviceless `default`: which autotuned decisions its results file made and which XLA's deviceless defaults did
    autotune: Coverage | None = None
    # the checked code asked JAX for the device and this machine answered, not the target (a backend cached at
    # import): why the signature may not be the target's (worker.not_representative; `check` and `run` alike)
    not_representative: str = ""

    @property
    def is_failure(self) -> bool:
        return self.code.is_failure
