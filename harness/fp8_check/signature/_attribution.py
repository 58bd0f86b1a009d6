"""Where a matmul comes from: HLO metadata -> layer path, pass and source line.

JAX writes every HLO instruction's origin into its metadata: `op_name` is the
name stack (`jit(train_step)/jvp(Decoder)/attn/q_proj/dot_general`, with
`transpose(jvp(...))` for the backward pass), and the source position is either
`source_file=... source_line=...` (older JAX) or a `stack_frame_id` into the
module's stack-frame tables (`FileNames`, `FunctionNames`, `FileLocations`,
`StackFrames`, newer JAX). This module turns that into an `Attribution`:

- `layer`: the name stack with the function-boundary wrappers (`jit(...)`,
  `pjit(...)`, `call_exported`, `remat`/`checkpoint`) dropped and the
  transformation wrappers (`jvp(X)`, `transpose(X)`, `vmap(X)`, ...) unwrapped to
  X, without the primitive at the end — so the same layer has the same path on
  every JAX version and in both passes (`Decoder/attn/q_proj`);
- `pass_`: `forward`, or `backward` where any component was under `transpose(...)`;
  `pair_passes` refines backward matmuls to `backward-input` (the input gradient:
  contracts the forward's output features) or `backward-weight` (contracts the
  forward's rows) by their sizes against the same layer's forward matmul; where the
  sizes cannot tell (square shapes), `pass_by_provenance` does by where their
  operands come from (`provenance.py`: the layer's weight, a parameter of the
  program, is an operand of the input gradient, never of the weight gradient);
- a gemm whose metadata names no matmul (XLA gave it the metadata of the next
  layer's requantization it fused) takes the layer of its operands' producers;
- `source`: `file:line` of the innermost frame outside JAX, flax, optax and
  fp8-check itself (the user's model code), else the innermost frame recorded.

Pure: text in, dataclasses out. Used by `signature.extract` (one call per gemm);
`group_of` names the layer of a collective (`collectives.extract`) from the same
reading of the name stack.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field

from fp8_check.core import package_path

FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT = "forward", "backward", "backward-input", "backward-weight"
PASSES = (FORWARD, BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)

# Name-stack components that are function boundaries, not layers: dropped with what they wrap.
_DROP = re.compile(r"^(jit|pjit|xla_computation|core_call|closed_call|named_call|custom_jvp_call|custom_vjp_call|"
                   r"custom_vjp_call_jaxpr|remat|checkpoint|rematted_computation|shard_map|call_exported|"
                   r"while|cond|body|scan|pmap|xla_pmap)(\(.*\))?$")
# Transformations that wrap a layer's name: `jvp(MLP)` -> MLP.
_UNWRAP = re.compile(r"^(jvp|transpose|vmap|remat|checkpoint|pmap|xmap|custom_jvp|custom_vjp|named|batching|"
                     r"linearize|partial_eval)\((.*)\)$")
# Library code that is never "the user's line" (fp8-check's own frames: `own_frame`).
_LIBRARY = re.compile(r"(site-packages|dist-packages)/(jax|jaxlib|flax|optax|qwix|chex|orbax|equinox)/|"
                      r"^<frozen |^<string>$")
# fp8-check's own package, where this file lives (as imported, and with links resolved): its frames (export,
# the API, check, the compile worker) are never a source line. Its `models` folder is the exception: the model
# code the library's cases compile is the program under test, and its lines are that program's sources.
_PACKAGE = package_path()
_OWN_ROOTS = tuple(dict.fromkeys(str(p) + os.sep for p in (_PACKAGE, _PACKAGE.resolve())))
_PROGRAM_ROOTS = tuple(dict.fromkeys(str(p / "models") + os.sep for p in (_PACKAGE, _PACKAGE.resolve())))


def own_frame(path: str) -> bool:
    """`path` (as JAX recorded it) is a file of fp8-check itself, not of the program it compiles."""
    return path.startswith(_OWN_ROOTS) and not path.startswith(_PROGRAM_ROOTS)
_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^\s}]+)')


@dataclass(frozen=True)
class Attribution:
    layer: str | None = None  # "Decoder/attn/q_proj" (None: no layer in the name stack)
    op: str | None = None  # the primitive that produced it: dot_general, transpose, ...
    pass_: str = FORWARD  # one of PASSES
    source: str | None = None  # "model.py:42"

    @property
    def path(self) -> str:
        """layer/op: what layer patterns are matched against."""
        return "/".join(p for p in (self.layer, self.op) if p)


@dataclass
class StackTable:
    """The stack-frame tables some XLA versions print at the top of an HLO module."""

    files: dict[int, str] = field(default_factory=dict)
    functions: dict[int, str] = field(default_factory=dict)
    locations: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # id -> (file id, function id, line)
    frames: dict[int, tuple[int, int]] = field(default_factory=dict)  # id -> (location id, parent frame id; 0 none)

    def chain(self, frame_id: int) -> list[tuple[str, str, int]]:
        """(file, function, line) from the innermost frame outwards."""
        out: list[tuple[str, str, int]] = []
        seen: set[int] = set()
        while frame_id in self.frames and frame_id not in seen and len(out) < 256:
            seen.add(frame_id)
            loc_id, parent = self.frames[frame_id]
            file_id, fn_id, line = self.locations.get(loc_id, (0, 0, 0))
            out.append((self.files.get(file_id, "?"), self.functions.get(fn_id, "?"), line))
            frame_id = parent
        return out


_TABLES = {"FileNames": "files", "FunctionNames": "functions", "FileLocations": "locations", "StackFrames": "frames"}


def stack_table(text: str) -> StackTable:
    """Parse the tables between the `HloModule` line and the first computation (empty if absent)."""
    table, section = StackTable(), None
    for line in text.splitlines():
        s = line.strip()
        if s in _TABLES:
            section = _TABLES[s]
            continue
        if not s:
            section = None
            continue
        if section is None:
            if s.endswith("{") and not s.startswith("HloModule"):
                break  # the first computation: no tables past it
            continue
        m = re.match(r"(\d+)\s+(.*)$", s)
        if not m:
            continue
        key, rest = int(m.group(1)), m.group(2)
        if section in ("files", "functions"):
            getattr(table, section)[key] = _unquote(rest)
        else:
            kv = dict((k, v) for k, v in _KV.findall(rest))
            try:
                if section == "locations":
                    table.locations[key] = (int(kv.get("file_name_id", 0)), int(kv.get("function_name_id", 0)),
                                            int(kv.get("line", 0)))
                else:
                    # printed 1-based; parent_frame_id is printed one above the id it names (0: no parent)
                    table.frames[key] = (int(kv.get("file_location_id", 0)), int(kv.get("parent_frame_id", 0)) - 1)
            except ValueError:
                continue
    return table


def parse_metadata(raw: str | None) -> dict[str, str]:
    """`{op_name="a/b" source_file="x.py" source_line=3}` -> {op_name: a/b, ...}."""
    if not raw:
        return {}
    return {k: _unquote(v) for k, v in _KV.findall(raw.strip().strip("{}"))}


def split_name_stack(op_name: str, sep: str = "/") -> list[str]:
    """Split on `sep` outside parentheses and brackets (`jit(f)/jvp(a/b)/dot` has three parts)."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in op_name:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth <= 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p]


