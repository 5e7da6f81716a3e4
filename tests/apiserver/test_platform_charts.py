"""The platform's components as the bootstrap Applications install them: the real helm renders each upstream
chart at its pinned version with the rendered values (simulation/charts.py), and the output must pass the
strict kube-apiserver tier, stay within the Application's AppProject, run the pinned images, and configure the
platform as the inventory says (Kueue's job policy, no upstream training runtimes).
"""
from __future__ import annotations

import functools

import pytest
import yaml

from generator.builders.bootstrap import COMPONENT_LABEL, app_version, values_context
from generator.components import COMPONENTS as REGISTRY
from generator.components.kueue.configuration import manager_configuration
from generator.inventory import load_inventory

from simulation import charts
from simulation.kube import message
from simulation.manifests import bootstrap_dir, load_one
from simulation.pins import REPO
from simulation.prerequisites import unavailable

pytestmark = pytest.mark.tools

# Helm hook types Argo CD runs (gitops-engine pkg/sync/hook/helm/type.go); objects of any other hook are ignored.
ARGO_HELM_HOOKS = {"pre-install", "pre-upgrade", "post-install", "post-upgrade"}

def applications() -> dict[str, dict]:
    apps = [load_one(f) for f in sorted((bootstrap_dir() / "platform").rglob("*.yaml"))]
    return {a["metadata"]["labels"][COMPONENT_LABEL]: a for a in apps
            if a["kind"] == "Application" and COMPONENT_LABEL in a["metadata"].get("labels", {})}


def projects() -> dict[str, dict]:
    files = sorted((bootstrap_dir() / "platform").rglob("*.yaml"))
    return {p["metadata"]["name"]: p for p in (load_one(f) for f in files) if p["kind"] == "AppProject"}


COMPONENTS = sorted(applications()) or ["none-rendered"]
# Those whose chart a pinned Go module ships: the others' charts come only from their repository, which this machine
# does not reach (render warns of what they go without).
CHARTED = [name for name in COMPONENTS if name not in REGISTRY or REGISTRY[name].chart.module]


@functools.cache
def rendered(component: str) -> tuple[list[dict], list[str]]:
    app = applications().get(component)
    if app is None:
        pytest.fail(f"no Application for {component} under {bootstrap_dir()}/platform")
    try:
        return charts.template_with_details(app)
    except FileNotFoundError as e:
        unavailable(str(e))


def applied_by_argo(objects: list[dict]) -> list[dict]:
    """Drop Helm hooks Argo CD ignores (Helm test Pods, pre-delete Jobs)."""
    out = []
    for obj in objects:
        hooks = obj["metadata"].get("annotations", {}).get("helm.sh/hook")
        if hooks is None or {h.strip() for h in hooks.split(",")} & ARGO_HELM_HOOKS:
            out.append(obj)
    return out


def test_every_component_has_an_application():
    assert set(applications()) == set(REGISTRY)


@pytest.mark.parametrize("component", CHARTED)
def test_chart_output_passes_the_strict_apiserver_tier(component, cluster):
    """Every object Argo CD would apply, server-side applied with dryRun=All and fieldValidation=Strict; the
    namespace is Argo CD's destination where the chart leaves it out."""
    app = applications()[component]
    namespace = app["spec"]["destination"]["namespace"]
    assert cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, dry_run=False).ok
    objects = applied_by_argo(rendered(component)[0])
    assert objects
    failures = []
    for obj in objects:
        _, namespaced = cluster.resources(obj["apiVersion"], refresh=True).get(obj["kind"], (None, None))
        if namespaced:
            obj["metadata"].setdefault("namespace", namespace)
        r = cluster.apply(obj, dry_run=True)
        if not r.ok:
            failures.append(f"{obj['kind']} {obj['metadata']['name']}: {r.status_code} {message(r)}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("component", CHARTED)
def test_app_project_allows_exactly_the_kinds_the_chart_renders(component, cluster):
    app = applications()[component]
    project = projects()[app["spec"]["project"]]["spec"]
    assert project["destinations"] == [{"server": app["spec"]["destination"]["server"],
                                        "namespace": app["spec"]["destination"]["namespace"]}]
    cluster_kinds, namespaced_kinds = set(), set()
    for obj in applied_by_argo(rendered(component)[0]):
        group = obj["apiVersion"].rpartition("/")[0]
        _, namespaced = cluster.resources(obj["apiVersion"], refresh=True)[obj["kind"]]
        (namespaced_kinds if namespaced else cluster_kinds).add((group, obj["kind"]))
    # Besides the chart's kinds, the component's own Namespace, by name: Argo CD creates it (CreateNamespace=true).
    assert {"group": "", "kind": "Namespace", "name": app["spec"]["destination"]["namespace"]} in \
        project["clusterResourceWhitelist"]
    assert {(k["group"], k["kind"]) for k in project["clusterResourceWhitelist"] if k["kind"] != "Namespace"} == \
        cluster_kinds
    assert {(k["group"], k["kind"]) for k in project["namespaceResourceWhitelist"]} == namespaced_kinds


@pytest.mark.parametrize("component", CHARTED)
def test_controllers_run_the_pinned_release_images(component):
    images = {}
    for obj in rendered(component)[0]:
        if obj["kind"] == "Deployment":
            for c in obj["spec"]["template"]["spec"]["containers"]:
                images[obj["metadata"]["name"]] = c["image"]
    assert images
    for name, image in images.items():
        assert image.rpartition(":")[2] == app_version(component), f"{name} runs {image}"
        assert "staging" not in image, f"{name} runs a staging build: {image}"


def test_disabled_chart_dependencies_are_the_ones_the_values_switch_off():
    assert rendered("trainer")[1] == ["jobset", "lws"]  # JobSet has its own Application; no data cache
    assert sorted(rendered("kyverno")[1]) == ["openreports", "reports-server"]


def test_trainer_installs_no_upstream_runtime():
    """The seed: no GPU-agnostic runtime exists. Trainer's chart could install torch-distributed and others
    (as ClusterTrainingRuntimes or through its runtime-installer hook Job); the rendered values switch all off."""
    objects = rendered("trainer")[0]
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"ClusterTrainingRuntime", "TrainingRuntime", "Job"}, kinds
    assert not [o for o in objects if "runtime" in o["metadata"]["name"] and o["kind"] == "ConfigMap"]


