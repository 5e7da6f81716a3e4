"""A kubelet for the platform's own pods: the controllers that Argo CD installs from the charts run as real
processes, started from the Pods the Deployments made, with what the API server holds for them.

KWOK plays the kubelet for every other pod (research jobs); the pods of the platform's namespaces are left to
this runtime (cluster.kwok_stages excludes them). For each such pod bound to a node it does what a kubelet and
a container runtime would, and nothing else:

- gives the pod an IP of its own in the simulation's network namespace (netns.POD_NETWORK) and reports it in the
  pod's status, so the EndpointSlice controller puts it behind the chart's Services and the API server reaches
  webhooks and aggregated APIs (Kueue's visibility API) through them (--enable-aggregator-routing);
- runs the container's args with the pinned binary of that component (tools/build.sh) in a private mount
  namespace chrooted into a root of its own, where every volume is mounted at its mountPath: ConfigMaps and
  Secrets as the API server has them (refreshed while the pod runs, as a kubelet does, so certificates that a
  controller writes into its Secret reach its files), emptyDirs, and the service-account token, bound to the
  pod, at /var/run/secrets/kubernetes.io/serviceaccount with KUBERNETES_SERVICE_HOST/PORT, so the process finds
  the API server in-cluster, as the chart's ServiceAccount;
- two changes to the container: every listener on all interfaces (`:9443`, `0.0.0.0:8080`) binds the pod's
  IP instead, since all pods share the host's network namespace (controller-runtime Configuration files get
  their webhook, probe and metrics hosts; Kyverno host flags); and the environment the simulation adds
  (Container.env: Kyverno may reach the tests' image registry on loopback);
- marks the pod Ready once its readiness probe answers on the pod's IP, restarts a container that exits
  (counting restarts), and removes the pod when it is deleted.

One difference from a kubelet: all pods share the simulation's network namespace, so two pods of one Deployment
could not both bind a port that a program always binds on all interfaces (Kueue's visibility server). In a rollout
the new pod's process therefore replaces the old pod's at once (the old pod is reported not Ready until the
Deployment deletes it), instead of both running until the new one is Ready.

Pods of Deployments this simulation does not run (`NOT_RUN`: Kyverno's background and reports
controllers) are marked Running and Ready without a process, and listed in `skipped`.
"""
from __future__ import annotations

import base64
import dataclasses
import os
import pathlib
import re
import shutil
import threading
import time
import traceback

import requests
import yaml

from simulation.processes import Process, Processes, log_tail, stop_process
from simulation.kube import ApiError, Client

from simulation.netns import POD_NETWORK
from simulation.waiting import PROBE, STOP_GRACE
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
CRASH_LOOP = 5  # restarts after which a pod's container counts as failed (kubelet would be in CrashLoopBackOff)


@dataclasses.dataclass(frozen=True)
class Container:
    """What runs the pods of a Deployment: `binary` stands in for the container's image; `host_flags`, if the
    program binds all interfaces unless flags name the host (Kyverno's --webhookServerHost, --metricsHost)."""
    deployment: str
    binary: pathlib.Path
    host_flags: tuple[str, ...] = ()
    # Environment the simulation adds to the container's own (SIMULATION_ENV of simulation/flame.py).
    env: tuple[tuple[str, str], ...] = ()


def image_repository(image: str) -> str:
    """registry/path of an image reference, without its tag or digest."""
    ref = image.split("@")[0]
    name, _, tag = ref.rpartition(":")
    return name if name and "/" not in tag else ref


def _now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _listeners(text: str, ip: str) -> str:
    """`:9443`, `0.0.0.0:9443`, `[::]:9443` -> `<ip>:9443` (a flag's value or a config field)."""
    return re.sub(r"(?<![\w.\]])(?:0\.0\.0\.0|\[::\])?:(\d{2,5})\b", rf"{ip}:\1", text)


