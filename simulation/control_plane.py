"""A test control plane: the pinned etcd + kube-apiserver (built by tools/build.sh) on 127.0.0.1.

Shared by the API-server tier (tests/apiserver/conftest.py) and the end-to-end tier
(tests/e2e/kueue_e2e.py); each starts its own. Plain functions, no fixtures:

    with start_control_plane(workdir) as plane:   # processes stopped on leaving the block; logs in workdir/logs
        prepare_cluster(plane)                    # pinned CRDs Established, the tree's namespaces
        plane.kube.apply(obj)

Choices (see README.md in this directory):
- Authorization is RBAC (as on a real cluster); the test client is an admin through a
  client certificate in group system:masters. RBAC objects we emit are therefore
  checked by the real RBAC storage validation (e.g. escalation checks do not apply
  to system:masters, but roleRef/subject validation does).
- Certificates and the service-account key are made with the `openssl` CLI, so the
  tests need no crypto package. `issue_certificate` signs further ones with the same CA.
- Requests are raw HTTP through `requests` (simulation.kube.Kube).

Missing binaries: `start_control_plane` calls `unavailable()`, a failure when CI is set
(run `make tools`) and a skip with the reason otherwise.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import socket
import subprocess
import threading

import requests
import yaml

from generator.components import COMPONENTS
from generator.kinds import ARGOCD, MONITORING
from simulation.go_tools import tool_bin
from simulation.kube import Kube, message
from simulation.manifests import load_all, load_one, manifest_files, rel
from simulation.pins import NEWEST, TOOLS, KubernetesLine
from simulation.prerequisites import unavailable
from simulation.processes import Processes, wait_ready
from simulation.waiting import PROBE, REQUEST, wait_for

# Namespace for objects the tests make themselves (pod-template Jobs, broken corpus).
SCRATCH_NS = "gpugen-validation"
# The group versions the tree uses from the pinned CRDs: discovery must serve them before tests run. The
# components' from their folders; Argo CD's and the Prometheus Operator's (the site's) besides.
CRD_GROUP_VERSIONS = (*(group.api_version for facts in COMPONENTS.values() for group in facts.api_groups),
                      ARGOCD.api_version, MONITORING.api_version)


# ---------------------------------------------------------------- processes

_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port():
    """A port free on 127.0.0.1 now and never handed out before by this process: the kernel may offer a port it
    has just offered again, and two listeners of one start-up (etcd's client and peer ports) would then collide."""
    with _HANDED_OUT_LOCK:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port


def wait_until(check, usual, what, log=None):
    """Return once check() is truthy (exceptions count as not yet); RuntimeError with log's tail at the ceiling of
    something that takes `usual` seconds on a fast machine (simulation/waiting.py)."""
    def tail():
        return pathlib.Path(log).read_text()[-3000:] if log and pathlib.Path(log).exists() else ""
    wait_for(check, f"waiting for {what}", usual, interval=0.5, pending=(Exception,), error=RuntimeError,
             describe=tail)


# Go's garbage collector for the processes the simulation configures itself (etcd, kube-apiserver, Argo CD), unless
# the environment says otherwise: at Go's default (GOGC=100) collection took a fifth of the API server's and of Argo
# CD's CPU while Argo CD installs the charts' CRDs, on a machine with two cores. A larger heap target, capped by a
# soft memory limit so that a process collects at that size rather than grow fivefold; behaviour is the same.
SIMULATION_GO_RUNTIME = {"GOGC": "400", "GOMEMLIMIT": "3GiB"}


def go_runtime_env(env: dict | None = None) -> dict:
    """`env` (default: this process's environment) with SIMULATION_GO_RUNTIME's settings where neither it nor this
    process's environment names one."""
    env = dict(os.environ if env is None else env)
    for name, value in SIMULATION_GO_RUNTIME.items():
        env.setdefault(name, os.environ.get(name, value))
    return env


# ---------------------------------------------------------------- PKI

def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def issue_certificate(ca_dir, out_dir, name, subject, extensions):
    """out_dir/<name>.key and <name>.crt for `subject`, signed by the test CA in ca_dir (ca.crt, ca.key).

    `extensions`: the X.509 v3 extensions, as lines of an openssl extfile (e.g. "extendedKeyUsage=clientAuth\\n")."""
    ca_dir, out_dir = pathlib.Path(ca_dir), pathlib.Path(out_dir)
    (out_dir / f"{name}.ext").write_text(extensions)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=out_dir)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca_dir / "ca.crt"), "-CAkey", str(ca_dir / "ca.key"),
            "-CAcreateserial", "-days", "2", "-out", f"{name}.crt", "-extfile", f"{name}.ext", cwd=out_dir)


