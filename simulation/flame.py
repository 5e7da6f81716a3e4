"""The simulated FLAME on 127.0.0.1, delivered by the real Argo CD: the pinned Kubernetes control plane,
scheduler and controller manager, KWOK nodes, and Argo CD (simulation/argocd_local.py) bootstrapped as the
README says, which installs Kyverno, JobSet, Trainer and Kueue from their charts and then syncs the rendered
tree. The controllers the charts' Deployments describe run as real processes from the pods they make
(simulation/pods.py). Plain functions, no pytest in here (tests/flame and simulation/demo.py use it):

    flame = start_flame(work)          # raises ToolMissing / ComponentFailed; stops what it started on failure
    try: ... flame.admin, flame.researchers["vision-lab"], flame.argocd ...
    finally: flame.stop()              # or `with start_flame(work) as flame:`

Layers: processes.py (start/stop/ready, named failures), cluster.py (Kubernetes + KWOK), pods.py (the platform's
pods as processes), argocd_local.py (git, chart mirror, Redis, Argo CD), kube.py (REST client), this module (order,
onboarding, identities).
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import time

from simulation import go_tools, manifests, pins
from generator.components import kyverno as kyverno_facts
from generator.inventory import load_inventory

# ToolMissing as ToolMissing: re-exported, start_flame raises it.
from simulation.cluster import (CLUSTER_TOOLS, JOB_POD_RUN_SECONDS, ToolMissing as ToolMissing, identity_kubeconfig,
                                require_tools, start_kubernetes)
from simulation.components import (COMPONENT_LABEL, COMPONENT_TOOLS, RUNS, SIMULATED, chart_objects,
                                  component_applications)
from simulation.argocd_local import (ARGOCD_TOOLS, ArgoCD, bootstrap as bootstrap_argocd, push_charts, start_argocd,
                          start_git, start_redis, start_registry)
from simulation.pods import Container, PodRuntime, image_repository
from simulation.netns import PodNetwork
from simulation.kube import Client
from simulation.monitoring import install_site_monitoring
from simulation.ledger import WorkloadLedger
from simulation.prometheus import SitePrometheus, start_prometheus
from simulation.processes import ComponentFailed, Processes, wait_ready
from simulation.waiting import wait_for

HERE = pathlib.Path(__file__).resolve().parent

# Images of the charts' hook Jobs that the pod runtime runs (last path segment -> tools/build.sh tool), as each
# component's folder says (generator/components/<name>/: simulation.hook_images).
HOOK_IMAGES = {image: tool for run in SIMULATED.values() for image, tool in run.hook_images}
# Kyverno's http library refuses loopback and private addresses (generator/components/kyverno/): the policy tests
# give the kyverno CLI what the simulation gives its admission controller.
KYVERNO_HTTP_BLOCKLIST = kyverno_facts.HTTP_BLOCKLIST
ALL_TOOLS = CLUSTER_TOOLS + COMPONENT_TOOLS + ARGOCD_TOOLS + list(HOOK_IMAGES.values())
# The site's Prometheus, when the inventory renders monitoring (simulation/prometheus.py).
MONITORING_TOOLS = ["prometheus"]
# Deployments of the charts this simulation does not run, and why (their pods are marked Ready).
NOT_RUN = {deployment: why for run in SIMULATED.values() for deployment, why in run.not_run}
# Seconds Argo CD usually takes from the bootstrap to every Application Synced and Healthy on a fast machine: the
# wait follows the Applications' progress and ends at ceiling() of it (simulation/waiting.py).
APPLICATIONS_USUAL = 90.0


@dataclasses.dataclass
class Researcher:
    group: str                 # inventory group
    user: str
    groups: list[str]          # as the API server sees them (certificate O=)
    kubeconfig: pathlib.Path
    namespaces: list[str]

    @property
    def client(self) -> Client:
        return Client.from_kubeconfig(self.kubeconfig)


def stop_cluster(ledger: WorkloadLedger | None, pods: PodRuntime | None, procs: Processes,
                 network: PodNetwork | None):
    """What a simulated cluster started, stopped in reverse, each part also when the one before it fails: the
    ledger's reader, the platform's pods, every process (each by its id), the network namespace. A part not yet
    started (None) is skipped."""
    try:
        if ledger is not None:
            ledger.stop()
    finally:
        try:
            if pods is not None:
                pods.stop()
        finally:
            try:
                procs.stop()
            finally:
                if network is not None:
                    network.stop()


@dataclasses.dataclass
class Flame:
    work: pathlib.Path
    procs: Processes
    plane: object                            # simulation.control_plane.ControlPlane: its CA signs identities
    admin: Client
    admin_kubeconfig: pathlib.Path
    inventory: object
    inventory_file: pathlib.Path
    researchers: dict[str, Researcher]      # inventory group -> a member (none for a group without identities)
    argocd: ArgoCD                           # the real Argo CD and the cluster's GitOps repository
    pods: PodRuntime                         # the platform's pods as processes
    network: PodNetwork                      # the simulation's network namespace (pod IPs exist only there)
    nodes: list[str]
    timings: dict[str, float]
    prometheus: SitePrometheus | None = None  # with cluster.monitoring: the site's Prometheus
    ledger: WorkloadLedger | None = None     # every Workload's spells of reserved quota since the start

    @property
    def skipped(self) -> list[str]:
        return sorted(self.pods.skipped)

    def stop(self):
        stop_cluster(self.ledger, self.pods, self.procs, self.network)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def check_running(self):
        self.procs.check_running()
        self.pods.check()

    def push(self, inventory_file: pathlib.Path, message: str, edit=None) -> str:
        """What a platform engineer's merge does: the inventory rendered and pushed to the cluster's repository,
        and Argo CD told of it (as by a Git webhook). Returns the commit."""
        revision = self.argocd.repo.commit(inventory_file, message, edit)
        self.argocd.refresh()
        return revision

    def sync(self, inventory_file: pathlib.Path, message: str, usual: float = 30) -> str:
        """push(), then every Application Synced and Healthy at that commit (a sync that usually takes `usual`
        seconds; simulation/waiting.py). Returns the commit."""
        revision = self.push(inventory_file, message)
        self.argocd.wait_applications(None, usual, revision, check=self.check_running)
        return revision


# ---------------------------------------------------------------- applying objects

def ensure_namespace(admin: Client, name: str):
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


# ---------------------------------------------------------------- the rendered tree

tree_objects = manifests.tree_objects  # the files Argo CD reads from the synced tree


def same_tree(a: pathlib.Path, b: pathlib.Path) -> list[str]:
    """Files that differ between two rendered trees (relative paths), none when they are byte-identical."""
    def files(d):
        return {p.relative_to(d): p.read_bytes() for p in d.rglob("*") if p.is_file()}

    fa, fb = files(a), files(b)
    return sorted(str(p) for p in fa.keys() | fb.keys() if fa.get(p) != fb.get(p))


# ---------------------------------------------------------------- onboarding research groups

def onboard_research_namespaces(admin: Client, inventory):
    """What onboarding a group does outside the rendered tree: its namespaces (unless rendered) and the home
    and workspace PVCs, each bound to a PersistentVolume (nothing provisions storage here)."""
    storage = inventory.cluster.storage
    for group in inventory.groups.values():
        for ns in group.namespaces:
            if admin.get("v1", "Namespace", ns) is None:
                ensure_namespace(admin, ns)
            for claim in (storage.home.claimName, storage.workspace.claimName):
                pv = f"{ns}-{claim}"
                admin.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
                             "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteMany"],
                                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                                      "hostPath": {"path": f"/flame/{ns}/{claim}"},
                                      "claimRef": {"namespace": ns, "name": claim}}})
                admin.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "metadata": {"name": claim, "namespace": ns},
                             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                                      "resources": {"requests": {"storage": "100Gi"}}}})
    # One wait over every claim, following how many are bound: the PersistentVolume controller binds them one after
    # another, so a national platform's thousands take minutes where FLAME's take a second.
    claims = {(ns, claim) for group in inventory.groups.values() for ns in group.namespaces
              for claim in (storage.home.claimName, storage.workspace.claimName)}
    bound: set[tuple[str, str]] = set()

    def every_claim_bound():
        bound.clear()
        bound.update((pvc["metadata"]["namespace"], pvc["metadata"]["name"])
                     for pvc in admin.list("v1", "PersistentVolumeClaim")
                     if pvc.get("status", {}).get("phase") == "Bound")
        return claims <= bound
    wait_for(every_claim_bound, f"the research namespaces' {len(claims)} PVCs Bound", 6 + 0.05 * len(claims),
             progress=lambda: len(bound & claims), error=ComponentFailed,
             describe=lambda: f"not bound yet: {sorted(claims - bound)[:10]}")


def researcher_identities(flame_work: pathlib.Path, plane, inventory) -> dict[str, Researcher]:
    """One member per group with identities in the inventory: a client certificate CN=<user>, O=<group>."""
    out = {}
    for name, group in inventory.groups.items():
        ids = group.identities
        if ids.groups:
            user, groups = f"{name}-researcher", [ids.groups[0]]
        elif ids.users:
            user, groups = ids.users[0], []
        else:
            continue
        kc = identity_kubeconfig(plane, flame_work / "researchers", name, user, groups, namespace=group.namespaces[0])
        out[name] = Researcher(name, user, groups, kc, list(group.namespaces))
    return out


# ---------------------------------------------------------------- readiness of the live webhooks

def admission_policies(objects: list[dict]) -> list[dict]:
    """Kyverno's admission policies among synced objects (a DeletingPolicy has no webhook and no readiness: the
    cleanup controller runs it)."""
    return [o for o in objects if o["apiVersion"].startswith("policies.kyverno.io/")
            and o["kind"] in ("ValidatingPolicy", "MutatingPolicy")]


def wait_policies_live(admin: Client, policies: list[dict], proc, usual=9):
    """Kyverno has built the webhooks of every synced CEL policy (status.conditionStatus.ready, with the
    WebhookConfigured condition) and its resource webhook configurations exist. Kyverno does this asynchronously
    after the sync; without the wait the first journeys would race it."""
    def ready(policy):
        live = admin.get(policy["apiVersion"], policy["kind"], policy["metadata"]["name"]) or {}
        return (live.get("status", {}).get("conditionStatus") or {}).get("ready") is True
    for policy in policies:
        wait_ready(proc, lambda: ready(policy), usual, f"Kyverno: {policy['kind']} {policy['metadata']['name']} ready")
    for policy_kind, webhook_kind in (("ValidatingPolicy", "ValidatingWebhookConfiguration"),
                                      ("MutatingPolicy", "MutatingWebhookConfiguration")):
        if any(p["kind"] == policy_kind for p in policies):
            name = f"kyverno-resource-{webhook_kind.removesuffix('WebhookConfiguration').lower()}-webhook-cfg"
            wait_ready(proc, lambda: admin.get("admissionregistration.k8s.io/v1", webhook_kind, name), usual,
                       f"Kyverno's {webhook_kind} {name}")


def wait_kueue_webhook(admin: Client, inventory, proc, usual=6):
    """Kueue's webhooks are live: a dry-run Job in a research namespace comes back suspended."""
    ns = next(iter(inventory.groups.values())).namespaces[0]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "probe-", "namespace": ns},
           "spec": {"suspend": False, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox:1.36"}]}}}}
    wait_ready(proc, lambda: admin.create(job, dry_run=True)["spec"].get("suspend") is True, usual,
               "Kueue's Job webhook (a Job in a research namespace suspended)")


# ---------------------------------------------------------------- start

def component_charts(bootstrap: pathlib.Path) -> list[tuple[dict, list[dict]]]:
    """Each component Application of a bootstrap/ tree with the objects its chart renders, read once per start."""
    return [(app, chart_objects(app)) for app in component_applications(bootstrap)]


def hook_images(charts: list[tuple[dict, list[dict]]]) -> dict[str, pathlib.Path]:
    """Image repository -> binary, for the containers of the charts' Jobs whose image is in HOOK_IMAGES."""
    out = {}
    for _, objects in charts:
        for o in objects:
            if o.get("kind") != "Job":
                continue
            for c in o["spec"]["template"]["spec"]["containers"]:
                repository = image_repository(c["image"])
                tool = HOOK_IMAGES.get(repository.rsplit("/", 1)[-1])
                if tool:
                    out[repository] = go_tools.tool_bin(tool)
    return out


def platform_containers(charts: list[tuple[dict, list[dict]]]) -> dict[str, Container]:
    """namespace/Deployment -> the pinned binary that runs it: for each component Application, the Deployments of
    its chart (as helm renders it for Argo CD) whose names end with RUNS' suffixes."""
    out = {}
    for app, objects in charts:
        name = app["metadata"]["labels"][COMPONENT_LABEL]
        deployments = [o["metadata"]["name"] for o in objects if o.get("kind") == "Deployment"]
        for process in RUNS[name]:
            (deployment,) = [d for d in deployments if d.endswith(process.deployment)] or [None]
            if deployment is None:
                raise ComponentFailed(f"{name}: no Deployment named *{process.deployment} in its chart: {deployments}")
            out[f"{app['spec']['destination']['namespace']}/{deployment}"] = Container(
                deployment, go_tools.tool_bin(process.tool), process.host_flags, process.env)
    return out


def start_flame(work: pathlib.Path, tree: pathlib.Path | None = None, inventory_file: pathlib.Path | None = None,
                log=print, job_seconds: float = JOB_POD_RUN_SECONDS) -> Flame:
    """Start the simulated FLAME in `work` (an empty directory) for an inventory (default gpu_classes.yaml, or
    GPUGEN_INVENTORY) whose rendered tree is `tree` (default the committed rendered/, or GPUGEN_RENDERED_DIR):
    the cluster's repository must carry exactly that tree. A Job's pod runs `job_seconds` before KWOK completes it,
    unless its pod-complete delay annotation says otherwise. Everything started is stopped again if anything
    fails."""
    tree = tree or manifests.rendered_dir()
    inventory_file = pathlib.Path(inventory_file or os.environ.get("GPUGEN_INVENTORY")
                                  or pins.REPO / "gpu_classes.yaml")
    inventory = load_inventory(inventory_file)
    require_tools(ALL_TOOLS + (MONITORING_TOOLS if inventory.cluster.monitoring else []))
    work = pathlib.Path(work)
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    procs = Processes()
    runtime = net = ledger = None
    try:
        net = PodNetwork.start(work)
        registry = start_registry(work, procs, net)
        repo = start_git(work, procs, inventory_file, f"{registry}/charts", net)
        differs = same_tree(repo.checkout / "rendered", tree)
        if differs:
            raise ComponentFailed(f"the cluster's repository would not carry the tree under test {tree}: "
                                  f"{differs[:5]} differ (only bootstrap/ may name the site's URLs)")
        charts = component_charts(repo.checkout / "bootstrap")
        containers = platform_containers(charts)
        namespaces = sorted({key.split("/")[0] for key in containers})
        k8s = start_kubernetes(work, procs, inventory, pod_runtime_namespaces=namespaces, netns=net,
                               job_seconds=job_seconds)
        admin = Client.from_kube(k8s.plane.kube)
        runtime = PodRuntime(admin, k8s.plane, work, namespaces, containers, NOT_RUN, procs, net, log,
                             images=hook_images(charts))
        runtime.start()
        timings["kubernetes"] = time.monotonic() - t0
        log(f"kubernetes (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK) ready in "
            f"{timings['kubernetes']:.1f}s")

        # What the site already runs beside the platform (the Prometheus Operator's CRDs and namespace): there
        # before Argo CD, as the README's bootstrap asks.
        install_site_monitoring(admin, inventory)
        push_charts(repo.checkout / "bootstrap", registry, work)
        argo = start_argocd(work, procs, k8s.plane, admin, repo, start_redis(work, procs, net), net)
        timings["argocd"] = time.monotonic() - t0
        log(f"git daemon, chart mirror, redis, Argo CD ready at {timings['argocd']:.1f}s")

        # The README's bootstrap, then Argo CD alone: the app-of-apps, the components, the gpugen Application.
        bootstrap_argocd(argo)
        argo.wait_applications(None, APPLICATIONS_USUAL, repo.revision, check=runtime.check)
        expected = expected_applications(repo.checkout / "bootstrap")
        names = {a["metadata"]["name"] for a in argo.applications()}
        if names != expected:
            raise ComponentFailed(f"Argo CD has Applications {sorted(names)}, bootstrap/ renders {sorted(expected)}")
        timings["synced"] = time.monotonic() - t0
        log(f"Argo CD: {len(names)} Applications Synced and Healthy at {timings['synced']:.1f}s")

        onboard_research_namespaces(admin, inventory)
        synced = tree_objects(tree)
        policies = admission_policies(synced)
        if policies:
            wait_policies_live(admin, policies, None)
        if inventory.cluster.components.kueue.install:
            wait_kueue_webhook(admin, inventory, None)
        # The site's Prometheus, once Argo CD has synced the monitors and rules it reads.
        prometheus = start_prometheus(work, procs, k8s.plane, synced, inventory, net)
        # What ran, from Kueue's Workloads: the accounting is checked against it.
        ledger = WorkloadLedger(admin, inventory).start()
        researchers = researcher_identities(work, k8s.plane, inventory)
        timings["ready"] = time.monotonic() - t0
        log(f"FLAME ready in {timings['ready']:.1f}s")
        return Flame(work, procs, k8s.plane, admin, k8s.plane.kubeconfig, inventory, inventory_file, researchers,
                     argo, runtime, net, k8s.nodes, timings, prometheus, ledger)
    except BaseException as e:
        hold = float(os.environ.get("GPUGEN_FLAME_HOLD_ON_FAILURE", "0"))
        if hold and not isinstance(e, KeyboardInterrupt):  # a developer inspects the failed start-up first
            log(f"start-up failed: {e}\nkept running {hold:.0f}s for inspection: "
                f"KUBECONFIG={work / 'apiserver' / 'kubeconfig'}")
            time.sleep(hold)
        stop_cluster(ledger, runtime, procs, net)
        raise


def expected_applications(bootstrap: pathlib.Path) -> set[str]:
    return {manifests.load_one(f)["metadata"]["name"] for f in bootstrap.rglob("*.yaml")
            if manifests.load_one(f).get("kind") == "Application"}
