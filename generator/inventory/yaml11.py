"""The inventory's YAML dialect: YAML 1.1, the dialect Kubernetes reads manifests in, so a value means here
what it would mean in a manifest (`yes` is a boolean, `0777` an octal number), parsed into plain data with
the position of every key kept for error messages.

PyYAML's C parser is fast at national scale; its event stream is checked, before the nodes are built into data,
for nesting depth, recursive aliases and the number of nodes the document expands to once aliases are followed
(an alias bomb is refused at the alias that crosses the budget). A large inventory is checked in a forked child
while this process composes its nodes. Every string is then checked generically, whatever
field it is in: no control characters or line breaks (only a `description` may span lines) and a length cap.
Tags are refused except the plain ones. (ruamel.yaml, much slower, is used only to edit the file in place.)
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from generator import parallel
from generator.errors import InventoryInvalid, Problem
from generator.inventory.reading import MAX_INPUT_BYTES, check_characters

MAX_DEPTH = 32  # nested mappings and sequences, aliases followed; the schema itself needs 6
MAX_NODES = 400_000  # scalars, mappings and sequences, every alias counted as the nodes it stands for
MAX_STRING = 4096  # characters in any single-line string (keys included)
MAX_TEXT = 65_536  # characters in a multi-line field (descriptions), far below Kubernetes' 256 KiB of annotations
MULTILINE_FIELDS = frozenset({"description"})

Loc = tuple[str | int, ...]


def field_path(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"


class Positions:
    """(line, column), 1-based, of every key and sequence item, by location tuple. Worked out from the node
    graph only when a problem is reported: a valid inventory (the common case, thousands of groups at
    national scale) never pays for it."""

    def __init__(self, root: yaml.Node | None, loader: _InventoryLoader) -> None:
        self._root, self._loader = root, loader
        self._at: dict[Loc, tuple[int, int]] | None = None

    @property
    def at(self) -> dict[Loc, tuple[int, int]]:
        if self._at is None:
            self._at = {(): (1, 1)}
            self._record(self._root, ())
        return self._at

    def _record(self, node: yaml.Node | None, loc: Loc) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = _key(key_node, self._loader)
                # Assigned, not setdefault: after a merge (`<<: *std`) the explicit key that overrides comes last.
                self._at[loc + (key,)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                self._record(value_node, loc + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for index, item_node in enumerate(node.value):
                self._at[loc + (index,)] = (item_node.start_mark.line + 1, item_node.start_mark.column + 1)
                self._record(item_node, loc + (index,))

    def find(self, loc: Loc) -> tuple[int, int]:
        at = self.at
        while loc not in at:
            loc = loc[:-1]
        return at[loc]


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_COLLECTION_TAGS = {yaml.MappingNode: ("tag:yaml.org,2002:map", "mapping"),
                    yaml.SequenceNode: ("tag:yaml.org,2002:seq", "list")}


def _where(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _DocumentError(Exception):
    def __init__(self, where: tuple[int, int], reason: str, field: str = "(document)"):
        super().__init__(reason)
        self.where, self.reason, self.field = where, reason, field


def _scalar(node: yaml.Node, loader: _InventoryLoader) -> Any:
    # Most scalars are strings; PyYAML's construct_object would only hand back node.value, more slowly.
    if node.tag == _STR_TAG and type(node) is yaml.ScalarNode:
        return node.value
    try:
        return loader.construct_object(node, deep=True)
    except yaml.MarkedYAMLError:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. an int of 5,000 digits, a 13th month, an empty `!!int`
        raise _DocumentError(_where(node), f"YAML: cannot read {node.value!r:.60} as {node.tag.rsplit(':', 1)[-1]}: "
                                           f"{exc}") from None


def _check_collection_tag(node: yaml.Node, loc: Loc) -> None:
    # The builder reads a mapping or a list by its shape alone; a tag on it (`!!python/object`, `!!set`,
    # `!!omap`, a local `!thing`) would be dropped in silence, so it is refused as it is on a scalar.
    expected, shape = _COLLECTION_TAGS[type(node)]
    if node.tag != expected:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!", 1)
        raise _DocumentError(_where(node), f"YAML: tag {tag:.80} on a {shape} is not allowed (the inventory is "
                                           "plain YAML: mappings, lists and scalars, untagged)", field_path(loc))


def _key(key_node: yaml.Node, loader: _InventoryLoader) -> Any:
    key = _scalar(key_node, loader) if type(key_node) is yaml.ScalarNode else None
    if not isinstance(key, (str, int, float, bool)) or key is None:
        raise _DocumentError(_where(key_node), f"YAML: mapping key {key!r} must be a scalar")
    return key


# Control characters, DEL, C1 controls and Unicode line/paragraph separators: invisible in review, refused by
# the API server or silently different from what was meant. \t and \n are allowed only in multi-line fields.
_NOT_ON_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NOT_IN_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _check_string(text: str, multiline: bool, node: yaml.Node, loc: Loc, what: str = "value") -> None:
    limit, forbidden = (MAX_TEXT, _NOT_IN_TEXT) if multiline else (MAX_STRING, _NOT_ON_ONE_LINE)
    if len(text) > limit:
        raise _DocumentError(_where(node), f"{what} is {len(text):,} characters long; at most {limit:,} are "
                                           "allowed here", field_path(loc))
    bad = forbidden.search(text)
    if bad:
        char = bad.group()
        name = {"\n": "a line break", "\r": "a carriage return", "\t": "a tab"}.get(
            char, f"character U+{ord(char):04X}")
        where = "at its end" if bad.start() == len(text) - 1 else f"at character {bad.start() + 1}"
        allowed = " (only a description may span lines)" if char in "\n\t" else ""
        raise _DocumentError(_where(node), f"{what} {text[:40]!r}{'...' if len(text) > 40 else ''} holds "
                                           f"{name} {where}{allowed}", field_path(loc))


class _Builder:
    """Plain dicts, lists and scalars from the node graph, refusing duplicate keys (PyYAML itself keeps the
    last one silently) and checking every string. A merge key's (`<<: *std`) entries may be overridden by the
    mapping's own keys, as YAML 1.1 says; two explicit keys are a duplicate."""

    def __init__(self, loader: _InventoryLoader) -> None:
        self.loader = loader
        self.merged: dict[int, int] = {}  # id(mapping node) -> how many leading pairs came from merge keys

    def build(self, node: yaml.Node | None, loc: Loc = ()) -> Any:
        kind = type(node)
        if kind is yaml.MappingNode or kind is yaml.SequenceNode:
            _check_collection_tag(node, loc)
        if kind is yaml.MappingNode:
            return self._mapping(node, loc)
        if kind is yaml.SequenceNode:
            return [self.build(item_node, loc + (index,)) for index, item_node in enumerate(node.value)]
        if node is None:
            return None
        value = _scalar(node, self.loader)
        if type(value) is str:
            last = next((part for part in reversed(loc) if isinstance(part, str)), None)
            _check_string(value, last in MULTILINE_FIELDS, node, loc)
        return value

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[Any, Any]:
        merged = self.merged.get(id(node))
        if merged is None:  # flatten once: a mapping reached again through an alias is already flat
            explicit = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE_TAG)
            self.loader.flatten_mapping(node)  # resolves `<<` merge keys: merged pairs first, then explicit ones
            merged = self.merged[id(node)] = len(node.value) - explicit
        result: dict[Any, Any] = {}
        explicit_at: dict[Any, yaml.Node] = {}
        for index, (key_node, value_node) in enumerate(node.value):
            key = _key(key_node, self.loader)
            if type(key) is str:
                _check_string(key, False, key_node, loc, what="key")
            if index >= merged:
                first = explicit_at.get(key)
                if first is not None:
                    raise _DocumentError(_where(key_node), f"YAML: duplicate key {key!r} (first at line "
                                         f"{first.start_mark.line + 1}; each key may appear once in a mapping)")
                explicit_at[key] = key_node
            result[key] = self.build(value_node, loc + (key,))
        return result


