"""The simulated FLAME on 127.0.0.1: the pinned Kubernetes control plane, scheduler and controller manager,
KWOK nodes, and the platform's controllers (Kyverno's admission controller, JobSet, Trainer, Kueue) as local
processes, configured from the rendered bootstrap/ Applications, with the rendered tree synced in Argo CD's
order (tests/platform/argo_sync.py). Plain functions, no pytest in here (tests/journeys and tools/demo.py use it):

    flame = start_flame(work)          # raises ToolMissing / ComponentFailed; stops what it started on failure
    try: ... flame.admin, flame.researchers["vision-lab"] ...
    finally: flame.stop()              # or `with start_flame(work) as flame:`

Layers: processes.py (start/stop/ready, named failures), cluster.py (Kubernetes + KWOK), components.py (the
charts and the one chart -> local process transform), kube.py (REST client), this module (order, onboarding,
identities).
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import sys
import time


HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

from validation import validation_support as vs  # noqa: E402
from generator.inventory import load_inventory  # noqa: E402

from cluster import CLUSTER_TOOLS, ToolMissing, identity_kubeconfig, require_tools, start_kubernetes  # noqa: E402,F401
from components import (COMPONENT_TOOLS, LocalComponent, chart_objects, component_applications, localize,  # noqa: E402
                        ready_check, write_identity)
from argo_sync import ArgoSync  # noqa: E402
from kube import Client, conditions, poll  # noqa: E402
from processes import ComponentFailed, Processes, wait_ready  # noqa: E402,F401

ALL_TOOLS = CLUSTER_TOOLS + COMPONENT_TOOLS


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


@dataclasses.dataclass
class Flame:
    work: pathlib.Path
    procs: Processes
    plane: object                            # validation.control_plane.ControlPlane: its CA signs identities
    admin: Client
    admin_kubeconfig: pathlib.Path
    inventory: object
    researchers: dict[str, Researcher]      # inventory group -> a member (none for a group without identities)
    components: dict[str, LocalComponent]
    nodes: list[str]
    timings: dict[str, float]
    skipped: list[str]
    argo: ArgoSync                          # the gpugen Application's sync (it remembers what it applied)

    def stop(self):
        self.procs.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def check_running(self):
        self.procs.check_running()


# ---------------------------------------------------------------- applying objects

def _namespaced(admin: Client, obj) -> bool:
    res = admin.kube.resources(obj["apiVersion"])
    if obj["kind"] not in res:
        res = admin.kube.resources(obj["apiVersion"], refresh=True)
    return res[obj["kind"]][1]


def apply_all(admin: Client, objects, default_namespace=None):
    """Server-side apply, CRDs first (waited for Established), namespaced objects without a namespace in the
    destination namespace (as Argo CD does)."""
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        admin.apply(crd)
    for crd in crds:
        poll(lambda: conditions(admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                          crd["metadata"]["name"])).get("Established", {}).get("status") == "True",
             60, f"CRD {crd['metadata']['name']} Established")
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            continue
        if default_namespace and not obj["metadata"].get("namespace") and _namespaced(admin, obj):
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": default_namespace}}
        admin.apply(obj)


def ensure_namespace(admin: Client, name: str):
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


# ---------------------------------------------------------------- syncing the rendered tree

tree_objects = vs.tree_objects  # the files Argo CD reads from the synced tree


class _ArgoApi:
    """The API argo_sync.ArgoSync talks to (raw responses for apply and delete), on a Client."""

    def __init__(self, client: Client):
        self.client = client

    def get(self, api_version, kind, name, namespace=None):
        return self.client.get(api_version, kind, name, namespace)

    def list(self, api_version, kind):
        return self.client.list(api_version, kind)

    def apply(self, obj):
        meta = obj["metadata"]
        return self.client.http.patch(
            self.client.url(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]),
            params={"fieldManager": "argocd-controller", "fieldValidation": "Strict", "force": "true"},
            data=json.dumps(obj), headers={"Content-Type": "application/apply-patch+yaml"}, timeout=60)

    def delete(self, api_version, kind, name, namespace=None, propagation="Foreground"):
        return self.client.http.delete(self.client.url(api_version, kind, namespace, name),
                                       json={"propagationPolicy": propagation}, timeout=60)


def gpugen_argo_sync(admin: Client, bootstrap: pathlib.Path, inventory) -> ArgoSync:
    """Argo CD's sync of the gpugen Application (tests/platform/argo_sync.py) with the Application's own sync
    options (PruneLast) and Argo CD's default foreground pruning (the garbage collector runs here)."""
    name = inventory.cluster.gitops.applicationName
    (app,) = [vs.load_one(f) for f in bootstrap.rglob("*.yaml")
              if f.name.endswith(f".{name}.yaml") and vs.load_one(f).get("kind") == "Application"]
    options = app["spec"].get("syncPolicy", {}).get("syncOptions", [])
    return ArgoSync(_ArgoApi(admin), name, prune_last="PruneLast=true" in options)


def sync_tree(argo: ArgoSync, tree: pathlib.Path, timeout=120):
    """Sync `tree` as the gpugen Application: Argo CD's waves, health waits and pruning (argo_sync.py)."""
    return argo.sync(tree_objects(tree), timeout=timeout)


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
    for group in inventory.groups.values():
        for ns in group.namespaces:
            for claim in (storage.home.claimName, storage.workspace.claimName):
                poll(lambda: (admin.get("v1", "PersistentVolumeClaim", claim, ns) or {}).get("status", {})
                     .get("phase") == "Bound", 60, f"PVC {ns}/{claim} Bound")


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

