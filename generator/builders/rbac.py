"""RBAC (rbac.authorization.k8s.io/v1): every authenticated user may read the ClusterTrainingRuntimes.

The seed page tells users to run `kubectl get clustertrainingruntimes` and `TrainerClient().list_runtimes()`;
both need cluster-scoped get/list/watch.
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.inventory.models import Inventory

API_VERSION = "rbac.authorization.k8s.io/v1"
RUNTIME_READER = "training-runtime-reader"


def runtime_reader_role(inventory: Inventory) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(inventory, RUNTIME_READER),
        "rules": [{
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["clustertrainingruntimes"],
            "verbs": ["get", "list", "watch"],
        }],
    }


def runtime_reader_binding(inventory: Inventory) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": metadata(inventory, RUNTIME_READER),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": RUNTIME_READER},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}],
    }


def rbac(inventory: Inventory) -> list[dict[str, Any]]:
    return [runtime_reader_role(inventory), runtime_reader_binding(inventory)]