def make_pki(d):
    """CA, serving cert for 127.0.0.1, admin client cert (system:masters), SA key pair."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gpugen-test-ca",
            "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    issue_certificate(d, d, "server", "/CN=kube-apiserver",
                      "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    issue_certificate(d, d, "admin", "/O=system:masters/CN=gpugen-admin", "extendedKeyUsage=clientAuth\n")
    # The aggregator's client certificate towards aggregated API servers (Kueue's visibility API).
    issue_certificate(d, d, "front-proxy-client", "/CN=front-proxy-client", "extendedKeyUsage=clientAuth\n")
    openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


def write_kubeconfig(path, server, ca, cert, key, user="admin", context="gpugen"):
    """A kubeconfig at `path` for `server` (trusting `ca`) as the client certificate cert/key."""
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "gpugen", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
        "contexts": [{"name": context, "context": {"cluster": "gpugen", "user": user}}],
    }
    path = pathlib.Path(path)
    path.write_text(yaml.safe_dump(cfg))
    return path


# ---------------------------------------------------------------- the control plane

@dataclasses.dataclass
class ControlPlane:
    """A running etcd + kube-apiserver. Stop it with .stop() or by leaving a `with` block."""
    pki: pathlib.Path             # ca.crt/ca.key of the test CA (and the server's and admin's certificates)
    kube: Kube                    # admin client (system:masters)
    kubeconfig: pathlib.Path      # the same admin identity, for tools
    apiserver_log: pathlib.Path
    logs: pathlib.Path            # the directory of its logs, where the tier's other processes log too
    procs: Processes | None       # None: the caller's Processes own etcd and the API server
    line: KubernetesLine = NEWEST  # the Kubernetes line it runs (simulation/pins.py)
    etcd_url: str = ""            # etcd's client URL (plain HTTP on 127.0.0.1)

    def stop(self):
        if self.procs is not None:
            self.procs.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_control_plane(workdir, netns=None, procs: Processes | None = None, logs=None,
                        line: KubernetesLine = NEWEST) -> ControlPlane:
    """Start etcd + kube-apiserver of the Kubernetes `line` (simulation/pins.py; the newest unless told) in `workdir`
    (an empty directory) and wait until /readyz answers. With `netns` (simulation/netns.py) both run in that network
    namespace, reached from here on the same ports. Their logs go to `logs` (default workdir/logs). With `procs` (a
    simulated cluster's), those Processes own and stop them; otherwise the ControlPlane does."""
    etcd = tool_bin(line.etcd_tool)
    kas = tool_bin(line.apiserver_tool)
    for b in (etcd, kas):
        if not os.access(b, os.X_OK):
            unavailable(f"{b} is missing: run `make tools` (tools/build.sh {line.etcd_tool} {line.apiserver_tool})")
    if not shutil.which("openssl"):
        unavailable("openssl is not installed")

    d = pathlib.Path(workdir)
    make_pki(d)
    etcd_client, etcd_peer, secure = free_port(), free_port(), free_port()
    if netns:
        netns.forward(etcd_client)
        netns.forward(secure)
    etcd_url = f"http://127.0.0.1:{etcd_client}"
    logs = pathlib.Path(logs or d / "logs")
    own = procs is None
    procs = Processes() if own else procs
    try:
        etcd_process = procs.start("etcd", [
            str(etcd), "--name", "gpugen", "--data-dir", str(d / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"gpugen=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ], logs / "etcd.log", env=go_runtime_env(), netns=netns)
        etcd_http = requests.Session()
        etcd_http.trust_env = False  # never via a proxy
        wait_ready(etcd_process, lambda: etcd_http.get(etcd_url + "/health", timeout=PROBE).json()["health"] == "true",
                   60, "etcd /health")

        server = f"https://127.0.0.1:{secure}"
        log = logs / "kube-apiserver.log"
        apiserver = procs.start("kube-apiserver", [
            str(kas), "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(secure),
            "--tls-cert-file", str(d / "server.crt"), "--tls-private-key-file", str(d / "server.key"),
            "--client-ca-file", str(d / "ca.crt"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(d / "sa.pub"),
            "--service-account-signing-key-file", str(d / "sa.key"),
            "--service-cluster-ip-range", "10.96.0.0/24",
            "--authorization-mode", "RBAC",
            # No nodes or Services here: keeps it from retrying a loopback `kubernetes` endpoint.
            "--endpoint-reconciler-type", "none",
            "--cert-dir", str(d / "certs"),
            # Aggregated APIs and webhooks reached through their Service's EndpointSlices (no kube-proxy here):
            # the simulated FLAME's platform pods have addresses of their own (simulation/netns.py).
            "--enable-aggregator-routing=true",
            "--requestheader-client-ca-file", str(d / "ca.crt"),
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--proxy-client-cert-file", str(d / "front-proxy-client.crt"),
            "--proxy-client-key-file", str(d / "front-proxy-client.key"),
        ], log, env=go_runtime_env(), netns=netns)
        kube = Kube(server, d / "ca.crt", d / "admin.crt", d / "admin.key")
        kubeconfig = write_kubeconfig(d / "kubeconfig", server, d / "ca.crt", d / "admin.crt", d / "admin.key")
        wait_ready(apiserver, lambda: kube.http.get(server + "/readyz", timeout=PROBE).status_code == 200, 180,
                   "kube-apiserver /readyz")
    except BaseException:
        if own:  # otherwise the caller stops its Processes
            procs.stop()
        raise
    return ControlPlane(d, kube, kubeconfig, log, logs, procs if own else None, line, etcd_url)


# ---------------------------------------------------------------- what the tree needs on it

def install_crds(kube, log=None):
    """Create every pinned CRD (tools/crds.sh), wait until each is Established and the tree's group
    versions are discoverable. `log`: the API server's log, quoted on a timeout."""
    out = subprocess.run([str(TOOLS / "crds.sh")], capture_output=True, text=True)
    assert out.returncode == 0, f"tools/crds.sh failed:\n{out.stderr}"
    crd_dir = pathlib.Path(out.stdout.strip())
    names = []
    for f in sorted(crd_dir.glob("*.yaml")):
        for crd in load_all(f.read_text()):
            r = kube.create(crd, dry_run=False)
            assert r.status_code == 201, f"installing {f.name}: {r.status_code} {message(r)}"
            names.append(crd["metadata"]["name"])

    def established(name):
        url = f"{kube.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        conds = kube.http.get(url, timeout=REQUEST).json().get("status", {}).get("conditions", [])
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)
    for n in names:
        wait_until(lambda: established(n), 120, f"CRD {n} Established", log)

    # Discovery of the new groups can lag Established by a moment.
    for api_version in CRD_GROUP_VERSIONS:
        wait_until(lambda: kube.resources(api_version), 60, f"discovery of {api_version}", log)


def create_tree_namespaces(kube):
    """The tree's own Namespace objects, then every namespace its objects only reference, and SCRATCH_NS."""
    wanted, defined = {SCRATCH_NS}, set()
    for f in manifest_files():
        obj = load_one(f)
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Namespace":
            r = kube.apply(obj, dry_run=False)
            assert r.ok, f"{rel(f)}: {message(r)}"
            defined.add(obj["metadata"]["name"])
        elif obj.get("metadata", {}).get("namespace"):
            wanted.add(obj["metadata"]["namespace"])
    # A bare re-apply by the same field manager would drop the tree's labels (Pod Security) from its own.
    for ns in sorted(wanted - defined):
        r = kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, dry_run=False)
        assert r.ok, f"namespace {ns}: {message(r)}"


def prepare_cluster(plane: ControlPlane) -> Kube:
    """What the tree needs on a fresh control plane: the pinned CRDs (Established, discoverable), then the
    tree's namespaces. Returns the admin client."""
    install_crds(plane.kube, plane.apiserver_log)
    create_tree_namespaces(plane.kube)
    return plane.kube