def _localize_configuration(doc: dict, ip: str, ports: dict[str, int] | None = None) -> dict:
    """A controller-runtime Configuration (Kueue, Trainer, JobSet) listening on the pod's IP. A listener the file
    leaves to its default (`:8081` for probes, `:8443` for metrics) is written out on the port the container
    declares for it (`ports`: "health" and "metrics")."""
    ports = ports or {}
    doc.setdefault("webhook", {})["host"] = ip
    for section, key, port in (("health", "healthProbeBindAddress", ports.get("health")),
                               ("metrics", "bindAddress", ports.get("metrics"))):
        if isinstance(doc.get(section), dict) and key in doc[section]:
            doc[section][key] = _listeners(str(doc[section][key]), ip)
        elif port:
            doc.setdefault(section, {})[key] = f"{ip}:{port}"
    if str(doc.get("apiVersion", "")).startswith("config.kueue.x-k8s.io/"):
        # Kueue's visibility API server listens on all interfaces unless told its address.
        doc.setdefault("visibilityServer", {})["bindAddress"] = ip
    return doc


def container_ports(container: dict) -> dict[str, int]:
    """The ports a container declares for its probes ("health": the readiness probe's) and metrics."""
    named = {p.get("name"): int(p["containerPort"]) for p in container.get("ports", [])}
    out = {}
    probe = ((container.get("readinessProbe") or {}).get("httpGet") or {}).get("port")
    if probe is not None:
        out["health"] = named.get(probe) if isinstance(probe, str) else int(probe)
    if "metrics" in named:
        out["metrics"] = named["metrics"]
    return out


