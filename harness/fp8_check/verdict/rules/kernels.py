"""The rules for a signature's `kernels`, `launches` and `unfused`: how many kernels run, which, and what stays outside.

Pure: no I/O, no JAX.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fp8_check import platforms
from fp8_check.verdict.rules.findings import IMPROVEMENT, NEUTRAL, REGRESSION, _family, _list, explained


@explained('more kernels launched', 'fewer')
def count(before: Any, after: Any) -> list[tuple[str, str]]:
    if isinstance(before, int) and isinstance(after, int):
        if after > before:
            n = after - before
            return [(REGRESSION, f"{n} more kernel launch{'es' if n > 1 else ''} ({before} -> {after})")]
        n = before - after
        return [(IMPROVEMENT, f"{n} fewer kernel launch{'es' if n > 1 else ''} ({before} -> {after})")]
    return [(NEUTRAL, "kernel count not comparable")]


_LAUNCH = re.compile(r"^(?P<head>.*?)(?: \[(?P<ops>[^\]]*)\])?$")


@dataclass(frozen=True)
class _Launch:
    text: str
    gemm: str | None  # the gemm target for `gemm X` launches
    ops: frozenset

    @classmethod
    def parse(cls, text: str) -> "_Launch":
        m = _LAUNCH.match(str(text))
        assert m is not None  # the pattern matches any text
        head, ops = m.group("head"), m.group("ops")
        ops_set = frozenset(o.strip() for o in ops.split(",") if o.strip()) if ops else frozenset()
        if head.startswith("gemm "):
            return cls(str(text), head[5:].strip(), ops_set)
        return cls(str(text), None, ops_set)


@explained('a new non-gemm kernel; pattern ops moved into a separate kernel (a kernel renamed with the same ops is neutral)', 'a separate kernel gone; ops left it')
def launches(before: Any, after: Any) -> list[tuple[str, str]]:
    """Launch lines added and removed, paired where a kernel only changed its name or its ops."""
    before, after = _list(before), _list(after)
    removed, added = _multiset_minus(before, after), _multiset_minus(after, before)
    rem = [_Launch.parse(x) for x in removed]
    add = [_Launch.parse(x) for x in added]
    out: list[tuple[str, str]] = []
    # 1. same role, same ops: a rename (gemm target in one family, or fusion kind kInput -> kLoop)
    for x in list(add):
        for y in rem:
            same = (x.gemm is not None and y.gemm is not None and _family(x.gemm) == _family(y.gemm)) or \
                   (x.gemm is None and y.gemm is None and x.ops == y.ops)
            if same:
                out.append((NEUTRAL, f"kernel renamed: {y.text} -> {x.text}"))
                add.remove(x)
                rem.remove(y)
                break
    # 2. a non-gemm kernel whose pattern ops changed: ops moved into / out of a gemm
    for x in list(add):
        if x.gemm is not None:
            continue
        best = max((y for y in rem if y.gemm is None and y.ops & x.ops), key=lambda y: len(y.ops & x.ops), default=None)
        if best is None:
            continue
        rem.remove(best)
        add.remove(x)
        gained, lost = sorted(x.ops - best.ops), sorted(best.ops - x.ops)
        if gained and not lost:
            out.append((REGRESSION, f"ops {', '.join(gained)} moved into a separate kernel ({x.text})"))
        elif lost and not gained:
            out.append((IMPROVEMENT, f"ops {', '.join(lost)} left the separate kernel ({best.text})"))
        else:
            out.append((NEUTRAL, f"separate kernel changed: {best.text} -> {x.text}"))
    for x in add:
        if x.gemm is None:
            out.append((REGRESSION, f"new kernel outside the gemm: {x.text}"))
        else:
            out.append((_gemm_presence(x.gemm, gained=True), f"new gemm launch: {x.text}"))
    for y in rem:
        if y.gemm is None:
            out.append((IMPROVEMENT, f"kernel gone: {y.text}"))
        else:
            out.append((_gemm_presence(y.gemm, gained=False), f"gemm launch gone: {y.text}"))
    return out or [(NEUTRAL, "launch order only")]


def _gemm_presence(target: str, gained: bool) -> str:
    engine = platforms.engine_of(target)
    if engine is not None and engine.fp8:  # the platforms say which gemm library calls are FP8 gemms
        return IMPROVEMENT if gained else REGRESSION
    return NEUTRAL  # the gemms[] lines say what this costs


def _multiset_minus(xs: list, ys: list) -> list:
    rest = list(ys)
    out = []
    for x in xs:
        if x in rest:
            rest.remove(x)
        else:
            out.append(x)
    return out


@explained('a pattern op now outside the gemms', 'an op no longer outside')
def unfused(before: Any, after: Any) -> list[tuple[str, str]]:
    before, after = _list(before), _list(after)
    out = [(REGRESSION, f"{op} now outside the gemms") for op in after if op not in before]
    out += [(IMPROVEMENT, f"{op} no longer outside the gemms") for op in before if op not in after]
    return out or [(NEUTRAL, "same ops")]
