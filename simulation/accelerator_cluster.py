"""One simulated cluster of a single-cluster inventory whose classes are of every accelerator kind (tests/accelerators):
no Argo CD (unlike the simulated FLAME and the several clusters): each component Application of the render is
installed from its chart in Argo CD's order by the model (simulation/argo_sync.py), then the rendered tree. What runs:
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK (nodes advertising each class's resource, as its
device plugin would: cluster.inventory_nodes), and every component's controllers as the pod runtime runs them in the
FLAME (Kueue, JobSet, Trainer, Kyverno's admission and cleanup controllers), then the site's Prometheus scraping them
as the rendered monitors say, and the ledger of Kueue's Workloads.

    cluster = start_accelerator_cluster(work, inventory_file)   # stops what it started on failure
    try: ... cluster.admin, cluster.researchers["nlp-lab"], cluster.prometheus.url ...
    finally: cluster.stop()

Helm hooks are not applied: Argo CD skips the charts' test and pre-delete hooks, and runs Kyverno's post-upgrade
resource migration as a PostSync hook, which on a fresh install has nothing to migrate (the FLAME runs it).
"""
from __future__ import annotations

import dataclasses
import pathlib
import time

import yaml

from generator.inventory import load_inventory
from generator.layout import KUSTOMIZATION_FILE
from generator.tree import render_trees
from simulation import argo_sync
from simulation.cluster import CLUSTER_TOOLS, require_tools, start_kubernetes
from simulation.components import COMPONENT_LABEL, COMPONENT_TOOLS, chart_objects
from simulation.flame import (MONITORING_TOOLS, NOT_RUN, admission_policies, Researcher, onboard_research_namespaces,
                              platform_containers, researcher_identities, stop_cluster, wait_kueue_webhook,
                              wait_policies_live)
from simulation.kube import Client, SyncApi, poll
from simulation.ledger import WorkloadLedger
from simulation.monitoring import install_site_monitoring
from simulation.netns import PodNetwork
from simulation.pods import PodRuntime
from simulation.processes import ComponentFailed, Processes
from simulation.prometheus import SitePrometheus, start_prometheus

# Seconds a Job's pod runs before KWOK completes it: over two of the inventory's scrape intervals (15 s), so that
# Prometheus sees every job's quota held, and `gpugen report` can be held to the ledger.
JOB_SECONDS = 32.0
ALL_TOOLS = CLUSTER_TOOLS + COMPONENT_TOOLS
# Seconds a step of bringing up the cluster usually takes (simulation/waiting.py bounds the waits on it).
USUAL = 30.0
HELM_HOOK = "helm.sh/hook"


def sync_chart(admin_kube, app: dict, log):
    """The component Application's chart in Argo CD's order, as the model syncs it."""
    # Helm hooks are left out: Argo CD skips test and pre-delete hooks, and the one it would run (Kyverno's
    # post-upgrade migration, a PostSync hook) has nothing to migrate on a fresh install. Only Kyverno's chart has
    # hooks.
    objects = [o for o in chart_objects(app) if HELM_HOOK not in o["metadata"].get("annotations", {})]
    namespace = app["spec"]["destination"]["namespace"]
    api = SyncApi(admin_kube)
    if api.get("v1", "Namespace", namespace) is None:  # CreateNamespace=true
        admin_kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, dry_run=False)
    result = argo_sync.ArgoSync(api, app["metadata"]["name"], destination_namespace=namespace).sync(
        [o if "namespace" in o["metadata"] or not _namespaced(admin_kube, o) else
         {**o, "metadata": {**o["metadata"], "namespace": namespace}} for o in objects], usual=USUAL)
    if result.phase != "Succeeded":
        raise ComponentFailed(f"{app['metadata']['name']}: {result.phase} {result.message} {result.waiting_on}")
    # A CRD's sync succeeds once it is applied; the next Application's objects need it served (Argo CD retries
    # until then).
    for crd in (o for o in objects if o["kind"] == "CustomResourceDefinition"):
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        poll(lambda: all(crd["spec"]["names"]["kind"] in admin_kube.resources(f"{crd['spec']['group']}/{version}",
                                                                              refresh=True) for version in served),
             USUAL, f"CRD {crd['metadata']['name']} served", interval=0.2)
    log(f"  {app['metadata']['name']}: {len(objects)} objects")


def _namespaced(kube, obj) -> bool:
    if obj["kind"] == "CustomResourceDefinition":
        return False
    found = kube.resources(obj["apiVersion"]).get(obj["kind"])
    return bool(found and found[1])


