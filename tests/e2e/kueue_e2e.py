"""End-to-end harness: the pinned Kueue controller, webhooks included, against the test API server.

Builds on the simulation package: simulation.control_plane (etcd + kube-apiserver, PKI, pinned CRDs), its pins,
tool paths and manifests, and the Kube client (simulation.kube). The session fixture
`control_plane` below starts this tier's own control plane; a missing tool fails when CI is set and skips
otherwise (simulation.prerequisites.unavailable).

What runs for real: kube-apiserver with the Trainer, JobSet, Kueue (and Kyverno, Argo CD) CRDs; the Kueue
controller built from its Go module (tools/build.sh), configured, identified and authorised exactly as the
rendered Kueue Application installs it: its Configuration, Deployment arguments, RBAC and admission webhook
configurations come from `helm template` of the pinned chart with the rendered values (simulation/charts.py),
with only local-process adaptations (local_process_config; Service references turned into a loopback URL +
caBundle). What does not run: kube-controller-manager (no garbage
collector, no Job pods), kube-scheduler, nodes, the Trainer and JobSet controllers, Kyverno. Kueue needs
none of them to admit or hold workloads against quota.
"""
from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from typing import Any

import pytest
import requests
import yaml

from simulation import go_tools, manifests, pins, prerequisites
from simulation.kube import Kube, message
from simulation import argo_sync
from simulation import kube as platform_kube  # simulation/kube.py, for its poll
from simulation import charts
from simulation.control_plane import (
    ControlPlane, free_port, issue_certificate, prepare_cluster, start_control_plane, write_kubeconfig)
from simulation.processes import Processes, stop_process
from simulation.waiting import PROBE, REQUEST

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_RUNTIME_PATCH_MANAGER = "kueue.x-k8s.io/manager"
GPU = "nvidia.com/gpu"
# Seconds Kueue usually takes to act on a change here (admit, unsuspend, mark a queue Active); every wait on it
# ends at ceiling(USUAL) (simulation/waiting.py).
USUAL = 9.0


def poll(check, usual=USUAL, what="condition", interval=0.25):
    """Return check()'s first truthy value; fail with `what` (and the last value) at ceiling(usual)."""
    return platform_kube.poll(check, usual, what=what, interval=interval)


# Named apart from the fixture, so that a test's `control_plane` argument does not shadow the import.
@pytest.fixture(scope="module", name="control_plane")
def control_plane_fixture(tmp_path_factory):
    """This tier's own etcd + kube-apiserver, the pinned CRDs and the tree's namespaces on it (the test module
    imports this fixture); stopped when the module's tests are done, not kept through the later tiers."""
    with start_control_plane(tmp_path_factory.mktemp("apiserver")) as plane:
        prepare_cluster(plane)
        yield plane


# ---------------------------------------------------------------- a small REST client on top of Kube

