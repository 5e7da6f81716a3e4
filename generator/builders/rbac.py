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
from generator.kinds import BATCH, CORE, JOBSET, KUEUE, RBAC, TRAINER
from generator.inventory.contract import JOB_LIMITS
from generator.inventory.naming import KUBE_SYSTEM, MULTIKUEUE_IDENTITY, RESEARCH_GROUP_LABEL, RESEARCHER

API_VERSION = RBAC.api_version
RBAC_GROUP = RBAC.name
RUNTIME_READER = "training-runtime-reader"
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


# On a worker of several clusters researchers only read: they submit and cancel on the manager, whose Kueue
# (MultiKueue) creates and deletes the copies here. Without create, a researcher who goes to a worker directly is
# refused by the API server.
SUBMIT_VERBS = {"create", "delete"}
RESEARCHER_RULES_ON_WORKER = [
    {**rule, "verbs": [verb for verb in rule["verbs"] if verb not in SUBMIT_VERBS]} for rule in RESEARCHER_RULES]

# The identity the manager's Kueue acts as on a worker (its token, in the manager's MultiKueue kubeconfig Secret,
# is made by hand): Kueue's own rules for a MultiKueue worker at the pinned version (test/util/multikueue.go,
# MultiKueueRulesForManager), for the integrations the platform enables (components/kueue/configuration.py:
# KUEUE_INTEGRATIONS).
_MULTIKUEUE_VERBS = ["create", "update", "patch", "delete", "get", "list", "watch"]
_INTEGRATION_RESOURCES = {"batch/job": (BATCH.name, "jobs"), "jobset.x-k8s.io/jobset": (JOBSET.name, "jobsets"),
                          "trainer.kubeflow.org/trainjob": (TRAINER.name, "trainjobs")}


def multikueue_worker_rules(integrations: tuple[str, ...]) -> list[dict[str, Any]]:
    rules = [
        {"apiGroups": [KUEUE.name], "resources": ["workloads"], "verbs": _MULTIKUEUE_VERBS},
        {"apiGroups": [KUEUE.name], "resources": ["workloads/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": [KUEUE.name], "resources": ["clusterqueues"], "verbs": READ},
        {"apiGroups": [KUEUE.name], "resources": ["localqueues"], "verbs": READ},
    ]
    for integration in integrations:
        group, resource = _INTEGRATION_RESOURCES[integration]
        rules += [{"apiGroups": [group], "resources": [resource], "verbs": _MULTIKUEUE_VERBS},
                  {"apiGroups": [group], "resources": [f"{resource}/status"], "verbs": ["get"]}]
    return rules


def multikueue_worker_identity(inventory: Inventory, integrations: tuple[str, ...]) -> list[dict[str, Any]]:
    """A ServiceAccount in Kueue's namespace, its ClusterRole and the binding of the two (cluster-wide, as
    Kueue's MultiKueue lists and watches Workloads in every namespace)."""
    namespace = inventory.cluster.components.kueue.namespace
    return [
        {"apiVersion": CORE.version, "kind": "ServiceAccount",
         "metadata": metadata(inventory, MULTIKUEUE_IDENTITY, namespace=namespace)},
        {"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": metadata(inventory, MULTIKUEUE_IDENTITY),
         "rules": multikueue_worker_rules(integrations)},
        {"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": metadata(inventory, MULTIKUEUE_IDENTITY),
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": MULTIKUEUE_IDENTITY},
         "subjects": [{"kind": "ServiceAccount", "name": MULTIKUEUE_IDENTITY, "namespace": namespace}]},
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


def researcher_role(inventory: Inventory, submit: bool = True) -> dict[str, Any]:
    """One ClusterRole for all groups; RoleBindings confine it to each group's namespaces. submit=False: a
    worker of several clusters (RESEARCHER_RULES_ON_WORKER)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(inventory, RESEARCHER),
        "rules": RESEARCHER_RULES if submit else RESEARCHER_RULES_ON_WORKER,
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
        "subjects": [{"kind": "ServiceAccount", "name": COMPONENTS["kueue"].service_account,
                      "namespace": kueue.namespace}],
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


def rbac(inventory: Inventory, submit: bool = True) -> list[dict[str, Any]]:
    """submit=False: a worker of several clusters, where researchers only read."""
    return [runtime_reader_role(inventory), runtime_reader_binding(inventory), researcher_role(inventory, submit),
            *researcher_bindings(inventory), *metrics_reader(inventory)]
