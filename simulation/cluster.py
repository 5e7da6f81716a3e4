"""The simulated FLAME's Kubernetes: etcd + kube-apiserver (simulation/control_plane.py), then
kube-controller-manager, kube-scheduler and KWOK as local processes on 127.0.0.1, and KWOK nodes shaped like
the inventory's classes plus one CPU-only node.

Identities: every process authenticates with a client certificate signed by the test CA, as the identity it
has on a real cluster: the controller manager as system:kube-controller-manager (and, with
--use-service-account-credentials, each controller as its own service account: Pods of Jobs are created by
system:serviceaccount:kube-system:job-controller, which the rendered policies rely on), the scheduler as
system:kube-scheduler, KWOK as the kwok-controller service account bound by KWOK's own RBAC from its module.

Nothing is faked but the nodes: KWOK (sigs.k8s.io/kwok) plays the kubelets with its upstream Stage files from
the pinned module (node initialise + lease heartbeat, pods become Ready at once); the one simulation choice is
how long a Job's container "runs" before it completes (JOB_POD_RUN_SECONDS), so a test can observe a job while
it holds its GPUs.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib

import requests
import urllib3
import yaml

from simulation import go_tools, pins, prerequisites
from simulation.kube import Client, message
from simulation.control_plane import (
    ControlPlane, free_port, issue_certificate, start_control_plane, write_kubeconfig)

from simulation.processes import Processes, wait_ready
from simulation.waiting import PROBE, REQUEST

# Health probes of local processes that serve self-signed certificates (like a kubelet's probes).
urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

# How long a simulated Job container runs before KWOK marks it Succeeded (journeys observe running jobs); the demo
# asks for longer (start_kubernetes' job_seconds).
JOB_POD_RUN_SECONDS = float(os.environ.get("GPUGEN_FLAME_JOB_SECONDS", "8"))
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
CPU_NODE = "cpu-0"

# Every tool the simulation runs: (tools/build.sh name, versions.env key).
CLUSTER_TOOLS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]


class ToolMissing(prerequisites.Unavailable):
    """A Go-built tool is not in the cache: tests skip (fail in CI), the demo says which to build."""


def require_tools(tools):
    absent = [t for t in tools if not os.access(go_tools.tool_bin(t), os.X_OK)]
    missing = [f"{t} ({go_tools.tool_bin(t)})" for t in absent]
    if missing:
        names = " ".join(absent)
        raise ToolMissing(f"missing: {', '.join(missing)}; build with `bash tools/build.sh {names}`")


def module_dir(module: str, version_key: str) -> pathlib.Path:
    return go_tools.module_dir(module, pins.versions()[version_key])


def identity_kubeconfig(plane: ControlPlane, out: pathlib.Path, name: str, user: str, groups=(),
                        namespace: str | None = None) -> pathlib.Path:
    """A kubeconfig authenticating as `user` in `groups` (client certificate: CN=user, O=group...), its context
    in `namespace` (kubectl's and the SDK's default namespace)."""
    out.mkdir(parents=True, exist_ok=True)
    subject = "".join(f"/O={g}" for g in groups) + f"/CN={user}"
    issue_certificate(plane.pki, out, name, subject, "extendedKeyUsage=clientAuth\n")
    path = write_kubeconfig(out / f"{name}.kubeconfig", plane.kube.server, plane.pki / "ca.crt",
                            out / f"{name}.crt", out / f"{name}.key", user=name, context=name)
    if namespace:
        cfg = yaml.safe_load(path.read_text())
        cfg["contexts"][0]["context"]["namespace"] = namespace
        path.write_text(yaml.safe_dump(cfg))
    return path


def service_account_kubeconfig(plane: ControlPlane, path: pathlib.Path, namespace: str, name: str) -> pathlib.Path:
    """A kubeconfig at `path` with a token of the (existing) service account NAMESPACE/NAME from the TokenRequest
    API, as a pod's projected token: the process acts as system:serviceaccount:NS:NAME with its groups.
    (A client certificate could not carry names longer than X.509's 64-character CN.)"""
    kube = plane.kube
    url = kube.resource_url("v1", "ServiceAccount", namespace, name) + "/token"
    r = kube.http.post(url, json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 2 * 24 * 3600}}, timeout=REQUEST)
    if r.status_code != 201:
        raise RuntimeError(f"token for {namespace}/{name}: {r.status_code} {message(r)}")
    token = r.json()["status"]["token"]
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": name,
           "clusters": [{"name": "flame", "cluster": {"server": kube.server,
                                                      "certificate-authority": str(plane.pki / "ca.crt")}}],
           "users": [{"name": name, "user": {"token": token}}],
           "contexts": [{"name": name, "context": {"cluster": "flame", "user": name, "namespace": namespace}}]}
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return path


