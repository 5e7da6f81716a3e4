"""The real Argo CD (v3.6, pinned) delivering the platform to the simulated FLAME, as the README's bootstrap says.

What runs, all on 127.0.0.1 and all stopped with the simulation:
- the cluster's GitOps repository: a git repository served by `git daemon` (git's own server, git:// protocol),
  holding the inventory rendered with this cluster's two site settings (`cluster.gitops.repoURL` pointing at that
  server and `cluster.chartMirror` at the registry below); the rendered/ tree it carries is byte-identical to the
  tree under test (checked), only bootstrap/ names other URLs;
- a chart mirror: go-containerregistry's OCI registry (tests/oracles/registry) holding each component's chart,
  packaged from the pinned Go module that ships it (simulation/charts.py) and pushed with the pinned helm;
- Redis (Debian's redis-server), the cache Argo CD's controller and repo-server share;
- Argo CD's repo-server and application controller (tools/argocd/main.go, built by tools/build.sh), out of
  cluster as upstream's Procfile runs them (ARGOCD_FAKE_IN_CLUSTER: the in-cluster destination is the
  kubeconfig's API server), the controller as the argocd-application-controller ServiceAccount of Argo CD's
  install manifest, whose CRDs, RBAC, ConfigMaps and Secrets are applied from the pinned module
  (manifests/install.yaml; its Deployments, Services and NetworkPolicies are these processes instead).

`commit(inventory)` renders an inventory into the repository and commits it, `refresh()` tells Argo CD (as a Git
webhook would), and `wait_applications()` waits for every Application to be Synced and Healthy at that revision.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

from generator.builders.argocd import IN_CLUSTER
from simulation import go_tools, manifests, pins
from simulation.control_plane import free_port, go_runtime_env

from simulation.cluster import service_account_kubeconfig
from simulation.kube import Client, apply_all
from simulation.processes import ComponentFailed, Process, Processes, wait_ready
from simulation.waiting import PROBE, ceiling, wait_for

ARGOCD_MODULE = "github.com/argoproj/argo-cd/v3"
ARGOCD_NAMESPACE = "argocd"
REPO_NAME = "flame-gitops.git"
CHART_PATH = "charts"
# Kinds of Argo CD's install manifest applied here; the rest (Deployments, StatefulSet, Services,
# NetworkPolicies) is what these local processes stand in for.
INSTALL_KINDS = {"CustomResourceDefinition", "ServiceAccount", "Role", "ClusterRole", "RoleBinding",
                 "ClusterRoleBinding", "ConfigMap", "Secret"}
ARGOCD_TOOLS = ["argocd"]
RECONCILIATION = "10s"
# The controller sleeps ARGOCD_SYNC_WAVE_DELAY seconds (default 2) between the waves of every sync, to give other
# controllers time to report on what it just applied. Here it does not: each wave then proceeds on health alone,
# which the health checks of docs/argocd-cm.yaml must get right (a stricter test than the default), and a sync
# of the gpugen Application takes seconds instead of twelve. GPUGEN_ARGOCD_SYNC_WAVE_DELAY=2 runs the default.
SYNC_WAVE_DELAY = "0"
# The in-cluster destination as a declarative cluster Secret of this installation, with compression off: the
# controller reloads the API server's whole OpenAPI document after every CRD event (gitops-engine's cluster cache,
# holding its lock), and gzip of that document was the API server's largest cost while the charts' CRDs arrived,
# on a machine with two cores. Over loopback it saves nothing. A site may do the same (Argo CD's
# `disableCompression`); the rendered tree does not depend on it.
IN_CLUSTER_SECRET = {
    "apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "in-cluster", "namespace": ARGOCD_NAMESPACE,
                 "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
    "stringData": {"name": "in-cluster", "server": IN_CLUSTER,
                   "config": json.dumps({"disableCompression": True, "tlsClientConfig": {"insecure": False}})},
}
# The README's bootstrap patch for argocd-cm (health checks, watched APIServices).
ARGOCD_CM_PATCH = pins.REPO / "docs" / "argocd-cm.yaml"


def argocd_module() -> pathlib.Path:
    return go_tools.module_dir(ARGOCD_MODULE, pins.versions()["ARGOCD_VERSION"])


def install_objects() -> list[dict]:
    """Argo CD's install manifest from the pinned module, the kinds this simulation applies, in namespace argocd."""
    out = []
    for doc in manifests.load_all((argocd_module() / "manifests" / "install.yaml").read_text()):
        if doc["kind"] in INSTALL_KINDS:
            out.append(doc)
    return out


