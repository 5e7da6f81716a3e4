"""Several simulated clusters on one machine (docs/multi-cluster.md): a manager and its workers, each with its own
etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK nodes (simulation/cluster.py), and the
platform's controllers as each cluster's component Applications install them from their pinned charts
(simulation/components.py, simulation/pods.py). The manager's Kueue runs MultiKueue with the kubeconfig Secrets
made as docs/multi-cluster.md says (a token of the worker's `multikueue` ServiceAccount, the worker's CA).

What Argo CD would do is done by its model (simulation/argo_sync.py): each component Application's chart, then
each cluster's rendered tree, in Argo CD's order; the real Argo CD delivers the single FLAME (simulation/flame.py).

    platform = start_clusters(work, inventory_file)     # stops what it started on failure
    try: platform.members["hub"].admin, platform.researchers["vision-lab"], platform.stop_cluster("ember") ...
    finally: platform.stop()

Which controllers run where (RUN_ON): the manager runs Kueue (MultiKueue) and Trainer, whose webhook judges the
researcher's TrainJob and whose controller must leave a job MultiKueue manages alone; the workers run Kueue,
JobSet and Trainer. Kyverno is not run here: the CRDs of its kinds the trees hold are applied so that the trees sync,
and its admission is proven by the simulated FLAME and the policy tier. A component's chart is applied only where
it runs; elsewhere only its CRDs are.
"""
from __future__ import annotations

import base64
import dataclasses
import pathlib
import time

import yaml

from generator.builders.argocd import IN_CLUSTER
from generator.inventory import clusters as inventory_clusters
from generator.inventory import load_inventory
from generator.layout import KUSTOMIZATION_FILE
from generator.tree import render_trees
from simulation import argo_sync
from simulation.kube import message
from simulation.cluster import CLUSTER_TOOLS, require_tools, start_kubernetes
from simulation.components import COMPONENT_LABEL, COMPONENT_TOOLS, SIMULATED, chart_objects
from simulation.flame import (Researcher, onboard_research_namespaces, platform_containers,
                              researcher_identities, wait_kueue_webhook)
from simulation.kube import Client, SyncApi, conditions, poll
from simulation.netns import PodNetwork
from simulation.pods import PodRuntime
from simulation.processes import ComponentFailed, Processes
from simulation.waiting import REQUEST

# role -> the components whose controllers run there (each component's folder says: simulation.roles).
RUN_ON = {role: tuple(name for name, run in SIMULATED.items() if role in run.roles) for role in ("manager", "worker")}
# Where they do not run, of their CRDs only those of the kinds a cluster's tree holds are applied (each large CRD
# costs every API server CPU for its OpenAPI schema; Kyverno's chart brings 22).
TREE_CRDS_ONLY = tuple(name for name, run in SIMULATED.items() if run.tree_crds_only)
ALL_TOOLS = CLUSTER_TOOLS + COMPONENT_TOOLS
# Each cluster's pods get addresses of their own: POD_NETWORK[IP_BLOCK * i + 10] onwards for the i-th cluster.
IP_BLOCK = 1000
# Seconds a step of bringing up the clusters usually takes (simulation/waiting.py bounds the waits on it).
USUAL = 30.0
KUEUE = "kueue.x-k8s.io/v1beta2"
HELM_HOOK = "helm.sh/hook"


