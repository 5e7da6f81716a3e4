"""bootstrap/: the app-of-apps that installs the platform's components and then gpugen's tree.

What the charts render with these values is proven with the real helm in tests/apiserver/test_platform_charts.py;
here: which Applications exist for which inventory, their order, their projects, and the chart pins.
"""
from __future__ import annotations

import copy

import pytest
import yaml

from generator.builders import bootstrap_objects
from generator.builders.bootstrap import COMPONENT_LABEL, GPUGEN_WAVE
from generator.components import COMPONENTS
from generator.versions import pins
from tests.support.inventories import variant

SYNC_WAVE = "argocd.argoproj.io/sync-wave"


def applications(objects):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "Application"}


def wave(obj):
    return int(obj["metadata"]["annotations"][SYNC_WAVE])


def test_root_application_syncs_the_platform_folder_within_its_own_project(flame, flame_bootstrap):
    root = flame_bootstrap["root"]
    (project,) = [o for o in root if o["kind"] == "AppProject"]
    (app,) = applications(root).values()
    assert app["spec"]["project"] == project["metadata"]["name"]
    assert app["spec"]["source"]["path"] == f"{flame.cluster.gitops.bootstrapPath}/platform"
    assert app["spec"]["source"]["repoURL"] == flame.cluster.gitops.repoURL
    # The app-of-apps may only manage Argo CD's own objects in Argo CD's namespace, and the RoleBinding Kueue's
    # visibility API needs in kube-system; its own destination is Argo CD's namespace.
    assert project["spec"]["destinations"] == [
        {"server": "https://kubernetes.default.svc", "namespace": flame.cluster.gitops.applicationNamespace},
        {"server": "https://kubernetes.default.svc", "namespace": "kube-system"}]
    assert app["spec"]["destination"] == project["spec"]["destinations"][0]
    assert project["spec"]["clusterResourceWhitelist"] == []
    assert {(k["group"], k["kind"]) for k in project["spec"]["namespaceResourceWhitelist"]} == {
        ("argoproj.io", "Application"), ("argoproj.io", "AppProject"), ("", "Secret"),
        ("rbac.authorization.k8s.io", "RoleBinding")}
    (binding,) = [o for o in flame_bootstrap["platform"] if o["kind"] == "RoleBinding"]
    assert (binding["metadata"]["namespace"], binding["metadata"]["name"]) == \
        ("kube-system", "kueue-visibility-server-auth-reader")
    assert wave(binding) < min(wave(a) for a in applications(flame_bootstrap["platform"]).values())


def test_without_kueue_installed_the_app_of_apps_stays_in_argo_cds_namespace():
    inventory = variant(lambda d: d["cluster"].setdefault("components", {}).update(
        {"kueue": {"install": False, "existing": True, "namespace": "kueue-system"}}))
    objects = bootstrap_objects(inventory)
    (project,) = [o for o in objects["root"] if o["kind"] == "AppProject"]
    assert [d["namespace"] for d in project["spec"]["destinations"]] == [inventory.cluster.gitops.applicationNamespace]
    assert not [o for o in objects["platform"] if o["kind"] == "RoleBinding"]


def test_a_chart_mirror_serves_every_component_chart():
    inventory = variant(lambda d: d["cluster"].update(
        {"chartMirror": {"url": "registry.example.org:5000/charts", "plainHTTP": True}}))
    platform = bootstrap_objects(inventory)["platform"]
    components = {o["metadata"]["labels"][COMPONENT_LABEL]: o for o in applications(platform).values()
                  if COMPONENT_LABEL in o["metadata"]["labels"]}
    secrets = {o["stringData"]["name"]: o["stringData"] for o in platform if o["kind"] == "Secret"}
    assert set(secrets) == set(components) == set(COMPONENTS)
    for name, app in components.items():
        assert app["spec"]["source"]["repoURL"] == "registry.example.org:5000/charts"
        assert app["spec"]["source"]["chart"] == COMPONENTS[name].chart.name
        assert secrets[name] == {"name": name, "type": "helm", "url": "registry.example.org:5000/charts",
                                 "enableOCI": "true", "insecureOCIForceHttp": "true"}
    # The gpugen tree does not depend on where the charts come from.
    from generator.builders import synced_objects
    assert synced_objects(inventory) == synced_objects(variant(lambda d: None))


def test_components_install_in_order_and_gpugen_syncs_last(flame, flame_bootstrap):
    platform = flame_bootstrap["platform"]
    apps = applications(platform)
    components = {o["metadata"]["labels"][COMPONENT_LABEL]: o for o in apps.values()
                  if COMPONENT_LABEL in o["metadata"]["labels"]}
    assert set(components) == set(COMPONENTS)
    waves = {name: wave(app) for name, app in components.items()}
    # Trainer's controller watches JobSets; Kueue's TrainJob and JobSet integrations start with their CRDs present.
    assert waves["jobset"] < waves["trainer"] < waves["kueue"]
    # Kyverno needs no other component: it shares the wave of the other long install instead of adding one.
    assert waves["kyverno"] == waves["kueue"]
    gpugen = apps[flame.cluster.gitops.applicationName]
    # The policies, runtimes and queues need every component's CRDs and webhooks.
    assert wave(gpugen) > max(waves.values())
    # Projects and repository secrets exist before any Application that uses them.
    for obj in platform:
        if obj["kind"] in ("AppProject", "Secret"):
            assert wave(obj) < min(wave(a) for a in apps.values())