class _TmpFactory:
    """go_program's tmp_path_factory outside pytest."""

    def __init__(self, base: pathlib.Path):
        self.base = base

    def mktemp(self, name):
        return pathlib.Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.base))


def _port_open(netns, port: int) -> bool:
    """Something listens on 127.0.0.1:port, inside `netns` if given (else in this network namespace)."""
    try:
        (netns.connect_inside(port) if netns else socket.create_connection(("127.0.0.1", port), timeout=PROBE)).close()
        return True
    except OSError:
        return False


def _run(cmd, cwd=None, env=None, what=None):
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=ceiling(30))
    if done.returncode != 0:
        raise ComponentFailed(f"{what or cmd[0]} failed ({done.returncode}): {' '.join(map(str, cmd))}\n"
                              f"{done.stdout}{done.stderr}")
    return done.stdout


def site_inventory(inventory_file: pathlib.Path, repo_url: str, chart_mirror: str,
                   servers: dict[str, str] | None = None) -> str:
    """The inventory with this simulated site's repository and chart mirror, and with several clusters their API
    servers (`servers`: cluster name -> URL) as the site gives them."""
    doc = yaml.safe_load(inventory_file.read_text())
    doc["cluster"]["gitops"]["repoURL"] = repo_url
    doc["cluster"]["chartMirror"] = {"url": chart_mirror, "plainHTTP": True}
    for name, server in (servers or {}).items():
        doc["clusters"][name]["server"] = server
    return "# The simulated FLAME's inventory: the committed one with this site's repository and chart mirror.\n" \
        + yaml.safe_dump(doc, sort_keys=False)


# ---------------------------------------------------------------- the chart mirror

def start_registry(work: pathlib.Path, procs: Processes, netns) -> str:
    """go-containerregistry's registry (tests/oracles/registry); its address host:port."""
    source = pins.REPO / "tests" / "oracles" / "registry" / "main.go"
    binary = go_tools.go_program(source, "gpugen.local/test-registry",
                                 [f"github.com/google/go-containerregistry@{pins.versions()['GGCR_VERSION']}"],
                                 _TmpFactory(work))
    log = work / "logs" / "chart-registry.log"
    popen = procs.start("chart registry", [binary], log, netns=netns, stdout_pipe=True).popen
    deadline = time.monotonic() + ceiling(12)
    for line in popen.stdout:
        if line.startswith("ADDR "):
            address = line.split()[1]
            netns.forward(int(address.rsplit(":", 1)[1]))  # helm pushes the charts from here
            return address
        if time.monotonic() > deadline:
            break
    raise ComponentFailed(f"the chart registry did not start (log: {log})")


def push_charts(bootstrap: pathlib.Path, registry: str, work: pathlib.Path):
    """Each component Application's chart, packaged from its pinned module with the dependencies its values
    enable (charts.prepare_chart), pushed to the mirror with the pinned helm."""
    from simulation import charts  # simulation/charts.py
    from simulation.components import component_applications
    helm = charts.tool("helm")
    env = {**os.environ, "HELM_CACHE_HOME": str(work / "helm" / "cache"),
           "HELM_CONFIG_HOME": str(work / "helm" / "config"), "HELM_DATA_HOME": str(work / "helm" / "data")}
    for app in component_applications(bootstrap):
        component = charts.component_of(app)
        out = work / "charts" / component
        out.mkdir(parents=True, exist_ok=True)
        chart_dir, _ = charts.prepare_chart(component, app["spec"]["source"]["helm"].get("valuesObject", {}), out)
        _run([helm, "package", chart_dir, "--destination", out], env=env, what=f"helm package {component}")
        (package,) = out.glob("*.tgz")
        _run([helm, "push", package, f"oci://{registry}/{CHART_PATH}", "--plain-http"], env=env,
             what=f"helm push {component}")