@dataclasses.dataclass
class Member:
    """One running cluster of the platform."""
    name: str
    role: str                 # "manager" or "worker"
    inventory: object         # the cluster's view (inventory.clusters.worker_view for a worker)
    procs: Processes
    plane: object             # simulation.control_plane.ControlPlane
    admin: Client
    pods: PodRuntime
    nodes: list[str]
    stopped: bool = False

    def stop(self, grace: float = 15):
        """Every process of the cluster, newest first (`grace`: seconds each may take to exit before SIGKILL)."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.pods.stop()
        finally:
            self.procs.stop(grace)

    def check_running(self):
        if not self.stopped:
            self.procs.check_running()
            self.pods.check()


@dataclasses.dataclass
class Platform:
    work: pathlib.Path
    inventory: object
    members: dict[str, Member]              # cluster name -> its member, the manager first
    researchers: dict[str, Researcher]      # inventory group -> a member, with a kubeconfig for the manager
    network: PodNetwork
    timings: dict[str, float]

    @property
    def manager(self) -> Member:
        return next(m for m in self.members.values() if m.role == "manager")

    def stop_cluster(self, name: str):
        """The cluster goes away at once, as when a site is cut off: every process of it killed."""
        self.members[name].stop(grace=0)

    def check_running(self):
        for member in self.members.values():
            member.check_running()

    def stop(self):
        # The manager first: while its Kueue still watches a worker, that worker's API server waits out its whole
        # grace period before it exits.
        try:
            for member in self.members.values():
                member.stop()
        finally:
            self.network.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- what each cluster gets, from the render

def cluster_trees(inventory, source: str) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """The render of the inventory: per cluster its synced objects (rendered/<cluster>/, kustomization.yaml left
    out) and its component Applications (bootstrap/, by destination), in sync-wave order."""
    rendered = render_trees(inventory, source)
    trees: dict[str, list[dict]] = {}
    for path, content in sorted(rendered.synced.items()):
        cluster, _, rest = path.partition("/")
        if rest != KUSTOMIZATION_FILE:
            trees.setdefault(cluster, []).append(yaml.safe_load(content))
    servers = {IN_CLUSTER: inventory_clusters.manager(inventory),
               **{member.server: name for name, member in inventory.clusters.items()}}
    applications: dict[str, list[dict]] = {}
    for content in rendered.bootstrap.values():
        obj = yaml.safe_load(content)
        if obj.get("kind") == "Application" and COMPONENT_LABEL in obj["metadata"].get("labels", {}):
            applications.setdefault(servers[obj["spec"]["destination"]["server"]], []).append(obj)
    for apps in applications.values():
        apps.sort(key=lambda a: int(a["metadata"]["annotations"][argo_sync.SYNC_WAVE]))
    return trees, applications


def node_inventory(inventory, role: str):
    """Whose nodes a cluster has: a worker its classes' (and a CPU node), the manager the CPU node alone."""
    return inventory.model_copy(update={"classes": {}}) if role == "manager" else inventory


def sync_chart(admin_kube, app: dict, run: bool, tree: list[dict], log):
    """The component Application's chart in Argo CD's order, as the model syncs it; only its CRDs where the
    component does not run (for TREE_CRDS_ONLY, those of the kinds in `tree`)."""
    # Helm hooks are left out: Argo CD skips test and pre-delete hooks, and the one it would run (Kyverno's
    # post-upgrade migration, a PostSync hook) has nothing to migrate on a fresh install. Only Kyverno's chart has
    # hooks, and only simulation/accelerator_cluster.py runs it here.
    objects = [o for o in chart_objects(app) if HELM_HOOK not in o["metadata"].get("annotations", {})]
    if not run:
        objects = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
        if app["metadata"]["labels"][COMPONENT_LABEL] in TREE_CRDS_ONLY:
            kinds = {(o["apiVersion"].rpartition("/")[0], o["kind"]) for o in tree}
            objects = [o for o in objects if (o["spec"]["group"], o["spec"]["names"]["kind"]) in kinds]
    namespace = app["spec"]["destination"]["namespace"]
    api = SyncApi(admin_kube)
    if run and api.get("v1", "Namespace", namespace) is None:  # CreateNamespace=true
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
    log(f"  {app['metadata']['name']}: {len(objects)} objects{'' if run else ' (its CRDs: not run here)'}")


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


# ---------------------------------------------------------------- MultiKueue's credentials, made as documented

def multikueue_secret(manager: Member, worker: Member, namespace: str, worker_namespace: str) -> dict:
    """docs/multi-cluster.md "Credentials, made by hand": on the worker a token of its `multikueue`
    ServiceAccount (in the worker's Kueue namespace); on the manager a Secret multikueue-<worker> in the manager's
    Kueue namespace with a kubeconfig under the key `kubeconfig` (the worker's CA inline: Kueue refuses file
    paths)."""
    kube = worker.plane.kube
    url = kube.resource_url("v1", "ServiceAccount", worker_namespace, "multikueue") + "/token"
    r = kube.http.post(url, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 7 * 24 * 3600}}, timeout=REQUEST)
    if r.status_code != 201:
        raise ComponentFailed(f"{worker.name}: token for {worker_namespace}/multikueue: {r.status_code} "
                              f"{message(r)}")
    ca = base64.b64encode((worker.plane.pki / "ca.crt").read_bytes()).decode()
    kubeconfig = {"apiVersion": "v1", "kind": "Config", "current-context": worker.name,
                  "clusters": [{"name": worker.name, "cluster": {"server": kube.server,
                                                                 "certificate-authority-data": ca}}],
                  "users": [{"name": "multikueue", "user": {"token": r.json()["status"]["token"]}}],
                  "contexts": [{"name": worker.name, "context": {"cluster": worker.name, "user": "multikueue"}}]}
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"multikueue-{worker.name}", "namespace": namespace},
            "stringData": {"kubeconfig": yaml.safe_dump(kubeconfig)}}


