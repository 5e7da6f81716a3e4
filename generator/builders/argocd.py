"""Argo CD (argoproj.io/v1alpha1): the bootstrap Application, and the sync waves of everything it syncs.

The Application lives outside the synced path (it is applied once, by hand or by an app-of-apps), so a bad
render can never delete the Application that would repair it.
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.layout import KUSTOMIZATION_FILE
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


# The synced tree is read as a plain directory of manifests, not built with kustomize: Argo CD's repo server
# runs `kustomize build` on every manifest generation with a 90 s exec timeout (ARGOCD_EXEC_TIMEOUT), and
# kustomize's time grows superlinearly with the number of resources (160 s at 8,000 objects, see
# benchmarks/README.md). Argo CD v3.6's repo server (reposerver/repository/repository.go):
# - an explicit `directory` with recurse set wins over the kustomization.yaml it would otherwise detect;
# - it reads *.yaml/*.yml/*.json files and matches `exclude` (gobwas/glob) against paths relative to the
#   synced path. The kustomization.yaml, kept for `kubectl apply -k` and review, must be excluded: it would
#   otherwise become a resource of kind Kustomization, which no cluster serves, and fail the sync.
DIRECTORY_SOURCE = {"recurse": True, "exclude": KUSTOMIZATION_FILE}
# Argo CD's repo server refuses a directory source whose manifests add up to more than this
# (--max-combined-directory-manifests-size, reposerver.max.combined.directory.manifests.size; default 10M).
REPO_SERVER_MAX_DIRECTORY_BYTES = 10_000_000


def directory_size_warning(synced_files: dict[str, bytes]) -> str | None:
    """A warning when the manifests Argo CD reads exceed its repo server's default limit, else None."""
    total = sum(len(content) for path, content in synced_files.items() if path != KUSTOMIZATION_FILE)
    if total <= REPO_SERVER_MAX_DIRECTORY_BYTES:
        return None
    return (f"the synced manifests add up to {total:,} bytes, over the {REPO_SERVER_MAX_DIRECTORY_BYTES:,} bytes "
            "Argo CD's repo server reads from a directory source by default: raise "
            "reposerver.max.combined.directory.manifests.size in argocd-cmd-params-cm (e.g. to 50M) and restart "
            "the repo server")


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
            "source": {"repoURL": gitops.repoURL, "targetRevision": gitops.targetRevision, "path": gitops.path,
                       "directory": DIRECTORY_SOURCE},
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
