"""Lay objects out as files: one object per file, paths derived from group, kind, namespace and name.

Pure: returns {relative path: bytes}; writing is write.py's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator import emit, userdocs, versions
from generator.builders import bootstrap_objects, synced_objects
from generator.layout import KUSTOMIZATION_FILE
from generator.inventory.models import Inventory

Files = dict[str, bytes]

# API group -> top-level folder, named after the upstream project.
_FOLDERS = {
    "trainer.kubeflow.org": "trainer",
    "kueue.x-k8s.io": "kueue",
    "policies.kyverno.io": "kyverno",
    "rbac.authorization.k8s.io": "rbac",
    "argoproj.io": "argocd",
    "": "core",
}


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
    return f"{_FOLDERS[group]}/{obj['kind'].lower()}/{stem}.yaml"


def _files(objects: list[dict[str, Any]], source: str) -> Files:
    files: Files = {}
    for obj in objects:
        path = object_path(obj)
        if path in files:
            raise ValueError(f"two objects would be written to {path}")
        files[path] = emit.manifest(obj, source)
    return dict(sorted(files.items()))


def kustomization(resources: list[str], source: str) -> bytes:
    pins = versions.pins()
    targets = ", ".join(f"{name.removesuffix('_VERSION').title().replace('_', ' ')} {pins[name]}"
                        for name in ("KUBERNETES_VERSION", "TRAINER_VERSION", "KUEUE_VERSION", "KYVERNO_VERSION",
                                     "ARGOCD_VERSION"))
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": sorted(resources)}
    text = emit.header(source) + f"# Validated against {targets}.\n" + emit.to_yaml(body)
    return text.encode("utf-8")


def _bootstrap_files(inventory: Inventory, source: str) -> Files:
    files = {f"{folder}/{path}": content for folder, objects in bootstrap_objects(inventory).items()
             for path, content in _files(objects, source).items()}
    return dict(sorted(files.items()))


def render_trees(inventory: Inventory, source: str) -> RenderedTrees:
    synced = _files(synced_objects(inventory), source)
    synced[KUSTOMIZATION_FILE] = kustomization(list(synced), source)
    return RenderedTrees(synced=dict(sorted(synced.items())), bootstrap=_bootstrap_files(inventory, source),
                         docs=userdocs.runtimes_page(inventory, source).encode("utf-8"))
