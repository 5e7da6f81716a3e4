"""Read gpu_classes.yaml into a validated Inventory, or a list of every problem with its file, line and column.

The file is read as YAML 1.1, the dialect Kubernetes reads manifests in, so a value means here what it would
mean in a manifest (`yes` is a boolean, `0777` an octal number). PyYAML's C parser is fast at national
scale (thousands of groups) and its node graph keeps the position of every key; pydantic's error locations
are mapped back to those positions. (ruamel.yaml, much slower, is used only to edit the file in place.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
import yaml

from generator.inventory.models import Inventory
from generator.inventory.rules import check_inventory

Loc = tuple[str | int, ...]


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the inventory, printed as PATH:LINE:COL: field.path: reason."""

    path: str
    line: int
    column: int
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.field}: {self.reason}"


class InventoryInvalid(Exception):
    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(map(str, self.problems)))


class _Positions:
    """(line, column), 1-based, of every key and sequence item, by location tuple. Worked out from the node
    graph only when a problem is reported: a valid inventory (the common case, thousands of groups at
    national scale) never pays for it."""

    def __init__(self, root: yaml.Node | None, loader: "_InventoryLoader") -> None:
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
                self._at.setdefault(loc + (key,), (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
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


def _scalar(node: yaml.Node, loader: "_InventoryLoader") -> Any:
    # Most scalars are strings; PyYAML's construct_object would only hand back node.value, more slowly.
    if node.tag == _STR_TAG and type(node) is yaml.ScalarNode:
        return node.value
    return loader.construct_object(node, deep=True)


def _key(key_node: yaml.Node, loader: "_InventoryLoader") -> Any:
    key = _scalar(key_node, loader)
    if not isinstance(key, (str, int, float, bool)) or key is None:
        raise _DocumentError((key_node.start_mark.line + 1, key_node.start_mark.column + 1),
                             f"mapping key {key!r} must be a scalar")
    return key


def _document(node: yaml.Node | None, loader: "_InventoryLoader") -> Any:
    """Plain dicts, lists and scalars from the node graph, refusing duplicate keys (PyYAML itself keeps the
    last one silently)."""
    kind = type(node)
    if kind is yaml.MappingNode:
        loader.flatten_mapping(node)  # resolves `<<` merge keys
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _key(key_node, loader)
            if key in result:
                first = next(k for k, _ in node.value if _key(k, loader) == key)
                raise _DocumentError((key_node.start_mark.line + 1, key_node.start_mark.column + 1),
                                     f"duplicate key {key!r} (first at line {first.start_mark.line + 1}; each key "
                                     "may appear once in a mapping)")
            result[key] = _document(value_node, loader)
        return result
    if kind is yaml.SequenceNode:
        return [_document(item_node, loader) for item_node in node.value]
    return None if node is None else _scalar(node, loader)


class _DocumentError(Exception):
    def __init__(self, where: tuple[int, int], reason: str):
        super().__init__(reason)
        self.where, self.reason = where, reason


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


def field_path(loc: Loc) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"


_YAML11_WORDS = ("yes", "no", "on", "off", "y", "n", "true", "false")


def _reason(error: dict[str, Any]) -> str:
    message = error["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if error["type"] == "extra_forbidden":
        return "unknown field (check its spelling and indentation)"
    if error["type"] == "string_type" and isinstance(error.get("input"), bool):
        return f"{message}: YAML 1.1 reads an unquoted {'/'.join(_YAML11_WORDS)} as a boolean; quote it"
    if error["type"] in ("string_type", "int_type", "float_type", "dict_type", "list_type") and "input" in error:
        message += f" (got {type(error['input']).__name__} {error['input']!r})"
    return message


def _is_type_tag(part: str | int) -> bool:
    """pydantic adds the branch of a union or a validator wrapper to an error's location; it is not a field."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool", "[key]") or part.startswith("function-"))


def _schema_problems(path: str, error: ValidationError, positions: _Positions) -> list[Problem]:
    reasons: dict[Loc, list[str]] = {}
    for item in error.errors(include_url=False):
        loc: Loc = ()
        for part in item["loc"]:
            if loc + (part,) in positions.at or not _is_type_tag(part):
                loc += (part,)
        reason = _reason(item)
        if reason not in reasons.setdefault(loc, []):
            reasons[loc].append(reason)
    return [Problem(path, *positions.find(loc), field_path(loc), "; or ".join(texts)) for loc, texts in reasons.items()]


def parse_inventory(text: str, path: str) -> tuple[Any, _Positions]:
    loader = _InventoryLoader(text)
    try:
        node = loader.get_single_node()
        document = _document(node, loader)
        positions = _Positions(node, loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise InventoryInvalid([Problem(path, line, column, "(document)", f"YAML: {reason}")]) from None
    except yaml.YAMLError as exc:
        raise InventoryInvalid([Problem(path, 1, 1, "(document)", f"YAML: {exc}")]) from None
    except _DocumentError as exc:
        raise InventoryInvalid([Problem(path, *exc.where, "(document)", f"YAML: {exc.reason}")]) from None
    finally:
        loader.dispose()
    return document, positions


def load_inventory(path: str | Path) -> Inventory:
    """Parse, validate the schema, then the cross-object rules. Raises InventoryInvalid listing every problem."""
    path = Path(path)
    shown = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InventoryInvalid([Problem(shown, 1, 1, "(file)", f"cannot read: {exc}")]) from None
    return load_inventory_text(text, shown)


def load_inventory_text(text: str, path: str = "<inventory>") -> Inventory:
    document, positions = parse_inventory(text, path)
    if document is None:
        raise InventoryInvalid([Problem(path, 1, 1, "(document)",
                                        "the inventory is empty: expected a mapping with cluster, classes and groups")])
    if not isinstance(document, dict):
        raise InventoryInvalid([Problem(path, 1, 1, "(document)",
                                        f"expected a mapping with cluster, classes and groups, got a {type(document).__name__}")])
    try:
        inventory = Inventory.model_validate(document)
    except ValidationError as exc:
        raise InventoryInvalid(_schema_problems(path, exc, positions)) from None
    problems = [Problem(path, *positions.find(loc), field_path(loc), reason) for loc, reason in check_inventory(inventory)]
    if problems:
        raise InventoryInvalid(problems)
    return inventory
