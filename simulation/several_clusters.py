"""Several simulated clusters on one machine (docs/multi-cluster.md), delivered by the real Argo CD on the manager as
docs/multi-cluster.md bootstraps them: a manager and its workers, each with its own etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and KWOK nodes (simulation/cluster.py) and its own pod runtime
(simulation/pods.py); on the manager Argo CD's application controller, repo-server and ApplicationSet controller
(simulation/argocd_local.py) with a cluster Secret per worker made as `argocd cluster add` makes it. The bootstrap
then installs every cluster's components from their pinned charts, and the ApplicationSet controller expands the
rendered ApplicationSet into one Application per cluster that syncs that cluster's tree to its API server. The
manager's Kueue runs MultiKueue with the kubeconfig Secrets made as docs/multi-cluster.md says (a token of the
worker's `multikueue` ServiceAccount, the worker's CA).

    platform = start_clusters(work, inventory_file)     # stops what it started on failure
    try: platform.members["hub"].admin, platform.researchers["vision-lab"], platform.cut_off("ember") ...
    finally: platform.stop()

Every cluster runs the controllers of every component its Applications install, as a site would (Kyverno's
admission and cleanup controllers too: the workers' policies judge MultiKueue's copies).
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
from generator.inventory.naming import cluster_tree_application_name
from generator.tree import render_trees
from simulation import manifests
from simulation.argocd_local import (ARGOCD_TOOLS, ArgoCD, bootstrap as bootstrap_argocd, cluster_manager_access,
                                     cluster_secret, push_charts, start_argocd, start_git, start_redis, start_registry)
from simulation.cluster import CLUSTER_TOOLS, require_tools, start_kubernetes
from simulation.components import COMPONENT_TOOLS, chart_objects, component_applications_of
from simulation.flame import (HOOK_IMAGES, NOT_RUN, Researcher, admission_policies, expected_applications, hook_images,
                              onboard_research_namespaces, platform_containers, researcher_identities,
                              wait_kueue_webhook, wait_policies_live)
from simulation.kube import Client, conditions, message, poll
from simulation.netns import Link, PodNetwork
from simulation.pods import PodRuntime
from simulation.processes import ComponentFailed, Processes
from simulation.waiting import REQUEST

ALL_TOOLS = CLUSTER_TOOLS + COMPONENT_TOOLS + ARGOCD_TOOLS + list(HOOK_IMAGES.values())
# Each cluster's pods get addresses of their own: POD_NETWORK[IP_BLOCK * i + 10] onwards for the i-th cluster.
IP_BLOCK = 1000
# Seconds a step of bringing up the clusters usually takes (simulation/waiting.py bounds the waits on it).
USUAL = 30.0
# Seconds Argo CD usually takes from the bootstrap to every Application of three clusters Synced and Healthy.
APPLICATIONS_USUAL = 240.0
KUEUE = "kueue.x-k8s.io/v1beta2"


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
    # A worker: the network between it and the manager (its API server as the manager's Argo CD and Kueue reach it,
    # the inventory's `server:`); None for the manager.
    link: Link | None = None
    stopped: bool = False

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.link.port}" if self.link else self.plane.kube.server

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
    inventory_file: pathlib.Path
    members: dict[str, Member]              # cluster name -> its member, the manager first
    researchers: dict[str, Researcher]      # inventory group -> a member, with a kubeconfig for the manager
    network: PodNetwork
    timings: dict[str, float]
    argocd: ArgoCD                          # on the manager
    site: Processes                         # the GitOps repository, chart mirror, Redis and Argo CD

    @property
    def manager(self) -> Member:
        return next(m for m in self.members.values() if m.role == "manager")

    def cut_off(self, name: str):
        """The worker's site is cut off from the manager: every connection between them closed, new ones refused.
        The worker itself goes on, as a site does when only its link is down."""
        self.members[name].link.cut()

    def reconnect(self, name: str):
        self.members[name].link.restore()

    def check_running(self):
        check_running(self.site, self.members)

    def stop(self):
        stop_all(self.site, self.members, self.network)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def check_running(site: Processes, members: dict[str, Member]):
    site.check_running()
    for member in members.values():
        member.check_running()


def stop_all(site: Processes, members: dict[str, Member], network: PodNetwork):
    """Argo CD and the site's other processes first, then the clusters, the manager first: while a controller
    still watches a worker, that worker's API server waits out its whole grace period before it exits."""
    try:
        site.stop()
        for member in members.values():
            member.stop()
    finally:
        network.stop()


# ---------------------------------------------------------------- what each cluster gets, from the render

def cluster_applications(inventory, source: str) -> dict[str, list[dict]]:
    """The render of the inventory: per cluster its component Applications (bootstrap/, by destination), in
    sync-wave order. A component the simulations do not run stops here, saying why."""
    rendered = render_trees(inventory, source)
    servers = {IN_CLUSTER: inventory_clusters.manager(inventory),
               **{member.server: name for name, member in inventory.clusters.items()}}
    applications: dict[str, list[dict]] = {name: [] for name in inventory.clusters}
    for app in component_applications_of(yaml.safe_load(content) for content in rendered.bootstrap.values()):
        applications[servers[app["spec"]["destination"]["server"]]].append(app)
    return applications


