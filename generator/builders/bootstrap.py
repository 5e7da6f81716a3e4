"""The platform's components as Argo CD objects: an app-of-apps installing Kyverno, JobSet, Trainer and Kueue from
their upstream Helm charts at the pinned versions, with values from the inventory, then the gpugen Application.

bootstrap/
  root/       applied once by hand (README, "Bootstrapping a new cluster"): the bootstrap AppProject, then the root
              Application, which syncs bootstrap/platform
  platform/   one AppProject and one Application per component, the chart repositories, and the gpugen
              Application (last wave)

Order: the root Application syncs its children in sync waves, so CRDs and webhooks are there before the objects
that need them: JobSet, then Trainer (its controller watches JobSets), then Kueue (its TrainJob and JobSet
integrations start with their CRDs present) together with Kyverno (which needs no other component: sharing Kueue's
wave overlaps the two longest installs, both dominated by their CRDs), then gpugen. Argo CD waits for a child
Application to be Healthy before the next wave only when its Application health check is enabled (argocd-cm
`resource.customizations.health.argoproj.io_Application`; README: "Bootstrapping a cluster"); without it the
gpugen Application still converges through SkipDryRunOnMissingResource and its retry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from generator.builders import argocd, rbac
from generator.builders.common import metadata
from generator.components import COMPONENTS
from generator.components.facts import Role, ValuesContext
from generator.layout import KUSTOMIZATION_FILE
from generator.inventory import clusters
from generator.inventory.naming import (GPUGEN_PROJECT, KUBE_SYSTEM, ROOT_PROJECT, application_folders,
                                        cluster_tree_application_name, component_application_name, project_name,
                                        research_namespaces, root_application_name, synced_application_name)
from generator.inventory.models import Component, Inventory
from generator.kinds import RBAC, project_whitelist

COMPONENT_LABEL = "gpugen/component"
# The gpugen Application's wave: after every component (components.COMPONENTS gives theirs). A tree split into
# Applications (cluster.gitops.groupApplications): the platform's at GPUGEN_WAVE, the groups' after it, so that the
# guardrails are there before a research namespace is.
GPUGEN_WAVE = "10"
GROUPS_WAVE = "11"


def components(inventory: Inventory) -> dict[str, Component]:
    """The components gpugen installs, in install order."""
    return {name: component for name, component in inventory.cluster.components.by_name().items()
            if component.install}


def unchecked(inventory: Inventory) -> list[str]:
    """What the project's own checks cannot see of the installed components, one sentence each (`render` says
    them): a chart that comes only from its repository, a component the simulated clusters do not run."""
    notes = []
    for name in components(inventory):
        facts = COMPONENTS[name]
        if not facts.chart.module:
            notes.append(f"component {name}: its chart comes only from {facts.chart.repo_url}, which no pinned Go "
                         "module ships: the chart tier (helm template into a strict API server) and the simulated "
                         "clusters cannot render it, so its Helm values and the kinds its AppProject allows are "
                         "checked by Argo CD alone, at sync")
        if facts.simulated() is None:
            notes.append(f"component {name}: the simulated clusters do not run it ({facts.simulation.why})")
    return notes


def chart_version(component: str) -> str:
    return COMPONENTS[component].chart_version()


def app_version(component: str) -> str:
    return COMPONENTS[component].app_version()


def values_context(inventory: Inventory, name: str, role: Role | None = None) -> ValuesContext:
    """What the component's Helm values may read of the cluster. `role`: for one cluster of several, its role there,
    with `inventory` the cluster's own view of it (clusters.worker_view)."""
    return ValuesContext(settings=inventory.cluster.components.by_name()[name], app_version=app_version(name),
                         role=role, research_namespaces=tuple(research_namespaces(inventory)),
                         monitoring=inventory.cluster.monitoring is not None,
                         fair_sharing=inventory.cluster.queueing.fairSharing)


def helm_values(inventory: Inventory, name: str, role: Role | None = None) -> dict[str, Any]:
    """The component's Helm values, as its folder's values(cluster) gives them; none: the chart's defaults."""
    values = COMPONENTS[name].values
    return dict(values(values_context(inventory, name, role))) if values else {}


# ------------------------------------------------------------------ Argo CD objects

def _waved(meta: dict[str, Any], wave: str) -> dict[str, Any]:
    return {**meta, "annotations": dict(sorted({**meta.get("annotations", {}), argocd.SYNC_WAVE: wave}.items()))}


