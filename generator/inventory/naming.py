"""Names the platform derives from the inventory: one place for each, used by the rules, builders and docs."""

from __future__ import annotations

from dataclasses import dataclass

from generator.components import COMPONENTS
from generator.inventory.models import Allocation, GpuClass, Inventory

# Annotation on each ResourceFlavor naming the inventory class it serves (read back by `plan`).
GPU_CLASS_ANNOTATION = "gpugen/gpu-class"
# Label on each research Namespace and RoleBinding naming the inventory group it belongs to.
RESEARCH_GROUP_LABEL = "gpugen/research-group"

# Inventory resource field -> the Kubernetes resource name it is a quota of. The dict's order is the order
# ClusterQueues cover them in (Kueue wants every flavor to list its resources in exactly that order).
KUBERNETES_RESOURCE = {"cpu": "cpu", "memory": "memory", "gpus": "nvidia.com/gpu", "pods": "pods"}
GPU_RESOURCE = KUBERNETES_RESOURCE["gpus"]


def flavor_name(name: str, gpu_class: GpuClass) -> str:
    return gpu_class.flavor or name


def runtime_name(class_name: str) -> str:
    return f"torch-{class_name}"


def allocated_pods(allocation: Allocation, gpu_class: GpuClass) -> int:
    """Pods quota: explicit, or the share of the class's pod slots that matches the GPU share."""
    if allocation.pods is not None:
        return allocation.pods
    per_node = gpu_class.perNode
    return allocation.gpus * per_node.pods // per_node.gpus


# The label the API server sets on every Namespace to its name: it cannot be forged, so selectors match on it.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# Namespaces of the cluster itself: never a research namespace.
KUBE_SYSTEM = "kube-system"
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", KUBE_SYSTEM)


def research_namespaces(inventory: Inventory) -> list[str]:
    """Every group's namespaces, sorted (rules.py keeps them unique across groups)."""
    return sorted({ns for group in inventory.groups.values() for ns in group.namespaces})


def reserved_namespaces(inventory: Inventory) -> list[str]:
    """Namespaces of the platform's controllers (installed or adopted), of Kubernetes itself and of Argo CD: never a
    research namespace."""
    return sorted({component.namespace for component in inventory.cluster.components.by_name().values()}
                  | set(SYSTEM_NAMESPACES) | {inventory.cluster.gitops.applicationNamespace})


@dataclass(frozen=True)
class ControllerIdentities:
    kueue: str
    trainer: str
    jobset: str
    job: str


def controller_identities(inventory: Inventory) -> ControllerIdentities:
    """The username each controller acts as: the inventory's override, else its chart's service account
    (components.COMPONENTS)."""
    controllers, components = inventory.cluster.controllers, inventory.cluster.components.by_name()

    def identity(name: str) -> str:
        explicit = getattr(controllers, name)
        if explicit:
            return explicit
        return f"system:serviceaccount:{components[name].namespace}:{COMPONENTS[name].service_account}"
    return ControllerIdentities(kueue=identity("kueue"), trainer=identity("trainer"), jobset=identity("jobset"),
                                job=controllers.job)
