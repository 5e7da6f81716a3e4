"""Names the platform derives from the inventory: one place for each, used by the rules, builders and docs."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from decimal import Decimal

from generator.components import COMPONENTS
from generator.inventory import clusters, duration
from generator.inventory.models import Allocation, GpuClass, Group, Inventory
from generator.inventory.quantity import parse_quantity

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


# --- Names of rendered objects (inventory/rendered_names.py checks that no two collide) --------------------

# The LocalQueue of every research namespace: Kueue labels a job that names no queue with it.
DEFAULT_LOCAL_QUEUE = "default"
# The researcher ClusterRole, and its RoleBinding in each research namespace.
RESEARCHER = "researcher"
# The identity the manager's Kueue acts as on a worker: a ServiceAccount in Kueue's namespace, its ClusterRole and
# their binding.
MULTIKUEUE_IDENTITY = "multikueue"
# The PrometheusRule of the platform's rules; each group's is group_rules_name(group).
PLATFORM_RULES = "platform"


def group_rules_name(group_name: str) -> str:
    return f"group-{group_name}"


# Grafana refuses a dashboard uid longer than this, or with characters other than these.
UID_MAX = 40
_UID_CHARACTERS = re.compile(r"^[a-zA-Z0-9_-]+$")


def _uid(readable: str, taken: frozenset[str] = frozenset()) -> str:
    """`readable` when Grafana accepts it as a uid and it is free; else a prefix of it and a hash of all of it."""
    if len(readable) <= UID_MAX and _UID_CHARACTERS.match(readable) and readable not in taken:
        return readable
    digest = hashlib.sha256(readable.encode()).hexdigest()[:12]
    prefix = re.sub(r"[^a-zA-Z0-9_-]", "-", readable)[:UID_MAX - len(digest) - 1]
    return f"{prefix}-{digest}"


def platform_uid(inventory: Inventory) -> str:
    """The platform dashboard's uid, and its ConfigMap's name."""
    return _uid(f"gpugen-{inventory.cluster.name}-platform")


def group_uid(inventory: Inventory, group_name: str) -> str:
    """A group dashboard's uid, and its ConfigMap's name."""
    # A group named "platform" must not take the platform dashboard's uid.
    return _uid(f"gpugen-{inventory.cluster.name}-{group_name}", frozenset({platform_uid(inventory)}))


# Argo CD: per app ("bootstrap" for the app-of-apps, a component, "gpugen") an AppProject named after the platform.
ROOT_PROJECT = "bootstrap"
GPUGEN_PROJECT = "gpugen"


def project_name(inventory: Inventory, app: str) -> str:
    return f"{inventory.cluster.name}-{app}"


def root_application_name(inventory: Inventory) -> str:
    """The app-of-apps, applied once by hand: it syncs bootstrap/platform."""
    return f"{inventory.cluster.name}-platform"


def component_application_name(cluster: str, component: str) -> str:
    """A component's Application on `cluster` (the platform's name for one cluster, a cluster's for several)."""
    return f"{cluster}-{component}"


def cluster_tree_application_name(inventory: Inventory, cluster: str) -> str:
    """Several clusters: the Application the ApplicationSet makes for `cluster`, which syncs its tree."""
    return f"{inventory.cluster.gitops.applicationName}-{cluster}"


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
    """Namespaces of the platform's controllers (installed or adopted), of Kubernetes itself, of Argo CD and of the
    site's monitoring: never a research namespace."""
    monitoring = inventory.cluster.monitoring
    settings = [inventory.cluster.components,
                *(clusters.components_on(inventory, name) for name in inventory.clusters or ())]
    return sorted({component.namespace for components in settings for component in components.by_name().values()}
                  | set(SYSTEM_NAMESPACES) | {inventory.cluster.gitops.applicationNamespace}
                  | ({monitoring.namespace} if monitoring else set()))


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


# --- The research-computing contract: what each group's jobs may ask for -----------------------------------

# The ConfigMap in each research namespace that tells the guardrails, at admission, the group's limits.
JOB_LIMITS = "job-limits"


def allowed_priorities(inventory: Inventory, group: Group) -> list[str]:
    """The priority classes the group's jobs may name, in the inventory's order of `priorities`."""
    if group.priorities is None:
        return list(inventory.priorities)
    return [name for name in inventory.priorities if name in group.priorities]


def default_priority(inventory: Inventory, group: Group) -> str | None:
    """The priority class a job of the group gets when it names none (None: the inventory has no priorities)."""
    if group.defaultPriority is not None:
        return group.defaultPriority
    return next((name for name, priority in inventory.priorities.items() if priority.default), None)


def walltime_seconds(inventory: Inventory, group: Group, class_name: str) -> tuple[int, int]:
    """(default, maximum) run time in seconds of the group's jobs on the class: the group's override, else the
    class's."""
    class_walltime = inventory.classes[class_name].walltime
    override = group.walltime.get(class_name)
    default = override.default if override and override.default else class_walltime.default
    maximum = override.maximum if override and override.maximum else class_walltime.maximum
    return duration.seconds(default), duration.seconds(maximum)


def reachable(inventory: Inventory, resource: str) -> dict[tuple[str, str], Decimal]:
    """(group, class) -> the most of `resource` on the class the group's jobs can ever hold at once: its nominal
    quota plus what its cohort could lend it (each other member's lending limit, else its nominal quota), within
    its borrowing limit. A job asking for more waits forever: Kueue never admits it. Linear in the allocations:
    each cohort's lendable total is summed once."""
    def lendable(allocation: Allocation, gpu_class: GpuClass) -> Decimal:
        limit = getattr(allocation.lendingLimit, resource, None) if allocation.lendingLimit else None
        return parse_quantity(str(limit)) if limit is not None else allocated_amount(allocation, resource, gpu_class)

    cohort_total: dict[tuple[str, str], Decimal] = {}
    for group in inventory.groups.values():
        if group.cohort is None:
            continue
        for class_name, allocation in group.allocations.items():
            key = (group.cohort, class_name)
            cohort_total[key] = cohort_total.get(key, Decimal(0)) + lendable(allocation, inventory.classes[class_name])
    reach = {}
    for group_name, group in inventory.groups.items():
        for class_name, allocation in group.allocations.items():
            gpu_class = inventory.classes[class_name]
            own = allocated_amount(allocation, resource, gpu_class)
            if group.cohort is None:
                reach[(group_name, class_name)] = own
                continue
            borrowable = cohort_total[(group.cohort, class_name)] - lendable(allocation, gpu_class)
            limit = getattr(allocation.borrowingLimit, resource, None) if allocation.borrowingLimit else None
            if limit is not None:
                borrowable = min(borrowable, parse_quantity(str(limit)))
            reach[(group_name, class_name)] = own + borrowable
    return reach


def allocated_amount(allocation: Allocation, resource: str, gpu_class: GpuClass) -> Decimal:
    """A group's nominal quota of one inventory resource field on a class (pods as allocated_pods says)."""
    if resource == "pods":
        return Decimal(allocated_pods(allocation, gpu_class))
    return parse_quantity(str(getattr(allocation, resource)))