def _scope(component: str) -> str | None:
    """One name-stack component as a scope: parameters stripped (old JAX: `transpose[permutation=(1, 0)]`),
    transformation wrappers unwrapped (`jvp(MLP)` -> MLP), function boundaries dropped (None)."""
    comp = re.sub(r"\[.*\]$", "", component.strip())
    while m := _UNWRAP.match(comp):
        comp = m.group(2)
    return None if not comp or _DROP.match(comp) else comp


def layer_of(op_name: str) -> tuple[str | None, str | None, bool]:
    """(layer path, primitive, backward?) from a name stack."""
    names = [scope for comp in split_name_stack(op_name) if (scope := _scope(comp))]
    backward = "transpose(" in op_name
    if not names:
        return None, None, backward
    return ("/".join(names[:-1]) or None), names[-1], backward


def group_of(op_name: str) -> str:
    """The layer a collective or another non-matmul op is grouped under: its layer path without einsum specs
    (`bsd,df->bsf`: they tell a layer's matmuls apart, not its collectives), '' when it names none. An op XLA
    merged from several (`(jvp(up)/mul:jvp(down)/mul)`) serves each of their layers: `up+down`."""
    parts = split_name_stack(op_name)
    out: list[str] = []
    for i, part in enumerate(parts):
        if part.startswith("(") and part.endswith(")"):  # merged ops: alternatives separated by ':'
            merged = "+".join(dict.fromkeys(g for alt in split_name_stack(part[1:-1], ":") if (g := group_of(alt))))
            if merged:
                out.append(merged)
        elif i < len(parts) - 1 and (scope := _scope(part)) and "->" not in scope:  # the last part: the primitive
            out.append(scope)
    return "/".join(out)


def attribute(metadata_raw: str | None, table: StackTable | None = None) -> Attribution:
    """The attribution of one instruction from its raw `metadata={...}` text."""
    md = parse_metadata(metadata_raw)
    layer, op, backward = layer_of(md.get("op_name", ""))
    return Attribution(layer, op, BACKWARD if backward else FORWARD, _source(md, table))