class Api:
    """The e2e tier's requests (field manager gpugen-e2e), asserting success: get() is None on 404, list() the
    items; a namespaced kind without a namespace means all namespaces. Discovery and URLs: Kube."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self.http = kube.http

    def serves(self, api_version, kind):
        return kind in self.kube.resources(api_version, refresh=True)

    def get(self, api_version, kind, name, namespace=None):
        r = platform_kube.get_retrying(self.http, self.kube.resource_url(api_version, kind, namespace, name))
        if r.status_code == 404:
            return None
        assert r.ok, f"GET {kind} {namespace}/{name}: {r.status_code} {message(r)}"
        return r.json()

    def list(self, api_version, kind, namespace=None):
        r = platform_kube.get_retrying(self.http, self.kube.resource_url(api_version, kind, namespace))
        assert r.ok, f"LIST {kind} in {namespace}: {r.status_code} {message(r)}"
        return r.json()["items"]

    def create(self, obj):
        meta = obj["metadata"]
        r = self.http.post(self.kube.resource_url(obj["apiVersion"], obj["kind"], meta.get("namespace")),
                           params={"fieldManager": "gpugen-e2e"}, json=obj, timeout=REQUEST)
        assert r.status_code == 201, f"creating {obj['kind']} {meta.get('name') or meta.get('generateName')}: " \
                                     f"{r.status_code} {message(r)}"
        return r.json()

    def apply(self, obj):
        meta = obj["metadata"]
        url = self.kube.resource_url(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        return self.http.patch(url, params={"fieldManager": "gpugen-e2e", "fieldValidation": "Strict", "force": "true"},
                               data=json.dumps(obj), headers={"Content-Type": "application/apply-patch+yaml"},
                               timeout=REQUEST)

    def delete(self, api_version, kind, name, namespace=None, propagation="Background"):
        # Background: nothing here runs the garbage collector, and the orphan default for Jobs would leave
        # an `orphan` finalizer only the GC removes (likewise Foreground's foregroundDeletion finalizer).
        r = self.http.delete(self.kube.resource_url(api_version, kind, namespace, name),
                             json={"propagationPolicy": propagation}, timeout=REQUEST)
        assert r.status_code in (200, 202, 404), f"DELETE {kind} {namespace}/{name}: {r.status_code} {message(r)}"

    def delete_all(self, api_version, kind, namespace):
        r = self.http.delete(self.kube.resource_url(api_version, kind, namespace),
                             json={"propagationPolicy": "Background"}, timeout=REQUEST)
        assert r.ok or r.status_code == 404, f"DELETE all {kind} in {namespace}: {r.status_code} {message(r)}"


def condition(obj, type_):
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c.get("type") == type_:
            return c
    return None


# ---------------------------------------------------------------- the Kueue controller process

def kueue_module_dir() -> pathlib.Path:
    return go_tools.module_dir("sigs.k8s.io/kueue", pins.versions()["KUEUE_VERSION"])


def kueue_embedded_trainer_version() -> str:
    """The github.com/kubeflow/trainer/v2 version the pinned Kueue module requires (its go.mod)."""
    gomod = (kueue_module_dir() / "go.mod").read_text()
    m = re.search(r"^\s*github\.com/kubeflow/trainer/v2 (v\S+)", gomod, re.MULTILINE)
    assert m, "Kueue's go.mod no longer requires github.com/kubeflow/trainer/v2"
    return m.group(1)


def bootstrap_applications() -> list[dict]:
    return [a for a in (manifests.load_one(f) for f in sorted((manifests.bootstrap_dir() / "platform").rglob("*.yaml")))
            if a["kind"] == "Application"]


def gpugen_application() -> dict:
    """The rendered Application that syncs rendered/ (the one with a directory source)."""
    (app,) = [a for a in bootstrap_applications() if "directory" in a["spec"]["source"]]
    return app


def kueue_application() -> dict:
    """The rendered Argo CD Application that installs Kueue (bootstrap/platform)."""
    (app,) = [a for a in bootstrap_applications() if a["metadata"].get("labels", {}).get("gpugen/component") == "kueue"]
    return app


@functools.cache
def kueue_chart_objects() -> tuple[dict, ...]:
    """What Argo CD applies for the Kueue Application: `helm template` of the pinned chart with its values."""
    try:
        return tuple(charts.helm_template(kueue_application()))
    except FileNotFoundError as e:
        prerequisites.unavailable(str(e))


def from_chart(kind: str) -> list[dict]:
    return [o for o in kueue_chart_objects() if o["kind"] == kind]


def kueue_manager_config() -> tuple[dict, list[str]]:
    """The Configuration and the arguments the chart's Deployment gives the manager container."""
    (deployment,) = from_chart("Deployment")
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "manager"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "manager-config")
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "manager-config")
    (config_map,) = [c for c in from_chart("ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"]]
    config = yaml.safe_load(config_map["data"][mount["subPath"]] if mount.get("subPath")
                            else next(iter(config_map["data"].values())))
    args = [a for a in container.get("args", []) if not a.startswith("--config")]
    return config, args


def kueue_webhook_configurations(base_url: str, ca_pem: bytes) -> list[dict]:
    """The chart's webhook configurations, each Service reference turned into base_url + caBundle (Kueue runs
    as a local process); everything else (rules, selectors, failure policies) as the chart renders it."""
    ca_bundle = base64.b64encode(ca_pem).decode()
    docs = []
    for doc in from_chart("MutatingWebhookConfiguration") + from_chart("ValidatingWebhookConfiguration"):
        doc = json.loads(json.dumps(doc))
        for hook in doc["webhooks"]:
            service = hook["clientConfig"]["service"]
            hook["clientConfig"] = {"url": base_url + service["path"], "caBundle": ca_bundle}
        docs.append(doc)
    assert docs, "the Kueue chart rendered no webhook configuration"
    return docs


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def kueue_rbac(namespace: str) -> list[dict]:
    """The chart's identity and RBAC for the controller, applied as they are."""
    out = []
    for obj in kueue_chart_objects():
        if obj["kind"] in RBAC_KINDS:
            obj = json.loads(json.dumps(obj))
            if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
                obj["metadata"].setdefault("namespace", namespace)
            out.append(obj)
    return out