def wait_policies_live(admin: Client, policies: list[dict], proc, timeout=90):
    """Kyverno has built the webhooks of every synced CEL policy (status.conditionStatus.ready, with the
    WebhookConfigured condition) and its resource webhook configurations exist. Kyverno does this asynchronously
    after the sync; without the wait the first journeys would race it."""
    def ready(policy):
        live = admin.get(policy["apiVersion"], policy["kind"], policy["metadata"]["name"]) or {}
        return (live.get("status", {}).get("conditionStatus") or {}).get("ready") is True
    for policy in policies:
        wait_ready(proc, lambda: ready(policy), timeout, f"Kyverno: {policy['kind']} {policy['metadata']['name']} ready")
    for policy_kind, webhook_kind in (("ValidatingPolicy", "ValidatingWebhookConfiguration"),
                                      ("MutatingPolicy", "MutatingWebhookConfiguration")):
        if any(p["kind"] == policy_kind for p in policies):
            name = f"kyverno-resource-{webhook_kind.removesuffix('WebhookConfiguration').lower()}-webhook-cfg"
            wait_ready(proc, lambda: admin.get("admissionregistration.k8s.io/v1", webhook_kind, name), timeout,
                       f"Kyverno's {webhook_kind} {name}")


def wait_kueue_webhook(admin: Client, inventory, proc, timeout=60):
    """Kueue's webhooks are live: a dry-run Job in a research namespace comes back suspended."""
    ns = next(iter(inventory.groups.values())).namespaces[0]
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"generateName": "probe-", "namespace": ns},
           "spec": {"suspend": False, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "image": "busybox:1.36"}]}}}}
    wait_ready(proc, lambda: admin.create(job, dry_run=True)["spec"].get("suspend") is True, timeout,
               "Kueue's Job webhook (a Job in a research namespace suspended)")


# ---------------------------------------------------------------- start

def start_flame(work: pathlib.Path, tree: pathlib.Path | None = None, bootstrap: pathlib.Path | None = None,
                inventory_file: pathlib.Path | None = None, log=print) -> Flame:
    """Start the simulated FLAME in `work` (an empty directory) with a rendered tree (default: the committed
    rendered/ and bootstrap/ of gpu_classes.yaml; GPUGEN_RENDERED_DIR, GPUGEN_BOOTSTRAP_DIR and GPUGEN_INVENTORY
    select another render). Everything started is stopped again if anything fails."""
    tree = tree or vs.rendered_dir()
    bootstrap = bootstrap or vs.bootstrap_dir()
    inventory = load_inventory(inventory_file or os.environ.get("GPUGEN_INVENTORY") or vs.REPO / "gpu_classes.yaml")
    require_tools(ALL_TOOLS)
    work = pathlib.Path(work)
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    procs = Processes()
    try:
        k8s = start_kubernetes(work, procs, inventory)
        admin = Client.from_kube(k8s.plane.kube)
        timings["kubernetes"] = time.monotonic() - t0
        log(f"kubernetes (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK) ready in "
            f"{timings['kubernetes']:.1f}s")

        # The component Applications: chart objects applied, then the controllers started together.
        local: dict[str, LocalComponent] = {}
        skipped = []
        for app in component_applications(bootstrap):
            name = app["metadata"]["labels"]["gpugen/component"]
            lc = localize(name, chart_objects(app), work / "components", k8s.plane)
            ensure_namespace(admin, lc.namespace)
            apply_all(admin, lc.apply_first, lc.namespace)
            write_identity(lc, k8s.plane)
            local[name] = lc
            skipped += [f"{name}: {s}" for s in lc.skipped]
        started = {}
        for name, lc in local.items():
            started[name] = procs.start(name, lc.argv, work / "logs" / f"{name}.log", env=lc.env, cwd=lc.root)
        for name, lc in local.items():
            wait_ready(started[name], ready_check(lc.ready_url), 120, f"{name} ({lc.ready_url})")
            for hook in lc.webhooks:
                admin.apply(hook)
        timings["components"] = time.monotonic() - t0
        log(f"components ({', '.join(local)}) ready at {timings['components']:.1f}s")

        # The rendered tree, in Argo CD's order; then what onboarding adds; then the live webhooks.
        argo = gpugen_argo_sync(admin, bootstrap, inventory)
        result = sync_tree(argo, tree)
        if result.phase != "Succeeded":
            raise ComponentFailed(f"Argo CD sync of {tree}: {result.phase}: {result.message} "
                                  f"(waiting on {result.waiting_on})")
        onboard_research_namespaces(admin, inventory)
        if "kyverno" in started:
            wait_policies_live(admin, [o for o in tree_objects(tree) if o["apiVersion"].startswith("policies.kyverno.io/")],
                               started["kyverno"])
        if "kueue" in started:
            wait_kueue_webhook(admin, inventory, started["kueue"])
        researchers = researcher_identities(work, k8s.plane, inventory)
        timings["ready"] = time.monotonic() - t0
        log(f"FLAME ready in {timings['ready']:.1f}s")
        return Flame(work, procs, k8s.plane, admin, k8s.plane.kubeconfig, inventory, researchers, local, k8s.nodes, timings,
                     skipped, argo)
    except BaseException:
        procs.stop()
        raise