_EVENT_NODE_KINDS = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)


def _check_shape(loader: _InventoryLoader) -> None:
    """Walk the parser's events (no nodes are built, memory stays flat) and refuse, at the event where it
    happens: nesting deeper than MAX_DEPTH, an alias to a node that contains it (recursion), and a document
    that expands to more than MAX_NODES once every alias stands for its anchor's nodes (alias bombs)."""
    anchors: dict[str, tuple[int, int] | None] = {}  # anchor -> (expanded nodes, height); None while open
    open_nodes: list[list[Any]] = []  # [expanded nodes so far, height below, anchor] per open collection
    total = 0
    while not loader.check_event(yaml.StreamEndEvent):
        event = loader.get_event()
        kind = type(event)
        if kind is yaml.ScalarEvent or kind is yaml.AliasEvent:
            if kind is yaml.AliasEvent:
                if event.anchor not in anchors:
                    continue  # undefined: the composer reports it with its position
                found = anchors[event.anchor]
                if found is None:
                    raise _DocumentError(_where(event), f"YAML: alias *{event.anchor} refers to a node that "
                                                        "contains it (a recursive structure)")
                size, height = found
            else:
                size, height = 1, 0
                if event.anchor is not None:
                    anchors[event.anchor] = (1, 0)
            if len(open_nodes) + height > MAX_DEPTH:
                raise _DocumentError(_where(event), f"YAML: nested more than {MAX_DEPTH} levels deep"
                                     + (f" once alias *{event.anchor} is followed" if kind is yaml.AliasEvent else ""))
            total += size
            if total > MAX_NODES:
                raise _DocumentError(_where(event), f"YAML: the document expands to more than {MAX_NODES:,} "
                                     "nodes" + (f" once alias *{event.anchor} is followed (an alias bomb?)"
                                                if kind is yaml.AliasEvent else ""))
            if open_nodes:
                parent = open_nodes[-1]
                parent[0] += size
                parent[1] = max(parent[1], height + 1)
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            if len(open_nodes) >= MAX_DEPTH:
                raise _DocumentError(_where(event), f"YAML: nested more than {MAX_DEPTH} levels deep")
            total += 1
            if total > MAX_NODES:
                raise _DocumentError(_where(event), f"YAML: the document has more than {MAX_NODES:,} nodes")
            if event.anchor is not None:
                anchors[event.anchor] = None
            open_nodes.append([1, 0, event.anchor])
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            size, height, anchor = open_nodes.pop()
            if anchor is not None:
                anchors[anchor] = (size, height)
            if open_nodes:
                parent = open_nodes[-1]
                parent[0] += size
                parent[1] = max(parent[1], height + 1)


