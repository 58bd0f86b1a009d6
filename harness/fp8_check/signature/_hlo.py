"""A small, tolerant parser for XLA's optimized HLO text (the `*after_optimizations.txt` dump).

It keeps what the fusion signature needs — computations, instructions, their
result types, operands, called computations, custom-call targets, fusion kinds
and backend_config — and survives the format changes between XLA versions
(typed or untyped operands, `%x#0` tuple shorthand, backend_config as JSON or as
a quoted string).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\))?\s*(->.*)?\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")
_DTYPE = re.compile(r"^([a-z]+[0-9]*[a-z0-9]*)\[([^\]]*)\]")


@dataclass
class Instruction:
    name: str
    type: str  # e.g. "f32[64,16]{1,0}" or "(f8e4m3fn[64,16]{1,0}, f32[], s8[4194304]{0})"
    opcode: str
    operands: list[str]  # instruction names (tuple shorthand `#i` stripped)
    operand_text: str
    attrs: str
    root: bool = False
    operand_tuple_index: list[int | None] = field(default_factory=list)  # `%x#i`: element i of x's tuple

    def attr(self, key: str) -> str | None:
        """The raw text of attribute `key` (balanced braces/quotes respected)."""
        return _attr(self.attrs, key)

    @functools.cached_property
    def called(self) -> list[str]:  # asked for every instruction a walk passes, many times: computed once
        names: list[str] = []
        for key in ("calls", "to_apply", "called_computations", "body", "condition", "branch_computations"):
            raw = self.attr(key)
            if raw:
                names.extend(n for n in re.findall(r"%?([\w.\-]+)", raw) if n)
        return names

    @property
    def backend_config(self) -> dict:
        raw = self.attr("backend_config")
        if not raw:
            return {}
        if raw.startswith('"'):
            raw = _unquote(raw)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def custom_call_target(self) -> str | None:
        raw = self.attr("custom_call_target")
        return _unquote(raw) if raw else None

    @property
    def fusion_kind(self) -> str | None:
        raw = self.attr("kind")
        return raw.strip() if raw else None

    @property
    def result_types(self) -> list[str]:
        """Element types of the result (the tuple's elements, or the single array type)."""
        t = self.type.strip()
        if t.startswith("("):
            return [p.strip() for p in split_top_level(t[1:-1])]
        return [t]


@dataclass
class Computation:
    name: str
    entry: bool
    instructions: list[Instruction] = field(default_factory=list)
    thread: str = ""  # `}, execution_thread="sparsecore"`: the execution thread it runs on ('' : the main one)
    _index: dict[str, Instruction] = field(default_factory=dict, repr=False, compare=False)

    def by_name(self) -> dict[str, Instruction]:
        if len(self._index) != len(self.instructions):
            self._index = {i.name: i for i in self.instructions}
        return self._index


@dataclass
class Module:
    name: str
    computations: dict[str, Computation]
    entry: Computation

    def instruction(self, name: str) -> Instruction | None:
        """The instruction called `name` in any computation (ENTRY first)."""
        for comp in [self.entry, *self.computations.values()]:
            found = comp.by_name().get(name)
            if found is not None:
                return found
        return None


def dtype_of(type_text: str) -> str:
    m = _DTYPE.match(type_text.strip())
    if m:
        return m.group(1)
    return type_text.strip().split("[", 1)[0]


def rank_of(type_text: str) -> int:
    m = _DTYPE.match(type_text.strip())
    if not m or not m.group(2).strip():
        return 0
    return len(m.group(2).split(","))


def shape_of(type_text: str) -> list[int]:
    """`f32[64,128]{1,0}` -> [64, 128]; a scalar or a tuple -> []."""
    m = _DTYPE.match(type_text.strip())
    return [int(x) for x in m.group(2).split(",") if x.strip().isdigit()] if m else []


def parse(text: str) -> Module:
    computations: dict[str, Computation] = {}
    current: Computation | None = None
    entry: Computation | None = None
    module_name = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        if stripped.startswith("HloModule"):
            module_name = stripped.split()[1].rstrip(",")
            continue
        if current is None:
            m = _HEADER.match(stripped)
            if m and (stripped.startswith("%") or stripped.startswith("ENTRY") or "(" in stripped):
                current = Computation(m.group(2), bool(m.group(1)))
            continue
        if stripped == "}" or stripped.startswith("},"):  # `}, execution_thread="parallel"` closes one too
            thread = re.search(r'execution_thread="([^"]*)"', stripped)
            current.thread = thread.group(1) if thread and thread.group(1) != "main" else ""
            computations[current.name] = current
            if current.entry:
                entry = current
            current = None
            continue
        instr = _parse_instruction(stripped)
        if instr is not None:
            current.instructions.append(instr)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    return Module(module_name, computations, entry)


def _parse_instruction(line: str) -> Instruction | None:
    m = _INSTR.match(line)
    if not m:
        return None
    root, name, rest = bool(m.group(1)), m.group(2), m.group(3)
    if rest.startswith("("):
        end = match_bracket(rest, 0)
        type_text, rest = rest[: end + 1], rest[end + 1 :].lstrip()
    else:
        sp = rest.find(" ")
        type_text, rest = rest[:sp], rest[sp + 1 :].lstrip()
    om = re.match(r"([\w\-]+)\(", rest)
    if not om:
        return None
    opcode = om.group(1)
    open_at = om.end() - 1
    close_at = match_bracket(rest, open_at)
    operand_text = rest[open_at + 1 : close_at]
    attrs = rest[close_at + 1 :].lstrip(", ")
    operands: list[str] = []
    indices: list[int | None] = []
    if opcode not in ("constant", "parameter", "iota"):
        for part in split_top_level(operand_text):
            refs = re.findall(r"%([\w.\-]+)(?:#(\d+))?", part)
            bare = re.match(r"^([\w.\-]+)(?:#(\d+))?$", part.strip())
            ref = refs[-1] if refs else (bare.groups() if bare else None)
            if ref:
                operands.append(ref[0])
                indices.append(int(ref[1]) if ref[1] else None)
    return Instruction(name, type_text, opcode, operands, operand_text, attrs, root, indices)


def _structural(text: str, start: int = 0):
    """Yield (index, char) for the characters of `text` outside quoted strings (escapes honoured)."""
    i, in_str = start, False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        else:
            yield i, ch
        i += 1


def match_bracket(text: str, open_at: int) -> int:
    """Index of the bracket closing the one at `open_at`, skipping quoted strings."""
    pairs = {"(": ")", "{": "}", "[": "]"}
    stack: list[str] = []
    for i, ch in _structural(text, open_at):
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return i
    return len(text) - 1


def split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside brackets or quotes."""
    parts, depth, start = [], 0, 0
    for i, ch in _structural(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


@functools.lru_cache(maxsize=None)
def _attr_pattern(key: str) -> re.Pattern:
    return re.compile(r"(?:^|[\s,])" + re.escape(key) + r"=")


def _attr(attrs: str, key: str) -> str | None:
    if key + "=" not in attrs:  # most lookups miss; skip the regex
        return None
    for m in _attr_pattern(key).finditer(attrs):
        start = m.end()
        if start >= len(attrs):
            return ""
        ch = attrs[start]
        if ch in "{([":
            return attrs[start : match_bracket(attrs, start) + 1]
        if ch == '"':
            i = start + 1
            while i < len(attrs):
                if attrs[i] == "\\":
                    i += 2
                    continue
                if attrs[i] == '"':
                    break
                i += 1
            return attrs[start : i + 1]
        end = start
        while end < len(attrs) and attrs[end] not in ", ":
            end += 1
        return attrs[start:end]
    return None


def _unquote(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return raw


def called_instructions(module: Module, instr: Instruction, depth: int = 0):
    """Every instruction in the computations `instr` calls, recursively (nested fusions too)."""
    for name in instr.called:
        callee = module.computations.get(name)
        if callee is None:
            continue
        for inner in callee.instructions:
            yield inner, callee
            if inner.called and depth < 8:
                yield from called_instructions(module, inner, depth + 1)