def _source(md: dict[str, str], table: StackTable | None) -> str | None:
    """The program's line that made the op: the first frame that is neither library code nor fp8-check's own (else
    the first that is not fp8-check's own: a library's line, for a library function compiled as it is); None when
    JAX recorded only fp8-check's frames (`fusion_signature(jnp.matmul, a, b)` on a JAX that records one file)."""
    if md.get("source_file") and not own_frame(md["source_file"]):
        line = md.get("source_line")
        return short_path(md["source_file"]) + (f":{line}" if line else "")
    if table is None or not md.get("stack_frame_id"):
        return None
    try:
        frames = table.chain(int(md["stack_frame_id"]))
    except ValueError:
        return None
    frames = [f for f in frames if not own_frame(f[0])]
    if not frames:
        return None
    user = [f for f in frames if not _LIBRARY.search(f[0])]
    path, _fn, lineno = (user or frames)[0]
    return f"{short_path(path)}:{lineno}"


def short_path(path: str) -> str:
    """A library file from its package down (`flax/linen/linear.py`); other paths as JAX recorded them."""
    m = re.search(r"(?:site-packages|dist-packages)/(.*)$", path)
    return m.group(1) if m else path


# ------------------------------------------------------------------ passes, by sizes


@dataclass(frozen=True)
class MatmulSizes:
    """The sizes of one matmul: batch, rows (m), columns (n) and contraction (k)."""

    batch: int
    m: int
    n: int
    k: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


def sizes(lhs_shape: list[int], rhs_shape: list[int], lhs_contracting: list[int], rhs_contracting: list[int],
          lhs_batch: list[int], rhs_batch: list[int]) -> MatmulSizes | None:
    if not lhs_contracting or not rhs_contracting:
        return None
    try:
        prod = lambda dims, shape: _prod(shape[d] for d in dims)  # noqa: E731
        batch = prod(lhs_batch, lhs_shape)
        k = prod(lhs_contracting, lhs_shape)
        m = prod([d for d in range(len(lhs_shape)) if d not in lhs_contracting and d not in lhs_batch], lhs_shape)
        n = prod([d for d in range(len(rhs_shape)) if d not in rhs_contracting and d not in rhs_batch], rhs_shape)
    except IndexError:
        return None
    return MatmulSizes(batch, m, n, k)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def pair_passes(items: list[tuple[Attribution, MatmulSizes | None]]) -> list[Attribution]:
    """Refine each backward matmul to backward-input or backward-weight against its layer's forward matmuls.

    A forward y[m,n] = x[m,k] . w[k,n] has the input gradient dx = dy . w^T, which contracts n and
    has m*k elements, and the weight gradient dw = x^T . dy, which contracts m and has k*n elements.
    A backward matmul stays `backward` when no forward matmul of its layer tells them apart.
    """
    forward: dict[str | None, list[MatmulSizes]] = {}
    for att, sz in items:
        if att.pass_ == FORWARD and sz is not None and att.layer:
            forward.setdefault(att.layer, []).append(sz)
    out = []
    for att, sz in items:
        if att.pass_ != BACKWARD or sz is None or not att.layer:
            out.append(att)
            continue
        found = set()
        for f in forward.get(att.layer, []):
            if sz.batch != f.batch:
                continue
            out_elems = {sz.m * sz.n}
            if sz.k == f.n and out_elems == {f.m * f.k} and f.n != f.m:
                found.add(BACKWARD_INPUT)
            if sz.k == f.m and out_elems == {f.k * f.n} and f.n != f.m:
                found.add(BACKWARD_WEIGHT)
        out.append(Attribution(att.layer, att.op, found.pop(), att.source) if len(found) == 1 else att)
    return out


# Primitives a matmul's own metadata names; any other (`convert_element_type`: a requantization XLA fused into the
# gemm's epilogue, which belongs to the next layer) says the gemm took another op's metadata.
_MATMUL_OPS = {"dot_general", "dot", "transpose", "einsum", "matmul", "conv_general_dilated", "scaled_matmul",
               "scaled_dot", "ragged_dot", "ragged_dot_general"}


def own_layer(att: Attribution, operands: list[Attribution]) -> Attribution:
    """A gemm whose metadata names an op that is no matmul (XLA gave the fused gemm the metadata of the
    requantization it absorbed: the next layer's) takes the layer of what produced its operands (their
    quantization, in its own layer), when that is one layer."""
    if att.op is None or att.op in _MATMUL_OPS or "->" in att.op:
        return att
    layers = {o.layer for o in operands if o.layer}
    if len(layers) != 1:
        return att
    return Attribution(layers.pop(), att.op, att.pass_, att.source)


