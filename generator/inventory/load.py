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
    """(line, column), 1-based, of every key and sequence item, by location tuple."""

    def __init__(self) -> None:
        self.at: dict[Loc, tuple[int, int]] = {(): (1, 1)}

    def find(self, loc: Loc) -> tuple[int, int]:
        while loc not in self.at:
            loc = loc[:-1]
        return self.at[loc]


def _document(node: yaml.Node | None, loader: "_InventoryLoader", loc: Loc, positions: _Positions) -> Any:
    """Plain dicts, lists and scalars from the node graph, recording every key's and item's position and
    refusing duplicate keys (PyYAML itself keeps the last one silently)."""
    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)  # resolves `<<` merge keys
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            where = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise _DocumentError(where, f"mapping key {key!r} must be a scalar")
            if key in result:
                first = positions.at[loc + (key,)][0]
                raise _DocumentError(where, f"duplicate key {key!r} (first at line {first}; each key may appear "
                                            "once in a mapping)")
            positions.at[loc + (key,)] = where
            result[key] = _document(value_node, loader, loc + (key,), positions)
        return result
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item_node in enumerate(node.value):
            positions.at[loc + (index,)] = (item_node.start_mark.line + 1, item_node.start_mark.column + 1)
            items.append(_document(item_node, loader, loc + (index,), positions))
        return items
    return None if node is None else loader.construct_object(node, deep=True)


class _DocumentError(Exception):
    def __init__(self, where: tuple[int, int], reason: str):
        super().__init__(reason)
        self.where, self.reason = where, reason


class _InventoryLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML's (C, when available) safe loader with the two YAML 1.1 rules it leaves out, so a value means
    here exactly what it would mean to Kubernetes' reader: y/n are booleans, 1e3 is a float."""


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
    positions = _Positions()
    loader = _InventoryLoader(text)
    try:
        node = loader.get_single_node()
        document = _document(node, loader, (), positions)
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
