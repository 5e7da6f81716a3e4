"""Which Application syncs each object of the synced tree. One Application syncs it all, unless the inventory puts
the groups' objects in Applications of their own (cluster.gitops.groupApplications): then each object that exists
for one group (its namespaces and what is in them, its ClusterQueue, its rules and dashboard: the rendered names
whose inventory field is under groups.<name>) goes to that group's Application, chosen by a hash of the group's name
alone, and everything else (runtimes, flavors, priorities, policies, roles, the platform's monitoring) to the
platform's. Adding a group so changes its own Application and the platform's (whose policies list the research
namespaces), and moves no object from one Application to another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from generator.inventory.models import Inventory
from generator.inventory.naming import PLATFORM_FOLDER, group_application, group_application_folder
from generator.inventory.rendered_names import rendered_names

ObjectKey = tuple[str, str | None, str]  # kind, namespace (None when cluster-scoped), name


def group_objects(inventory: Inventory) -> dict[ObjectKey, str]:
    """Each object that exists for one group, and that group."""
    return {(name.kind, name.namespace, name.name): name.source[1] for name in rendered_names(inventory)
            if name.cluster is None and len(name.source) > 1 and name.source[0] == "groups"}


def folder_of(inventory: Inventory) -> Callable[[dict[str, Any]], str]:
    """A function from an object to the folder of the Application that syncs it."""
    owners = group_objects(inventory)
    group_folders = {group: group_application_folder(inventory, group_application(inventory, group))
                     for group in inventory.groups}

    def folder(obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        group = owners.get((obj["kind"], meta.get("namespace"), meta["name"]))
        return group_folders[group] if group is not None else PLATFORM_FOLDER
    return folder