# ---------------------------------------------------------------- the GitOps repository

@dataclasses.dataclass
class GitRepo:
    checkout: pathlib.Path      # the platform engineers' clone; commits are pushed to the served bare repository
    url: str
    chart_mirror: str
    servers: dict[str, str] = dataclasses.field(default_factory=dict)  # several clusters: name -> API server
    revision: str = ""

    def git(self, *args) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "gpugen test", "GIT_AUTHOR_EMAIL": "gpugen@example.org",
               "GIT_COMMITTER_NAME": "gpugen test", "GIT_COMMITTER_EMAIL": "gpugen@example.org"}
        return _run(["git", *args], cwd=self.checkout, env=env, what="git").strip()

    def commit(self, inventory_file: pathlib.Path, message: str, edit=None) -> str:
        """Render `inventory_file` (with this site's settings) into the repository, let `edit(checkout)` change
        files by hand if given (what the drift check exists to catch), commit and push; the commit."""
        (self.checkout / "docs").mkdir(exist_ok=True)
        shutil.copy(ARGOCD_CM_PATCH, self.checkout / "docs" / ARGOCD_CM_PATCH.name)
        site = self.checkout / "gpu_classes.yaml"
        site.write_text(site_inventory(inventory_file, self.url, self.chart_mirror, self.servers))
        _run([sys.executable, "-m", "generator", "render", "--inventory", site,
              "--out", self.checkout / "rendered", "--bootstrap-out", self.checkout / "bootstrap",
              "--docs-out", self.checkout / "docs" / "runtimes.md"], cwd=pins.REPO, what="gpugen render")
        if edit:
            edit(self.checkout)
        self.git("add", "-A")
        if self.git("status", "--porcelain"):
            self.git("commit", "-q", "-m", message)
            self.git("push", "-q", "origin", "HEAD:main")
        self.revision = self.git("rev-parse", "HEAD")
        return self.revision


    def revert(self) -> str:
        """`git revert` of the last commit, pushed: how a bad commit is usually undone; the new commit."""
        self.git("revert", "--no-edit", "HEAD")
        self.git("push", "-q", "origin", "HEAD:main")
        self.revision = self.git("rev-parse", "HEAD")
        return self.revision


def start_git(work: pathlib.Path, procs: Processes, inventory_file: pathlib.Path, chart_mirror: str, netns,
              servers: dict[str, str] | None = None) -> GitRepo:
    served = work / "git"
    bare = served / REPO_NAME
    _run(["git", "init", "-q", "--bare", "--initial-branch=main", bare])
    port = free_port()
    url = f"git://127.0.0.1:{port}/{REPO_NAME}"
    checkout = work / "checkout"
    _run(["git", "clone", "-q", bare, checkout])
    _run(["git", "checkout", "-q", "-b", "main"], cwd=checkout)
    repo = GitRepo(checkout, url, chart_mirror, dict(servers or {}))
    repo.commit(inventory_file, "the platform")
    p = procs.start("git daemon", ["git", "daemon", "--reuseaddr", "--listen=127.0.0.1", f"--port={port}",
                                   f"--base-path={served}", "--export-all", "--informative-errors", served],
                    work / "logs" / "git-daemon.log", netns=netns)
    wait_ready(p, lambda: _port_open(netns, port), 30, f"git daemon on 127.0.0.1:{port}")
    return repo


# ---------------------------------------------------------------- Redis and Argo CD