def kueue_service_account(namespace: str) -> tuple[str, str]:
    (deployment,) = from_chart("Deployment")
    return namespace, deployment["spec"]["template"]["spec"]["serviceAccountName"]


def _client_identity(pki: pathlib.Path, out: pathlib.Path, server: str, namespace: str, name: str) -> pathlib.Path:
    """A kubeconfig authenticating as the service account (x509: CN = its user name, O = its groups), so
    Kueue acts with the identity and the RBAC it has on a cluster."""
    subject = (f"/O=system:serviceaccounts/O=system:serviceaccounts:{namespace}"
               f"/CN=system:serviceaccount:{namespace}:{name}")
    issue_certificate(pki, out, "client", subject, "extendedKeyUsage=clientAuth\n")
    return write_kubeconfig(out / "kubeconfig", server, pki / "ca.crt", out / "client.crt", out / "client.key",
                            user="kueue", context="kueue")


def _serving_cert(pki: pathlib.Path, out: pathlib.Path):
    """tls.crt/tls.key for 127.0.0.1, signed by the test CA the API server trusts."""
    out.mkdir(parents=True)
    issue_certificate(pki, out, "tls", "/CN=kueue-webhook",
                      "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")


METRICS_CERT_DIR = pathlib.Path("/etc/kueue/metrics/certs")


def _metrics_cert_launcher(work: pathlib.Path, certs: pathlib.Path) -> list[str]:
    """Command prefix giving Kueue its metrics certificate at the path it hard-codes.

    With internal cert management off, cmd/kueue/main.go reads /etc/kueue/metrics/certs/tls.{crt,key}
    (no flag or config field changes that path) and exits if they are missing. Rather than writing into
    the host's /etc, Kueue runs in a private mount namespace (unshare; a user namespace too when not root)
    where /etc is a directory of symlinks to the real /etc plus kueue/metrics/certs."""
    if (METRICS_CERT_DIR / "tls.crt").is_file() and (METRICS_CERT_DIR / "tls.key").is_file():
        return []  # provisioned on this machine: use it as is
    unshare = shutil.which("unshare")
    if not unshare:
        prerequisites.unavailable("Kueue reads its metrics certificate from /etc/kueue/metrics/certs; "
                                  "`unshare` (util-linux) is needed to provide it in a private mount namespace")
    etc, real = work / "etc", work / "etc-real"
    etc.mkdir()
    real.mkdir()
    for entry in os.listdir("/etc"):
        if entry != "kueue":
            (etc / entry).symlink_to(real / entry)
    target = etc / "kueue" / "metrics" / "certs"
    target.mkdir(parents=True)
    for f in ("tls.crt", "tls.key"):
        shutil.copy(certs / f, target / f)
    script = 'mount --rbind /etc "$1" && mount --bind "$2" /etc && shift 2 && exec "$@"'
    errors = []
    # Root with CAP_SYS_ADMIN needs only a mount namespace; otherwise a user namespace maps us to root in it.
    for extra in ([[], ["--map-root-user"]] if os.geteuid() == 0 else [["--map-root-user"]]):
        prefix = [unshare, "--mount", "--propagation", "private", *extra, "--", "sh", "-c", script, "sh",
                  str(real), str(etc)]
        probe = subprocess.run(prefix + ["true"], capture_output=True, text=True)
        if probe.returncode == 0:
            return prefix
        errors.append(f"{' '.join(prefix[:5 + len(extra)])}: {probe.stderr.strip()}")
    raise prerequisites.Unavailable(
        "Kueue reads its metrics certificate from /etc/kueue/metrics/certs (hard-coded when internal cert management "
        f"is off) and no private mount namespace could provide it ({'; '.join(errors)}); provision that directory "
        "(any key pair) to run Kueue directly")


