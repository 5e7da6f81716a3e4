"""Argo CD (argoproj.io/v1alpha1): Applications of directories in this repository, and the sync waves of
everything the gpugen Application syncs. The platform's app-of-apps is assembled in builders/bootstrap.py.

The Applications live outside the synced path (bootstrap/), so a bad render can never delete the Application that
would repair it.
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.inventory.models import Inventory
from generator.inventory.servers import IN_CLUSTER
from generator.kinds import ARGOCD, SYNCED_KINDS

API_VERSION = ARGOCD.api_version
SYNC_WAVE = "argocd.argoproj.io/sync-wave"


# The synced tree is read as a plain directory of manifests, not built with kustomize: Argo CD's repo server
# runs `kustomize build` on every manifest generation with a 90 s exec timeout (ARGOCD_EXEC_TIMEOUT), and
# kustomize's time grows superlinearly with the number of resources (benchmarks/README.md). Argo CD v3.6's repo
# server (reposerver/repository/repository.go):
# - an explicit `directory` with recurse set wins over the kustomization.yaml it would otherwise detect;
# - it reads *.yaml/*.yml/*.json files and matches `exclude` (gobwas/glob) against paths relative to the
#   synced path. The kustomization.yaml, kept for `kubectl apply -k` and review, must be excluded: it would
#   otherwise become a resource of kind Kustomization, which no cluster serves, and fail the sync.


def with_sync_wave(obj: dict[str, Any]) -> dict[str, Any]:
    """The object with its kind's sync-wave annotation (kinds.SYNCED_KINDS)."""
    annotations = dict(obj["metadata"].get("annotations", {}))
    annotations[SYNC_WAVE] = SYNCED_KINDS[obj["kind"]].wave
    return {**obj, "metadata": {**obj["metadata"], "annotations": dict(sorted(annotations.items()))}}


# refresh: each retry syncs the newest commit, so a fix pushed while a refused change is being retried is what
# the next retry applies (without it the retries keep the refused revision until they run out).
RETRY = {"limit": 5, "backoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"}, "refresh": True}
# Options of the Application that syncs rendered/:
# - ServerSideApply: merges with the fields Kueue and Trainer controllers own;
# - SkipDryRunOnMissingResource: the runtime, queue and policy CRDs come from the component Applications;
# - PruneLast: every prune runs after every wave has been applied (gitops-engine sync_context.go gives prune
#   tasks of PruneLast the wave after the last one). Without it, removing a GPU class prunes its ResourceFlavor
#   in the flavor's wave while the ClusterQueue update that drops the flavor waits in a later wave: Kueue's
#   resource-in-use finalizer holds the flavor, the sync waits for the deletion forever and never fails.
#   With it, the ClusterQueues stop naming the flavor first, and Kueue releases it at once. A removed
#   ClusterQueue is still held while workloads reserve quota in it: `plan` names such changes.
SYNCED_TREE_OPTIONS = ["PruneLast=true", "ServerSideApply=true", "SkipDryRunOnMissingResource=true"]


def directory_application(inventory: Inventory, name: str, project: str, path: str, namespace: str,
                          exclude: str | None, synced_tree: bool = False) -> dict[str, Any]:
    """An Application syncing a directory of this repository (recursively), pruning and self-healing.
    `namespace`: its destination namespace, which its project must permit even when every object names its own."""
    gitops = inventory.cluster.gitops
    directory: dict[str, Any] = {"recurse": True}
    if exclude:
        directory["exclude"] = exclude
    return {
        "apiVersion": API_VERSION,
        "kind": "Application",
        "metadata": metadata(inventory, name, namespace=gitops.applicationNamespace),
        "spec": {
            "project": project,
            "source": {"repoURL": gitops.repoURL, "targetRevision": gitops.targetRevision, "path": path,
                       "directory": directory},
            "destination": {"server": IN_CLUSTER, "namespace": namespace},
            "syncPolicy": {
                "automated": {"prune": True, "selfHeal": True},
                "syncOptions": SYNCED_TREE_OPTIONS if synced_tree else ["ServerSideApply=true"],
                "retry": RETRY,
            },
        },
    }


# ---------------------------------------------------------------- the site's Argo CD, at scale

# Argo CD's own settings that matter for a split tree (docs/scale.md, "Argo CD's settings"): a kustomize Component
# the site adds to its own Argo CD installation's kustomization, never synced by gpugen (bootstrap/argocd-settings/).
# Each value is Argo CD v3.6's advice (docs/operator-manual/high_availability.md) applied to what gpugen renders:
# - the application tree of an Application (every object and its health) is one Redis key unless sharded;
#   ARGOCD_APPLICATION_TREE_SHARD_SIZE, an environment variable of the controller only, splits it into keys of this
#   many objects ("the reasonable value is 100");
# - the status and operation processors (argocd-cmd-params-cm; 20 and 10 by default, 50 and 25 "for 1000
#   applications") work on Applications: gpugen's split adds a handful, so they are raised only when the site's
#   Argo CD would otherwise refresh or sync gpugen's Applications in turns.
TREE_SHARD_SIZE = "100"
DEFAULT_STATUS_PROCESSORS = 20
DEFAULT_OPERATION_PROCESSORS = 10
CONTROLLER = "argocd-application-controller"
CMD_PARAMS = "argocd-cmd-params-cm"


def site_settings_patches(applications: int) -> list[dict[str, Any]]:
    """The patches (strategic merge) for an Argo CD that syncs `applications` of gpugen's Applications; tree.py
    writes them as a kustomize Component."""
    container = {"name": CONTROLLER, "env": [{"name": "ARGOCD_APPLICATION_TREE_SHARD_SIZE",
                                              "value": TREE_SHARD_SIZE}]}
    patches = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": CONTROLLER},
                "spec": {"template": {"spec": {"containers": [container]}}}}]
    if applications > DEFAULT_OPERATION_PROCESSORS:
        processors = {"controller.status.processors": max(DEFAULT_STATUS_PROCESSORS, applications),
                      "controller.operation.processors": max(DEFAULT_OPERATION_PROCESSORS, applications)}
        patches.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": CMD_PARAMS},
                        "data": {key: str(value) for key, value in processors.items()}})
    return patches