def app_project(inventory: Inventory, app: str, destinations: list[str], cluster_kinds, namespaced_kinds,
                wave: str) -> dict[str, Any]:
    gitops = inventory.cluster.gitops
    spec: dict[str, Any] = {
        "description": f"gpugen: what the {app} Application may change",
        "sourceRepos": [chart_source(inventory, app).repo_url] if app in COMPONENTS else [gitops.repoURL],
        "destinations": [{"server": argocd.IN_CLUSTER, "namespace": ns} for ns in destinations],
        "clusterResourceWhitelist": [dict(k) for k in cluster_kinds],
        "namespaceResourceWhitelist": [dict(k) for k in namespaced_kinds],
    }
    return {"apiVersion": argocd.API_VERSION, "kind": "AppProject",
            "metadata": _waved(metadata(inventory, project_name(inventory, app),
                                        namespace=gitops.applicationNamespace), wave),
            "spec": spec}


def component_application(inventory: Inventory, name: str, component: Component,
                          cluster: tuple[str, str, Role] | None = None) -> dict[str, Any]:
    """The component's Application. `cluster`: for one cluster of several, its (name, server, role), with
    `inventory` that cluster's view; the Application is then named after the cluster."""
    facts = COMPONENTS[name]
    chart = facts.chart
    gitops = inventory.cluster.gitops
    app_name, server, role = cluster or (inventory.cluster.name, argocd.IN_CLUSTER, None)
    spec: dict[str, Any] = {
        "project": project_name(inventory, name),
        "source": {"repoURL": chart_source(inventory, name).repo_url, "chart": chart.name,
                   "targetRevision": chart_version(name),
                   "helm": {"releaseName": facts.release,
                            **({"valuesObject": values} if (values := helm_values(inventory, name, role)) else {})}},
        "destination": {"server": server, "namespace": component.namespace},
        "syncPolicy": {
            "automated": {"prune": True, "selfHeal": True},
            # CRDs are too large for client-side apply's last-applied annotation.
            "syncOptions": ["CreateNamespace=true", "ServerSideApply=true"],
            "retry": argocd.RETRY,
        },
    }
    if chart.cert_secrets:
        # The controller writes its webhook certificate into the chart's Secret. Without this, Argo CD shows the
        # Application OutOfSync for ever, and a chart that renders the keys empty (JobSet's) has every self-heal
        # apply them over the certificate. RespectIgnoreDifferences keeps the sync from owning those fields.
        spec["ignoreDifferences"] = [{"group": "", "kind": "Secret", "name": secret, "namespace": component.namespace,
                                      "jsonPointers": ["/data"]} for secret in chart.cert_secrets]
        spec["syncPolicy"]["syncOptions"] = [*spec["syncPolicy"]["syncOptions"], "RespectIgnoreDifferences=true"]
    return {
        "apiVersion": argocd.API_VERSION,
        "kind": "Application",
        "metadata": _waved(metadata(inventory, component_application_name(app_name, name),
                                    namespace=gitops.applicationNamespace,
                                    labels={COMPONENT_LABEL: name}), facts.wave),
        "spec": spec,
    }


@dataclass(frozen=True)
class ChartSource:
    """Where Argo CD pulls a component's chart from: its upstream repository, or the inventory's mirror."""

    repo_url: str
    oci: bool
    plain_http: bool = False


def chart_source(inventory: Inventory, name: str) -> ChartSource:
    mirror = inventory.cluster.chartMirror
    if mirror:
        return ChartSource(mirror.url, True, mirror.plainHTTP)
    chart = COMPONENTS[name].chart
    return ChartSource(chart.repo_url, chart.oci)


def chart_repository(inventory: Inventory, name: str) -> dict[str, Any]:
    """Argo CD repository Secret: OCI Helm repositories must be declared with enableOCI (no credentials)."""
    source = chart_source(inventory, name)
    data = {"name": name, "type": "helm", "url": source.repo_url, "enableOCI": "true"}
    if source.plain_http:
        data["insecureOCIForceHttp"] = "true"
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _waved(metadata(inventory, f"helm-{name}", namespace=inventory.cluster.gitops.applicationNamespace,
                                    labels={"argocd.argoproj.io/secret-type": "repository"}), "-1"),
        "stringData": data,
    }


