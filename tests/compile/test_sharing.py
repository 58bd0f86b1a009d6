"""Identical compilations compiled once (harness/fp8_check/compile/_sharing.py): which sources may share, what a shared
compilation becomes, and the pool's fallback when the first compilation fails. The end-to-end check (a run
with sharing against `--no-cache`, outcome by outcome and HLO by HLO) is in tests/compile/test_pool.py."""

from __future__ import annotations

from pathlib import Path

from fp8_check.cases import _load as case_mod
from fp8_check.compile import _render as render, _sharing as sharing
from fp8_check.compile._cache import CompileCache
from fp8_check.compile._pool import CompilerPool, _Key
from fp8_check.compile._service import Compilation, CompileRequest
from fp8_check.targets import PROFILES, load_target

from ..conftest import REPO


def _rendered(case_id: str) -> str:
    [case] = [c for c in case_mod.load([REPO / "cases"]) if c.id == case_id]
    return render.render(case).source


def test_two_library_cases_that_differ_only_in_their_docstrings_share_a_source():
    a, b = _rendered("scale_none"), _rendered("seed_plain_f32")  # scaling.yaml and seed.yaml: the same pattern
    assert a != b and "scale_none" in a and "seed_plain_f32" in b
    shared_a, shared_b = sharing.shareable_source(a), sharing.shareable_source(b)
    assert shared_a is not None and shared_a == shared_b
    assert "scale_none" not in shared_a and "seed.yaml" not in shared_b
    assert shared_a.count("\n") == a.count("\n")  # blanked, not removed: every line number stays
    other = sharing.shareable_source(_rendered("epi_relu"))
    assert other is not None and other != shared_a


def test_a_source_that_can_tell_itself_apart_is_never_shared():
    base = '"""fp8-check case x"""\nimport jax\n\ndef FN(a):\n    return a\n'
    assert sharing.shareable_source(base) == "\nimport jax\n\ndef FN(a):\n    return a\n"
    for extra in ("N = len(__file__)", "D = __doc__", "M = __name__", "import inspect", "from inspect import stack",
                  "import sys\nF = sys._getframe()", "G = globals()", "import traceback", "V = vars()"):
        assert sharing.shareable_source(base + extra + "\n") is None, extra
    # a docstring sharing a line with code, a source that does not parse
    assert sharing.shareable_source('"""doc"""; X = 1\n') is None
    assert sharing.shareable_source("def (:\n") is None
    no_doc = "import jax\nX = 1\n"
    assert sharing.shareable_source(no_doc) == no_doc


def test_a_derived_compilation_carries_its_own_case_file_name_and_names():
    first = Compilation("scale_none", "h100", "cublas", "deviceless",
                        hlo='x metadata={source_file="/tmp/fp8_case_scale_none.py" source_line=14}\n'
                            'FileNames\n4 "/tmp/fp8_case_scale_none.py"\n',
                        stablehlo="module @jit_fn {}", seconds=0.5)
    out = sharing.derive(first, "seed_plain_f32", "h100b", "cublas2")
    assert (out.case_id, out.target, out.profile, out.shared_from, out.cached) == (
        "seed_plain_f32", "h100b", "cublas2", "scale_none", False)
    assert out.hlo == first.hlo.replace("fp8_case_scale_none.py", "fp8_case_seed_plain_f32.py")
    assert "scale_none" not in out.hlo and out.seconds == 0.5 and out.stablehlo == first.stablehlo


class _Recorded(CompilerPool):
    """The pool's own scheduling with the worker round trip replaced: `_run` answers from `answers`."""

    def __init__(self, tmp_path: Path, answers: dict[str, Compilation]):
        super().__init__("deviceless", jobs=2, cache=CompileCache(tmp_path / "cc"))
        self.answers, self.ran = answers, []

    def _key(self, r: CompileRequest) -> _Key:
        return _Key("own-" + r.rendered.case_id, None, {}, shared="one-program")

    def _warm_up(self, target) -> None:
        pass

    def _run(self, r: CompileRequest, key: _Key) -> Compilation:
        self.ran.append(r.rendered.case_id)
        with self._lock:
            self.compiled += 1
        comp = self.answers[r.rendered.case_id]
        self._store(r, key, comp)
        return comp


def _requests():
    h100 = load_target("h100")
    by_id = {c.id: c for c in case_mod.load([REPO / "cases"])}
    return [CompileRequest(render.render(by_id[i]), h100, PROFILES["cublas"]) for i in ("scale_none", "seed_plain_f32")]


def test_the_pool_compiles_a_shared_program_once_and_on_its_own_when_the_first_failed(tmp_path):
    def ok(case: str) -> Compilation:
        return Compilation(case, "h100", "cublas", "deviceless", hlo=f'"/tmp/fp8_case_{case}.py"', stablehlo="s")

    pool = _Recorded(tmp_path / "a", {"scale_none": ok("scale_none"), "seed_plain_f32": ok("seed_plain_f32")})
    with pool:
        first, second = list(pool.imap(_requests()))
    assert pool.ran == ["scale_none"] and (pool.compiled, pool.shared) == (1, 1)
    assert second.shared_from == "scale_none" and second.hlo == '"/tmp/fp8_case_seed_plain_f32.py"'
    assert "1 compiled, 1 shared" in pool.cache_summary()
    assert pool.cache is not None and pool.cache.get("own-seed_plain_f32") is not None  # a warm run hits it directly

    crashed = Compilation("scale_none", "h100", "cublas", "deviceless", error="worker crashed (exited with status -11)")
    pool = _Recorded(tmp_path / "b", {"scale_none": crashed, "seed_plain_f32": ok("seed_plain_f32")})
    with pool:
        first, second = list(pool.imap(_requests()))
    assert pool.ran == ["scale_none", "seed_plain_f32"] and (pool.compiled, pool.shared) == (2, 0)
    assert first.error and second.ok and second.shared_from is None