@dataclasses.dataclass
class Kueue:
    proc: subprocess.Popen
    log: pathlib.Path
    config: dict
    webhooks: list[dict]
    user: str = ""

    def log_tail(self, n=4000):
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def alive(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"the Kueue controller exited with {self.proc.returncode}:\n{self.log_tail()}")
        return True


def local_process_config(config: dict, webhook_port: int, health_port: int, metrics_port: int,
                         certs: pathlib.Path, namespace: str) -> dict:
    """The rendered Configuration with only what a local process needs changed: loopback ports, the test's
    webhook certificate (internal cert management would sign for the in-cluster Service name), and the
    visibility API server off (an aggregated API server that needs an APIService and a Service in the cluster),
    and the leader-election Lease in the release namespace (in a pod, controller-runtime reads it from the
    service account's namespace file).
    Everything the platform decides (integrations, namespaces, queue-name policy, waitForPodsReady) is kept."""
    config = json.loads(json.dumps(config))
    config.setdefault("webhook", {}).update(host="127.0.0.1", port=webhook_port, certDir=str(certs))
    config.setdefault("health", {})["healthProbeBindAddress"] = f"127.0.0.1:{health_port}"
    config.setdefault("metrics", {})["bindAddress"] = f"127.0.0.1:{metrics_port}"
    config["internalCertManagement"] = {"enable": False}
    if config.get("leaderElection", {}).get("leaderElect"):
        config["leaderElection"].setdefault("resourceNamespace", namespace)
    config.setdefault("featureGates", {})["VisibilityOnDemand"] = False
    return config


def start_kueue(plane: ControlPlane, work: pathlib.Path) -> Kueue:
    """The Kueue controller on `plane` (prepared: CRDs installed) as its service account, webhooks registered."""
    binary = go_tools.tool_bin("kueue")
    if not os.access(binary, os.X_OK):
        prerequisites.unavailable(f"{binary} is missing: run `make tools` (tools/build.sh kueue)")
    kube, pki = plane.kube, plane.pki
    api = Api(kube)
    certs = work / "webhook-certs"
    _serving_cert(pki, certs)
    launcher = _metrics_cert_launcher(work, certs)

    webhook_port, health_port, metrics_port = free_port(), free_port(), free_port()
    namespace = kueue_application()["spec"]["destination"]["namespace"]
    config, args = kueue_manager_config()
    config = local_process_config(config, webhook_port, health_port, metrics_port, certs, namespace)
    config_file = work / "kueue-config.yaml"
    config_file.write_text(yaml.safe_dump(config))

    r = api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    assert r.ok, message(r)
    for obj in kueue_rbac(namespace):
        r = api.apply(obj)
        assert r.ok, f"Kueue RBAC {obj['kind']} {obj['metadata']['name']}: {message(r)}"
    sa_namespace, sa_name = kueue_service_account(namespace)
    identity = work / "identity"
    identity.mkdir()
    kubeconfig = _client_identity(pki, identity, kube.server, sa_namespace, sa_name)

    log = plane.logs / "kueue.log"  # beside the control plane's: one directory to read when a test fails
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    proc = Processes().start("kueue", launcher + [binary, "--config", config_file, *args], log, env=env).popen
    kueue = Kueue(proc, log, config, [], f"system:serviceaccount:{sa_namespace}:{sa_name}")
    try:
        health = requests.Session()
        health.trust_env = False

        def ready():
            kueue.alive()  # an exited controller fails at once, with its log
            try:
                return health.get(f"http://127.0.0.1:{health_port}/readyz", timeout=PROBE).status_code == 200
            except requests.ConnectionError:
                return False
        poll(ready, 180, "Kueue /readyz (webhook server listening)", interval=0.5)

        # Webhooks only once Kueue serves them: they fail closed.
        kueue.webhooks = kueue_webhook_configurations(f"https://127.0.0.1:{webhook_port}",
                                                      (pki / "ca.crt").read_bytes())
        for hook_config in kueue.webhooks:
            r = api.apply(hook_config)
            assert r.ok, f"{hook_config['metadata']['name']}: {message(r)}"

        # The API server picks webhook configurations up asynchronously: wait until a dry-run Job with a
        # queue label comes back suspended by Kueue's mutating webhook. Kueue only manages the namespaces its
        # managedJobsNamespaceSelector selects (the research namespaces), so the probe runs in one of them.
        (selected,) = config["managedJobsNamespaceSelector"]["matchExpressions"]
        probe_ns = selected["values"][0]
        assert api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": probe_ns}}).ok
        probe_job = job_manifest("webhook-probe", probe_ns, gpus=0, queue="probe")
        probe_job["spec"]["suspend"] = False

        def mutated():
            kueue.alive()
            r = kube.http.post(kube.resource_url("batch/v1", "Job", probe_ns), params={"dryRun": "All"}, json=probe_job,
                               timeout=REQUEST)
            return r.status_code == 201 and r.json()["spec"].get("suspend") is True
        poll(mutated, 60, "Kueue's Job webhook to suspend a queued Job", interval=0.5)
    except BaseException:
        stop_process(proc)
        raise
    return kueue