def _localize_file(text: str, ip: str, ports: dict[str, int]) -> str:
    """A ConfigMap key as the pod runtime mounts it: a controller-runtime Configuration gets its listeners on the
    pod's IP; anything else is unchanged."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(doc, dict) and doc.get("kind") == "Configuration":
        return yaml.safe_dump(_localize_configuration(doc, ip, ports))
    return text


@dataclasses.dataclass
class RunningPod:
    namespace: str
    name: str
    uid: str
    ip: str
    container: Container | None      # None: marked Ready without a process (NOT_RUN)
    deployment: str = ""
    replaced: bool = False           # its process gave way to a newer pod of the same Deployment
    root: pathlib.Path | None = None
    process: Process | None = None
    ready: bool = False
    restarts: int = 0
    exit_code: int | None = None
    ports: dict = dataclasses.field(default_factory=dict)   # container_ports() of its container
    argv: list[str] = dataclasses.field(default_factory=list)
    env: dict = dataclasses.field(default_factory=dict)
    probe: str = ""
    secret_volumes: dict = dataclasses.field(default_factory=dict)   # host dir -> (secret name, items)
    configmap_volumes: dict = dataclasses.field(default_factory=dict)


class PodRuntime:
    """Runs the pods of `namespaces` (see the module docstring). start() a thread; stop() ends every process."""

    def __init__(self, admin: Client, plane, work: pathlib.Path, namespaces: list[str],
                 containers: dict[str, Container], not_run: dict[str, str], procs: Processes, netns, log=print,
                 images: dict[str, pathlib.Path] | None = None, first_ip: int = 10):
        self.admin, self.plane, self.work, self.netns = admin, plane, work, netns
        self.namespaces, self.containers, self.not_run = namespaces, containers, not_run
        # Image repository -> binary, for pods that are not a Deployment's (the charts' hook Jobs).
        self.images = images or {}
        self.procs, self.log = procs, log
        self.pods: dict[str, RunningPod] = {}
        self.skipped: set[str] = set()
        self.errors: list[str] = []
        # The pods' addresses: POD_NETWORK[first_ip] onwards (several clusters share one network namespace).
        self._next_ip = first_ip
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pod-runtime", daemon=True)
        self._server_port = plane.kube.server.rsplit(":", 1)[1]

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=STOP_GRACE)
        for pod in self.pods.values():
            self._kill(pod)

    def check(self):
        if self.errors:
            raise RuntimeError("the pod runtime failed:\n" + "\n".join(self.errors[-3:]))

    def _loop(self):
        self.netns.enter_thread()  # readiness probes reach the pods' IPs, which exist only there
        while not self._stop.is_set():
            try:
                self._sync()
            except Exception:  # noqa: BLE001 - reported through check(); the loop keeps the pods running
                self.errors.append(traceback.format_exc())
            self._stop.wait(1)

    def _sync(self):
        seen = set()
        for ns in self.namespaces:
            for pod in self.admin.list("v1", "Pod", ns):
                meta = pod["metadata"]
                key = meta["uid"]
                seen.add(key)
                if not pod["spec"].get("nodeName"):
                    continue
                if meta.get("deletionTimestamp"):
                    if key in self.pods:
                        self._kill(self.pods.pop(key))
                    self.admin._req("DELETE", self.admin.url("v1", "Pod", ns, meta["name"]), "delete pod",
                                    ok=(200, 202, 404), json={"gracePeriodSeconds": 0})
                    continue
                running = self.pods.get(key) or self._admit(pod)
                if running:
                    self._tend(running, pod)
        for key in list(self.pods):
            if key not in seen:
                self._kill(self.pods.pop(key))

    # ------------------------------------------------------------ one pod

    def _deployment_of(self, pod) -> str:
        labels = pod["metadata"].get("labels", {})
        for ref in pod["metadata"].get("ownerReferences", []):
            if ref["kind"] == "ReplicaSet":
                return ref["name"].removesuffix("-" + labels.get("pod-template-hash", ""))
        return pod["metadata"]["name"]

    def _admit(self, pod) -> RunningPod | None:
        meta = pod["metadata"]
        ip = str(POD_NETWORK[self._next_ip])
        self._next_ip += 1
        deployment = self._deployment_of(pod)
        container = self._container_for(pod, deployment)
        running = RunningPod(meta["namespace"], meta["name"], meta["uid"], ip, container, deployment=deployment)
        self.pods[meta["uid"]] = running
        if container is None:
            self.skipped.add(f"Deployment {meta['namespace']}/{deployment}: "
                             f"{self.not_run.get(deployment, 'not run by this simulation')}; its pod is marked Ready")
            running.ready = True
            self._report(pod, running, "Running")
            return running
        # A rollout: the Deployment's new pod takes over from the old one's process at once (see the docstring).
        for other in list(self.pods.values()):
            if other is not running and other.process is not None and other.deployment == deployment \
                    and other.namespace == running.namespace and other.exit_code is None:
                self.log(f"pod {other.namespace}/{other.name}: replaced by {running.name} (rollout)")
                self._kill(other)
                other.replaced = True
                other.ready = False
        self._prepare(pod, running)
        self._report(pod, running, "Running")
        return running

    def _container_for(self, pod, deployment: str) -> Container | None:
        found = self.containers.get(f"{pod['metadata']['namespace']}/{deployment}")
        if found or deployment in self.not_run:
            return found
        repository = image_repository(pod["spec"]["containers"][0].get("image", ""))
        if repository in self.images:
            return Container(deployment, self.images[repository])
        return None

    def _prepare(self, pod, running: RunningPod):
        spec = pod["spec"]
        c = spec["containers"][0]
        running.ports = container_ports(c)
        root = self.work / "pods" / f"{running.namespace}.{running.name}"
        running.root = root
        host = root / "volumes"
        host.mkdir(parents=True, exist_ok=True)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        # The service-account token, bound to this pod, where client-go's in-cluster config reads it (the API
        # server's ServiceAccount admission added its projected volume to the pod).
        sa = host / "serviceaccount"
        sa.mkdir(exist_ok=True)
        (sa / "token").write_text(self._token(pod))
        (sa / "ca.crt").write_bytes((self.plane.pki / "ca.crt").read_bytes())
        (sa / "namespace").write_text(running.namespace)
        mounts = []
        for m in c.get("volumeMounts", []):
            vol = volumes[m["name"]]
            src = host / m["name"]
            if m["mountPath"] == SA_DIR:
                mounts.append((sa, SA_DIR, False))
                continue
            if "configMap" in vol:
                running.configmap_volumes[src] = (vol["configMap"]["name"], vol["configMap"].get("items"))
            elif "secret" in vol:
                running.secret_volumes[src] = (vol["secret"]["secretName"], vol["secret"].get("items"))
            src.mkdir(exist_ok=True)
            sub = m.get("subPath")
            mounts.append((src / sub if sub else src, m["mountPath"], bool(sub)))
        self._refresh_volumes(running)

        ip = running.ip
        args = [_listeners(a, ip) for a in (c.get("command", [])[1:] + c.get("args", []))]
        for flag in running.container.host_flags:  # a listen host the program takes by a flag, not from its listeners
            args = [a for a in args if not a.startswith(flag)] + [f"{flag}={ip}"]
        field = {"metadata.namespace": running.namespace, "metadata.name": running.name,
                 "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
                 "spec.nodeName": spec["nodeName"], "status.podIP": ip, "status.hostIP": "127.0.0.1",
                 "metadata.uid": running.uid}
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "HOSTNAME": running.name,
               "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": self._server_port}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = str(e["value"])
            elif "fieldRef" in (e.get("valueFrom") or {}):
                env[e["name"]] = field.get(e["valueFrom"]["fieldRef"]["fieldPath"], "")
        env.update(running.container.env)
        running.env = env
        probe = (c.get("readinessProbe") or {}).get("httpGet")
        if probe:
            port = probe["port"]
            if isinstance(port, str):
                port = next(p["containerPort"] for p in c.get("ports", []) if p.get("name") == port)
            running.probe = f"{(probe.get('scheme') or 'HTTP').lower()}://{ip}:{port}{probe.get('path', '/')}"

        rootfs = root / "rootfs"
        for d in ("dev", "proc", "tmp", "etc", "gpugen"):
            (rootfs / d).mkdir(parents=True, exist_ok=True)
        (rootfs / "tmp").chmod(0o1777)
        steps = ["mount --rbind /dev \"$R/dev\"", "mount --rbind /proc \"$R/proc\""]
        for f in ("hosts", "resolv.conf", "ssl", "ca-certificates", "passwd", "group", "nsswitch.conf"):
            if os.path.exists(f"/etc/{f}"):
                target = rootfs / "etc" / f
                target.mkdir(exist_ok=True) if os.path.isdir(f"/etc/{f}") else target.touch()
                steps.append(f"mount --bind /etc/{f} \"$R/etc/{f}\"")
        binary = rootfs / "gpugen" / running.container.binary.name
        binary.touch()
        steps.append(f"mount --bind '{running.container.binary}' '{binary}'")
        for src, target, is_file in mounts:
            t = rootfs / target.lstrip("/")
            if is_file or src.is_file():
                t.parent.mkdir(parents=True, exist_ok=True)
                t.touch()
            else:
                t.mkdir(parents=True, exist_ok=True)
            steps.append(f"mount --bind '{src}' '{t}'")
        chroot = shutil.which("chroot") or "/usr/sbin/chroot"  # the pod's PATH does not reach sbin
        script = "set -e; R=\"$1\"; shift; " + " && ".join(steps) + f" && exec {chroot} \"$R\" \"$@\""
        running.argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh",
                        str(rootfs), f"/gpugen/{binary.name}", *args]

    def _token(self, pod) -> str:
        meta = pod["metadata"]
        sa = pod["spec"].get("serviceAccountName", "default")
        url = self.admin.url("v1", "ServiceAccount", meta["namespace"], sa) + "/token"
        r = self.admin._req("POST", url, f"token for {meta['namespace']}/{sa}", json={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 2 * 24 * 3600,
                     "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}}})
        return r.json()["status"]["token"]

    def _refresh_volumes(self, running: RunningPod) -> bool:
        """Write ConfigMap and Secret volumes as the API server has them; False while one is missing (a kubelet
        keeps such a pod in ContainerCreating)."""
        complete = True
        for sources, kind in ((running.configmap_volumes, "ConfigMap"), (running.secret_volumes, "Secret")):
            for path, (name, items) in sources.items():
                obj = self.admin.get("v1", kind, name, running.namespace)
                if obj is None:
                    complete = False
                    continue
                data = dict(obj.get("data") or {})
                if kind == "Secret":
                    data = {k: base64.b64decode(v) for k, v in data.items()}
                else:  # config files: listeners on the pod's IP
                    data = {k: _localize_file(v, running.ip, running.ports).encode() for k, v in data.items()}
                if items:
                    data = {i["path"]: data[i["key"]] for i in items if i["key"] in data}
                for k, v in data.items():
                    f = path / k
                    f.parent.mkdir(parents=True, exist_ok=True)
                    if not f.exists() or f.read_bytes() != v:
                        tmp = f.with_name(f".{f.name}.tmp")
                        tmp.write_bytes(v)
                        tmp.replace(f)
        return complete

    def _tend(self, running: RunningPod, pod):
        if running.container is None:
            return
        if running.replaced:
            if pod.get("status", {}).get("conditions") and any(
                    c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"]):
                self._report(pod, running, "Running")  # not ready any more: its process is gone
            return
        complete = self._refresh_volumes(running)
        once = pod["spec"].get("restartPolicy", "Always") != "Always"
        if running.process is not None and once and running.process.popen.poll() is not None:
            if running.exit_code is None:   # a Job's pod: it ends with its container
                running.exit_code = running.process.popen.returncode
                self.procs.forget(running.process)  # done, not a component that died
                self._report(pod, running, "Succeeded" if running.exit_code == 0 else "Failed")
            return
        if running.process is None or running.process.popen.poll() is not None:
            if running.process is not None:
                running.restarts += 1
                running.ready = False
                self.log(f"pod {running.namespace}/{running.name} exited "
                         f"({running.process.popen.returncode}); restarting (log: {running.process.log})")
                if running.restarts >= CRASH_LOOP:
                    self.errors.append(f"pod {running.namespace}/{running.name} keeps exiting ({running.restarts} "
                                       f"restarts; log: {running.process.log})\n{log_tail(running.process.log)}")
                self.procs.forget(running.process)
                self._report(pod, running, "Running")
                time.sleep(min(5, running.restarts))
            if not complete:
                return
            # Re-run the preparation so config files written before a ConfigMap existed are complete.
            log = self.work / "logs" / f"{running.namespace}.{running.name}.log"
            running.process = self.procs.start(f"pod {running.namespace}/{running.name}", running.argv, log,
                                               env=running.env, netns=self.netns)
            running.process.supervised = True  # this runtime restarts it, or reports its Job pod's end
            return
        if not running.ready and self._probe(running):
            running.ready = True
            self._report(pod, running, "Running")

    def _probe(self, running: RunningPod) -> bool:
        if not running.probe:
            return True
        s = requests.Session()
        s.trust_env = False
        try:
            return s.get(running.probe, verify=False, timeout=PROBE).status_code < 400
        except requests.RequestException:
            return False

    def _report(self, pod, running: RunningPod, phase: str):
        now = _now()
        ready = "True" if running.ready and phase == "Running" else "False"
        c = pod["spec"]["containers"][0]
        state = {"running": {"startedAt": now}}
        if running.exit_code is not None:
            state = {"terminated": {"exitCode": running.exit_code, "finishedAt": now, "startedAt": now,
                                    "reason": "Completed" if running.exit_code == 0 else "Error"}}
        status = {
            "phase": phase, "podIP": running.ip, "podIPs": [{"ip": running.ip}], "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}], "startTime": pod.get("status", {}).get("startTime") or now,
            "conditions": [{"type": t, "status": s, "lastTransitionTime": now} for t, s in (
                ("PodScheduled", "True"), ("Initialized", "True"), ("ContainersReady", ready), ("Ready", ready))],
            "containerStatuses": [{"name": c["name"], "image": c.get("image", ""), "imageID": "",
                                   "ready": ready == "True", "restartCount": running.restarts,
                                   "started": running.exit_code is None, "state": state}],
        }
        try:
            self.admin.patch_merge("v1", "Pod", running.name, {"status": status}, running.namespace, "status")
        except ApiError as e:
            if "404" not in str(e):
                raise

    def _kill(self, running: RunningPod):
        p = running.process
        if p:
            stop_process(p.popen)
        self.procs.forget(p)

    def describe(self) -> str:
        lines = []
        for p in self.pods.values():
            state = "ready" if p.ready else "not ready"
            lines.append(f"{p.namespace}/{p.name} {p.ip} {state} restarts={p.restarts}"
                         + (f" log={p.process.log}" if p.process else " (no process)"))
            if p.process and not p.ready:
                lines.append(log_tail(p.process.log, 800))
        return "\n".join(lines)