def wait_deployments(admin: Client, member_name: str, namespaces: list[str], check):
    def available():
        check()
        for ns in namespaces:
            for d in admin.list("apps/v1", "Deployment", ns):
                if (d.get("status", {}).get("availableReplicas") or 0) < d["spec"].get("replicas", 1):
                    return False
        return True
    poll(available, USUAL, f"{member_name}: every Deployment of the components Available", interval=0.5)


@dataclasses.dataclass
class AcceleratorCluster:
    work: pathlib.Path
    inventory: object
    inventory_file: pathlib.Path
    procs: Processes
    plane: object                           # simulation.control_plane.ControlPlane
    admin: Client
    pods: PodRuntime
    network: PodNetwork
    nodes: list[str]
    researchers: dict[str, Researcher]      # inventory group -> a member with a kubeconfig
    prometheus: SitePrometheus | None
    ledger: WorkloadLedger
    timings: dict[str, float]

    def check_running(self):
        self.procs.check_running()
        self.pods.check()

    def stop(self):
        stop_cluster(self.ledger, self.pods, self.procs, self.network)


def render(inventory, source: str) -> tuple[list[dict], list[dict], list[dict]]:
    """The synced tree (kustomization.yaml left out), the component Applications in sync-wave order, and the
    bootstrap's other objects outside Argo CD's namespace (the app-of-apps syncs them beside the Applications:
    the RoleBinding in kube-system that lets Kueue's visibility server read the API server's front-proxy CA)."""
    rendered = render_trees(inventory, source)
    tree = [yaml.safe_load(content) for path, content in sorted(rendered.synced.items())
            if path != KUSTOMIZATION_FILE]
    bootstrap = [yaml.safe_load(content) for _, content in sorted(rendered.bootstrap.items())]
    apps = [o for o in bootstrap
            if o.get("kind") == "Application" and COMPONENT_LABEL in o["metadata"].get("labels", {})]
    apps.sort(key=lambda a: int(a["metadata"]["annotations"][argo_sync.SYNC_WAVE]))
    argocd = inventory.cluster.gitops.applicationNamespace
    beside = [o for o in bootstrap if not o["apiVersion"].startswith("argoproj.io/")
              and o["metadata"].get("namespace") != argocd]
    return tree, apps, beside


def start_accelerator_cluster(work: pathlib.Path, inventory_file: pathlib.Path, log=print) -> AcceleratorCluster:
    inventory = load_inventory(inventory_file)
    require_tools(ALL_TOOLS + (MONITORING_TOOLS if inventory.cluster.monitoring else []))
    work = pathlib.Path(work)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    tree, apps, beside = render(inventory, str(inventory_file))
    charts = [(app, chart_objects(app)) for app in apps]
    containers = platform_containers(charts)
    namespaces = sorted({key.split("/")[0] for key in containers})
    procs = Processes()
    net = runtime = ledger = None
    try:
        net = PodNetwork.start(work)
        k8s = start_kubernetes(work, procs, inventory, pod_runtime_namespaces=namespaces, netns=net,
                               job_seconds=JOB_SECONDS)
        admin = Client.from_kube(k8s.plane.kube)
        runtime = PodRuntime(admin, k8s.plane, work, namespaces, containers, NOT_RUN, procs, net, log)
        runtime.start()
        timings["kubernetes"] = time.monotonic() - t0
        install_site_monitoring(admin, inventory)
        for obj in beside:
            admin.apply(obj)
        for app in apps:
            sync_chart(k8s.plane.kube, app, log)
        wait_deployments(admin, inventory.cluster.name, namespaces, lambda: (procs.check_running(), runtime.check()))
        timings["components"] = time.monotonic() - t0
        result = argo_sync.ArgoSync(SyncApi(k8s.plane.kube), inventory.cluster.gitops.applicationName,
                                    prune_last=True).sync(tree, usual=USUAL)
        if result.phase != "Succeeded":
            raise ComponentFailed(f"the tree: {result.phase} {result.message} {result.waiting_on}")
        onboard_research_namespaces(admin, inventory)
        wait_policies_live(admin, admission_policies(tree), None)
        wait_kueue_webhook(admin, inventory, None)
        prometheus = start_prometheus(work, procs, k8s.plane, tree, inventory, net)
        ledger = WorkloadLedger(admin, inventory).start()
        researchers = researcher_identities(work, k8s.plane, inventory)
        timings["ready"] = time.monotonic() - t0
        log(f"{inventory.cluster.name}: ready in {timings['ready']:.1f}s (Kubernetes {timings['kubernetes']:.1f}s, "
            f"components {timings['components']:.1f}s)")
        return AcceleratorCluster(work, inventory, pathlib.Path(inventory_file), procs, k8s.plane, admin, runtime,
                                  net, k8s.nodes, researchers, prometheus, ledger, timings)
    except BaseException:
        stop_cluster(ledger, runtime, procs, net)
        raise
