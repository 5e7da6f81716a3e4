"""Core API (v1): the research Namespaces, when the inventory asks for them (cluster.createNamespaces).

A Namespace holds users' data (home and workspace PVCs, which are never rendered), so Argo CD must never
prune it when a group leaves the inventory nor delete it with the Application: `Prune=false,Delete=false`.
Removing one is a human decision, made with kubectl. Until then Argo CD would report the Application OutOfSync
for the namespace it no longer renders (measured with the real controller): `IgnoreExtraneous` leaves such a
left-over namespace out of the sync status, and only while it is not in git.
Pod Security admission enforces `baseline`, so no pod there runs privileged or mounts host paths (a
privileged container could open the node's GPU devices without asking Kueue for them), and warns on
`restricted` so users see what would harden their pods.
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.inventory.models import Inventory
from generator.kinds import CORE
from generator.inventory.naming import RESEARCH_GROUP_LABEL

API_VERSION = CORE.api_version
SYNC_OPTIONS = "argocd.argoproj.io/sync-options"
NEVER_PRUNE_OR_DELETE = "Prune=false,Delete=false"
COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
}


def namespaces(inventory: Inventory) -> list[dict[str, Any]]:
    if not inventory.cluster.createNamespaces:
        return []
    return [{
        "apiVersion": API_VERSION,
        "kind": "Namespace",
        "metadata": metadata(inventory, namespace, labels={**POD_SECURITY, RESEARCH_GROUP_LABEL: group_name},
                             annotations={SYNC_OPTIONS: NEVER_PRUNE_OR_DELETE,
                                          COMPARE_OPTIONS: "IgnoreExtraneous"}),
    } for group_name, group in inventory.groups.items() for namespace in group.namespaces]
