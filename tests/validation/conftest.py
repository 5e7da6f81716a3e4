"""API-server tier: a real etcd + kube-apiserver (built by tools/build.sh at the pinned
versions) on 127.0.0.1, with the pinned upstream CRDs installed.

Choices (see README.md in this directory):
- Authorization is RBAC (as on a real cluster); the test client is an admin through a
  client certificate in group system:masters. RBAC objects we emit are therefore
  checked by the real RBAC storage validation (e.g. escalation checks do not apply
  to system:masters, but roleRef/subject validation does).
- Certificates and the service-account key are made with the `openssl` CLI, so the
  tests need no crypto package.
- Requests are raw HTTP through `requests`: server-side apply is a PATCH with
  content type application/apply-patch+yaml.

Missing binaries or rendered tree: the tests FAIL when CI is set (run `make tools`),
and are skipped with the reason otherwise.
"""
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest
import requests
import yaml

from .validation_support import (
    SCRATCH_NS, TOOLS, Kube, load_one, manifest_files, message, rel, rendered_dir, tool_bin, unavailable,
    broken_files)


def pytest_generate_tests(metafunc):
    # Parametrize by file so each object is its own test id; an absent tree yields one
    # placeholder param that fails (CI) or skips (local) inside the test.
    if "manifest_file" in metafunc.fixturenames:
        files = manifest_files() or [None]
        metafunc.parametrize("manifest_file", files, ids=[rel(f) if f else "no-tree" for f in files])
    if "runtime_file" in metafunc.fixturenames:
        files = [f for f in manifest_files() if load_one(f).get("kind") == "ClusterTrainingRuntime"]
        files = files or [None]
        metafunc.parametrize("runtime_file", files, ids=[f.stem if f else "no-runtimes" for f in files])
    if "broken_file" in metafunc.fixturenames:
        files = broken_files()
        metafunc.parametrize("broken_file", files, ids=[f.stem for f in files])


@pytest.fixture
def tree_present():
    if not manifest_files():
        unavailable(f"no rendered objects under {rendered_dir()} (run `python -m generator render`)")


# ---------------------------------------------------------------- processes

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout, what, log=None):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as e:  # still starting: connection refused, 503, ...
            last = e
        time.sleep(0.5)
    tail = pathlib.Path(log).read_text()[-3000:] if log and pathlib.Path(log).exists() else ""
    raise RuntimeError(f"timed out after {timeout}s waiting for {what} (last error: {last})\n{tail}")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d):
    """CA, serving cert for 127.0.0.1, admin client cert (system:masters), SA key pair."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=gpugen-test-ca",
            "-keyout", "ca.key", "-out", "ca.crt", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                                  "extendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subj in (("server", "/CN=kube-apiserver"), ("admin", "/O=system:masters/CN=gpugen-admin")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj,
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-out", f"{name}.crt",
                "-extfile", "server.ext" if name == "server" else "client.ext", cwd=d)
    openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


def write_kubeconfig(d, server):
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": "gpugen",
        "clusters": [{"name": "gpugen", "cluster": {"server": server,
                                                    "certificate-authority": str(d / "ca.crt")}}],
        "users": [{"name": "admin", "user": {"client-certificate": str(d / "admin.crt"),
                                             "client-key": str(d / "admin.key")}}],
        "contexts": [{"name": "gpugen", "context": {"cluster": "gpugen", "user": "admin"}}],
    }
    path = d / "kubeconfig"
    path.write_text(yaml.safe_dump(cfg))
    return path


def start(cmd, log):
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)


def stop(proc):
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def apiserver(tmp_path_factory):
    """Start etcd + kube-apiserver; yield a Kube client (kubeconfig path on .kubeconfig)."""
    etcd = tool_bin("etcd", "ETCD_VERSION")
    kas = tool_bin("kube-apiserver", "KUBERNETES_VERSION")
    for b in (etcd, kas):
        if not os.access(b, os.X_OK):
            unavailable(f"{b} is missing: run `make tools` (tools/build.sh etcd kube-apiserver)")
    if not shutil.which("openssl"):
        unavailable("openssl is not installed")

    d = tmp_path_factory.mktemp("apiserver")
    make_pki(d)
    etcd_client, etcd_peer, secure = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_client}"
    procs = []
    try:
        procs.append(start([
            str(etcd), "--name", "gpugen", "--data-dir", str(d / "etcd"),
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{etcd_peer}",
            "--initial-cluster", f"gpugen=http://127.0.0.1:{etcd_peer}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ], d / "etcd.log"))
        etcd_http = requests.Session()
        etcd_http.trust_env = False  # never via a proxy
        wait_until(lambda: etcd_http.get(etcd_url + "/health", timeout=2).json()["health"] == "true",
                   60, "etcd", d / "etcd.log")

        server = f"https://127.0.0.1:{secure}"
        procs.append(start([
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
        ], d / "kube-apiserver.log"))
        kube = Kube(server, d / "ca.crt", d / "admin.crt", d / "admin.key")
        kube.kubeconfig = write_kubeconfig(d, server)
        kube.log = d / "kube-apiserver.log"

        def ready():
            if procs[-1].poll() is not None:
                raise RuntimeError(f"kube-apiserver exited with {procs[-1].returncode}")
            return kube.http.get(server + "/readyz", timeout=5).status_code == 200
        wait_until(ready, 180, "kube-apiserver /readyz", d / "kube-apiserver.log")
        yield kube
    finally:
        for p in reversed(procs):
            stop(p)


@pytest.fixture(scope="session")
def cluster(apiserver):
    """The API server with the pinned CRDs Established and the tree's namespaces created."""
    kube = apiserver
    out = subprocess.run([str(TOOLS / "crds.sh")], capture_output=True, text=True)
    assert out.returncode == 0, f"tools/crds.sh failed:\n{out.stderr}"
    crd_dir = pathlib.Path(out.stdout.strip())
    names = []
    for f in sorted(crd_dir.glob("*.yaml")):
        for crd in yaml.safe_load_all(f.read_text()):
            if not crd:
                continue
            r = kube.create(crd, dry_run=False)
            assert r.status_code == 201, f"installing {f.name}: {r.status_code} {message(r)}"
            names.append(crd["metadata"]["name"])

    def established(name):
        url = f"{kube.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
        conds = kube.http.get(url, timeout=10).json().get("status", {}).get("conditions", [])
        return any(c["type"] == "Established" and c["status"] == "True" for c in conds)
    for n in names:
        wait_until(lambda: established(n), 120, f"CRD {n} Established", kube.log)

    # Namespaces first: the tree's own Namespace objects, then any namespace only referenced.
    wanted = {SCRATCH_NS}
    for f in manifest_files():
        obj = load_one(f)
        if obj.get("apiVersion") == "v1" and obj.get("kind") == "Namespace":
            r = kube.apply(obj, dry_run=False)
            assert r.ok, f"{rel(f)}: {message(r)}"
        elif obj.get("metadata", {}).get("namespace"):
            wanted.add(obj["metadata"]["namespace"])
    for ns in sorted(wanted):
        r = kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, dry_run=False)
        assert r.ok, f"namespace {ns}: {message(r)}"
    # Discovery of the new groups can lag Established by a moment.
    for api_version in ("trainer.kubeflow.org/v1alpha1", "kueue.x-k8s.io/v1beta2", "policies.kyverno.io/v1",
                        "jobset.x-k8s.io/v1alpha2", "argoproj.io/v1alpha1"):
        wait_until(lambda: kube._resources(api_version), 60, f"discovery of {api_version}", kube.log)
    return kube
