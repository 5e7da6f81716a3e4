"""Variant inventories, made one way in every tier: the FLAME inventory as data, changed by small named edits,
then validated as a render validates it (the model: Kueue's pkg/util/testing wrappers).

    variant(setting("cluster.components.kueue.install", False))       # a validated Inventory
    edited(flame_data(), lambda d: d["groups"].pop("physics-lab"))     # data, to write or edit further
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from generator.inventory import Inventory, load_inventory_text
from tests.support import INVENTORY

Change = Callable[[dict], Any]


def flame_data() -> dict:
    """The committed FLAME inventory as plain data (a fresh copy on every call)."""
    return yaml.safe_load(INVENTORY.read_text(encoding="utf-8"))


def setting(path: str, value: Any) -> Change:
    """Set the dotted `path` (mappings made on the way) to `value`."""
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return change


def edited(data: dict, *changes: Change) -> dict:
    """A copy of `data` with `changes` applied in order."""
    data = copy.deepcopy(data)
    for change in changes:
        change(data)
    return data


def to_text(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def inventory(data: dict, source: str = "variant.yaml") -> Inventory:
    """`data` validated exactly as `gpugen render` validates a file (schema and cross-object rules)."""
    return load_inventory_text(to_text(data), source)


def variant(*changes: Change) -> Inventory:
    """The FLAME inventory with `changes`, validated."""
    return inventory(edited(flame_data(), *changes))


def write(data: dict, path: Path) -> Path:
    path.write_text(to_text(data), encoding="utf-8")
    return path
