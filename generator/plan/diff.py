"""What changed between two trees' objects: added, removed, and changed field by field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from generator.plan.objects import Key


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any  # None when added
    new: Any  # None when removed


@dataclass
class ObjectChange:
    key: Key
    action: str  # added | removed | changed | moved (to another Application, unchanged: plans.py)
    fields: list[FieldChange] = field(default_factory=list)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths. Lists of named items are keyed by name (resources[nvidia.com/gpu]) so that reordering or
    inserting an item reads as what it is, not as every later index changing."""
    if isinstance(value, dict):
        if not value:
            return {prefix: {}}
        return {k: v for key, item in value.items()
                for k, v in flatten(item, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(value, list):
        if not value:
            return {prefix: []}
        if not all(isinstance(item, dict) for item in value):
            return {prefix: value}  # scalar lists (namespaces, verbs) compare as one value
        if all("name" in item for item in value):
            return {k: v for item in value for k, v in flatten({x: y for x, y in item.items() if x != "name"},
                                                               f"{prefix}[{item['name']}]").items()}
        return {k: v for index, item in enumerate(value) for k, v in flatten(item, f"{prefix}[{index}]").items()}
    return {prefix: value}


def field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    before, after = flatten(old), flatten(new)
    return [FieldChange(path, before.get(path), after.get(path))
            for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)]


def matches(path: str, pattern: str) -> bool:
    """pattern may use [*] for any named item; matches the field itself or anything below it."""
    parts, pattern_parts = path.split("."), pattern.split(".")
    if len(parts) < len(pattern_parts):
        return False
    for part, want in zip(parts, pattern_parts):
        if want.endswith("[*]"):
            if not (part.startswith(want[:-3] + "[") and part.endswith("]")):
                return False
        elif part != want:
            return False
    return True


def diff(base: dict[Key, dict[str, Any]], new: dict[Key, dict[str, Any]]) -> list[ObjectChange]:
    """Every object added, removed or changed, in key order."""
    changes = []
    for key in sorted(set(base) | set(new)):
        if key not in base:
            changes.append(ObjectChange(key, "added"))
        elif key not in new:
            changes.append(ObjectChange(key, "removed"))
        else:
            fields = field_changes(base[key], new[key])
            if fields:
                changes.append(ObjectChange(key, "changed", fields))
    return changes
