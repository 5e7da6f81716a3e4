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
from generator.kinds import KUEUE, NAMESPACE_NAME_LABEL
from generator.inventory import accelerators
from generator.inventory.contract import allocated_pods
from generator.inventory.naming import DEFAULT_LOCAL_QUEUE, GPU_CLASS_ANNOTATION, KUBERNETES_RESOURCE, flavor_name

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

