"""Core API (v1): the research Namespaces, when the inventory asks for them (cluster.createNamespaces), and the
job-limits ConfigMap in each research namespace.

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

from decimal import Decimal
from typing import Any

from generator.builders.common import metadata
from generator.inventory.models import Inventory
from generator.kinds import CORE
from generator.inventory.contract import JOB_LIMITS, allowed_priorities, default_priority, reachable, walltime_seconds
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


def job_limits_data(inventory: Inventory, group_name: str,
                    gpu_reach: dict[tuple[str, str], Decimal] | None = None) -> dict[str, str]:
    """What the guardrails need to know about a group at admission, as flat strings (ConfigMap data):
    the priorities it may name and its default, and per class its walltime default and maximum (seconds) and
    the most GPUs it can ever hold there. `walltime.*` without a class is for a plain Job that does not pin a
    class: the strictest of its classes."""
    group = inventory.groups[group_name]
    gpu_reach = reachable(inventory, "gpus") if gpu_reach is None else gpu_reach
    classes = sorted(group.allocations)
    walltimes = {name: walltime_seconds(inventory, group, name) for name in classes}
    data = {
        "group": group_name,
        "classes": ",".join(classes),
        "priorities": ",".join(allowed_priorities(inventory, group)),
        "defaultPriority": default_priority(inventory, group) or "",
        "walltime.default": str(min(default for default, _ in walltimes.values())),
        "walltime.maximum": str(min(maximum for _, maximum in walltimes.values())),
    }
    for name in classes:
        default, maximum = walltimes[name]
        data[f"{name}.walltime.default"] = str(default)
        data[f"{name}.walltime.maximum"] = str(maximum)
        data[f"{name}.gpus"] = str(int(gpu_reach[(group_name, name)]))
    return dict(sorted(data.items()))


def job_limits(inventory: Inventory) -> list[dict[str, Any]]:
    """The job-limits ConfigMap of every research namespace (read by the Kyverno policies; researchers may read
    it too). Rendered whether or not gpugen creates the namespaces."""
    objects = []
    gpu_reach = reachable(inventory, "gpus")
    for group_name, group in inventory.groups.items():
        data = job_limits_data(inventory, group_name, gpu_reach)
        for namespace in group.namespaces:
            objects.append({
                "apiVersion": API_VERSION,
                "kind": "ConfigMap",
                "metadata": metadata(inventory, JOB_LIMITS, namespace=namespace,
                                     labels={RESEARCH_GROUP_LABEL: group_name}),
                "data": data,
            })
    return objects
