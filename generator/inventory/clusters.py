"""The clusters of a platform that spans several (inventory `clusters:`, docs/multi-cluster.md): which one is the
manager, which worker runs which GPU class and which groups, each cluster's components (its own settings over the
platform's), and each cluster's share of the inventory as an Inventory the builders read like a single cluster's.

Pure: inventory in, names and Inventory views out.
"""

from __future__ import annotations

from typing import Any

from generator.inventory.models import Components, Inventory


def several(inventory: Inventory) -> bool:
    return inventory.clusters is not None


def manager(inventory: Inventory) -> str:
    (name,) = [name for name, member in (inventory.clusters or {}).items() if member.role == "manager"]
    return name


def workers(inventory: Inventory) -> list[str]:
    """In the inventory's order (each group's MultiKueueConfig lists its workers so)."""
    return [name for name, member in (inventory.clusters or {}).items() if member.role == "worker"]


def classes_of(inventory: Inventory, worker: str) -> list[str]:
    return [name for name, gpu_class in inventory.classes.items() if gpu_class.cluster == worker]


def workers_of(inventory: Inventory, group_name: str) -> list[str]:
    """The workers where the group holds an allocation: where MultiKueue may send its jobs."""
    allocated = {inventory.classes[name].cluster for name in inventory.groups[group_name].allocations}
    return [name for name in workers(inventory) if name in allocated]


def components_on(inventory: Inventory, cluster: str) -> Components:
    """The cluster's components: cluster.components, with the fields its own `components:` gives replaced."""
    own = inventory.clusters[cluster].components if inventory.clusters else None
    platform = inventory.cluster.components
    if own is None:
        return platform
    updates = {}
    for name in own.model_fields_set:
        setting = getattr(own, name)
        if setting is not None:
            updates[name] = getattr(platform, name).model_copy(
                update={field: getattr(setting, field) for field in setting.model_fields_set})
    return platform.model_copy(update=updates) if updates else platform


def _with_components(inventory: Inventory, cluster: str, update: dict[str, Any]) -> Inventory:
    components = components_on(inventory, cluster)
    if components is not inventory.cluster.components:
        update = {**update, "cluster": inventory.cluster.model_copy(update={"components": components})}
    return inventory.model_copy(update=update) if update else inventory


def manager_view(inventory: Inventory) -> Inventory:
    """What the manager runs: the whole inventory, with the manager's own components."""
    return _with_components(inventory, manager(inventory), {})


def worker_view(inventory: Inventory, worker: str) -> Inventory:
    """What one worker runs: its own classes, and the groups with an allocation on them (their other
    allocations and walltime overrides left out), with the worker's own components. MultiKueue sends a group's
    jobs only to the workers in its MultiKueueConfig, so a worker needs the namespaces and queues of those groups
    alone."""
    classes = set(classes_of(inventory, worker))
    groups = {}
    for name, group in inventory.groups.items():
        allocations = {cls: allocation for cls, allocation in group.allocations.items() if cls in classes}
        if allocations:
            walltime = {cls: override for cls, override in group.walltime.items() if cls in classes}
            groups[name] = group.model_copy(update={"allocations": allocations, "walltime": walltime})
    return _with_components(inventory, worker, {
        "classes": {name: gpu_class for name, gpu_class in inventory.classes.items() if name in classes},
        "groups": groups,
    })