def start_redis(work: pathlib.Path, procs: Processes, netns) -> str:
    redis = shutil.which("redis-server")
    if not redis:
        raise ComponentFailed("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
    port = free_port()
    p = procs.start("redis", [redis, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                              "--dir", work], work / "logs" / "redis.log", netns=netns)
    wait_ready(p, lambda: _port_open(netns, port), 30, f"redis on 127.0.0.1:{port}")
    return f"127.0.0.1:{port}"


@dataclasses.dataclass
class ArgoCD:
    admin: Client
    admin_kubeconfig: pathlib.Path
    repo: GitRepo
    controller: Process
    repo_server: Process
    applicationset_controller: Process | None = None

    def log_mark(self) -> int:
        """Where the controller's log ends now; sync_tasks reads only what is logged after such a mark."""
        return self.controller.log.stat().st_size

    def sync_tasks(self, application: str, mark: int) -> list[tuple[str, int, str, str, str, str, str]]:
        """The tasks of the first sync operation of `application` that the controller started after `mark`, in
        its order, as (phase, wave, action, group, kind, namespace, name) with action "apply" or "prune".
        gitops-engine logs them, sorted, as "Tasks (dry-run)" when an operation starts; [] if none started."""
        with open(self.controller.log, "rb") as log:
            log.seek(mark)
            for line in log:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "Tasks (dry-run)" and entry.get("application") == application:
                    return [(m["phase"], int(m["wave"]), "prune" if m["target"] == "nil" else "apply", m["group"],
                             m["kind"], m["namespace"], m["name"]) for m in _SYNC_TASK.finditer(entry["tasks"])]
        return []

    def applications(self) -> list[dict]:
        return self.admin.list("argoproj.io/v1alpha1", "Application", ARGOCD_NAMESPACE)

    def from_repo(self, app: dict) -> bool:
        """The Application syncs the cluster's repository (its synced revision is a commit; a chart's is its
        version)."""
        return app["spec"].get("source", {}).get("repoURL") == self.repo.url

    def refresh(self):
        """What a Git webhook does after a push: every Application compares with the new revision now."""
        for app in self.applications():
            self.admin.patch_merge("argoproj.io/v1alpha1", "Application", app["metadata"]["name"],
                                   {"metadata": {"annotations": {"argocd.argoproj.io/refresh": "normal"}}},
                                   ARGOCD_NAMESPACE)

    def kubectl(self, *args) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.admin_kubeconfig)}
        return _run(["kubectl", *args], cwd=self.repo.checkout, env=env, what="kubectl")

    def wait_applications(self, names: set[str] | None, usual: float, revision: str | None = None,
                          check=lambda: None, refusal_lasts: float | None = None, interval: float = 1) -> list[dict]:
        """Every Application (or those named) Synced and Healthy, at `revision` when given. It follows the
        Applications' progress (simulation/waiting.py): a ComponentFailed listing each Application's sync and health
        status, conditions and last operation when none of them changed for waiting.STALL seconds, or at
        ceiling(usual) for a convergence that usually takes `usual` seconds."""
        first_refused: dict[str, float] = {}
        apps: list[dict] = []

        def settled():
            nonlocal apps
            check()
            apps = self.applications()
            done = [a for a in apps if names is None or a["metadata"]["name"] in names]
            if (names is None or {a["metadata"]["name"] for a in done} >= names) and done and all(
                    application_settled(a, revision if self.from_repo(a) else None) for a in done):
                return done
            # A refusal that lasts: right after `kubectl apply` the controller may see an Application before its
            # AppProject, which it reports for a moment.
            now = time.monotonic()
            for a in apps:
                if refusal(a):
                    first_refused.setdefault(a["metadata"]["name"], now)
                else:
                    first_refused.pop(a["metadata"]["name"], None)
            refused = [a for a in apps
                       if now - first_refused.get(a["metadata"]["name"], now) > (refusal_lasts or REFUSAL_LASTS)]
            if refused:
                raise ComponentFailed("Argo CD refuses an Application (a retry cannot help):\n"
                                      + "\n".join(f"  {a['metadata']['name']}: {refusal(a)}" for a in refused)
                                      + "\n" + "\n".join(describe_application(a) for a in apps))
            return None

        return wait_for(settled, "Argo CD: Applications Synced and Healthy", usual, interval=interval,
                        progress=lambda: [application_progress(a) for a in apps], error=ComponentFailed,
                        describe=lambda: "\n".join(describe_application(a) for a in apps)
                        + f"\n(controller log: {self.controller.log})")


# Seconds a refusal must last to count (`refusal_lasts` widens it: a controller busy with thousands of objects
# reconciles an Application again only minutes later, its condition of a moment ago still shown).
REFUSAL_LASTS = 20.0

