"""A rendered tree read as objects, and what the plan's rules read of Kueue's objects in it (a queue's quotas, the
flavors it uses, the GPU class each flavor serves)."""

from __future__ import annotations

from typing import Any

import yaml

from generator.inventory.naming import GPU_CLASS_ANNOTATION
from generator.layout import KUSTOMIZATION_FILE, cluster_folders

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
Files = dict[str, bytes]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # a national-scale plan reads two 8,000-file trees


def objects_of(files: Files) -> dict[Key, dict[str, Any]]:
    return read_tree(files)[0]


def read_tree(files: Files) -> tuple[dict[Key, dict[str, Any]], dict[Key, str]]:
    """The tree's objects, and for a tree split into Applications (cluster.gitops.groupApplications) the folder of
    the Application each is in (layout.cluster_folders); {} for a tree one Application syncs."""
    read = _read(files)
    folders = cluster_folders(files)
    return ({key: obj for key, (obj, _) in read.items()},
            {key: path.partition("/")[0] for key, (_, path) in read.items() if path.partition("/")[0] in folders})


def _read(files: Files) -> dict[Key, tuple[dict[str, Any], str]]:
    objects = {}
    for path, content in files.items():
        if path.endswith(KUSTOMIZATION_FILE) or not path.endswith(".yaml"):
            continue
        for obj in yaml.load_all(content, Loader=_Loader):
            if obj:
                meta = obj["metadata"]
                objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = (obj, path)
    return objects


def nominal_quotas(queue: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(flavor["name"], resource["name"]): str(resource["nominalQuota"])
            for group in queue["spec"].get("resourceGroups", []) for flavor in group["flavors"]
            for resource in flavor["resources"]}


def flavors_used(queue: dict[str, Any]) -> set[str]:
    return {flavor for flavor, _ in nominal_quotas(queue)}


def flavor_classes(objects: dict[Key, dict]) -> dict[str, str]:
    """Flavor name -> the GPU class it serves (its gpugen/gpu-class annotation; the flavor's name without one)."""
    return {name: obj["metadata"].get("annotations", {}).get(GPU_CLASS_ANNOTATION, name)
            for (kind, _, name), obj in objects.items() if kind == "ResourceFlavor"}


def quotas_by_class(queue: dict[str, Any], flavor_classes: dict[str, str]) -> dict[tuple[str, str], tuple[str, str]]:
    """(class, resource) -> (flavor, nominal quota). Keyed by class so that renaming a class's flavor compares
    the same quota under its new name instead of reading as removed."""
    return {(flavor_classes.get(flavor, flavor), resource): (flavor, amount)
            for (flavor, resource), amount in nominal_quotas(queue).items()}



def class_flavor(objects: dict[Key, dict], gpu_class: str) -> str:
    for (kind, _, name), obj in objects.items():
        if kind == "ResourceFlavor" and obj["metadata"].get("annotations", {}).get(GPU_CLASS_ANNOTATION) == gpu_class:
            return name
    return gpu_class