def test_every_application_has_its_own_project_limited_to_its_namespace(flame, flame_bootstrap):
    platform = flame_bootstrap["platform"]
    projects = {o["metadata"]["name"]: o for o in platform if o["kind"] == "AppProject"}
    for app in applications(platform).values():
        project = projects[app["spec"]["project"]]["spec"]
        assert project["sourceRepos"] == [app["spec"]["source"]["repoURL"]]
        if COMPONENT_LABEL in app["metadata"]["labels"]:
            assert [d["namespace"] for d in project["destinations"]] == [app["spec"]["destination"]["namespace"]]
        else:
            research = sorted(ns for g in flame.groups.values() for ns in g.namespaces)
            # and the monitoring namespace, where the monitors, rules and dashboards go
            monitoring = [flame.cluster.monitoring.namespace] if flame.cluster.monitoring else []
            assert [d["namespace"] for d in project["destinations"]] == research + monitoring
            assert app["spec"]["destination"]["namespace"] == research[0]
    assert len(projects) == len(applications(platform))


def test_charts_are_the_pinned_versions_from_the_pinned_modules(flame_bootstrap):
    for app in applications(flame_bootstrap["platform"]).values():
        component = app["metadata"]["labels"].get(COMPONENT_LABEL)
        if component:
            chart = COMPONENTS[component].chart
            assert app["spec"]["source"]["chart"] == chart.name
            assert app["spec"]["source"]["targetRevision"] == pins()[chart.version_pin]


def test_oci_chart_repositories_are_declared_for_argo_cd(flame_bootstrap):
    secrets = {o["stringData"]["url"]: o for o in flame_bootstrap["platform"] if o["kind"] == "Secret"}
    for app in applications(flame_bootstrap["platform"]).values():
        component = app["metadata"]["labels"].get(COMPONENT_LABEL)
        if component and COMPONENTS[component].chart.oci:
            secret = secrets[app["spec"]["source"]["repoURL"]]
            assert secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"] == "repository"
            assert secret["stringData"]["enableOCI"] == "true"


def test_gpugen_application_prunes_last(flame, gpugen_application):
    """PruneLast: removing a GPU class must not prune its flavor before the ClusterQueues stop naming it
    (proven against the real Kueue in tests/e2e: test_inventory_change_syncs_to_completion...)."""
    assert "PruneLast=true" in gpugen_application["spec"]["syncPolicy"]["syncOptions"]
    assert wave(gpugen_application) == int(GPUGEN_WAVE)


@pytest.mark.parametrize("component", list(COMPONENTS))
def test_an_adopted_component_gets_no_application(component):
    def adopt(data):
        written = data["cluster"]["components"].get(component, {})
        data["cluster"]["components"][component] = {
            "install": False, "existing": True,
            "namespace": written.get("namespace", COMPONENTS[component].default_namespace)}
    objects = bootstrap_objects(variant(adopt))["platform"]
    labels = {o["metadata"].get("labels", {}).get(COMPONENT_LABEL) for o in objects}
    assert labels - {None} == set(COMPONENTS) - {component}
    names = {o["metadata"]["name"] for o in objects if o["kind"] == "AppProject"}
    assert f"flame-{component}" not in names


def test_kueue_only_manages_the_research_namespaces_of_the_inventory():
    def add_group(data):
        data["groups"]["physics-lab"] = copy.deepcopy(data["groups"]["vision-lab"])
        data["groups"]["physics-lab"]["namespaces"] = ["physics"]
        data["groups"]["physics-lab"].pop("identities", None)
        for group in data["groups"].values():
            group["allocations"]["gh200"].update(gpus=0, cpu=1, memory="1G")
    inventory = variant(add_group)
    (kueue_app,) = [o for o in bootstrap_objects(inventory)["platform"]
                    if o["metadata"].get("labels", {}).get(COMPONENT_LABEL) == "kueue"]
    config = yaml.safe_load(kueue_app["spec"]["source"]["helm"]["valuesObject"]["managerConfig"]
                            ["controllerManagerConfigYaml"])
    (expression,) = config["managedJobsNamespaceSelector"]["matchExpressions"]
    assert expression == {"key": "kubernetes.io/metadata.name", "operator": "In",
                          "values": ["nlp-lab", "nlp-lab-teaching", "physics", "vision-lab"]}


def test_kyverno_admission_controller_image_can_carry_the_index_fix():
    def set_image(data):
        data["cluster"]["components"]["kyverno"]["admissionControllerImage"] = (
            "registry.example.org:5000/platform/kyverno:index-fix-2026")
    (kyverno_app,) = [o for o in bootstrap_objects(variant(set_image))["platform"]
                      if o["metadata"].get("labels", {}).get(COMPONENT_LABEL) == "kyverno"]
    image = kyverno_app["spec"]["source"]["helm"]["valuesObject"]["admissionController"]["container"]["image"]
    assert image == {"registry": "registry.example.org:5000", "repository": "platform/kyverno", "tag": "index-fix-2026"}


@pytest.mark.parametrize("image", ["kyverno/kyverno:pinned-tag",
                                   "ghcr.io/urcf/kyverno@sha256:" + "a" * 64])
def test_kyverno_admission_controller_image_needs_a_registry_and_a_tag(image):
    from generator.errors import InventoryInvalid

    def set_image(data):
        data["cluster"]["components"]["kyverno"]["admissionControllerImage"] = image
    with pytest.raises(InventoryInvalid, match="registry-host/repository:tag"):
        variant(set_image)