# gitops-engine's syncTask.String(): "PHASE/WAVE resource|hook GROUP/KIND:NAMESPACE/NAME live->target (...)".
_SYNC_TASK = re.compile(r"(?P<phase>\w+)/(?P<wave>-?\d+) (?:resource|hook) (?P<group>[^/ ]*)/(?P<kind>[^:]+):"
                        r"(?P<namespace>[^/]*)/(?P<name>[^ ]+) (?P<live>obj|nil)->(?P<target>obj|nil) ")


def refusal(app: dict) -> str:
    """Argo CD's word that an Application can never sync as it is: an invalid spec (its destination or source
    outside its project, ...) or a sync refused by its project. Empty otherwise."""
    st = app.get("status", {})
    for c in st.get("conditions", []) or []:
        if c["type"] == "InvalidSpecError":
            return c.get("message", "")
    message = st.get("operationState", {}).get("message", "")
    return message if "not permitted in project" in message else ""


def application_progress(app: dict) -> tuple:
    """What moves while an Application converges: its sync and health, its operation's phase and message (Argo CD
    counts down what it waits on there), and each of its objects' status. Not its reconciledAt, which Argo CD
    renews on every refresh even when nothing moves."""
    st = app.get("status", {})
    op = st.get("operationState", {})
    return (app["metadata"]["name"], st.get("sync", {}).get("status"), st.get("sync", {}).get("revision"),
            st.get("health", {}).get("status"), op.get("phase"), op.get("message"),
            tuple((r.get("kind"), r.get("name"), r.get("status"), (r.get("health") or {}).get("status"))
                  for r in st.get("resources", []) or []))


def application_settled(app: dict, revision: str | None = None) -> bool:
    st = app.get("status", {})
    sync = st.get("sync", {})
    op = st.get("operationState", {})
    at_revision = revision is None or sync.get("revision") == revision
    return (sync.get("status") == "Synced" and st.get("health", {}).get("status") == "Healthy" and at_revision
            and op.get("phase") in (None, "Succeeded"))


def describe_application(app: dict) -> str:
    st = app.get("status", {})
    op = st.get("operationState", {})
    conds = "; ".join(f"{c['type']}: {c.get('message', '')}" for c in st.get("conditions", []) or [])
    unhealthy = [f"{r.get('kind')} {r.get('namespace', '')}/{r.get('name')}: {r.get('health', {}).get('status')} "
                 f"{r.get('health', {}).get('message', '')}".strip()
                 for r in st.get("resources", []) or []
                 if r.get("health") and r["health"].get("status") not in ("Healthy", None)]
    out_of_sync = [f"{r.get('kind')} {r.get('namespace', '')}/{r.get('name')}"
                   for r in st.get("resources", []) or [] if r.get("status") == "OutOfSync"]
    return (f"  {app['metadata']['name']}: sync={st.get('sync', {}).get('status')} "
            f"health={st.get('health', {}).get('status')} operation={op.get('phase')}: {op.get('message', '')}"
            + (f"\n    conditions: {conds}" if conds else "")
            + (f"\n    not healthy: {unhealthy}" if unhealthy else "")
            + (f"\n    out of sync: {out_of_sync}" if out_of_sync else ""))


