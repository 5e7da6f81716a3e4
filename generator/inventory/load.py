"""Read gpu_classes.yaml into a validated Inventory, or a list of every problem with its file, line and column:
the bytes (reading.py), the YAML dialect (yaml11.py), then the schema (pydantic, whose error locations are
mapped back to the positions the parser kept) and the cross-object rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from generator.errors import InventoryInvalid, Problem
from generator.inventory.models import Inventory
from generator.inventory.reading import decode_inventory, read_inventory_bytes
from generator.inventory.rules import ELSEWHERE, check_inventory
from generator.inventory.yaml11 import Loc, Positions, field_path, parse_inventory

MAX_ENTRIES = 20_000  # classes + groups + namespaces: bounds the number of rendered objects before building them


_YAML11_WORDS = ("yes", "no", "on", "off", "y", "n", "true", "false")


def _reason(error: dict[str, Any]) -> str:
    message = error["msg"]
    message = message.removeprefix("Value error, ")
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


def _schema_problems(path: str, error: ValidationError, positions: Positions) -> list[Problem]:
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


def _placed(reason: str, elsewhere: list[Loc], path: str, positions: Positions) -> str:
    """The reason with the other place it names (rules.ELSEWHERE) as FILE:LINE:COL."""
    if not elsewhere:
        return reason
    line, column = positions.find(elsewhere[0])
    return reason.replace(ELSEWHERE, f"{path}:{line}:{column}")


def load_inventory(path: str | Path) -> Inventory:
    """Parse, validate the schema, then the cross-object rules. Raises InventoryInvalid listing every problem."""
    path = Path(path)
    shown = str(path)
    try:
        data = read_inventory_bytes(path)
    except OSError as exc:
        raise InventoryInvalid([Problem(shown, 1, 1, "(file)", f"cannot read: {exc.strerror or exc}")]) from None
    return load_inventory_text(decode_inventory(data, shown), shown)


def load_inventory_text(text: str, path: str = "<inventory>") -> Inventory:
    document, positions = parse_inventory(text, path)
    if document is None:
        raise InventoryInvalid([Problem(path, 1, 1, "(document)",
                                        "the inventory is empty: expected a mapping with cluster, classes and groups")])
    if not isinstance(document, dict):
        raise InventoryInvalid([Problem(
            path, 1, 1, "(document)",
            f"expected a mapping with cluster, classes and groups, got a {type(document).__name__}")])
    try:
        inventory = Inventory.model_validate(document)
    except ValidationError as exc:
        raise InventoryInvalid(_schema_problems(path, exc, positions)) from None
    entries = (len(inventory.classes) + len(inventory.groups)
               + sum(len(group.namespaces) for group in inventory.groups.values()))
    if entries > MAX_ENTRIES:  # checked before anything is built: each entry becomes one or more objects
        raise InventoryInvalid([Problem(path, *positions.find(("groups",)), "groups", (
            f"{entries:,} classes, groups and namespaces in all; gpugen renders at most {MAX_ENTRIES:,} "
            "(the national-scale example has 8,064)"))])
    problems = [Problem(path, *positions.find(loc), field_path(loc), _placed(reason, elsewhere, path, positions))
                for loc, reason, *elsewhere in check_inventory(inventory)]
    if problems:
        raise InventoryInvalid(problems)
    return inventory