def root_objects(inventory: Inventory) -> list[dict[str, Any]]:
    """Applied once by hand: the bootstrap project and the Application that syncs bootstrap/platform."""
    gitops = inventory.cluster.gitops
    project = project_name(inventory, ROOT_PROJECT)
    # The app-of-apps can already make any AppProject, so the binding Kueue needs in kube-system
    # (rbac.kueue_visibility_auth_reader) widens what it may do by nothing.
    kube_system = inventory.cluster.components.kueue.install and not clusters.several(inventory)
    destinations = [gitops.applicationNamespace, *([KUBE_SYSTEM] if kube_system else [])]
    namespaced = [{"group": "argoproj.io", "kind": "Application"}, {"group": "argoproj.io", "kind": "AppProject"},
                  *([{"group": "argoproj.io", "kind": "ApplicationSet"}] if clusters.several(inventory) else []),
                  {"group": "", "kind": "Secret"}, *([{"group": RBAC.name, "kind": "RoleBinding"}]
                                                     if kube_system else [])]
    return [
        {"apiVersion": argocd.API_VERSION, "kind": "AppProject",
         "metadata": metadata(inventory, project, namespace=gitops.applicationNamespace),
         "spec": {"description": "gpugen: the app-of-apps may manage Applications, AppProjects and chart "
                                 "repositories in Argo CD's namespace, and Kueue's binding in kube-system",
                  "sourceRepos": [gitops.repoURL],
                  "destinations": [{"server": argocd.IN_CLUSTER, "namespace": ns} for ns in destinations],
                  "clusterResourceWhitelist": [],
                  "namespaceResourceWhitelist": namespaced}},
        argocd.directory_application(inventory, root_application_name(inventory), project,
                                     f"{gitops.bootstrapPath}/platform", gitops.applicationNamespace, exclude=None),
    ]


def platform_objects(inventory: Inventory) -> list[dict[str, Any]]:
    """Synced by the root Application: per component a repository, a project and an Application; then gpugen's
    (for several clusters its ApplicationSet, one Application per cluster)."""
    gitops = inventory.cluster.gitops
    objects: list[dict[str, Any]] = _component_objects(inventory)
    if clusters.several(inventory):
        return objects + several_clusters_trees(inventory)
    research = research_namespaces(inventory)
    monitoring = inventory.cluster.monitoring
    # The monitors, rules and dashboards live in the monitoring namespace (the site's, never created here).
    destinations = [*research, *([monitoring.namespace] if monitoring else [])]
    objects.append(app_project(inventory, GPUGEN_PROJECT, destinations,
                               project_whitelist(namespaced=False, monitoring=monitoring is not None),
                               project_whitelist(namespaced=True, monitoring=monitoring is not None), "-1"))
    # Every namespaced object in rendered/ names its namespace; Argo CD still wants the Application's own
    # destination inside the project: the first research namespace.
    folders = application_folders(inventory)
    for index, folder in enumerate(folders or [None]):
        app = argocd.directory_application(
            inventory, synced_application_name(inventory, folder) if folder else gitops.applicationName,
            project_name(inventory, GPUGEN_PROJECT), f"{gitops.path}/{folder}" if folder else gitops.path,
            research[0], exclude=KUSTOMIZATION_FILE, synced_tree=True)
        # A split tree: the platform's Application (policies, flavors, runtimes) before the groups'.
        app["metadata"] = _waved(app["metadata"], GPUGEN_WAVE if index == 0 else GROUPS_WAVE)
        objects.append(app)
    return objects


def _component_objects(inventory: Inventory) -> list[dict[str, Any]]:
    """Per installed component its chart repository, AppProject and Application (for several clusters one per
    cluster that installs it, each with that cluster's view); on one cluster, Kueue's kube-system binding."""
    if clusters.several(inventory):
        return _cluster_component_objects(inventory)
    objects: list[dict[str, Any]] = []
    for name, component in components(inventory).items():
        if chart_source(inventory, name).oci:
            objects.append(chart_repository(inventory, name))
        objects += [_component_project(inventory, name, [component.namespace]),
                    component_application(inventory, name, component)]
    # Before the Kueue Application (wave -1): see rbac.kueue_visibility_auth_reader.
    objects += [{**b, "metadata": _waved(b["metadata"], "-1")} for b in rbac.kueue_visibility_auth_reader(inventory)]
    return objects


def _component_project(inventory: Inventory, name: str, namespaces: list[str]) -> dict[str, Any]:
    chart = COMPONENTS[name].chart
    # CreateNamespace=true: Argo CD creates the component's namespace in the sync, under the project's rules;
    # the project allows that Namespace by name.
    namespace_kinds = [{"group": "", "kind": "Namespace", "name": namespace} for namespace in namespaces]
    return app_project(inventory, name, namespaces[:1], (*chart.cluster_kinds, *namespace_kinds),
                       chart.namespaced_kinds, "-1")