class _InventoryLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's (C, when available) safe loader with the two YAML 1.1 rules it leaves out, so a value means
    here exactly what it would mean to Kubernetes' reader: y/n are booleans, 1e3 is a float."""

    _plain_tags: dict[str, str] = {}

    def resolve(self, kind, value, implicit):
        # The C parser asks this pure-Python resolver about every scalar, and inventories repeat their values
        # (resource names, quantities, cohorts): a plain scalar's tag depends on its text alone.
        if kind is yaml.ScalarNode and implicit[0]:
            tag = self._plain_tags.get(value)
            if tag is None:
                tag = self._plain_tags[value] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)


_InventoryLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))
_InventoryLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"), list("-+0123456789"))


def _bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return loader.construct_scalar(node).lower() in ("yes", "true", "on", "y")


def _float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).replace("_", "")
    if re.match(r"^[-+]?[0-9]+[eE]", text):
        return float(text)
    return yaml.SafeLoader.construct_yaml_float(loader, node)


_InventoryLoader.add_constructor("tag:yaml.org,2002:bool", _bool)
_InventoryLoader.add_constructor("tag:yaml.org,2002:float", _float)


# From this size the shape check runs in a forked child while this process composes the nodes (the check guards
# building, which follows every alias; composing shares an aliased node, and libyaml refuses nesting deeper than
# 1,000 levels). Up to the upper bound, what is composed before the verdict stays small whatever the document holds.
PARALLEL_FROM = 64 * 1024  # characters
PARALLEL_UP_TO = 1024 * 1024  # characters


def _shape_problem(text: str) -> tuple[int, int, str, str] | None:
    """(line, column, field, reason) of the first shape problem (_check_shape), or None: none, or a syntax error
    first, which the composer reports with its position."""
    loader = _InventoryLoader(text)
    try:
        _check_shape(loader)
    except yaml.MarkedYAMLError:
        return None
    except _DocumentError as exc:
        return (*exc.where, exc.field, exc.reason)
    finally:
        loader.dispose()
    return None


def _composed(text: str) -> tuple[_InventoryLoader, yaml.Node | None, yaml.YAMLError | None]:
    """The loader and the document's node graph, or the YAML error composing it raised (kept, not raised: a shape
    problem earlier in the document is reported first)."""
    loader = _InventoryLoader(text)
    try:
        return loader, loader.get_single_node(), None
    except yaml.YAMLError as exc:
        return loader, None, exc


def parse_inventory(text: str, path: str) -> tuple[Any, Positions]:
    if len(text) > MAX_INPUT_BYTES:  # characters >= bytes / 4; the byte limit was checked on reading
        raise InventoryInvalid([Problem(path, 1, 1, "(file)", f"larger than {MAX_INPUT_BYTES:,} characters")])
    check_characters(text, path)
    if PARALLEL_FROM <= len(text) <= PARALLEL_UP_TO:
        (loader, node, composing_error), problem = parallel.both(lambda: _composed(text), lambda: _shape_problem(text))
        if problem:
            loader.dispose()
    else:
        problem = _shape_problem(text)
        if not problem:
            loader, node, composing_error = _composed(text)
    if problem:
        raise InventoryInvalid([Problem(path, *problem)])
    try:
        if composing_error is not None:
            raise composing_error
        document = _Builder(loader).build(node)
        positions = Positions(node, loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise InventoryInvalid([Problem(path, line, column, "(document)", f"YAML: {reason}")]) from None
    except yaml.YAMLError as exc:
        raise InventoryInvalid([Problem(path, 1, 1, "(document)", f"YAML: {' '.join(str(exc).split())}")]) from None
    except _DocumentError as exc:
        raise InventoryInvalid([Problem(path, *exc.where, exc.field, exc.reason)]) from None
    finally:
        loader.dispose()
    return document, positions
