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
from tests.support import EXAMPLES, INVENTORY

Change = Callable[[dict], Any]
SEVERAL_CLUSTERS = EXAMPLES / "several-clusters" / "gpu_classes.yaml"


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


def platform_data() -> dict:
    """The several-clusters example (examples/several-clusters/gpu_classes.yaml, docs/multi-cluster.md) as plain data,
    a fresh copy on every call: FLAME's inventory spread over a manager `hub`, the GH200s on the worker `flame`, a
    second class (A100, amd64) on the worker `ember` where only vision-lab holds GPUs. Without monitoring (not built
    for several clusters)."""
    return yaml.safe_load(SEVERAL_CLUSTERS.read_text(encoding="utf-8"))


def own_components(data: dict) -> None:
    """platform_data()'s ember with components of its own: it already runs Kyverno (adopted, not installed), and its
    Kueue goes to the namespace `kueue`."""
    data["clusters"]["ember"]["components"] = {"kyverno": {"install": False, "existing": True},
                                               "kueue": {"namespace": "kueue"}}


def platform(data: dict | None = None) -> Inventory:
    """platform_data() (or `data`), validated."""
    return load_inventory_text(to_text(platform_data() if data is None else data), "platform.yaml")