def pass_by_provenance(items: list[tuple[Attribution, tuple[str | None, str | None]]]) -> list[str | None]:
    """Backward-input or backward-weight for each backward matmul, by which operand comes from a parameter; None
    where provenance cannot tell. `annotate` uses it where `pair_passes` (sizes) cannot tell (square shapes).

    A layer's forward matmul y = x . w has its weight w among its operands, traced to a parameter of the program
    (`provenance.py`); its input gradient dx = dy . w^T has the same parameter among its operands, its weight
    gradient dw = x^T . dy does not. When the forward's input is a parameter too (the first layer's batch), the
    operand alone does not say which one is the weight: a layer with one backward matmul then has it as its weight
    gradient (its input needs no gradient), a layer with two stays undecided.
    """
    forward: dict[str, set[str]] = {}
    backward_count: dict[str, int] = {}
    for att, srcs in items:
        if not att.layer:
            continue
        if att.pass_ == FORWARD:
            forward.setdefault(att.layer, set()).update(s for s in srcs if s)
        else:
            backward_count[att.layer] = backward_count.get(att.layer, 0) + 1
    out: list[str | None] = []
    for att, srcs in items:
        params = forward.get(att.layer or "", set())
        if att.pass_ != BACKWARD or not att.layer or not params:
            out.append(None)
            continue
        shared = params & {s for s in srcs if s}
        if not shared:
            out.append(BACKWARD_WEIGHT)
        elif len(params) == 1:
            out.append(BACKWARD_INPUT)
        elif backward_count.get(att.layer) == 1:
            out.append(BACKWARD_WEIGHT)
        else:
            out.append(None)
    return out


def annotate(text: str, gemms: list, items: list[tuple], provenance: list | None = None) -> None:
    """Set `layer`, `pass_`, `source` and `flops` on each gemm (a `signature.Gemm`, with its `dims`) from
    (raw metadata, [lhs shape, rhs shape]) of its dot, in the same order; `provenance`, where given, holds per gemm
    ((lhs parameter, rhs parameter), [raw metadata of its operands' producers]) (`provenance.py`)."""
    table, found = stack_table(text), []
    prov = provenance or [((None, None), [])] * len(gemms)
    for g, (metadata, shapes), (_srcs, operand_md) in zip(gemms, items, prov):
        d = {k.replace("_dimensions", "").replace("_dims", ""): v for k, v in g.dims.items()}
        sz = sizes(*shapes, *(d.get(k, []) for k in ("lhs_contracting", "rhs_contracting", "lhs_batch", "rhs_batch"))) \
            if len(shapes) == 2 else None
        g.flops = sz.flops if sz else None
        found.append((own_layer(attribute(metadata, table), [attribute(m, table) for m in operand_md]), sz))
    by_operand = pass_by_provenance([(att, srcs) for (att, _), (srcs, _) in zip(found, prov)])
    for g, att, p in zip(gemms, pair_passes(found), by_operand):
        if att.pass_ == BACKWARD and p:  # the sizes could not tell (square shapes): the operands do
            att = Attribution(att.layer, att.op, p, att.source)
        g.layer, g.source, g.pass_ = att.layer, att.source, (att.pass_ if att.layer else None)


# ------------------------------------------------------------------ matching layer patterns


def pass_matches(pattern: str, pass_: str | None) -> bool:
    """`backward` matches every backward pass; otherwise a glob over the pass name (`*` matches all)."""
    pattern = (pattern or "*").strip()
    pass_ = pass_ or FORWARD
    if pattern == BACKWARD:
        return pass_.startswith(BACKWARD)
    return fnmatch.fnmatchcase(pass_, pattern)


def layer_matches(pattern: str, layer: str | None) -> bool:
    """Glob over the layer path (`*` also crosses `/`); `*/Dense_2/*` matches the layer `MLP/Dense_2`."""
    if not layer:
        return False
    return fnmatch.fnmatchcase(layer, pattern) or fnmatch.fnmatchcase(layer + "/", pattern)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return c_unescape(text[1:-1])
    return text


_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
_ESCAPED = {"n": b"\n", "t": b"\t", "r": b"\r", "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v"}


def c_unescape(text: str) -> str:
    """A quoted HLO string's text as it was written: HLO prints strings with C escapes (absl's CEscape), a name's
    non-ASCII characters as the octal escapes of their UTF-8 bytes (`\\320\\277` is `п`), `\\"`, `\\\\`, `\\n`.
    Bytes that are not UTF-8 become U+FFFD. The text is escaped again where it is shown (Markdown, HTML, lines)."""
    if "\\" not in text:
        return text
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(text):
        out += text[pos:m.start()].encode()
        octal, hexa, char = m.groups()
        if octal:
            out.append(int(octal, 8) & 0xFF)
        elif hexa:
            out.append(int(hexa, 16))
        else:
            out += _ESCAPED.get(char, char.encode())
        pos = m.end()
    out += text[pos:].encode()
    return out.decode("utf-8", errors="replace")
