"""Pure functions from a validated Inventory to Kubernetes objects, one module per upstream API."""

from __future__ import annotations

from typing import Any

from generator.builders import argocd, bootstrap, core, grafana, kueue, kyverno, prometheus, rbac, trainer
from generator.inventory.models import Inventory


def synced_objects(inventory: Inventory) -> list[dict[str, Any]]:
    """Everything Argo CD syncs from the rendered tree, each with its sync wave."""
    objects = [
        *core.namespaces(inventory),
        *core.job_limits(inventory),
        *trainer.runtimes(inventory),
        *kueue.workload_priority_classes(inventory),
        *kueue.resource_flavors(inventory),
        *kueue.cluster_queues(inventory),
        *kueue.local_queues(inventory),
        *kyverno.policies(inventory),
        *rbac.rbac(inventory),
        *prometheus.monitoring_objects(inventory),
        *grafana.dashboards(inventory),
    ]
    return [argocd.with_sync_wave(obj) for obj in objects]


def bootstrap_objects(inventory: Inventory) -> dict[str, list[dict[str, Any]]]:
    """bootstrap/ by folder: root/ is applied once by hand and syncs platform/ (the components, then gpugen)."""
    return {"root": bootstrap.root_objects(inventory), "platform": bootstrap.platform_objects(inventory)}
