"""Collectives in the optimized HLO of a sharded compile: what each one moves, how many bytes, for which layer.

Part of the signature stage: `extract_collectives(module)` lists every all-gather, reduce-scatter,
all-reduce, all-to-all and collective-permute — synchronous, `*-start`/`*-done` pairs
(counted once, at the start) and `async-start` wrappers around them — as a `Collective`:

- `op`: the collective, without `-start`;
- `dtype`, `shape`: the array it produces on one device (for a reduce-scatter, its shard); a variadic one (FP8
  data gathered with its scales) names each of its arrays in order, joined by `+`;
- `bytes`: the larger of what it reads and what it writes on one device (an FP8 all-gather
  of the same weight moves half the bytes of a bf16 one);
- `groups`: the replica groups, summarised as `GROUPSxDEVICES` (`1x8`: one group of all 8
  devices; `2x4`), or `N pairs` for a collective-permute;
- `asynchronous`: a start/done pair (or an async wrapper) not marked `is_sync`: it can overlap compute; a
  collective inside a computation an `async-start` runs, directly or through `call`s at any depth (XLA's TPU
  compiler offloads an all-gather to the SparseCore as `async-start` -> `call` -> `all-gather`), is asynchronous;
- `core`: where it runs when that is not the main compute core: `sparsecore` for an `async-start` with
  `async_execution_thread="sparsecore"` or a computation with `execution_thread="sparsecore"` (a TPU's
  SparseCore); '' for the TensorCore (on a GPU: the SMs);
- `layer`: the named scopes around the op that made it (`metadata op_name` without the
  jit/transform wrappers and the primitive), '' when the function names none;
- `loop`: `windowed-einsum` when it sits in a while loop whose body also runs a gemm (XLA's
  collective matmul decomposing a sharded matmul into steps), else ''.

The layer is the op's name stack read by `attribution.group_of`, the one reader of name stacks.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import asdict, dataclass

from fp8_check.core import BITS
from fp8_check.signature._attribution import group_of, parse_metadata
from fp8_check.signature._hlo import Computation, Instruction, Module, dtype_of, match_bracket, split_top_level

OPS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
_START = {op + "-start": op for op in ("all-gather", "all-reduce", "collective-permute", "all-to-all", "reduce-scatter")}
# Bits per element, from the dtype vocabulary (harness/fp8_check/core/_dtypes.py; f4e2m1fn: half a byte); pred and complex added here.
_BITS = {**BITS, "pred": 8, "c64": 64, "c128": 128}


@dataclass
class Collective:
    op: str
    dtype: str
    shape: str
    bytes: int
    groups: str
    asynchronous: bool = False
    layer: str = ""
    loop: str = ""
    core: str = ""  # `sparsecore` (offloaded), '' for the TensorCore / the GPU's SMs

    def to_dict(self) -> dict:
        d = asdict(self)
        return {k: v for k, v in d.items() if v not in ("", None)}

    @classmethod
    def from_dict(cls, d: dict) -> "Collective":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def text(self) -> str:
        """`all-gather f8e4m3fn[1024,1024] 1.0 MiB 1x8 @layer`, for the terminal, the report and issue bodies."""
        where = f" @{self.layer}" if self.layer else ""
        loop = f" ({self.loop})" if self.loop else ""
        return f"{self.op} {self.shape} {size_text(self.bytes)} {self.groups}{loop}{_runs(self)}{where}"


def _runs(c: Collective) -> str:
    """` async on the SparseCore` / ` async`: how it runs, when that is more than a synchronous op on the main core."""
    core = {"sparsecore": "SparseCore"}.get(c.core, c.core)
    return (" async" if c.asynchronous else "") + (f" on the {core}" if core else "")


def summary(collectives: list[Collective]) -> str:
    """`all-gather f8e4m3fn 1.0 MiB, 8x collective-permute bf16 512.0 KiB (windowed-einsum)`: one entry per kind."""
    counts: dict[tuple, int] = {}
    for c in collectives:
        key = (c.op, c.dtype, c.bytes, c.loop, f" on the {'SparseCore' if c.core == 'sparsecore' else c.core}" if c.core else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{f'{n}x ' if n > 1 else ''}{op} {dtype} {size_text(size)}{f' ({loop})' if loop else ''}{core}"
                     for (op, dtype, size, loop, core), n in counts.items())


def size_text(n: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def array_bytes(type_text: str) -> int:
    """Bytes of one array type (`bf16[128,1024]{1,0}`); 0 for a token or an unknown element type."""
    m = re.match(r"^\s*([a-z]+[0-9]*[a-z0-9]*)\[([^\]]*)\]", type_text)
    if not m or m.group(1) not in _BITS:
        return 0
    count = 1
    for d in m.group(2).split(","):
        d = d.strip().lstrip("<=")
        if d:
            count *= int(d) if d.isdigit() else 1
    return (count * _BITS[m.group(1)] + 7) // 8


def _arrays(type_text: str) -> list[str]:
    """The array types in a (possibly nested) tuple type."""
    t = type_text.strip()
    if t.startswith("("):
        out = []
        for part in split_top_level(t[1:-1]):
            out += _arrays(part)
        return out
    return [t] if t else []


def _shape_text(type_text: str) -> str:
    return type_text.split("{", 1)[0].strip()


def device_groups(attrs: str) -> list[list[int]] | None:
    """The device ids of each replica group (`source_target_pairs`: each pair), from any of XLA's printed forms:
    `{{0,1},{2,3}}`, the iota form `[2,4]<=[4,2]T(1,0)`, the mesh form `mesh['a'=2,'b'=4] {'b'}` (ids in mesh
    order). None: no groups stated (`{}`: all devices) or a form this does not read."""
    at = re.search(r"(?:^|[\s,])(replica_groups|source_target_pairs)=", attrs)
    if at is None:
        return None
    rest = attrs[at.end():]
    m = re.match(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", rest)
    if m:
        groups, size = int(m.group(1)), int(m.group(2))
        dims = [int(d) for d in m.group(3).split(",")]
        perm = [int(x) for x in m.group(4).split(",")] if m.group(4) else list(range(len(dims)))
        ids = _iota(dims, perm)
        return [ids[i * size:(i + 1) * size] for i in range(groups)] if len(ids) == groups * size else None
    m = re.match(r"mesh\[([^\]]*)\]\s*\{([^}]*)\}", rest)
    if m:
        axes = [(k, int(v)) for k, v in re.findall(r"'(\w+)'\s*=\s*(\d+)", m.group(1))]
        listed = set(re.findall(r"'(\w+)'", m.group(2)))
        names = [k for k, _ in axes]
        # group by the coordinates of the axes not listed; mesh order is row-major over the axes
        perm = [i for i, k in enumerate(names) if k not in listed] + [i for i, k in enumerate(names) if k in listed]
        size = math.prod(v for k, v in axes if k in listed)
        ids = _iota([v for _, v in axes], perm)
        return [ids[i:i + size] for i in range(0, len(ids), size)] if size else None
    if not rest.startswith("{"):
        return None
    listed_groups = [[int(x) for x in g.split(",") if x.strip()]
                     for g in re.findall(r"\{([\d,\s]*)\}", rest[: match_bracket(rest, 0) + 1])]
    return [g for g in listed_groups if g] or None


def _iota(dims: list[int], perm: list[int]) -> list[int]:
    """iota(prod(dims)) reshaped to `dims`, transposed by `perm`, flattened (XLA's iota replica groups)."""
    strides = [math.prod(dims[i + 1:]) for i in range(len(dims))]
    return [sum(c * strides[p] for c, p in zip(coords, perm))
            for coords in itertools.product(*(range(dims[p]) for p in perm))]


def groups_of(instr: Instruction) -> str:
    """The replica groups summarised as GROUPSxDEVICES (or `N pairs`)."""
    groups = device_groups(instr.attrs)
    if instr.attr("source_target_pairs") is not None:
        return f"{len(groups or [])} pairs"
    if instr.attr("replica_groups") is None or groups is None:
        return "all"
    return f"{len(groups)}x{len(groups[0])}"


def _is_sync(instr: Instruction | None) -> bool:
    """XLA marks a collective it scheduled as a start/done pair but runs synchronously with `is_sync: true`."""
    if instr is None:
        return False
    cfg = instr.backend_config
    return bool((cfg.get("collective_backend_config") or cfg).get("is_sync"))


def _op_name(instr: Instruction) -> str:
    return parse_metadata(instr.attr("metadata")).get("op_name", "")  # unescaped: `проекция`, not `\320\277...`


def _has_gemm(module: Module, comp: Computation, depth: int = 0) -> bool:
    for instr in comp.instructions:
        if instr.opcode == "custom-call" and any(k in (instr.custom_call_target or "") for k in ("gemm", "matmul", "Dot")):
            return True
        if instr.opcode in ("dot", "scaled-dot"):
            return True
        if depth < 6:
            for name in instr.called:
                callee = module.computations.get(name)
                if callee is not None and _has_gemm(module, callee, depth + 1):
                    return True
    return False


def extract_collectives(module: Module) -> list[Collective]:
    """Every collective in `module`, in a stable order."""
    async_callers: dict[str, Instruction] = {}  # a computation an async-start runs (through calls) -> the start
    loop_bodies: set[str] = set()  # while bodies that run a gemm (and whatever they call)
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode == "async-start":
                for name in instr.called:
                    callee = module.computations.get(name)
                    for reached in _reachable(module, callee, limit=None) if callee is not None else {name}:
                        async_callers.setdefault(reached, instr)
            if instr.opcode == "while":
                body = instr.attr("body")
                name = body.lstrip("%") if body else ""
                callee = module.computations.get(name)
                if callee is not None and _has_gemm(module, callee):
                    loop_bodies |= _reachable(module, callee)
    out: list[Collective] = []
    for comp in module.computations.values():
        for instr in comp.instructions:
            op = instr.opcode if instr.opcode in OPS else _START.get(instr.opcode)
            if op is None:
                continue
            start = instr.opcode.endswith("-start")
            caller = async_callers.get(comp.name)
            operand_types = [t for _, t in _operand_types(module, comp, instr)]
            results = _arrays(instr.type)
            if start:  # (operands..., results...): the results follow the operands
                results = results[len(operand_types):] or results
            read = sum(array_bytes(t) for t in operand_types)
            wrote = sum(array_bytes(t) for t in results)
            in_loop = comp.name in loop_bodies or (caller is not None and _in(module, caller, loop_bodies))
            out.append(Collective(
                op=op, dtype=dtype_text(results), shape=shape_text(results), bytes=max(read, wrote),
                groups=groups_of(instr),
                asynchronous=(start or caller is not None) and not (_is_sync(instr) or _is_sync(caller)),
                layer=group_of(_op_name(instr) or (_op_name(caller) if caller is not None else "")),
                loop="windowed-einsum" if in_loop else "",
                core=_core(comp, caller),
            ))
    out.sort(key=lambda c: (c.op, c.layer, c.dtype, c.shape, c.groups, c.loop, c.asynchronous, c.core))
    return out


# Execution threads that are another core, not a schedule of the main one (a GPU's async computations run on
# thread "parallel", on the same SMs).
OFFLOAD_THREADS = ("sparsecore",)


def _core(comp: Computation, caller: Instruction | None) -> str:
    """The core a collective runs on when it is not the main one: `sparsecore` (else '')."""
    thread = (caller.attr("async_execution_thread") or "").strip('"') if caller is not None else ""
    thread = thread if thread in OFFLOAD_THREADS else comp.thread
    return thread if thread in OFFLOAD_THREADS else ""


def dtype_text(results: list[str]) -> str:
    """The element types a collective moves, per operand of a variadic one in order, each named once:
    `f8e4m3fn+f8e8m0fnu` for FP8 data gathered with its E8M0 scales (never only the last operand's)."""
    return "+".join(dict.fromkeys(dtype_of(r) for r in results)) or "?"


def shape_text(results: list[str]) -> str:
    """The arrays a collective produces, each operand of a variadic one in order: `f8e4m3fn[1024,1024]+f8e8m0fnu[1024,32]`
    for FP8 data gathered with its E8M0 scales (never only the last operand's, which hid the data's shape)."""
    return "+".join(_shape_text(r) for r in results) or "?"


def _operand_types(module: Module, comp: Computation, instr: Instruction) -> list[tuple[str, str]]:
    out = []
    idx = instr.operand_tuple_index or [None] * len(instr.operands)
    for name, i in zip(instr.operands, idx):
        src = comp.by_name().get(name) or module.instruction(name)
        if src is None:
            continue
        types = _arrays(src.type)
        if i is not None and src.type.lstrip().startswith("("):
            elements = src.result_types
            out.append((name, elements[i] if i < len(elements) else "?"))
        elif len(types) == 1:
            out.append((name, types[0]))
        else:
            out += [(name, t) for t in types]
    return out


def _reachable(module: Module, comp: Computation, depth: int = 0, limit: int | None = 6) -> set[str]:
    """`comp` and the computations it calls, to `limit` levels (None: any depth; each computation visited once)."""
    names = {comp.name}
    frontier = [comp]
    while frontier and (limit is None or depth < limit):
        depth += 1
        nxt = []
        for c in frontier:
            for instr in c.instructions:
                for name in instr.called:
                    callee = module.computations.get(name)
                    if callee is not None and name not in names:
                        names.add(name)
                        nxt.append(callee)
        frontier = nxt
    return names


def _in(module: Module, instr: Instruction, comps: set[str]) -> bool:
    return any(instr in module.computations[name].instructions for name in comps if name in module.computations)