def _tool_path(work: pathlib.Path) -> str:
    """PATH for the repo-server: the pinned helm, git, and git-verify-wrapper.sh from Argo CD's module (its
    image puts it on PATH; the repo-server runs it for every Git revision)."""
    bin_dir = work / "argocd" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    helm = bin_dir / "helm"
    if not helm.exists():
        helm.symlink_to(go_tools.tool_bin("helm"))
    wrapper = bin_dir / "git-verify-wrapper.sh"
    shutil.copy(argocd_module() / "hack" / "git-verify-wrapper.sh", wrapper)
    wrapper.chmod(0o755)
    return f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def start_argocd(work: pathlib.Path, procs: Processes, plane, admin: Client, repo: GitRepo, redis: str,
                 netns, reconciliation: str | None = RECONCILIATION, repo_server_args: tuple[str, ...] = (),
                 controller_env: dict[str, str] | None = None, application_sets: bool = False) -> ArgoCD:
    """Argo CD's install objects applied, its repo-server and application controller started, and its
    ApplicationSet controller with `application_sets`. `reconciliation`: the periodic refresh (None: Argo CD's own
    default, as a site runs it); `repo_server_args`, `controller_env`: a site's settings (as argocd-cmd-params-cm
    gives them to the commands)."""
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ARGOCD_NAMESPACE}})
    apply_all(admin, install_objects(), ARGOCD_NAMESPACE)
    # argocd-server writes server.secretkey into argocd-secret when it first starts; it is not run here, and
    # without the key the controller cannot parse its settings and ignores every later change to argocd-cm
    # (the bootstrap's health checks among them).
    admin.patch_merge("v1", "Secret", "argocd-secret", {"stringData": {
        "server.secretkey": base64.b64encode(os.urandom(32)).decode()}}, ARGOCD_NAMESPACE)
    # This installation's settings of its own: SYNC_WAVE_DELAY (above), and the periodic refresh every
    # RECONCILIATION instead of 120 s plus up to 60 s of jitter. Argo CD does not refresh an Application for a
    # status-only change of its objects (resource.customizations.ignoreResourceUpdates.all), so a freshly made CRD
    # can read Progressing until that refresh, on a real cluster as here; the simulation would otherwise wait
    # minutes for it.
    if reconciliation is not None:
        admin.patch_merge("v1", "ConfigMap", "argocd-cm", {"data": {
            "timeout.reconciliation": reconciliation, "timeout.reconciliation.jitter": "0s"}}, ARGOCD_NAMESPACE)
    admin.apply(IN_CLUSTER_SECRET)
    binary = go_tools.tool_bin("argocd")
    data = work / "argocd"
    for d in ("gpg", "tls", "ssh", "tmp"):
        (data / d).mkdir(parents=True, exist_ok=True)
    common = go_runtime_env({
        "PATH": _tool_path(work), "HOME": str(data), "TMPDIR": str(data / "tmp"),
        "ARGOCD_FAKE_IN_CLUSTER": "true", "ARGOCD_GPG_ENABLED": "false",
        "ARGOCD_GNUPGHOME": str(data / "gpg"), "ARGOCD_TLS_DATA_PATH": str(data / "tls"),
        "ARGOCD_SSH_DATA_PATH": str(data / "ssh")})
    repo_port, repo_metrics, controller_metrics = free_port(), free_port(), free_port()
    repo_kc = service_account_kubeconfig(plane, data / "repo-server.kubeconfig", ARGOCD_NAMESPACE, "argocd-repo-server")
    repo_server = procs.start("argocd-repo-server", [
        binary, "--port", repo_port, "--metrics-port", repo_metrics, "--address", "127.0.0.1",
        "--metrics-address", "127.0.0.1", "--redis", redis, "--loglevel", "info", *repo_server_args,
    ], work / "logs" / "argocd-repo-server.log",
        env={**common, "ARGOCD_BINARY_NAME": "argocd-repo-server", "KUBECONFIG": str(repo_kc)}, netns=netns)
    wait_ready(repo_server, lambda: _port_open(netns, repo_port), 60, "argocd-repo-server")
    controller_kc = service_account_kubeconfig(plane, data / "application-controller.kubeconfig", ARGOCD_NAMESPACE,
                                               "argocd-application-controller")
    controller = procs.start("argocd-application-controller", [
        binary, "--redis", redis, "--repo-server", f"127.0.0.1:{repo_port}", "--metrics-port", controller_metrics,
        "--loglevel", "info",
    ], work / "logs" / "argocd-application-controller.log",
        # As the install manifest's Deployment sets them from argocd-cm (configMapKeyRef):
        env={**common, "ARGOCD_BINARY_NAME": "argocd-application-controller", "KUBECONFIG": str(controller_kc),
             **({"ARGOCD_RECONCILIATION_TIMEOUT": reconciliation, "ARGOCD_RECONCILIATION_JITTER": "0s"}
                if reconciliation is not None else {}),
             "ARGOCD_SYNC_WAVE_DELAY": os.environ.get("GPUGEN_ARGOCD_SYNC_WAVE_DELAY", SYNC_WAVE_DELAY),
             **(controller_env or {})},
        netns=netns)
    wait_ready(controller, lambda: _port_open(netns, controller_metrics), 60, "argocd-application-controller")
    appset = None
    if application_sets:
        appset_kc = service_account_kubeconfig(plane, data / "applicationset-controller.kubeconfig",
                                               ARGOCD_NAMESPACE, "argocd-applicationset-controller")
        probe = free_port()
        # As the install manifest's Deployment runs it, its listeners on loopback; the Git webhook endpoint is
        # argocd-server's business here too (refresh() stands in for it), so nothing calls the controller's.
        appset = procs.start("argocd-applicationset-controller", [
            binary, "--argocd-repo-server", f"127.0.0.1:{repo_port}", "--metrics-addr", f"127.0.0.1:{free_port()}",
            "--probe-addr", f"127.0.0.1:{probe}", "--webhook-addr", f"127.0.0.1:{free_port()}",
            "--loglevel", "info", "--logformat", "json",
        ], work / "logs" / "argocd-applicationset-controller.log",
            env={**common, "ARGOCD_BINARY_NAME": "argocd-applicationset-controller", "KUBECONFIG": str(appset_kc)},
            netns=netns)
        wait_ready(appset, lambda: _port_open(netns, probe), 60, "argocd-applicationset-controller")
    return ArgoCD(admin, plane.kubeconfig, repo, controller, repo_server, appset)


