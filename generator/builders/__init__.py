"""Pure functions from a validated Inventory to Kubernetes objects, one module per upstream API."""

from __future__ import annotations

from typing import Any, Literal

from generator.builders import argocd, bootstrap, core, grafana, kueue, kyverno, prometheus, rbac, trainer
from generator.components.kueue.configuration import KUEUE_INTEGRATIONS
from generator.inventory import clusters
from generator.inventory.models import Inventory


def synced_objects(inventory: Inventory, role: Literal["manager", "worker"] | None = None) -> list[dict[str, Any]]:
    """Everything Argo CD syncs from the rendered tree, each with its sync wave. `role`: for one cluster of
    several, "manager" (the whole inventory; its ClusterQueues wait on MultiKueue's check) or "worker" (a
    clusters.worker_view; researchers only read there)."""
    objects = [
        *core.namespaces(inventory),
        *core.job_limits(inventory),
        *trainer.runtimes(inventory),
        *kueue.workload_priority_classes(inventory),
        *kueue.resource_flavors(inventory),
        *kueue.cluster_queues(inventory, multikueue=role == "manager"),
        *kueue.local_queues(inventory),
        *kyverno.policies(inventory),
        *rbac.rbac(inventory, submit=role != "worker"),
        *prometheus.monitoring_objects(inventory),
        *grafana.dashboards(inventory),
    ]
    if role == "manager":
        objects += [*(kueue.multikueue_admission_check(inventory, name) for name in sorted(inventory.groups)),
                    *(kueue.multikueue_config(inventory, name, clusters.workers_of(inventory, name))
                      for name in sorted(inventory.groups)),
                    *(kueue.multikueue_cluster(inventory, name) for name in clusters.workers(inventory))]
    elif role == "worker":
        objects += rbac.multikueue_worker_identity(inventory, KUEUE_INTEGRATIONS)
    return [argocd.with_sync_wave(obj) for obj in objects]


def bootstrap_objects(inventory: Inventory) -> dict[str, list[dict[str, Any]]]:
    """bootstrap/ by folder: root/ is applied once by hand and syncs platform/ (the components, then gpugen)."""
    return {"root": bootstrap.root_objects(inventory), "platform": bootstrap.platform_objects(inventory)}