# ---------------------------------------------------------------- rendered trees on the cluster

def render(inventory: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """`python -m generator render` of an inventory into out/rendered (+ bootstrap, docs beside it)."""
    out.mkdir(parents=True, exist_ok=True)
    tree = out / "rendered"
    r = subprocess.run([sys.executable, "-m", "generator", "render", "--inventory", str(inventory),
                        "--out", str(tree), "--bootstrap-out", str(out / "bootstrap"),
                        "--docs-out", str(out / "training-runtimes.md")],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, f"render of {inventory} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return tree


# What Argo CD syncs from a tree (argo_sync orders it: waves, kinds).
tree_objects = manifests.tree_objects


def key(obj):
    return obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"), obj["metadata"]["name"]


JOB_KINDS = [("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("batch/v1", "Job")]


class Platform:
    """The cluster with one rendered tree applied; switches trees and clears jobs between tests."""

    def __init__(self, api: Api, kueue: Kueue):
        self.api, self.kueue = api, kueue
        # The rendered Application's own sync options decide PruneLast, as on the cluster.
        app_options = gpugen_application()["spec"]["syncPolicy"]["syncOptions"]
        self.argo = argo_sync.ArgoSync(api, gpugen_application()["metadata"]["name"],
                                       prune_last="PruneLast=true" in app_options, propagation="Background",
                                       destination_namespace=gpugen_application()["spec"]["destination"]["namespace"])
        self.last_sync = None
        self.previous_objects: list[dict] = []
        self.tree: pathlib.Path | None = None
        self.objects: list[dict] = []
        self.skipped: list[str] = []

    # -- tree

    def namespaces(self, objects=None):
        out = set()
        for o in self.objects if objects is None else objects:
            if o["kind"] == "LocalQueue":
                out.add(o["metadata"]["namespace"])
            if o["kind"] == "ClusterQueue":
                for e in o["spec"].get("namespaceSelector", {}).get("matchExpressions", []):
                    out.update(e.get("values", []))
        return sorted(out)

    def of_kind(self, kind):
        return [o for o in self.objects if o["kind"] == kind]

    def use(self, tree: pathlib.Path, wait_deleted: bool = True, keep_jobs: bool = False):
        """Make `tree` the applied tree, synced as Argo CD syncs the rendered Application (simulation/
        argo_sync.py: waves, PruneLast, waiting on pruned objects). The sync must succeed; with wait_deleted,
        objects it pruned must then be gone (a ClusterQueue still reserving quota would stay terminating)."""
        tree = pathlib.Path(tree).resolve()
        if self.tree == tree:
            self.clear_jobs()
            return self
        if not keep_jobs:
            self.clear_jobs()
        new = tree_objects(tree)
        self.skipped = []
        self.previous_objects, self.objects = self.objects, new
        for ns in self.namespaces():
            r = self.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
            assert r.ok, message(r)
        served = []
        for o in new:
            if not self.api.serves(o["apiVersion"], o["kind"]):
                self.skipped.append(f"{o['kind']}/{o['metadata']['name']} ({o['apiVersion']} not served)")
                continue
            served.append(o)
        result = self.argo.sync(served, usual=USUAL)
        self.last_sync = result
        assert result.phase == "Succeeded", f"Argo CD sync {result.phase}: {result.message}: {result.waiting_on}"
        if wait_deleted:
            for name in result.waiting_on:
                kind, _, obj_name = name.partition("/")
                o = next(x for x in self.argo.last_tasks if x.obj["kind"] == kind
                         and x.obj["metadata"]["name"] == obj_name)
                poll(lambda: self.api.get(o.obj["apiVersion"], kind, obj_name, o.obj["metadata"].get("namespace"))
                     is None, what=f"pruned {name} to be gone")
        self.tree = tree
        if not keep_jobs:
            self.wait_active()
        return self

    def queue_status(self):
        """(kind, name, namespace, Active condition) of every ClusterQueue and LocalQueue of the tree."""
        rows = []
        for o in self.of_kind("ClusterQueue") + self.of_kind("LocalQueue"):
            live = self.api.get(o["apiVersion"], o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))
            active = condition(live, "Active")
            if active and active.get("observedGeneration") != live["metadata"]["generation"]:
                active = {**active, "status": "Stale", "reason": "NotObservedYet"}
            rows.append((o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"), active))
        return rows

    def wait_active(self, usual=USUAL):
        """Every queue Active=True for its current generation: Kueue updates its cache from the watch event
        before its status, so queue changes of a new tree are in effect for the jobs that follow."""
        def all_active():
            self.kueue.alive()
            rows = self.queue_status()
            return rows if all(c and c["status"] == "True" for *_, c in rows) else None
        try:
            return poll(all_active, usual, "every ClusterQueue and LocalQueue Active=True")
        except AssertionError:
            bad = [(k, n, ns, c) for k, n, ns, c in self.queue_status() if not c or c["status"] != "True"]
            raise AssertionError(f"not Active: {bad}") from None

    # -- jobs

    def clear_jobs(self):
        """Delete every Job/TrainJob and then their Workloads (no garbage collector runs here)."""
        namespaces = sorted(set(self.namespaces()) | set(self.namespaces(self.previous_objects)))
        for ns in namespaces:
            for api_version, kind in JOB_KINDS:
                self.api.delete_all(api_version, kind, ns)
        for ns in namespaces:
            for api_version, kind in JOB_KINDS:
                poll(lambda: not self.api.list(api_version, kind, ns), what=f"{kind}s in {ns} to go")
            self.api.delete_all("kueue.x-k8s.io/v1beta2", "Workload", ns)
        for ns in namespaces:
            poll(lambda: not self.api.list("kueue.x-k8s.io/v1beta2", "Workload", ns), what=f"Workloads in {ns} to go")
        self.wait_usage_zero()

    def wait_usage_zero(self):
        def idle():
            for cq in self.of_kind("ClusterQueue"):
                live = self.api.get(cq["apiVersion"], "ClusterQueue", cq["metadata"]["name"])
                st = live.get("status", {})
                if st.get("admittedWorkloads", 0) or st.get("reservingWorkloads", 0) or st.get("pendingWorkloads", 0):
                    return False
            return True
        poll(idle, what="every ClusterQueue to report no workloads")

    def submit(self, obj):
        return self.api.create(obj)

    def remove(self, job):
        """What deleting a job does on a real cluster: the job goes, the GC deletes its Workload."""
        meta = job["metadata"]
        api_version, kind = job["apiVersion"], job["kind"]
        wl = self.workload(job, usual=0.5, optional=True)
        self.api.delete(api_version, kind, meta["name"], meta["namespace"])
        poll(lambda: self.api.get(api_version, kind, meta["name"], meta["namespace"]) is None, what="job deletion")
        if wl:
            self.api.delete("kueue.x-k8s.io/v1beta2", "Workload", wl["metadata"]["name"], meta["namespace"])
            poll(lambda: self.api.get("kueue.x-k8s.io/v1beta2", "Workload", wl["metadata"]["name"],
                                      meta["namespace"]) is None, what="workload deletion")

    def refresh(self, job):
        meta = job["metadata"]
        return self.api.get(job["apiVersion"], job["kind"], meta["name"], meta["namespace"])

    def started(self, job, usual=USUAL):
        """The job once Kueue's job controller has acted on the admission (unsuspended it)."""
        def unsuspended():
            self.kueue.alive()
            live = self.refresh(job)
            return live if live["spec"].get("suspend") is False else None
        return poll(unsuspended, usual, f"Kueue to unsuspend {job['kind']} {job['metadata']['name']}")

    def workload(self, job, usual=USUAL, optional=False):
        """The Workload Kueue made for `job` (owner reference by uid); with `optional`, None when Kueue made none
        within a short while (a job it ignores)."""
        uid = job["metadata"]["uid"]

        def find():
            self.kueue.alive()
            for wl in self.api.list("kueue.x-k8s.io/v1beta2", "Workload", job["metadata"]["namespace"]):
                if any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences", [])):
                    return wl
            return None
        try:
            return poll(find, usual, f"Kueue's Workload for {job['kind']} {job['metadata']['name']}")
        except AssertionError:
            if optional:
                return None
            raise

    def decision(self, job, usual=USUAL) -> Decision:
        """Wait until Kueue has decided on `job`'s Workload: admitted, or a scheduling attempt left it pending."""
        def decided():
            wl = self.workload(job)
            admitted = condition(wl, "Admitted")
            if admitted and admitted["status"] == "True":
                return wl
            reserved = condition(wl, "QuotaReserved")
            if reserved and reserved["status"] == "False" and reserved.get("message"):
                return wl
            return None
        wl = poll(decided, usual, f"Kueue's decision on {job['kind']} {job['metadata']['name']}")
        return Decision.of(job, wl)

    def admitted(self, job, usual=USUAL) -> Decision:
        """Wait for Kueue to admit `job` (e.g. after quota was freed); fail with its last decision."""
        last = []

        def admitted():
            last[:] = [self.decision(job)]
            return last[0].admitted
        try:
            poll(admitted, usual, f"Kueue to admit {job['kind']} {job['metadata']['name']}")
        except AssertionError:
            raise AssertionError(f"Kueue did not admit {job['metadata']['name']} within ceiling({usual}s): {last[0]}\n"
                                 f"Kueue log tail:\n{self.kueue.log_tail(2000)}") from None
        return last[0]

    def still_pending(self, job, settle=3.0) -> Decision:
        """A pending decision that holds: still not admitted after `settle` seconds of Kueue requeueing."""
        first = self.decision(job)
        assert not first.admitted, f"expected {job['metadata']['name']} to be held, Kueue admitted it: {first}"
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            time.sleep(0.5)
            again = self.decision(job)
            assert not again.admitted, f"{job['metadata']['name']} was admitted after all: {again}"
        return again

    def cq_usage(self, name, flavor, resource):
        """(total, borrowed) reserved in ClusterQueue `name` for flavor/resource, from Kueue's status."""
        live = self.api.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", name)
        for f in live.get("status", {}).get("flavorsReservation", []) or []:
            if f["name"] == flavor:
                for r in f["resources"]:
                    if r["name"] == resource:
                        return str(r.get("total", "0")), str(r.get("borrowed", "0"))
        return "0", "0"

    def wait_cq_usage(self, name, flavor, resource, total, borrowed):
        want = (str(total), str(borrowed))
        return poll(lambda: self.cq_usage(name, flavor, resource) == want,
                    what=f"ClusterQueue {name} {flavor}/{resource} reservation (total, borrowed) == {want}",
                    ) and want


@dataclasses.dataclass
class Decision:
    """What Kueue decided about one job, read from its Workload."""
    kind: str
    name: str
    namespace: str
    queue: str | None
    workload: str
    cluster_queue: str | None
    admitted: bool
    flavors: dict            # pod set -> {resource: flavor}
    usage: dict              # pod set -> {resource: quantity}
    counts: dict             # pod set -> pod count
    pod_set_selectors: dict  # pod set -> nodeSelector Kueue derived for the pod set (spec.podSets)
    reason: str
    message: str

    @classmethod
    def of(cls, job, wl):
        st = wl.get("status", {})
        admission = st.get("admission") or {}
        flavors, usage, counts = {}, {}, {}
        for a in admission.get("podSetAssignments", []) or []:
            flavors[a["name"]] = a.get("flavors", {})
            usage[a["name"]] = a.get("resourceUsage", {})
            counts[a["name"]] = a.get("count")
        if not usage:  # not admitted: what the pod sets ask for (Kueue's own sum, status.resourceRequests)
            for rr in st.get("resourceRequests", []) or []:
                usage[rr["name"]] = rr.get("resources", {})
            counts = {ps["name"]: ps.get("count") for ps in wl["spec"]["podSets"]}
        selectors = {ps["name"]: ps["template"]["spec"].get("nodeSelector", {}) for ps in wl["spec"]["podSets"]}
        admitted_c = condition(wl, "Admitted")
        admitted = bool(admitted_c and admitted_c["status"] == "True")
        deciding = admitted_c if admitted else condition(wl, "QuotaReserved")
        return cls(job["kind"], job["metadata"]["name"], job["metadata"]["namespace"],
                   job["metadata"].get("labels", {}).get(QUEUE_LABEL), wl["metadata"]["name"],
                   admission.get("clusterQueue"), admitted, flavors, usage, counts, selectors,
                   (deciding or {}).get("reason", ""), (deciding or {}).get("message", ""))

    def all_flavors(self):
        return {f for per_set in self.flavors.values() for f in per_set.values()}

    def gpus(self):
        return sum(int(u.get(GPU, "0")) for u in self.usage.values())


# ---------------------------------------------------------------- the report

class AdmissionReport:
    """Collects Kueue's decisions; printed at the end of the run (terminal summary) and per test."""

    def __init__(self):
        self.rows: list[tuple] = []

    def add(self, case, decision: Decision, note=""):
        d = decision
        flavors = ",".join(sorted(d.all_flavors())) or "-"
        usage = "; ".join(f"{ps} x{d.counts.get(ps)}: " + " ".join(f"{k}={v}" for k, v in sorted(u.items()))
                          for ps, u in d.usage.items()) or "-"
        usage = ("uses " if d.admitted else "asks ") + usage
        msg = re.sub(r"^couldn't assign flavors to pod set \S+: ", "", d.message)
        msg = msg if len(msg) <= 120 else msg[:117] + "..."
        self.rows.append((case, f"{d.kind}/{d.name}", d.namespace, d.queue or "-", d.cluster_queue or "-",
                          "Admitted" if d.admitted else "Pending", flavors, usage, d.reason, msg, note))

    HEADER = ("case", "job", "namespace", "queue", "ClusterQueue", "Kueue", "flavor", "resources", "reason",
              "message", "note")

    def table(self, rows=None):
        rows = [self.HEADER] + list(self.rows if rows is None else rows)
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(self.HEADER))]
        return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def pytest_terminal_summary(self, terminalreporter):
        if self.rows:
            terminalreporter.section("Kueue admission decisions (from Workload status)")
            for line in self.table().splitlines():
                terminalreporter.write_line(line)


def trainjob_manifest(name, namespace, runtime="torch-gh200", gpus=1, num_nodes=None, cpu="8", memory="64Gi",
                      resources=True):
    """A TrainJob as the seed's YAML example writes it: runtimeRef + resourcesPerNode, no queue label."""
    trainer: dict[str, Any] = {}
    if resources:
        requests = {"cpu": cpu, "memory": memory}
        limits = {}
        if gpus:
            requests[GPU] = str(gpus)
            limits[GPU] = str(gpus)
        trainer["resourcesPerNode"] = {"requests": requests, **({"limits": limits} if limits else {})}
    if num_nodes is not None:
        trainer["numNodes"] = num_nodes
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime}}
    if trainer:
        spec["trainer"] = trainer
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def job_manifest(name, namespace, gpus=1, queue=None, image="ghcr.io/urcf/pytorch:2.9.1-cuda12.9"):
    """A plain batch/v1 Job, as a user writes it: no queue label, no suspend, no nodeSelector."""
    requests = {"cpu": "4", "memory": "16Gi"}
    limits = {}
    if gpus:
        requests[GPU] = limits[GPU] = str(gpus)
    container = {"name": "main", "image": image, "command": ["python", "-c", "print(1)"],
                 "resources": {"requests": requests, **({"limits": limits} if limits else {})}}
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}


def kueue_runtime_patch_selectors(trainjob) -> dict:
    """replicatedJob -> nodeSelector Kueue wrote into the TrainJob's runtimePatches on admission."""
    out = {}
    for patch in trainjob["spec"].get("runtimePatches", []) or []:
        if patch.get("manager") != KUEUE_RUNTIME_PATCH_MANAGER:
            continue
        spec = (patch.get("trainingRuntimeSpec") or {}).get("template", {}).get("spec", {})
        for rj in spec.get("replicatedJobs", []) or []:
            pod = rj.get("template", {}).get("spec", {}).get("template", {}).get("spec", {})
            out[rj["name"]] = pod.get("nodeSelector", {})
    return out
