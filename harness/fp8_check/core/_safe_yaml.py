"""Bounded reading and YAML loading for files users write (case files, goldens).

PyYAML's safe loader still expands aliases without limit (a "billion laughs" file of a
few hundred bytes becomes gigabytes), recurses once per nesting level (a deeply nested
file raises RecursionError) and accepts recursive aliases. Here every file is read with a
size limit and as UTF-8, nesting depth is limited while composing, and the composed
node graph is measured (as if every alias were expanded) before anything is constructed.
Every problem is a `yaml.MarkedYAMLError` (or `ReadError`), i.e. one line with the line number.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from fp8_check.core._errors import excerpt
from fp8_check.core._files import ReadError, read_text

MAX_BYTES = 2 * 1024 * 1024  # per file
MAX_DEPTH = 64  # nesting levels (mappings and lists), counting through aliases
MAX_NODES = 200_000  # scalars, mappings and lists after alias expansion




def problem_line(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: the problem and its line, never PyYAML's snippet of the file (it quotes the line)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    problem = (str(problem).strip().splitlines() or ["unreadable"])[0]
    return f"line {mark.line + 1}: {problem}" if mark is not None else problem


class LimitError(yaml.composer.ComposerError):
    """A YAML document over the nesting or expansion limits."""


class _DepthLimit(yaml.composer.Composer):
    """Limits nesting while composing (before Python's recursion limit is near): a Composer whose
    `compose_node` wraps the next one in the loader's MRO (`_Base`'s Composer, fed by its parser)."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(None, None, f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser

    class _Base(yaml.composer.Composer, CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """SafeLoader with libyaml's scanner and parser, and PyYAML's composer.

        libyaml's own composer recurses in C once per nesting level (a deeply nested file
        crashes the interpreter), so composing stays in Python, where `_DepthLimit` bounds it;
        scanning and parsing (most of the time) run in C: goldens load about 3x faster.
        """

        def __init__(self, stream):
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
else:  # a PyYAML built without libyaml: the same loader, all in Python
    _Base = yaml.SafeLoader  # type: ignore[misc]  # one of two definitions of the base class, chosen at import


class BoundedLoader(_DepthLimit, _Base):
    """A safe loader that limits nesting while composing."""


class LineMap(dict):
    """A YAML mapping that remembers the (1-based) line it starts on."""

    line: int = 0


class LineLoader(BoundedLoader):
    """BoundedLoader whose mappings are LineMaps and that rejects duplicate keys (case files)."""


def _construct_mapping(loader: LineLoader, node: yaml.MappingNode, deep: bool = False) -> LineMap:
    out = LineMap()
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: a complex key (unhashable, and never meant)
            raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a plain name, not a list or "
                                                    "mapping (a '?' complex key)", key_node.start_mark)
        key = loader.construct_object(key_node, deep=deep)
        if key in out:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class UniqueKeyLoader(BoundedLoader):
    """BoundedLoader that rejects duplicate keys and builds plain dicts (goldens: a second `cost_us:` silently
    replaced the first)."""


def _construct_unique(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    return dict(_construct_mapping(loader, node, deep))  # the same checks, a plain dict


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _distinct(root: yaml.Node) -> int:
    """How many different nodes `root` holds (each alias counted once: what the file itself spells out)."""
    seen = {id(root)}
    stack = [root]
    while stack:
        for child in _children(stack.pop()):
            if id(child) not in seen:
                seen.add(id(child))
                stack.append(child)
    return len(seen)


def check_graph(root: yaml.Node) -> None:
    """Raise LimitError if `root`, with every alias expanded, is recursive, too deep or too large: its aliases
    may add at most MAX_NODES values to what the file spells out (a large file without aliases is no bomb: its
    size limit bounds it)."""
    limit = MAX_NODES + _distinct(root)
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    visiting: set[int] = set()
    stack = [(root, iter(_children(root)))]
    visiting.add(id(root))
    while stack:
        node, kids = stack[-1]
        for child in kids:
            key = id(child)
            if key in visiting:
                raise LimitError(None, None, "a recursive alias (a node that contains itself)", child.start_mark)
            if key not in size:
                visiting.add(key)
                stack.append((child, iter(_children(child))))
                break
        else:
            stack.pop()
            visiting.discard(id(node))
            children = _children(node)
            size[id(node)] = min(limit + 1, 1 + sum(size[id(c)] for c in children))
            depth[id(node)] = 1 + max((depth[id(c)] for c in children), default=0)
            if size[id(node)] > limit:
                raise LimitError(None, None, f"more than {MAX_NODES} values once its aliases are expanded "
                                 "(an alias bomb?)", node.start_mark)
            if depth[id(node)] > MAX_DEPTH:
                raise LimitError(None, None, f"nested deeper than {MAX_DEPTH} levels once its aliases are expanded",
                                 node.start_mark)


def load(text: str, loader: type[BoundedLoader] = BoundedLoader):
    """Like yaml.load(text, Loader=loader) for one document, within the limits above."""
    ldr = loader(text)
    try:
        node = ldr.get_single_node()
        if node is None:
            return None
        check_graph(node)
        return ldr.construct_document(node)
    finally:
        ldr.dispose()


def _unique_keys(pairs: list) -> dict:
    """A JSON object whose keys are all different (a second `"outcome":` silently replaced the first)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ReadError(f"not JSON this tool reads: duplicate key {excerpt(k)}")
        out[k] = v
    return out


MAX_JSON_BYTES = 1024 * 2**20  # results and matrix files carry HLO texts: large, but bounded


def load_json(path: Path | str, max_bytes: int = MAX_JSON_BYTES, home: Path | str | None = None):
    """A JSON file users pass in (results, matrices), within the size and nesting limits; ReadError otherwise."""
    import json

    text = read_text(path, max_bytes, home)
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ReadError(f"not JSON: {exc}") from None
    except RecursionError:
        raise ReadError(f"nested deeper than {MAX_DEPTH} levels") from None
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ReadError(f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return doc
