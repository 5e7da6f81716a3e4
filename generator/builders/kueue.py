"""Kueue (kueue.x-k8s.io/v1beta2): a ResourceFlavor per GPU class, a ClusterQueue per research group,
a LocalQueue named `default` in each group namespace.

Kueue tries a ClusterQueue's flavors in order and skips those whose nodeLabels conflict with a pod's
nodeSelector; the flavor's nodeLabels are exactly the runtime's nodeSelector, so picking torch-<class>
picks that class's flavor. A LocalQueue named `default` makes Kueue label unlabelled jobs itself.
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.inventory.models import Allocation, GpuClass, Group, Inventory, Priority, ResourceAmounts
from generator.kinds import KUEUE, KUEUE_CONFIG
from generator.inventory import accelerators
from generator.inventory.contract import allocated_pods
from generator.inventory.naming import (DEFAULT_LOCAL_QUEUE, GPU_CLASS_ANNOTATION, KUBERNETES_RESOURCE,
                                        NAMESPACE_NAME_LABEL, flavor_name, research_namespaces)

API_VERSION = KUEUE.api_version
def covered_resources(inventory: Inventory, group: Group) -> list[str]:
    """What a group's ClusterQueue covers, in this order: cpu, memory, the accelerator resource of each of its
    classes, pods. One resource group: `pods` gives every pod set a flavor even when it asks for no accelerator, a
    resource sits in at most one group and CPU and memory are every flavor's. Each flavor lists them in exactly
    this order (Kueue's webhook) and gives the other classes' accelerators a quota of 0: a job asking for one
    class's accelerator never fits another class's flavor."""
    held = {accelerators.resource(inventory.classes[name]) for name in group.allocations if name in inventory.classes}
    covered = []
    for field, resource in KUBERNETES_RESOURCE.items():
        covered += [r for r in accelerators.resources(inventory) if r in held] if field == "gpus" else [resource]
    return covered


def resource_flavor(inventory: Inventory, class_name: str, gpu_class: GpuClass) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": dict(sorted(gpu_class.nodeSelector.items()))}
    if gpu_class.tolerations:
        # Kueue adds these on admission, so plain Jobs admitted on this flavor tolerate the class's taints too.
        spec["tolerations"] = [t.model_dump(exclude_none=True) for t in gpu_class.tolerations]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": metadata(inventory, flavor_name(class_name, gpu_class),
                             annotations={GPU_CLASS_ANNOTATION: class_name}),
        "spec": spec,
    }


def _flavor_resources(inventory: Inventory, class_name: str, allocation: Allocation,
                      covered: list[str]) -> list[dict[str, Any]]:
    own = accelerators.resource(inventory.classes[class_name])
    field_of = {resource: field for field, resource in KUBERNETES_RESOURCE.items() if field != "gpus"} | {own: "gpus"}
    resources = []
    for resource in covered:
        field = field_of.get(resource)
        if field is None:  # another class's accelerator
            resources.append({"name": resource, "nominalQuota": "0"})
            continue
        nominal = allocated_pods(inventory, class_name, allocation) if field == "pods" else getattr(allocation, field)
        entry: dict[str, Any] = {"name": resource, "nominalQuota": str(nominal)}
        for kind in ("borrowingLimit", "lendingLimit"):
            limits: ResourceAmounts | None = getattr(allocation, kind)
            value = getattr(limits, field) if limits else None
            if value is not None:
                entry[kind] = str(value)
        resources.append(entry)
    return resources


def cluster_queue(inventory: Inventory, group_name: str, group: Group, admission_check: str | None = None
                  ) -> dict[str, Any]:
    """`admission_check`: the check every workload of the queue must pass, for all its flavors (MultiKueue's,
    on the manager of several clusters: Kueue refuses one limited to some flavors)."""
    covered = covered_resources(inventory, group)
    flavors = [
        {"name": flavor_name(class_name, inventory.classes[class_name]),
         "resources": _flavor_resources(inventory, class_name, allocation, covered)}
        for class_name, allocation in sorted(group.allocations.items())
    ]
    spec: dict[str, Any] = {}
    if group.cohort:
        spec["cohortName"] = group.cohort
    # Explicit: a null selector admits no namespace, {} admits all.
    spec["namespaceSelector"] = {"matchExpressions": [{
        "key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(group.namespaces),
    }]}
    spec["resourceGroups"] = [{"coveredResources": covered, "flavors": flavors}]
    # Server-side defaults (Kueue v1beta2 CRD), written out so Argo CD sees no drift.
    spec["queueingStrategy"] = "BestEffortFIFO"
    spec["stopPolicy"] = "None"
    spec["preemption"] = {
        # Kueue ignores borrowWithinCohort under fair sharing, and refuses it with reclaimWithinCohort: Never.
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": group.reclaimWithinCohort,
        "withinClusterQueue": group.preemptWithinGroup,
    }
    spec["flavorFungibility"] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    if inventory.cluster.queueing.fairSharing:
        spec["fairSharing"] = {"weight": str(group.weight)}
    if admission_check is not None:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": admission_check}]}
    annotations = {"gpugen/description": group.description} if group.description else None
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": metadata(inventory, group_name, annotations=annotations),
        "spec": spec,
    }


def local_queue(inventory: Inventory, group_name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": metadata(inventory, DEFAULT_LOCAL_QUEUE, namespace=namespace),
        "spec": {"clusterQueue": group_name, "stopPolicy": "None"},
    }


def workload_priority_class(inventory: Inventory, name: str, priority: Priority) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": metadata(inventory, name),
        "value": priority.value,
    }
    if priority.description:
        obj["description"] = priority.description
    return obj


def workload_priority_classes(inventory: Inventory) -> list[dict[str, Any]]:
    return [workload_priority_class(inventory, name, priority)
            for name, priority in sorted(inventory.priorities.items())]


def resource_flavors(inventory: Inventory) -> list[dict[str, Any]]:
    return [resource_flavor(inventory, name, gpu_class) for name, gpu_class in sorted(inventory.classes.items())]


def cluster_queues(inventory: Inventory, multikueue: bool = False) -> list[dict[str, Any]]:
    """multikueue: each queue names its group's MultiKueue check (the manager of several clusters)."""
    return [cluster_queue(inventory, name, group, name if multikueue else None)
            for name, group in sorted(inventory.groups.items())]


# MultiKueue (several clusters, docs/multi-cluster.md): on the manager, per group an AdmissionCheck and a
# MultiKueueConfig named like its ClusterQueue, and per worker a MultiKueueCluster whose kubeconfig is in the
# Secret MULTIKUEUE_SECRET_PREFIX<worker> of Kueue's namespace, made by hand (credentials are never rendered).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
MULTIKUEUE_SECRET_PREFIX = "multikueue-"


def multikueue_admission_check(inventory: Inventory, group_name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": metadata(inventory, group_name),
        "spec": {"controllerName": MULTIKUEUE_CONTROLLER,
                 "parameters": {"apiGroup": KUEUE.name, "kind": "MultiKueueConfig", "name": group_name}},
    }


def multikueue_config(inventory: Inventory, group_name: str, workers: list[str]) -> dict[str, Any]:
    """`workers`: where the group holds allocations, in the inventory's order (the Incremental dispatcher's)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "MultiKueueConfig",
        "metadata": metadata(inventory, group_name),
        "spec": {"clusters": list(workers)},
    }


def multikueue_cluster(inventory: Inventory, worker: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "MultiKueueCluster",
        "metadata": metadata(inventory, worker),
        "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                  "location": MULTIKUEUE_SECRET_PREFIX + worker}}},
    }


def local_queues(inventory: Inventory) -> list[dict[str, Any]]:
    return [local_queue(inventory, name, namespace)
            for name, group in sorted(inventory.groups.items()) for namespace in sorted(group.namespaces)]


# Kueue's manager Configuration (config.kueue.x-k8s.io/v1beta2), rendered into the Kueue Application's Helm
# values. The chart's stock configuration enables the pod, deployment, statefulset and LeaderWorkerSet
# integrations: with a `default` LocalQueue in a research namespace, every notebook pod or Deployment there would
# be queued and pinned to a GPU flavor. Only the job kinds the platform runs are enabled:
# - batch/job: plain Jobs share the group's quota;
# - trainer.kubeflow.org/trainjob: the TrainJob is the workload;
# - jobset.x-k8s.io/jobset: a TrainJob's JobSet and that JobSet's Jobs must be recognised as owned by a
#   Kueue-managed parent. Kueue skips queue-name defaulting only for a job whose controller owner is of an
#   ENABLED integration (jobframework.IsOwnerManagedByKueueForObject); without this one, the Jobs of an admitted
#   TrainJob's JobSet would get the `default` queue label and be queued a second time.
KUEUE_INTEGRATIONS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
CONFIG_API_VERSION = KUEUE_CONFIG.api_version
# Kueue's documented default: preempt a borrower only while the reclaiming group's share, with its job, stays at
# or under the borrower's share without the preempted job; failing that, while it stays under the borrower's.
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


# MultiKueue's dispatcher on a manager: every worker of the group's MultiKueueConfig gets a copy at once, and the
# first to admit it keeps it. Only the worker with the job's class can admit it (its runtime's nodeSelector matches
# no other worker's flavor), so the order of the workers does not matter.
MULTIKUEUE_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"


def manager_configuration(inventory: Inventory, multikueue_manager: bool = False) -> dict[str, Any]:
    """Kueue's Configuration: the chart's defaults for serving and leader election, the platform's job policy;
    on the manager of several clusters, MultiKueue's settings written out (Kueue's defaults but the timeout)."""
    kueue = inventory.cluster.components.kueue
    multikueue = {"multiKueue": {"gcInterval": "1m", "origin": "multikueue",
                                 "workerLostTimeout": kueue.workerLostTimeout,
                                 "dispatcherName": MULTIKUEUE_DISPATCHER}} if multikueue_manager else {}
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": "Configuration",
        # Kueue defaults this to kueue-system; its webhook certificate Secret and leader-election Lease live here.
        "namespace": kueue.namespace,
        "health": {"healthProbeBindAddress": ":8081"},
        # The usage per ClusterQueue, flavor and resource that the accounting integrates is reported only when
        # asked for.
        "metrics": {"bindAddress": ":8443",
                    **({"enableClusterQueueResources": True} if inventory.cluster.monitoring else {})},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 300, "burst": 500},
        # Queue names come from the `default` LocalQueue of each research namespace; a job anywhere else, or one
        # without a queue where no `default` LocalQueue exists, is not Kueue's business.
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": research_namespaces(inventory)}]},
        # A job whose pods cannot start (image pull, missing claim) gives its quota back after the timeout and is
        # requeued with backoff, instead of holding GPUs it does not use.
        "waitForPodsReady": {
            "timeout": kueue.podsReadyTimeout,
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
        **({"fairSharing": {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}}
           if inventory.cluster.queueing.fairSharing else {}),
        **multikueue,
    }
