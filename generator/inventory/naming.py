"""Names the platform derives from the inventory: one place for each, used by the rules, builders and docs."""

from __future__ import annotations

import hashlib
import re
from dataclasses import make_dataclass

from generator.components import COMPONENTS
from generator.inventory import clusters
from generator.inventory.models import GpuClass, Inventory

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


# The folder of the synced tree that holds the platform's shared objects when the groups' objects are in Applications
# of their own (cluster.gitops.groupApplications).
PLATFORM_FOLDER = "platform"


def group_application(inventory: Inventory, group_name: str) -> int:
    """The index of the Application that syncs a group's objects (cluster.gitops.groupApplications): a hash of the
    group's name alone, so adding or removing another group never moves it."""
    count = inventory.cluster.gitops.groupApplications or 1
    return int(hashlib.sha256(group_name.encode("utf-8")).hexdigest(), 16) % count


def group_application_folder(inventory: Inventory, index: int) -> str:
    """The synced tree's folder of the index-th groups' Application: groups-<k>-of-<N>, k zero-padded. N is in the
    name so that another N renames every groups' Application: the old ones are deleted without their objects, which
    the new ones adopt (docs/scale.md), where a kept name would prune the groups that leave it."""
    count = inventory.cluster.gitops.groupApplications or 1
    return f"groups-{index:0{len(str(count - 1))}d}-of-{count}"


def application_folders(inventory: Inventory) -> list[str]:
    """The folders of a synced tree of one cluster split into Applications, the platform's first; [] when one
    Application syncs it all (no cluster.gitops.groupApplications, or several clusters: a tree per cluster)."""
    count = inventory.cluster.gitops.groupApplications
    if count is None or clusters.several(inventory):
        return []
    return [PLATFORM_FOLDER, *(group_application_folder(inventory, index) for index in range(count))]


def synced_application_name(inventory: Inventory, folder: str) -> str:
    """The Application that syncs a folder of a split tree: <applicationName>-<folder>. None keeps the name of the
    whole tree's Application, so that splitting or joining the tree renames them all (docs/scale.md)."""
    return f"{inventory.cluster.gitops.applicationName}-{folder}"


def cluster_tree_application_name(inventory: Inventory, cluster: str) -> str:
    """Several clusters: the Application the ApplicationSet makes for `cluster`, which syncs its tree."""
    return f"{inventory.cluster.gitops.applicationName}-{cluster}"


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


# The username of each component's controller the policies recognise (its facts name a service account), and of
# Kubernetes' Job controller: .kueue, .trainer, .jobset, .job.
ControllerIdentities = make_dataclass(
    "ControllerIdentities", [*(name for name, facts in COMPONENTS.items() if facts.service_account), "job"],
    frozen=True)


def controller_identities(inventory: Inventory) -> ControllerIdentities:
    """The username each controller acts as: the inventory's override (cluster.controllers), else its chart's
    service account (generator/components/<name>/)."""
    controllers, components = inventory.cluster.controllers, inventory.cluster.components.by_name()

    def identity(name: str) -> str:
        explicit = getattr(controllers, name, None)
        if explicit:
            return explicit
        return f"system:serviceaccount:{components[name].namespace}:{COMPONENTS[name].service_account}"
    return ControllerIdentities(**{name: identity(name) for name in COMPONENTS if COMPONENTS[name].service_account},
                                job=controllers.job)
