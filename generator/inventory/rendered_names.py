"""Every object name the render derives from the inventory, with the inventory field each comes from: what
rules.py (`_check_rendered_names`, the one check of collisions) compares.

Names come from several fields at once (a component's Application is `<cluster>-<component>`, the ApplicationSet's
Application of a cluster `<applicationName>-<cluster>`, a dashboard's ConfigMap a uid that may be hashed), so
two different spellings can meet only after rendering: the app-of-apps overwritten by a cluster's Application,
one group's namespace taken by another. Kubernetes would keep one object and Argo CD would fight over it, so such
an inventory is refused at load, naming both places in the file.

The objects listed are those whose name or namespace comes from the inventory, on the cluster they are applied
to: the synced tree (a worker's tree is part of the manager's, so only what differs on a worker is listed for it),
the app-of-apps (root and platform, both on the manager) and the Applications the ApplicationSet makes. Left out:
objects named by the code alone (Kyverno's policies, the ClusterRoles and their bindings, the chart repositories'
Secrets, Kueue's binding in kube-system), which cannot meet a name from the inventory.
`tests/unit/test_rendered_names.py` checks this list against the rendered objects.

Pure: inventory in, names out. The names themselves come from naming.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from generator.components import COMPONENTS
from generator.inventory import clusters
from generator.inventory.models import Inventory
from generator.inventory.contract import JOB_LIMITS
from generator.inventory.naming import (DEFAULT_LOCAL_QUEUE, GPUGEN_PROJECT, MULTIKUEUE_IDENTITY, PLATFORM_RULES,
                                        RESEARCHER, ROOT_PROJECT, cluster_tree_application_name,
                                        component_application_name, flavor_name, application_folders,
                                        group_rules_name, group_uid, platform_uid, project_name, root_application_name,
                                        runtime_name, synced_application_name)

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class RenderedName:
    cluster: str | None  # the cluster the object is applied to; None for an inventory of one cluster
    kind: str
    namespace: str | None  # None for a cluster-scoped object
    name: str
    source: Loc  # the inventory field the name (or namespace) comes from
    owner: str  # what the object is rendered for, in the inventory's words

    @property
    def key(self) -> tuple[str | None, str, str | None, str]:
        return self.cluster, self.kind, self.namespace, self.name

    def shown(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}" if self.namespace else f"{self.kind} {self.name}"


def rendered_names(inventory: Inventory) -> Iterator[RenderedName]:
    """The objects the render makes whose name or namespace comes from the inventory, the app-of-apps first."""
    yield from _argocd_names(inventory)
    yield from _synced_names(inventory)


def _synced_names(inventory: Inventory) -> Iterator[RenderedName]:
    several = clusters.several(inventory)
    here = _manager(inventory)

    def named(kind: str, namespace: str | None, name: str, source: Loc, owner: str) -> RenderedName:
        return RenderedName(here, kind, namespace, name, source, owner)

    for group_name, group in inventory.groups.items():
        owner = f"group {group_name!r}"
        for index, namespace in enumerate(group.namespaces):
            source = ("groups", group_name, "namespaces", index)
            if inventory.cluster.createNamespaces:
                yield named("Namespace", None, namespace, source, owner)
            yield named("LocalQueue", namespace, DEFAULT_LOCAL_QUEUE, source, owner)
            yield named("ConfigMap", namespace, JOB_LIMITS, source, owner)
            if group.identities.groups or group.identities.users:
                yield named("RoleBinding", namespace, RESEARCHER, source, owner)
    for class_name, gpu_class in inventory.classes.items():
        owner = f"class {class_name!r}"
        yield named("ClusterTrainingRuntime", None, runtime_name(class_name), ("classes", class_name), owner)
        yield named("ResourceFlavor", None, flavor_name(class_name, gpu_class),
                    ("classes", class_name) + (("flavor",) if gpu_class.flavor else ()), owner)
    for name in inventory.priorities:
        yield named("WorkloadPriorityClass", None, name, ("priorities", name), f"priority {name!r}")
    for group_name in inventory.groups:
        yield named("ClusterQueue", None, group_name, ("groups", group_name), f"group {group_name!r}")
    yield from _monitoring_names(inventory)
    if several:
        for group_name in inventory.groups:
            for kind in ("AdmissionCheck", "MultiKueueConfig"):
                yield named(kind, None, group_name, ("groups", group_name), f"group {group_name!r}")
        for worker in clusters.workers(inventory):
            yield named("MultiKueueCluster", None, worker, ("clusters", worker), f"worker {worker!r}")
            # What a worker's tree has beyond its share of the manager's: MultiKueue's identity in its own Kueue's
            # namespace.
            own = inventory.clusters[worker].components
            source = (("clusters", worker, "components", "kueue", "namespace") if own is not None and own.kueue
                      else ("cluster", "components", "kueue", "namespace"))
            yield RenderedName(worker, "ServiceAccount", clusters.components_on(inventory, worker).kueue.namespace,
                               MULTIKUEUE_IDENTITY, source, f"worker {worker!r}")


def _manager(inventory: Inventory) -> str | None:
    """The cluster Argo CD runs on: the manager of several (None while the rules find no single one), or the one."""
    managers = [name for name, member in (inventory.clusters or {}).items() if member.role == "manager"]
    return managers[0] if len(managers) == 1 else None


def _monitoring_names(inventory: Inventory) -> Iterator[RenderedName]:
    monitoring = inventory.cluster.monitoring
    if monitoring is None:
        return
    namespace = monitoring.namespace
    if monitoring.scrape != "none":
        for name, component in inventory.cluster.components.by_name().items():
            if component.install and COMPONENTS[name].chart.metrics is not None:
                yield RenderedName(None, "ServiceMonitor", namespace, name, ("cluster", "monitoring", "namespace"),
                                   f"component {name}")
    yield RenderedName(None, "PrometheusRule", namespace, PLATFORM_RULES, ("cluster", "monitoring"),
                       "the platform's rules")
    for group_name in inventory.groups:
        yield RenderedName(None, "PrometheusRule", namespace, group_rules_name(group_name), ("groups", group_name),
                           f"group {group_name!r}")
    if monitoring.dashboards:
        yield RenderedName(None, "ConfigMap", namespace, platform_uid(inventory), ("cluster", "name"),
                           "the platform's dashboard")
        for group_name in inventory.groups:
            yield RenderedName(None, "ConfigMap", namespace, group_uid(inventory, group_name), ("groups", group_name),
                               f"the dashboard of group {group_name!r}")


def _argocd_names(inventory: Inventory) -> Iterator[RenderedName]:
    """The app-of-apps (bootstrap/root and bootstrap/platform, applied to the cluster Argo CD runs on) and, for
    several clusters, the Applications the ApplicationSet makes there."""
    gitops = inventory.cluster.gitops
    argocd = gitops.applicationNamespace
    several = clusters.several(inventory)
    here = _manager(inventory)
    platform_name = ("cluster", "name")

    def named(kind: str, name: str, source: Loc, owner: str) -> RenderedName:
        return RenderedName(here, kind, argocd, name, source, owner)

    yield named("AppProject", project_name(inventory, ROOT_PROJECT), platform_name, "the app-of-apps")
    yield named("Application", root_application_name(inventory), platform_name, "the app-of-apps")
    for component in COMPONENTS:
        if several:
            installs = [(cluster, ("clusters", cluster)) for cluster in inventory.clusters
                        if getattr(clusters.components_on(inventory, cluster), component).install]
        else:
            installs = ([(inventory.cluster.name, platform_name)]
                        if getattr(inventory.cluster.components, component).install else [])
        if not installs:
            continue
        yield named("AppProject", project_name(inventory, component), platform_name, f"component {component}")
        for cluster, source in installs:
            on = f" on cluster {cluster!r}" if several else ""
            yield named("Application", component_application_name(cluster, component), source,
                        f"component {component}{on}")
    yield named("AppProject", project_name(inventory, GPUGEN_PROJECT), platform_name, "the gpugen Application")
    application = ("cluster", "gitops", "applicationName")
    if not several:
        folders = application_folders(inventory)
        if not folders:
            yield named("Application", gitops.applicationName, application, "the gpugen Application")
        for folder in folders:
            yield named("Application", synced_application_name(inventory, folder), application,
                        f"the Application of {folder}/")
        return
    yield named("ApplicationSet", gitops.applicationName, application, "the ApplicationSet of the clusters' trees")
    for cluster in inventory.clusters:
        yield named("Application", cluster_tree_application_name(inventory, cluster), ("clusters", cluster),
                    f"the ApplicationSet's Application for cluster {cluster!r}")