def serving_cert(plane: ControlPlane, out: pathlib.Path, name: str) -> pathlib.Path:
    """out/tls.crt, tls.key (for 127.0.0.1, signed by the test CA the API server trusts) and ca.crt."""
    out.mkdir(parents=True, exist_ok=True)
    issue_certificate(plane.pki, out, "tls", f"/CN={name}",
                      "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    (out / "ca.crt").write_bytes((plane.pki / "ca.crt").read_bytes())
    return out


def _https_ok(url):
    s = requests.Session()
    s.trust_env = False
    return s.get(url, verify=False, timeout=PROBE).status_code == 200


# ---------------------------------------------------------------- kube-controller-manager, kube-scheduler

def _start_kube_component(name: str, user: str, plane: ControlPlane, procs: Processes, work: pathlib.Path,
                          netns, extra: list) -> tuple:
    """A kube-controller-manager or kube-scheduler acting as `user`, serving its health endpoint on a free port."""
    ident = identity_kubeconfig(plane, work / "identities", name, user)
    port = free_port()
    if netns:
        netns.forward(port)  # its health endpoint, checked from here
    p = procs.start(name, [
        go_tools.tool_bin(name),
        "--kubeconfig", ident, "--authentication-kubeconfig", ident, "--authorization-kubeconfig", ident,
        "--bind-address", "127.0.0.1", "--secure-port", port, "--cert-dir", work / f"{name}-certs",
        "--leader-elect=false", *extra,
    ], work / "logs" / f"{name}.log", netns=netns)
    return p, f"https://127.0.0.1:{port}/healthz"


def start_controller_manager(plane: ControlPlane, procs: Processes, work: pathlib.Path, netns=None):
    return _start_kube_component("kube-controller-manager", "system:kube-controller-manager", plane, procs, work,
                                 netns, [
        # Each controller acts as its own service account (job-controller, ...), as on a kubeadm cluster.
        "--use-service-account-credentials=true",
        "--service-account-private-key-file", plane.pki / "sa.key",
        "--root-ca-file", plane.pki / "ca.crt",
        "--cluster-signing-cert-file", plane.pki / "ca.crt", "--cluster-signing-key-file", plane.pki / "ca.key",
    ])


def start_scheduler(plane: ControlPlane, procs: Processes, work: pathlib.Path, netns=None):
    return _start_kube_component("kube-scheduler", "system:kube-scheduler", plane, procs, work, netns, [])


# ---------------------------------------------------------------- KWOK

def kwok_stages(run_seconds: float = JOB_POD_RUN_SECONDS, not_namespaces: list[str] = ()) -> list[dict]:
    """KWOK's upstream Stages from the pinned module: nodes initialise at once and renew their Lease; pods
    become Ready at once (pod/fast). The changes: a Job's pod completes `run_seconds` after it runs
    (upstream pod/fast completes it immediately), unless its pod-complete delay annotation says otherwise; pods in
    `not_namespaces` are never made Ready or complete by KWOK (simulation/pods.py runs them); KWOK still
    finishes their deletion."""
    root = module_dir("sigs.k8s.io/kwok", "KWOK_VERSION") / "kustomize" / "stage"
    stages = []
    for sub in ("node/fast", "node/heartbeat-with-lease", "pod/fast"):
        kustomization = yaml.safe_load((root / sub / "kustomization.yaml").read_text())
        for f in kustomization["resources"]:
            stages += [d for d in yaml.safe_load_all((root / sub / f).read_text()) if d]
    for stage in stages:
        if (not_namespaces and stage["spec"]["resourceRef"]["kind"] == "Pod"
                and stage["metadata"]["name"] != "pod-delete"):
            stage["spec"]["selector"].setdefault("matchExpressions", []).append(
                {"key": ".metadata.namespace", "operator": "NotIn", "values": list(not_namespaces)})
        if stage["metadata"]["name"] == "pod-complete":
            stage["spec"]["delay"] = {"durationMilliseconds": int(run_seconds * 1000), "durationFrom": {
                "expressionFrom": '.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"]'}}
    return stages


def kwok_rbac() -> list[dict]:
    """KWOK's own controller RBAC from the pinned module (kustomize/rbac)."""
    d = module_dir("sigs.k8s.io/kwok", "KWOK_VERSION") / "kustomize" / "rbac"
    kustomization = yaml.safe_load((d / "kustomization.yaml").read_text())
    return [doc for f in kustomization["resources"] for doc in yaml.safe_load_all((d / f).read_text()) if doc]


def start_kwok(plane: ControlPlane, procs: Processes, work: pathlib.Path, apply, not_namespaces=(), netns=None,
               job_seconds: float = JOB_POD_RUN_SECONDS):
    rbac = kwok_rbac()
    for obj in rbac:
        apply(obj)
    (sa,) = [o for o in rbac if o["kind"] == "ServiceAccount"]
    ident = service_account_kubeconfig(plane, work / "identities" / "kwok.kubeconfig", sa["metadata"]["namespace"],
                                       sa["metadata"]["name"])
    config = work / "kwok.yaml"
    config.write_text(yaml.safe_dump_all(kwok_stages(job_seconds, not_namespaces=not_namespaces)))
    port = free_port()
    if netns:
        netns.forward(port)  # its health endpoint, checked from here
    p = procs.start("kwok", [
        go_tools.tool_bin("kwok"), "--kubeconfig", ident, "--config", config,
        "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
        "--node-lease-duration-seconds", "40", "--server-address", f"127.0.0.1:{port}",
        "--node-ip", "127.0.0.1", "--cidr", "10.244.0.0/16",
    ], work / "logs" / "kwok.log", env={**os.environ, "HOME": str(work)}, netns=netns)
    return p, f"http://127.0.0.1:{port}/healthz"


def node(name: str, labels: dict, allocatable: dict, arch: str) -> dict:
    labels = {"kubernetes.io/arch": arch, "kubernetes.io/os": "linux", "kubernetes.io/hostname": name,
              "type": "kwok", **labels}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
            "status": {"allocatable": allocatable, "capacity": allocatable,
                       "nodeInfo": {"architecture": arch, "operatingSystem": "linux", "kubeletVersion": "fake",
                                    "kubeProxyVersion": "fake"}}}