def _cluster_component_objects(inventory: Inventory) -> list[dict[str, Any]]:
    """Several clusters: per component the clusters that install it (their own settings: clusters.components_on),
    its project over their servers, and one Application each."""
    objects: list[dict[str, Any]] = []
    members = cluster_members(inventory)
    for name in COMPONENTS:
        installs = [(cluster, server, role, view, getattr(view.cluster.components, name))
                    for cluster, server, role, view in members]
        installs = [install for install in installs if install[-1].install]
        if not installs:
            continue
        if chart_source(inventory, name).oci:
            objects.append(chart_repository(inventory, name))
        namespaces = list(dict.fromkeys(component.namespace for *_, component in installs))
        project = _component_project(inventory, name, namespaces)
        project["spec"]["destinations"] = [
            {"server": server, "namespace": namespace} for _, server, _, _, component in installs
            for namespace in (component.namespace, *COMPONENTS[name].other_namespaces)]
        objects.append(project)
        objects += [component_application(view, name, component, (cluster, server, role))
                    for cluster, server, role, view, component in installs]
    return objects


def cluster_members(inventory: Inventory) -> list[tuple[str, str, Role, Inventory]]:
    """Several clusters: per cluster (the manager first) its name, the server Argo CD reaches it at (Argo CD runs
    on the manager: in-cluster there), its role, and its view of the inventory."""
    out: list[tuple[str, str, Role, Inventory]] = [
        (clusters.manager(inventory), argocd.IN_CLUSTER, "manager", clusters.manager_view(inventory))]
    for worker in clusters.workers(inventory):
        out.append((worker, inventory.clusters[worker].server, "worker", clusters.worker_view(inventory, worker)))
    return out


def tree_destinations(inventory: Inventory) -> list[tuple[str, str, list[str]]]:
    """Several clusters: per cluster (cluster_members' order) its name, server, and the namespaces its tree writes
    to (its research namespaces, and on a worker Kueue's, where MultiKueue's ServiceAccount lives)."""
    return [(name, server, [*research_namespaces(view),
                            *([view.cluster.components.kueue.namespace] if role == "worker" else [])])
            for name, server, role, view in cluster_members(inventory)]


def several_clusters_trees(inventory: Inventory) -> list[dict[str, Any]]:
    """The gpugen project over every cluster's namespaces, and an ApplicationSet whose list generator (written here
    from the inventory) makes one Application per cluster, syncing <path>/<cluster> to it. The list generator needs
    nothing outside Git; the cluster generator would read Argo CD's cluster Secrets, which hold credentials."""
    gitops = inventory.cluster.gitops
    project = project_name(inventory, GPUGEN_PROJECT)
    destinations = tree_destinations(inventory)
    project_object = app_project(inventory, GPUGEN_PROJECT, [], project_whitelist(False, False, several_clusters=True),
                                 project_whitelist(True, False, several_clusters=True), "-1")
    project_object["spec"]["destinations"] = [{"server": server, "namespace": ns}
                                              for _, server, namespaces in destinations for ns in namespaces]
    # Every namespaced object names its namespace; Argo CD still wants an Application's own destination inside
    # its project: the cluster's first namespace.
    template = argocd.directory_application(inventory, cluster_tree_application_name(inventory, "{{.cluster}}"),
                                            project, f"{gitops.path}/{{{{.cluster}}}}", "{{.namespace}}",
                                            exclude=KUSTOMIZATION_FILE, synced_tree=True)
    template["spec"]["destination"]["server"] = "{{.server}}"
    application_set = {
        "apiVersion": argocd.API_VERSION,
        "kind": "ApplicationSet",
        "metadata": _waved(metadata(inventory, gitops.applicationName, namespace=gitops.applicationNamespace),
                           GPUGEN_WAVE),
        "spec": {
            "goTemplate": True,
            # A typo in the template fails the generation instead of writing "<no value>".
            "goTemplateOptions": ["missingkey=error"],
            # Deleting a cluster's Application (a cluster removed from the inventory) leaves its objects in place,
            # research namespaces and their claims included, as for the single cluster's Application. Without this
            # the controller gives each Application the resources finalizer, which deletes them all.
            "syncPolicy": {"preserveResourcesOnDeletion": True},
            "generators": [{"list": {"elements": [
                {"cluster": name, "server": server, "namespace": namespaces[0]}
                for name, server, namespaces in destinations]}}],
            "template": {"metadata": {key: template["metadata"][key] for key in ("name", "namespace", "labels")},
                         "spec": template["spec"]},
        },
    }
    return [project_object, application_set]
