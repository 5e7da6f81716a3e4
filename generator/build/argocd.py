"""Argo CD (argoproj.io/v1alpha1): the bootstrap Application, and the sync waves of everything it syncs.

The Application lives outside the synced path (it is applied once, by hand or by an app-of-apps), so a bad
render can never delete the Application that would repair it.
"""

from __future__ import annotations

from typing import Any

from generator.build.common import metadata
from generator.inventory.models import Inventory

API_VERSION = "argoproj.io/v1alpha1"
SYNC_WAVE = "argocd.argoproj.io/sync-wave"
# Guardrails first; flavors before the ClusterQueues that name them, ClusterQueues before their LocalQueues.
# Pruning runs from high wave to low, so queues go before the flavors they hold a finalizer on.
SYNC_WAVES = {
    "ValidatingPolicy": "-1",
    "MutatingPolicy": "-1",
    "ClusterRole": "0",
    "ClusterRoleBinding": "0",
    "ClusterTrainingRuntime": "0",
    "ResourceFlavor": "1",
    "ClusterQueue": "2",
    "LocalQueue": "3",
}


def with_sync_wave(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with its kind's sync-wave annotation; every synced kind must have a wave."""
    annotations = dict(obj["metadata"].get("annotations", {}))
    annotations[SYNC_WAVE] = SYNC_WAVES[obj["kind"]]
    return {**obj, "metadata": {**obj["metadata"], "annotations": dict(sorted(annotations.items()))}}


def application(inventory: Inventory) -> dict[str, Any]:
    gitops = inventory.cluster.gitops
    return {
        "apiVersion": API_VERSION,
        "kind": "Application",
        "metadata": metadata(inventory, gitops.applicationName, namespace=gitops.applicationNamespace),
        "spec": {
            "project": gitops.project,
            "source": {"repoURL": gitops.repoURL, "targetRevision": gitops.targetRevision, "path": gitops.path},
            "destination": {"server": "https://kubernetes.default.svc"},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                # Server-side apply merges with the fields Kueue and Trainer controllers own; the runtime and
                # queue CRDs may be installed by another Application, hence no client dry-run on missing kinds.
                "syncOptions": ["ServerSideApply=true", "SkipDryRunOnMissingResource=true"],
                "retry": {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}},
            },
        },
    }