def node_inventory(inventory, role: str):
    """Whose nodes a cluster has: a worker its classes' (and a CPU node), the manager the CPU node alone."""
    return inventory.model_copy(update={"classes": {}}) if role == "manager" else inventory


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
                  "clusters": [{"name": worker.name, "cluster": {"server": worker.server,
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

def start_member(work: pathlib.Path, index: int, name: str, role: str, view, applications: list[dict], net,
                 log) -> Member:
    """A cluster's Kubernetes and pod runtime, and what `argocd cluster add` makes on it; Argo CD installs the
    rest."""
    procs = Processes()
    runtime = None
    try:
        charts = [(app, chart_objects(app)) for app in applications]
        containers = platform_containers(charts)
        namespaces = sorted({key.split("/")[0] for key in containers})
        k8s = start_kubernetes(work / name, procs, node_inventory(view, role), pod_runtime_namespaces=namespaces,
                               netns=net)
        admin = Client.from_kube(k8s.plane.kube)
        runtime = PodRuntime(admin, k8s.plane, work / name, namespaces, containers, NOT_RUN, procs, net, log,
                             images=hook_images(charts), first_ip=IP_BLOCK * index + 10)
        runtime.start()
        link = net.link(int(k8s.plane.kube.server.rsplit(":", 1)[1])) if role == "worker" else None
        return Member(name, role, view, procs, k8s.plane, admin, runtime, k8s.nodes, link)
    except BaseException:
        if runtime:
            runtime.stop()
        procs.stop()
        raise


def start_clusters(work: pathlib.Path, inventory_file: pathlib.Path, log=print) -> Platform:
    """Start every cluster of the inventory in `work` (an empty directory), the manager first, and Argo CD on the
    manager with access to each worker; bootstrap it as docs/multi-cluster.md says and wait for every Application
    Synced and Healthy; onboard each cluster, connect the manager's MultiKueue to each worker, and give each group
    with identities a researcher on the manager."""
    inventory = load_inventory(inventory_file)
    require_tools(ALL_TOOLS)
    work = pathlib.Path(work)
    t0 = time.monotonic()
    timings: dict[str, float] = {}
    applications = cluster_applications(inventory, str(inventory_file))
    net = PodNetwork.start(work)
    site = Processes()
    members: dict[str, Member] = {}
    try:
        roles = [(inventory_clusters.manager(inventory), "manager", inventory_clusters.manager_view(inventory))]
        roles += [(w, "worker", inventory_clusters.worker_view(inventory, w))
                  for w in inventory_clusters.workers(inventory)]
        for index, (name, role, view) in enumerate(roles):
            members[name] = start_member(work, index, name, role, view, applications[name], net, log)
            timings[name] = time.monotonic() - t0
            log(f"{name} ({role}): Kubernetes ready at {timings[name]:.1f}s")
        manager = members[roles[0][0]]
        workers = [members[name] for name, _role, _view in roles[1:]]

        # The site's repository holds the inventory with each cluster's API server as the manager reaches it.
        registry = start_registry(work, site, net)
        repo = start_git(work, site, inventory_file, f"{registry}/charts", net,
                         servers={m.name: m.server for m in members.values()})
        push_charts(repo.checkout / "bootstrap", registry, work)
        argo = start_argocd(work, site, manager.plane, manager.admin, repo, start_redis(work, site, net), net,
                            application_sets=True)
        for worker in workers:
            manager.admin.apply(cluster_secret(worker.name, worker.server,
                                               cluster_manager_access(worker.admin),
                                               (worker.plane.pki / "ca.crt").read_bytes()))
        timings["argocd"] = time.monotonic() - t0
        log(f"git daemon, chart mirror, redis, Argo CD with access to {len(workers)} workers at "
            f"{timings['argocd']:.1f}s")

        bootstrap_argocd(argo)
        expected = (expected_applications(repo.checkout / "bootstrap")
                    | {cluster_tree_application_name(inventory, name) for name in members})
        manager_tree = cluster_tree_application_name(inventory, manager.name)

        def check():
            check_running(site, members)
        # docs/multi-cluster.md's order: every Application but the manager's tree, which waits at its queues
        # (Progressing) until MultiKueue reaches a worker; onboarding; MultiKueue's credentials; then the manager's.
        argo.wait_applications(expected - {manager_tree}, APPLICATIONS_USUAL, repo.revision, check=check)
        timings["workers synced"] = time.monotonic() - t0
        log(f"Argo CD: every Application but {manager_tree} Synced and Healthy at {timings['workers synced']:.1f}s")
        for member in members.values():
            onboard_research_namespaces(member.admin, member.inventory)
        kueue_namespace = roles[0][2].cluster.components.kueue.namespace
        for name, _role, view in roles[1:]:
            manager.admin.apply(multikueue_secret(manager, members[name], kueue_namespace,
                                                  view.cluster.components.kueue.namespace))
        argo.wait_applications({manager_tree}, USUAL, repo.revision, check=check)
        names = {a["metadata"]["name"] for a in argo.applications()}
        if names != expected:
            raise ComponentFailed(f"Argo CD has Applications {sorted(names)}, bootstrap/ and its ApplicationSet "
                                  f"make {sorted(expected)}")
        timings["synced"] = time.monotonic() - t0
        log(f"Argo CD: {len(names)} Applications Synced and Healthy at {timings['synced']:.1f}s")
        poll(lambda: check() or multikueue_connected(manager.admin, inventory), USUAL,
             "the manager's MultiKueueClusters, AdmissionChecks and ClusterQueues Active", interval=0.5)
        timings["connected"] = time.monotonic() - t0
        log(f"MultiKueue connected to {len(workers)} workers at {timings['connected']:.1f}s")
        for member in members.values():
            tree = manifests.tree_objects(repo.checkout / inventory.cluster.gitops.path / member.name)
            wait_policies_live(member.admin, admission_policies(tree), None)
            wait_kueue_webhook(member.admin, member.inventory, None)
        researchers = researcher_identities(work, manager.plane, inventory)
        return Platform(work, inventory, pathlib.Path(inventory_file), members, researchers, net, timings, argo,
                        site)
    except BaseException:
        stop_all(site, members, net)
        raise
