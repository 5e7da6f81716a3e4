"""The API groups the platform speaks and the kinds it writes: one row each, read by the builders (API
versions), the tree (folders), the gpugen Application (sync waves, its AppProject's whitelists) and `plan`
(immutable fields, report order).

A new kind in rendered/ is one row here and the builder that makes it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ApiGroup:
    name: str  # "" for the core API
    version: str  # the version of the pinned upstream release that gpugen writes and matches
    folder: str | None = None  # top-level folder of its objects in rendered/ and bootstrap/, named after the project

    @property
    def api_version(self) -> str:
        return f"{self.name}/{self.version}" if self.name else self.version


TRAINER = ApiGroup("trainer.kubeflow.org", "v1alpha1", "trainer")
KUEUE = ApiGroup("kueue.x-k8s.io", "v1beta2", "kueue")
KUEUE_CONFIG = ApiGroup("config.kueue.x-k8s.io", "v1beta2")  # Kueue's own configuration file, not an object
KYVERNO = ApiGroup("policies.kyverno.io", "v1", "kyverno")
RBAC = ApiGroup("rbac.authorization.k8s.io", "v1", "rbac")
ARGOCD = ApiGroup("argoproj.io", "v1alpha1", "argocd")
CORE = ApiGroup("", "v1", "core")
# The Prometheus Operator's CRDs, installed by the site (inventory cluster.monitoring).
MONITORING = ApiGroup("monitoring.coreos.com", "v1", "monitoring")
# Matched by policies, never written.
JOBSET = ApiGroup("jobset.x-k8s.io", "v1alpha2")
BATCH = ApiGroup("batch", "v1")

# The label the API server sets on every Namespace to its name: it cannot be forged, so selectors match on it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

GROUP_FOLDERS = {group.name: group.folder for group in (TRAINER, KUEUE, KYVERNO, RBAC, ARGOCD, CORE, MONITORING)}


@dataclass(frozen=True)
class Kind:
    group: ApiGroup
    kind: str
    namespaced: bool
    # Argo CD sync wave in the gpugen Application: guardrails first; flavors before the ClusterQueues that name
    # them, ClusterQueues before their LocalQueues (pruning runs last: builders/argocd.py, PruneLast).
    wave: str
    # Fields the API server refuses to change in place (CRD CEL `self == oldSelf` rules of the pinned versions):
    # Argo CD's sync fails on them; the object must be deleted and recreated.
    immutable_fields: tuple[str, ...] = ()
    # Rendered only for a platform of several clusters (inventory clusters:, inventory/clusters.py).
    several_clusters: bool = False


# The kinds in rendered/, in the order `plan` reports them (what users touch first) and the gpugen AppProject
# lists them. The gpugen AppProject allows exactly these, and nothing else may be rendered there.
SYNCED_KINDS: dict[str, Kind] = {k.kind: k for k in (
    Kind(TRAINER, "ClusterTrainingRuntime", False, "0", tuple(f"spec.template.spec.{name}" for name in (
        "failurePolicy", "network", "startupPolicy", "successPolicy", "volumeClaimPolicies"))
        + ("spec.template.spec.replicatedJobs[*].dependsOn",)),
    Kind(KUEUE, "WorkloadPriorityClass", False, "1"),
    Kind(KUEUE, "ResourceFlavor", False, "1", ("spec.topologyName",)),
    Kind(KUEUE, "ClusterQueue", False, "2"),
    Kind(KUEUE, "LocalQueue", True, "3", ("spec.clusterQueue",)),
    Kind(KYVERNO, "ValidatingPolicy", False, "-1"),
    Kind(KYVERNO, "MutatingPolicy", False, "-1"),
    Kind(KYVERNO, "DeletingPolicy", False, "-1"),
    Kind(RBAC, "ClusterRole", False, "0"),
    Kind(RBAC, "ClusterRoleBinding", False, "0"),
    Kind(CORE, "Namespace", False, "-2"),  # before everything that lives in one
    Kind(RBAC, "RoleBinding", True, "0"),
    # Read by the guardrails at admission: with them, after the namespaces.
    Kind(CORE, "ConfigMap", True, "-1"),
    # Only with cluster.monitoring: what the site's Prometheus scrapes and evaluates.
    Kind(MONITORING, "ServiceMonitor", True, "0"),
    Kind(MONITORING, "PrometheusRule", True, "0"),
    # Several clusters: on the manager, MultiKueue's check, its clusters and each group's list of them, before
    # the ClusterQueues that name the checks; on a worker, the identity the manager's Kueue acts as.
    Kind(KUEUE, "AdmissionCheck", False, "1", several_clusters=True),
    Kind(KUEUE, "MultiKueueConfig", False, "1", several_clusters=True),
    Kind(KUEUE, "MultiKueueCluster", False, "1", several_clusters=True),
    Kind(CORE, "ServiceAccount", True, "0", several_clusters=True),
)}


def project_whitelist(namespaced: bool, monitoring: bool, several_clusters: bool = False) -> tuple[dict[str, str], ...]:
    """The synced kinds of one scope as an AppProject's resource whitelist writes them; the Prometheus
    Operator's only where the inventory renders them (a cluster without its CRDs), MultiKueue's only for several
    clusters."""
    return tuple({"group": k.group.name, "kind": k.kind} for k in SYNCED_KINDS.values()
                 if k.namespaced == namespaced and (monitoring or k.group is not MONITORING)
                 and (several_clusters or not k.several_clusters))
