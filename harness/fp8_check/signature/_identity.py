"""Which expected record is which found record: gemms and collectives matched by identity, never by list index.

A golden's `gemms` and `collectives` are lists, and XLA is free to emit the same gemms in
another order from one release to the next (a train step's 27 matmuls come out in a different
order after a scheduling change). Comparing them position by position turns a pure
reordering into a dozen "changes". The one comparator (harness/fp8_check/verdict/_comparator.py: the FAIL
lines and the verdicts' classes) pairs records here instead:

- a gemm's identity is its layer path, its pass and its dot dimension numbers (`dims`:
  contracting and batch dimensions of each operand); a collective's is its layer, op and
  shape;
- the rule, in three rounds, each keeping the order of both lists: (1) records whose whole
  identity is equal are paired, first with first, second with second (a multiset match,
  then stable order within an identity group: the repeated layers of a model, the merged
  q/k/v gemm serving three layers, the two gemms of a pattern with equal dims); (2) the rest
  by layer and pass (collectives: layer and op) alone, so a gemm whose layout changed is
  still compared field by field with its old self; (3) what is left, in order, position
  by position (a bare pattern's one gemm stays the same gemm whatever changed in it);
- a record left over on one side is absent on the other (a gemm gained or lost).

Each pair gets the index of the expected record (`gemms[3]` is the golden's fourth gemm);
a found-only record is numbered after the golden's last. Pure: lists of dicts in, pairs out.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

LISTS = ("gemms", "collectives")  # the record lists matched by identity (top-level signature fields)


def _frozen(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _get(d: Any, key: str) -> Any:
    return _frozen(d.get(key)) if isinstance(d, dict) else None


def gemm_identity(g: Any) -> tuple:
    return (_get(g, "layer"), _get(g, "pass"), _get(g, "dims"))


def gemm_place(g: Any) -> tuple:
    return (_get(g, "layer"), _get(g, "pass"))


def collective_identity(c: Any) -> tuple:
    return (_get(c, "layer"), _get(c, "op"), _get(c, "shape"))


def collective_place(c: Any) -> tuple:
    return (_get(c, "layer"), _get(c, "op"))


_ROUNDS: dict[str, tuple[Callable[[Any], tuple], ...]] = {
    "gemms": (gemm_identity, gemm_place, lambda _: ()),
    "collectives": (collective_identity, collective_place, lambda _: ()),
}


def pairs(kind: str, expected: list, found: list) -> list[tuple[int, int | None, int | None]]:
    """(label index, index in `expected` or None, index in `found` or None) for every record of either side.

    Ordered by label index: the golden's records in its order, then the found-only ones in theirs."""
    rounds = _ROUNDS[kind]
    free_e, free_f = list(range(len(expected))), list(range(len(found)))
    matched: dict[int, int] = {}
    for key in rounds:
        groups: dict[Any, list[int]] = {}
        for j in free_f:
            groups.setdefault(key(found[j]), []).append(j)
        for i in list(free_e):
            group = groups.get(key(expected[i]))
            if group:
                j = group.pop(0)
                matched[i] = j
                free_e.remove(i)
                free_f.remove(j)
    out: list[tuple[int, int | None, int | None]] = [(i, i, matched.get(i)) for i in range(len(expected))]
    out += [(len(expected) + k, None, j) for k, j in enumerate(free_f)]
    return out


def aligned(kind: str, expected: list, found: list) -> Iterator[tuple[int, Any, Any, bool, bool]]:
    """(label index, expected record, found record, has expected, has found) in label order."""
    for label, i, j in pairs(kind, expected, found):
        yield (label, expected[i] if i is not None else None, found[j] if j is not None else None,
               i is not None, j is not None)


def found_by_label(kind: str, expected: list, found: list) -> dict[int, Any]:
    """The found record each label index stands for (absent labels left out)."""
    return {label: found[j] for label, _i, j in pairs(kind, expected, found) if j is not None}
