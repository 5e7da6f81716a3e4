"""Lay objects out as files: one object per file, paths derived from group, kind, namespace and name.

Pure: returns {relative path: bytes}; writing is generator/files' job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator import emit, limits, userdocs, versions
from generator.inventory import clusters
from generator.builders import bootstrap_objects, cluster_synced_objects, synced_objects
from generator.kinds import GROUP_FOLDERS
from generator.repo_server import KUSTOMIZATION_FILE
from generator.errors import OverLimits
from generator.inventory.models import Inventory

Files = dict[str, bytes]

@dataclass(frozen=True)
class RenderedTrees:
    synced: Files  # the tree Argo CD syncs (rendered/), with its kustomization.yaml
    bootstrap: Files  # the app-of-apps (bootstrap/): root/ applied once by hand, platform/ synced by it
    docs: bytes  # the users' "Available runtimes" page (docs/runtimes.md)


def object_path(obj: dict[str, Any]) -> str:
    group = obj["apiVersion"].rpartition("/")[0]
    meta = obj["metadata"]
    # Namespaces are DNS labels (no dots), so namespace.name is unambiguous.
    stem = f"{meta['namespace']}.{meta['name']}" if "namespace" in meta else meta["name"]
    return f"{GROUP_FOLDERS[group]}/{obj['kind'].lower()}/{stem}.yaml"


def _files(objects: list[dict[str, Any]], source: str, over_limits: list[tuple[str, str]] | None = None) -> Files:
    files: Files = {}
    for obj in objects:
        path = object_path(obj)
        if path in files:
            raise ValueError(f"two objects would be written to {path}")
        files[path] = emit.manifest(obj, source)
        if over_limits is not None:  # what Kubernetes or the file system would refuse (limits.py)
            over_limits.extend((path, reason) for reason in limits.object_problems(obj, path, files[path]))
    return dict(sorted(files.items()))


def kustomization(resources: list[str], source: str) -> bytes:
    pins = versions.pins()
    targets = ", ".join(f"{name.removesuffix('_VERSION').title().replace('_', ' ')} {pins[name]}"
                        for name in ("KUBERNETES_VERSION", "TRAINER_VERSION", "KUEUE_VERSION", "KYVERNO_VERSION",
                                     "ARGOCD_VERSION"))
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": sorted(resources)}
    text = emit.header(source) + f"# Validated against {targets}.\n" + emit.to_yaml(body)
    return text.encode("utf-8")


def _bootstrap_files(inventory: Inventory, source: str, over_limits: list[tuple[str, str]] | None = None) -> Files:
    files = {f"{folder}/{path}": content for folder, objects in bootstrap_objects(inventory).items()
             for path, content in _files(objects, source, over_limits).items()}
    return dict(sorted(files.items()))


def _synced_tree(objects: list[dict[str, Any]], source: str, over_limits: list[tuple[str, str]]) -> Files:
    """One Application's directory: a file per object, and the kustomization.yaml listing them. The object limit
    holds per directory."""
    if len(objects) > limits.MAX_OBJECTS:
        raise OverLimits([("(tree)", f"{len(objects):,} objects; gpugen renders at most {limits.MAX_OBJECTS:,}")])
    files = _files(objects, source, over_limits)
    files[KUSTOMIZATION_FILE] = kustomization(list(files), source)
    return files


def _cluster_trees(inventory: Inventory, source: str, over_limits: list[tuple[str, str]]) -> Files:
    """Several clusters: <cluster>/ per cluster, each its own synced tree (Argo CD syncs each to its cluster)."""
    return {f"{name}/{path}": content for name, objects in cluster_synced_objects(inventory).items()
            for path, content in _synced_tree(objects, source, over_limits).items()}


def render_trees(inventory: Inventory, source: str) -> RenderedTrees:
    """Raises errors.OverLimits when an object would exceed what Kubernetes or the file system accepts. For
    several clusters (docs/multi-cluster.md) rendered/ holds one tree per cluster."""
    over_limits: list[tuple[str, str]] = []
    if clusters.several(inventory):
        synced = _cluster_trees(inventory, source, over_limits)
    else:
        synced = _synced_tree(synced_objects(inventory), source, over_limits)
    bootstrap = _bootstrap_files(inventory, source, over_limits)
    if over_limits:
        raise OverLimits(over_limits)
    return RenderedTrees(synced=dict(sorted(synced.items())), bootstrap=bootstrap,
                         docs=userdocs.runtimes_page(inventory, source).encode("utf-8"))