# What `argocd cluster add` makes on a cluster Argo CD is to manage (util/clusterauth/clusterauth.go of the pinned
# module: InstallClusterManagerRBAC with no namespaces, ArgoCDManagerClusterPolicyRules, and a long-lived token
# Secret `<service account>-long-lived-token` that the token controller fills).
CLUSTER_MANAGER = "argocd-manager"
CLUSTER_MANAGER_NAMESPACE = "kube-system"


def cluster_manager_access(kube_admin: Client) -> str:
    """`argocd cluster add`'s part on the managed cluster: the ServiceAccount argocd-manager in kube-system bound
    to every verb on every resource and non-resource URL, and its bearer token."""
    role = f"{CLUSTER_MANAGER}-role"
    apply_all(kube_admin, [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": CLUSTER_MANAGER, "namespace": CLUSTER_MANAGER_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": role},
         "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                   {"nonResourceURLs": ["*"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": f"{role}-binding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": CLUSTER_MANAGER, "namespace": CLUSTER_MANAGER_NAMESPACE}]},
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
         "metadata": {"name": f"{CLUSTER_MANAGER}-long-lived-token", "namespace": CLUSTER_MANAGER_NAMESPACE,
                      "annotations": {"kubernetes.io/service-account.name": CLUSTER_MANAGER}}},
    ], CLUSTER_MANAGER_NAMESPACE)

    def token():
        secret = kube_admin.get("v1", "Secret", f"{CLUSTER_MANAGER}-long-lived-token", CLUSTER_MANAGER_NAMESPACE)
        return base64.b64decode(secret["data"]["token"]).decode() if (secret or {}).get("data", {}).get("token") \
            else None
    return wait_for(token, f"the token of {CLUSTER_MANAGER_NAMESPACE}/{CLUSTER_MANAGER}", 2, interval=0.2,
                    error=ComponentFailed)


def cluster_secret(name: str, server: str, token: str, ca: bytes) -> dict:
    """`argocd cluster add`'s part on Argo CD's side, declaratively: a cluster Secret whose server is the cluster's
    `server:` as the inventory spells it, with the bearer token and CA (compression off, as IN_CLUSTER_SECRET)."""
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": f"cluster-{name}", "namespace": ARGOCD_NAMESPACE,
                         "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
            "stringData": {"name": name, "server": server, "config": json.dumps({
                "bearerToken": token, "disableCompression": True,
                "tlsClientConfig": {"insecure": False, "caData": base64.b64encode(ca).decode()}})}}


def bootstrap(argo: ArgoCD):
    """The README's "Bootstrapping a new cluster", command for command, from the repository's checkout."""
    argo.kubectl("-n", ARGOCD_NAMESPACE, "patch", "configmap", "argocd-cm", "--type", "merge",
                 "--patch-file", f"docs/{ARGOCD_CM_PATCH.name}")
    argo.kubectl("apply", "-f", "bootstrap/root/argocd/appproject/")
    argo.kubectl("apply", "-f", "bootstrap/root/argocd/application/")
