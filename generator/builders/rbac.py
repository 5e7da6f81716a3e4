"""RBAC (rbac.authorization.k8s.io/v1): what every user and what each research group may do.

- Every authenticated user may read the ClusterTrainingRuntimes: the seed page tells users to run
  `kubectl get clustertrainingruntimes` and `TrainerClient().list_runtimes()`.
- In each research namespace, the group's identities are bound to one researcher ClusterRole. Nothing here
  grants create on TrainingRuntimes or ClusterTrainingRuntimes: only platform admins (cluster-admin) make
  runtimes, because a namespaced runtime named like a cluster runtime shadows it in the SDK's list_runtimes().
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.components import COMPONENTS
from generator.inventory.models import Group, Inventory
from generator.kinds import BATCH, CORE, KUEUE, RBAC, TRAINER
from generator.inventory.naming import JOB_LIMITS, KUBE_SYSTEM, RESEARCH_GROUP_LABEL

API_VERSION = RBAC.api_version
RBAC_GROUP = RBAC.name
RUNTIME_READER = "training-runtime-reader"
RESEARCHER = "researcher"
KUEUE_VISIBILITY = "visibility.kueue.x-k8s.io"  # Kueue's aggregated API of pending workloads

READ = ["get", "list", "watch"]
# Exactly what a researcher needs, and nothing more:
RESEARCHER_RULES = [
    # Submit, follow and cancel their jobs; no update or patch (placement and queue are the platform's).
    {"apiGroups": [TRAINER.name], "resources": ["trainjobs"],
     "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [BATCH.name], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
    # kubeflow 0.5's list_runtimes() and train(runtime=...) read namespaced runtimes first and raise on 403.
    {"apiGroups": [TRAINER.name], "resources": ["trainingruntimes"], "verbs": READ},
    # Their place in the queue: their Workloads, and Kueue's visibility API for the pending ones ahead of them
    # (kubectl get --raw .../localqueues/default/pendingworkloads), in their own namespaces only.
    {"apiGroups": [KUEUE.name], "resources": ["localqueues", "workloads"], "verbs": READ},
    {"apiGroups": [KUEUE_VISIBILITY], "resources": ["localqueues/pendingworkloads"], "verbs": ["get"]},
    # Their group's limits (priorities, walltimes, the most GPUs it can hold), as the guardrails read them.
    {"apiGroups": [CORE.name], "resources": ["configmaps"], "resourceNames": [JOB_LIMITS], "verbs": ["get"]},
    # Pods, their logs and events, for the SDK's get_job(), get_job_logs() and get_job_events().
    {"apiGroups": [CORE.name], "resources": ["pods", "pods/log", "events"], "verbs": READ},
]


def runtime_reader_role(inventory: Inventory) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(inventory, RUNTIME_READER),
        "rules": [{
            "apiGroups": [TRAINER.name],
            "resources": ["clustertrainingruntimes"],
            "verbs": READ,
        }],
    }


def runtime_reader_binding(inventory: Inventory) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": metadata(inventory, RUNTIME_READER),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": RUNTIME_READER},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": "system:authenticated"}],
    }


def researcher_role(inventory: Inventory) -> dict[str, Any]:
    """One ClusterRole for all groups; RoleBindings confine it to each group's namespaces."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(inventory, RESEARCHER),
        "rules": RESEARCHER_RULES,
    }


def researcher_subjects(group: Group) -> list[dict[str, str]]:
    return ([{"apiGroup": RBAC_GROUP, "kind": "Group", "name": name} for name in group.identities.groups]
            + [{"apiGroup": RBAC_GROUP, "kind": "User", "name": name} for name in group.identities.users])


def researcher_bindings(inventory: Inventory) -> list[dict[str, Any]]:
    """Per research namespace, the group's identities bound to the researcher role; none for a group
    without identities (only platform admins act there)."""
    bindings = []
    for group_name, group in inventory.groups.items():
        subjects = researcher_subjects(group)
        if not subjects:
            continue
        for namespace in group.namespaces:
            bindings.append({
                "apiVersion": API_VERSION,
                "kind": "RoleBinding",
                "metadata": metadata(inventory, RESEARCHER, namespace=namespace,
                                     labels={RESEARCH_GROUP_LABEL: group_name}),
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": RESEARCHER},
                "subjects": subjects,
            })
    return bindings


def kueue_visibility_auth_reader(inventory: Inventory) -> list[dict[str, Any]]:
    """Kueue's visibility API server reads the API server's client-CA ConfigMap in kube-system. Its chart would
    bind that itself, outside the Kueue Application's project; the binding is rendered by gpugen instead, with
    the chart's name and subject (builders/bootstrap.py switches the chart's copy off and puts this one in the
    app-of-apps, ahead of Kueue: Kueue's APIService is not Available, and so its Application not Healthy, until
    the visibility server can authenticate the API server's requests)."""
    kueue = inventory.cluster.components.kueue
    if not kueue.install:
        return []
    return [{
        "apiVersion": API_VERSION,
        "kind": "RoleBinding",
        "metadata": metadata(inventory, "kueue-visibility-server-auth-reader", namespace=KUBE_SYSTEM),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "extension-apiserver-authentication-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": COMPONENTS["kueue"].service_account, "namespace": kueue.namespace}],
    }]


METRICS_READER = "metrics-reader"


def metrics_reader(inventory: Inventory) -> list[dict[str, Any]]:
    """The site's Prometheus may GET /metrics: the controllers' https metrics endpoints (controller-runtime's
    authorizing filter) ask the API server whether the scraper's token may, with a SubjectAccessReview."""
    monitoring = inventory.cluster.monitoring
    if monitoring is None or monitoring.scrape == "none":
        return []
    return [
        {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": metadata(inventory, METRICS_READER),
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]},
        {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": metadata(inventory, METRICS_READER),
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": METRICS_READER},
         "subjects": [{"kind": "ServiceAccount", "name": monitoring.prometheusServiceAccount,
                       "namespace": monitoring.namespace}]},
    ]


def rbac(inventory: Inventory) -> list[dict[str, Any]]:
    return [runtime_reader_role(inventory), runtime_reader_binding(inventory), researcher_role(inventory),
            *researcher_bindings(inventory), *metrics_reader(inventory)]