def test_kueue_runs_the_configuration_rendered_from_the_inventory():
    inventory = load_inventory(REPO / "gpu_classes.yaml")
    objects = rendered("kueue")[0]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap" and "manager-config" in o["metadata"]["name"]]
    (text,) = config_map["data"].values()
    config = yaml.safe_load(text)
    # The chart's template adds only the in-cluster certificate management for its own webhook Service.
    assert set(config.pop("internalCertManagement")) == {"enable", "webhookSecretName", "webhookServiceName"}
    assert config == manager_configuration(values_context(inventory, "kueue"))
    assert set(config["integrations"]["frameworks"]) == {"batch/job", "jobset.x-k8s.io/jobset",
                                                         "trainer.kubeflow.org/trainjob"}
    assert config["manageJobsWithoutQueueName"] is False
    (selector,) = config["managedJobsNamespaceSelector"]["matchExpressions"]
    assert selector["operator"] == "In"
    assert sorted(selector["values"]) == sorted(ns for g in inventory.groups.values() for ns in g.namespaces)
    assert config["waitForPodsReady"]["timeout"]
    # The control: the chart's stock configuration would capture notebooks (pod, deployment, statefulset).
    stock = yaml.safe_load(yaml.safe_load((charts.chart_source_dir("kueue") / "values.yaml").read_text())
                           ["managerConfig"]["controllerManagerConfigYaml"])
    assert {"pod", "deployment", "statefulset"} <= set(stock["integrations"]["frameworks"])


@pytest.mark.parametrize("component", [name for name in CHARTED if REGISTRY[name].service_account])
def test_controllers_run_as_the_identities_the_policies_let_through(component):
    """The policies exempt controllers by request.userInfo (naming.controller_identities): the chart's Deployment
    must run under exactly that service account, or Kyverno refuses the controller's own JobSets and Jobs."""
    from generator.inventory.naming import controller_identities
    inventory = load_inventory(REPO / "gpu_classes.yaml")
    app = applications()[component]
    (deployment,) = [o for o in rendered(component)[0] if o["kind"] == "Deployment"]
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    namespace = app["spec"]["destination"]["namespace"]
    assert getattr(controller_identities(inventory), component) == f"system:serviceaccount:{namespace}:{account}"


@pytest.mark.parametrize("component", CHARTED)
def test_argo_cd_leaves_the_certificates_the_controllers_write_alone(component):
    """The Secrets an Application tells Argo CD to ignore (/data) are exactly the chart's Secrets that its
    controller fills: the one its Configuration names as the webhook certificate's."""
    import yaml as _yaml
    app = applications()[component]
    objects = rendered(component)[0]
    ignored = {d["name"] for d in app["spec"].get("ignoreDifferences", []) if d["kind"] == "Secret"}
    secrets = {o["metadata"]["name"] for o in objects if o["kind"] == "Secret"}
    named = set()
    for o in objects:
        for text in (o.get("data") or {}).values() if o["kind"] == "ConfigMap" else ():
            try:
                doc = _yaml.safe_load(text)
            except _yaml.YAMLError:
                continue
            if isinstance(doc, dict) and doc.get("kind") == "Configuration":
                for key in ("internalCertManagement", "certManagement"):
                    if (doc.get(key) or {}).get("webhookSecretName"):
                        named.add(doc[key]["webhookSecretName"])
    assert ignored == (secrets & named), (ignored, secrets, named)
    if ignored:
        assert "RespectIgnoreDifferences=true" in app["spec"]["syncPolicy"]["syncOptions"]

