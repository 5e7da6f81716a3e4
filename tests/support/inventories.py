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


def platform_data() -> dict:
    """FLAME's inventory spread over several clusters (docs/multi-cluster.md): a manager `hub`, the GH200s on the
    worker `flame`, a second class (A100, amd64) on the worker `ember` where only vision-lab holds GPUs. Without
    monitoring (not built for several clusters)."""
    def spread(data: dict) -> None:
        data["clusters"] = {"hub": {"role": "manager", "server": "https://hub.example.org:6443"},
                            "flame": {"role": "worker", "server": "https://flame.example.org:6443"},
                            "ember": {"role": "worker", "server": "https://ember.example.org:6443"}}
        data["cluster"].pop("monitoring", None)
        data["classes"]["gh200"]["cluster"] = "flame"
        data["classes"]["a100"] = {
            "arch": "amd64", "nodeSelector": {data["cluster"]["gpuClassLabel"]: "NVIDIA-A100-SXM4-80GB"},
            "image": "ghcr.io/urcf/pytorch:2.9.1-cuda12.9-amd64", "nodes": 2,
            "perNode": {"gpus": 4, "cpu": 64, "memory": "512G"}, "cluster": "ember"}
        data["groups"]["vision-lab"]["allocations"]["a100"] = {"gpus": 4, "cpu": 32, "memory": "256G"}
    return edited(flame_data(), spread)


def own_components(data: dict) -> None:
    """platform_data()'s ember with components of its own: it already runs Kyverno (adopted, not installed), and its
    Kueue goes to the namespace `kueue`."""
    data["clusters"]["ember"]["components"] = {"kyverno": {"install": False, "existing": True},
                                               "kueue": {"namespace": "kueue"}}


def platform(data: dict | None = None) -> Inventory:
    """platform_data() (or `data`), validated."""
    return load_inventory_text(to_text(platform_data() if data is None else data), "platform.yaml")
