"""Read gpu_classes.yaml into a validated Inventory, or a list of every problem with its file, line and column.

The file is read as YAML 1.1, the dialect Kubernetes reads manifests in, so a value means here what it would
mean in a manifest (`yes` is a boolean, `0777` an octal number). ruamel.yaml keeps the position of every
key; pydantic's error locations are mapped back to those positions.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning

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


def _plain(node: Any, loc: Loc, positions: _Positions) -> Any:
    """Turn ruamel's commented containers into plain dicts and lists, recording positions on the way."""
    if isinstance(node, CommentedMap):
        result = {}
        for key, value in node.items():
            line, column = node.lc.key(key)
            positions.at[loc + (key,)] = (line + 1, column + 1)
            result[key] = _plain(value, loc + (key,), positions)
        return result
    if isinstance(node, CommentedSeq):
        items = []
        for index, value in enumerate(node):
            line, column = node.lc.item(index)
            positions.at[loc + (index,)] = (line + 1, column + 1)
            items.append(_plain(value, loc + (index,), positions))
        return items
    # ruamel's scalar subclasses (ScalarFloat, OctalInt, ...) become their plain base types.
    for base in (bool, int, float, str):
        if isinstance(node, base):
            return base(node)
    return node


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
    yaml = YAML(typ="rt")
    yaml.version = (1, 1)
    yaml.allow_duplicate_keys = False
    positions = _Positions()
    try:
        with warnings.catch_warnings():
            # ruamel warns that YAML 1.1 floats want a dot; Kubernetes' reader accepts 1e3 as a float anyway.
            warnings.simplefilter("ignore")
            document = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        reason = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        if "duplicate key" in reason:
            reason = f"{reason} (each key may appear once in a mapping)"
        raise InventoryInvalid([Problem(path, line, column, "(document)", f"YAML: {reason}")]) from None
    return _plain(document, (), positions), positions


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