def inventory_nodes(inventory) -> list[dict]:
    """One KWOK node per node of each inventory class (its nodeSelector labels, arch and per-node allocatable, the
    class's accelerator resource as its device plugin advertises it), and one CPU-only amd64 node. Classes with
    the same nodeSelector share their nodes (MIG's mixed strategy: one A100 node advertises each profile), so
    those nodes advertise each such class's resource, and are named after the selector's values."""
    pools: dict[tuple, list] = {}
    for class_name, gpu_class in inventory.classes.items():
        pools.setdefault(tuple(sorted(gpu_class.nodeSelector.items())), []).append((class_name, gpu_class))
    nodes = []
    for selector, classes in pools.items():
        first = classes[0][1]
        per = first.perNode
        allocatable = {"cpu": str(per.cpu), "memory": str(per.memory)}
        for _, gpu_class in classes:
            allocatable[gpu_class.accelerator.resource] = str(gpu_class.perNode.gpus)
        allocatable |= {"pods": str(per.pods), "ephemeral-storage": "1Ti"}
        prefix = classes[0][0] if len(classes) == 1 else "-".join(value for _, value in selector)
        for i in range(max(gpu_class.nodes for _, gpu_class in classes)):
            nodes.append(node(f"{prefix}-{i}", dict(first.nodeSelector), allocatable, first.arch))
    nodes.append(node(CPU_NODE, {}, {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "1Ti"},
                      "amd64"))
    return nodes


@dataclasses.dataclass
class Kubernetes:
    plane: ControlPlane
    nodes: list[str]


def start_kubernetes(work: pathlib.Path, procs: Processes, inventory, pod_runtime_namespaces=(),
                     netns=None, job_seconds: float = JOB_POD_RUN_SECONDS) -> Kubernetes:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK and the nodes, all Ready. KWOK plays
    the kubelet for every pod but those in `pod_runtime_namespaces` (simulation/pods.py runs them), and completes a
    Job's pod `job_seconds` after it runs."""
    require_tools(CLUSTER_TOOLS)
    (work / "apiserver").mkdir(parents=True, exist_ok=True)
    # etcd and the API server in `procs`, so one stop() ends everything; every log in work/logs.
    plane = start_control_plane(work / "apiserver", netns, procs=procs, logs=work / "logs")
    admin = Client.from_kube(plane.kube)
    kcm, kcm_health = start_controller_manager(plane, procs, work, netns)
    sched, sched_health = start_scheduler(plane, procs, work, netns)
    kwok, _kwok_health = start_kwok(plane, procs, work, admin.apply, pod_runtime_namespaces, netns, job_seconds)
    for n in inventory_nodes(inventory):
        admin.create(n)
    wait_ready(kcm, lambda: _https_ok(kcm_health), 90, "kube-controller-manager /healthz")
    wait_ready(sched, lambda: _https_ok(sched_health), 90, "kube-scheduler /healthz")
    names = [n["metadata"]["name"] for n in inventory_nodes(inventory)]

    def nodes_ready():
        ready = 0
        for n in admin.list("v1", "Node"):
            conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}
            ready += conds.get("Ready") == "True"
        return ready == len(names)
    wait_ready(kwok, nodes_ready, 60, "KWOK nodes Ready")
    return Kubernetes(plane, names)