def multikueue_connected(admin: Client, inventory) -> bool:
    """Every MultiKueueCluster Active, every AdmissionCheck Active, every ClusterQueue Active (the manager)."""
    for kind in ("MultiKueueCluster", "AdmissionCheck", "ClusterQueue"):
        objects = admin.list(KUEUE, kind)
        if not objects or any(conditions(o).get("Active", {}).get("status") != "True" for o in objects):
            return False
    return True


# ---------------------------------------------------------------- start

def start_member(work: pathlib.Path, index: int, name: str, role: str, view, trees, applications, net, log) -> Member:
    procs = Processes()
    runtime = None
    try:
        run = RUN_ON[role]
        apps = applications[name]
        charts = [(app, chart_objects(app)) for app in apps if app["metadata"]["labels"][COMPONENT_LABEL] in run]
        containers = platform_containers(charts)
        namespaces = sorted({key.split("/")[0] for key in containers})
        k8s = start_kubernetes(work / name, procs, node_inventory(view, role), pod_runtime_namespaces=namespaces,
                               netns=net)
        admin = Client.from_kube(k8s.plane.kube)
        runtime = PodRuntime(admin, k8s.plane, work / name, namespaces, containers, {}, procs, net, log,
                             first_ip=IP_BLOCK * index + 10)
        runtime.start()
        member = Member(name, role, view, procs, k8s.plane, admin, runtime, k8s.nodes)
        for app in apps:
            sync_chart(k8s.plane.kube, app, app["metadata"]["labels"][COMPONENT_LABEL] in run, trees[name], log)
        wait_deployments(admin, name, namespaces, member.check_running)
        result = argo_sync.ArgoSync(SyncApi(k8s.plane.kube), f"training-platform-{name}", prune_last=True).sync(
            trees[name], usual=USUAL)
        if result.phase != "Succeeded":
            raise ComponentFailed(f"{name}: its tree: {result.phase} {result.message} {result.waiting_on}")
        onboard_research_namespaces(admin, view)
        wait_kueue_webhook(admin, view, None)
        return member
    except BaseException:
        if runtime:
            runtime.stop()
        procs.stop()
        raise


def start_clusters(work: pathlib.Path, inventory_file: pathlib.Path, log=print) -> Platform:
    """Start every cluster of the inventory in `work` (an empty directory), the manager first, connect the
    manager's MultiKueue to each worker, and give each group with identities a researcher on the manager."""
    inventory = load_inventory(inventory_file)
    require_tools(ALL_TOOLS)
    work = pathlib.Path(work)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    trees, applications = cluster_trees(inventory, str(inventory_file))
    net = PodNetwork.start(work)
    members: dict[str, Member] = {}
    try:
        roles = [(inventory_clusters.manager(inventory), "manager", inventory_clusters.manager_view(inventory))]
        roles += [(w, "worker", inventory_clusters.worker_view(inventory, w))
                  for w in inventory_clusters.workers(inventory)]
        for index, (name, role, view) in enumerate(roles):
            members[name] = start_member(work, index, name, role, view, trees, applications, net, log)
            timings[name] = time.monotonic() - t0
            log(f"{name} ({role}) ready at {timings[name]:.1f}s")
        manager = members[roles[0][0]]
        kueue_namespace = roles[0][2].cluster.components.kueue.namespace
        for name, _role, view in roles[1:]:
            manager.admin.apply(multikueue_secret(manager, members[name], kueue_namespace,
                                                  view.cluster.components.kueue.namespace))
        poll(lambda: manager.check_running() or multikueue_connected(manager.admin, inventory), USUAL,
             "the manager's MultiKueueClusters, AdmissionChecks and ClusterQueues Active", interval=0.5)
        timings["connected"] = time.monotonic() - t0
        log(f"MultiKueue connected to {len(roles) - 1} workers at {timings['connected']:.1f}s")
        researchers = researcher_identities(work, manager.plane, inventory)
        return Platform(work, inventory, members, researchers, net, timings)
    except BaseException:
        for member in members.values():  # the manager first, as in Platform.stop
            member.stop()
        net.stop()
        raise
