"""The platform's components (Kyverno, JobSet, Trainer, Kueue) run as local processes, configured exactly as the
rendered bootstrap/ Applications install them.

For each component Application (label gpugen/component) in bootstrap/, `chart_objects` renders its Helm chart
with the Application's values (tests/platform/charts.py `helm_template`, as Argo CD's repo server would). What
the chart renders is then applied as it is, except for the one transform `localize` below, which turns "a Deployment in a pod" into "a process on 127.0.0.1":

- the controller Deployment is not applied: it becomes a process of the pinned binary (tools/build.sh) with
  the container's args; files the pod mounts (ConfigMaps, the webhook serving-cert Secret, emptyDirs) are
  written under a per-process root and the paths in args and config files are rewritten to it; env values
  from the downward API get the values the pod would see; every container port and probe port is mapped to a
  free port on 127.0.0.1 (config files and args that name such a port are rewritten);
- webhook configurations: `service:` becomes `url: https://127.0.0.1:<port><path>` and the caBundle is the
  test CA that signed the process's serving certificate; cert rotators that would write a certificate for the
  Service's DNS name are switched off (Kueue internalCertManagement, Trainer certManagement, JobSet
  internalCertManagement); Kyverno manages its own certificate and webhooks and is told where it runs
  (--serverIP=127.0.0.1:<port>, its out-of-cluster flag);
- Deployments of the chart this simulation does not run (Kyverno's background, reports and cleanup
  controllers) and APIServices (Kueue's visibility API: an aggregated API cannot point at a URL, and an
  unavailable APIService stalls namespace deletion) are left out, and the harness says so (`skipped`).

The process runs as the chart's ServiceAccount (client certificate for system:serviceaccount:NS:NAME), so
the chart's RBAC is what it can do.
"""
from __future__ import annotations

import base64
import copy
import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import sys

import requests
import yaml

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))
from validation import validation_support as vs  # noqa: E402

# (importing cluster also silences urllib3's warning for the self-signed health probes)
from cluster import free_port, serving_cert, service_account_kubeconfig  # noqa: E402

COMPONENT_LABEL = "gpugen/component"

# component -> (the Deployment this simulation runs: a name suffix, tools/build.sh tool, versions.env key)
RUNS = {
    "kyverno": ("admission-controller", "kyverno-controller", "KYVERNO_VERSION"),
    "jobset": ("controller", "jobset", "JOBSET_VERSION"),
    "trainer": ("controller-manager", "trainer", "TRAINER_VERSION"),
    "kueue": ("controller-manager", "kueue", "KUEUE_VERSION"),
}
COMPONENT_TOOLS = [(tool, key) for _, tool, key in RUNS.values()] + [("helm", "HELM_VERSION")]



# ---------------------------------------------------------------- helm template

def chart_objects(application: dict) -> list[dict]:
    """What Argo CD would apply for this component Application. `helm template` is deterministic for one
    Application and one pinned chart and helm, so its output is cached under ~/.cache/gpugen/flame-charts keyed
    by those (and by this module and charts.py), which keeps a warm start fast."""
    import charts  # tests/platform/charts.py: helm template as Argo CD's repo server runs it
    ident = json.dumps([application, vs.versions(), (HERE / "charts.py").read_text()], sort_keys=True)
    cached = vs.cache_dir() / "flame-charts" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.yaml"
    if cached.exists():
        return [d for d in yaml.safe_load_all(cached.read_text()) if d]
    objects = charts.helm_template(application)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(yaml.safe_dump_all(objects))
    tmp.replace(cached)
    return objects


def component_applications(bootstrap: pathlib.Path) -> list[dict]:
    """The component Applications of a rendered bootstrap/ tree, in sync-wave order."""
    apps = []
    for f in sorted(bootstrap.rglob("*.yaml")):
        obj = vs.load_one(f)
        if obj.get("kind") == "Application" and COMPONENT_LABEL in obj["metadata"].get("labels", {}):
            apps.append(obj)
    return sorted(apps, key=lambda a: int(a["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave", "0")))


# ---------------------------------------------------------------- the transform

@dataclasses.dataclass
class LocalComponent:
    """A component as this simulation runs it."""
    name: str
    namespace: str
    apply_first: list[dict]         # CRDs and everything else from the chart, applied before the process starts
    webhooks: list[dict]            # webhook configurations, applied once the process is ready
    argv: list[str]
    env: dict
    root: pathlib.Path              # the process's files (mounted ConfigMaps, certs, emptyDirs)
    ready_url: str
    service_account: tuple[str, str]
    skipped: list[str]              # what the chart renders that this simulation does not run or apply


def _rooted(root: pathlib.Path, path: str) -> str:
    return str(root / path.lstrip("/"))


def _rewrite(value, replacements):
    """Replace mount paths and ports inside a string (args, config file text)."""
    for old, new in replacements:
        value = old.sub(new, value) if isinstance(old, re.Pattern) else value.replace(old, new)
    return value


def _port_patterns(ports: dict[int, int]):
    """host:port and :port (":8081", "0.0.0.0:8081", "[::]:8081") -> 127.0.0.1:<mapped>."""
    return [(re.compile(rf"(?<![\w.])(?:0\.0\.0\.0|\[::\]|localhost|127\.0\.0\.1)?:{old}\b"), f"127.0.0.1:{new}")
            for old, new in ports.items()]


def _map_ports(node, ports: dict[int, int]):
    """Every integer `port`/`bindPort` field naming a container port -> its local port (recursively)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("port", "bindPort") and isinstance(v, int) and v in ports:
                node[k] = ports[v]
            else:
                _map_ports(v, ports)
    elif isinstance(node, list):
        for v in node:
            _map_ports(v, ports)


def _localize_config(doc: dict, ports: dict[int, int], probe_port, metrics_port, cert_dir: str | None,
                     namespace: str) -> dict:
    """A controller-runtime style Configuration (Kueue, Trainer, JobSet): every listener on 127.0.0.1 and its
    mapped port (set explicitly where the chart relies on a default such as :8081), the webhook serving our
    certificate (`cert_dir`, checked to be the default one), no cert rotator (it would issue a certificate for the Service's DNS name), and the leader
    election namespace a pod reads from its service-account mount."""
    assert cert_dir is None or cert_dir.endswith("/tmp/k8s-webhook-server/serving-certs"), cert_dir
    _map_ports(doc, ports)
    if isinstance(doc.get("leaderElection"), dict) and not doc["leaderElection"].get("resourceNamespace"):
        doc["leaderElection"]["resourceNamespace"] = namespace
    wh = doc.setdefault("webhook", {})
    wh["host"] = "127.0.0.1"
    wh.setdefault("port", ports.get(9443, 9443))
    # The charts mount the serving cert at /tmp/k8s-webhook-server/serving-certs, controller-runtime's default
    # ($TMPDIR/...: written under the process root with TMPDIR=<root>/tmp, so Trainer and JobSet find it). Kueue
    # defaults webhook.certDir to that absolute path instead: only there the field is set (Trainer's strict
    # decoder has no such field).
    if cert_dir and str(doc.get("apiVersion", "")).startswith("config.kueue.x-k8s.io/"):
        wh["certDir"] = cert_dir
    if probe_port:
        doc.setdefault("health", {}).setdefault("healthProbeBindAddress", f":{probe_port}")
    if metrics_port:
        doc.setdefault("metrics", {}).setdefault("bindAddress", f":{metrics_port}")
    for key in ("internalCertManagement", "certManagement"):
        if key in doc:
            doc[key] = {**(doc.get(key) or {}), "enable": False}
    return doc


def localize(component: str, objects: list[dict], work: pathlib.Path, plane) -> LocalComponent:
    """The one transform from a chart's objects to a local process (see the module docstring)."""
    suffix, tool, key = RUNS[component]
    objs = copy.deepcopy(objects)
    by_kind = lambda kind: [o for o in objs if o.get("kind") == kind]  # noqa: E731
    deployments = by_kind("Deployment")
    candidates = [d for d in deployments if d["metadata"]["name"].endswith(suffix)]
    assert len(candidates) == 1, f"{component}: expected one Deployment named *{suffix} in the chart, found " \
                                 f"{[d['metadata']['name'] for d in deployments]}"
    (deployment,) = candidates
    deployment_name = deployment["metadata"]["name"]
    namespace = deployment["metadata"].get("namespace")
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    root = work / component
    root.mkdir(parents=True, exist_ok=True)
    configmaps = {o["metadata"]["name"]: o for o in by_kind("ConfigMap")}

    # Ports: every container port and probe port -> a free local port.
    ports: dict[int, int] = {}
    named: dict[str, int] = {}
    for p in container.get("ports", []):
        ports.setdefault(int(p["containerPort"]), free_port())
        if p.get("name"):
            named[p["name"]] = int(p["containerPort"])
    probe = (container.get("readinessProbe") or {}).get("httpGet") or {}
    probe_port = probe.get("port")
    if isinstance(probe_port, str):
        probe_port = named[probe_port]
    if probe_port:
        ports.setdefault(int(probe_port), free_port())

    # Files: the pod's volume mounts under root.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    path_map: list[tuple[str, str]] = []
    webhook_cert_dir = None
    certs = serving_cert(plane, work / f"{component}-serving-cert", component)
    for m in container.get("volumeMounts", []):
        vol = volumes[m["name"]]
        target = pathlib.Path(_rooted(root, m["mountPath"]))
        if "configMap" in vol:
            data = configmaps.get(vol["configMap"]["name"], {}).get("data", {})
            if m.get("subPath"):
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(data.get(m["subPath"], ""))
            else:
                target.mkdir(parents=True, exist_ok=True)
                for k, v in data.items():
                    (target / k).write_text(v)
        elif "secret" in vol:
            # The only Secrets these pods mount are serving certificates: ours, for 127.0.0.1.
            shutil.copytree(certs, target, dirs_exist_ok=True)
            webhook_cert_dir = str(target)
        else:  # emptyDir, projected tokens and the like: an empty directory
            target.mkdir(parents=True, exist_ok=True)
        path_map.append((m["mountPath"], str(target)))
    path_map.sort(key=lambda pm: -len(pm[0]))
    replacements = [(re.compile(rf"(?<![\w/]){re.escape(old)}"), new) for old, new in path_map]
    replacements += _port_patterns(ports)

    # Config files written from ConfigMaps: same rewrites, plus the controller-runtime Configuration tweaks.
    for old, new in path_map:
        for f in ([pathlib.Path(new)] if pathlib.Path(new).is_file() else pathlib.Path(new).rglob("*")):
            if not f.is_file() or f.suffix not in (".yaml", ".yml", ""):
                continue
            try:
                doc = yaml.safe_load(f.read_text())
            except yaml.YAMLError:
                continue
            if isinstance(doc, dict) and doc.get("kind") == "Configuration":
                metrics_port = named.get("metrics", 8443 if 8443 in ports else None)
                doc = _localize_config(doc, ports, probe_port, metrics_port, webhook_cert_dir, namespace)
                f.write_text(_rewrite(yaml.safe_dump(doc), replacements))

    # Command line and environment. A port in a flag (`--x=:8080`, `--metricsPort=8000`) is a listener too.
    raw_args = container.get("command", [])[1:] + container.get("args", [])
    for a in raw_args:
        for m in re.finditer(r"(?:=[\w.\[\]:]*:|Port=)(\d+)\b", a):
            ports.setdefault(int(m.group(1)), free_port())
    replacements += _port_patterns(ports)
    replacements += [(re.compile(rf"(?<=Port=){old}\b"), str(new)) for old, new in ports.items()]
    binary = str(vs.tool_bin(tool, key))
    argv = [binary] + [_rewrite(a, replacements) for a in raw_args]
    sa = pod.get("serviceAccountName", "default")
    field_values = {"metadata.namespace": namespace, "metadata.name": f"{deployment_name}-local",
                    "spec.serviceAccountName": sa, "spec.nodeName": "localhost", "status.podIP": "127.0.0.1",
                    "status.hostIP": "127.0.0.1"}
    env = {"TMPDIR": _rooted(root, "/tmp"), "HOME": str(root)}
    pathlib.Path(env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = _rewrite(str(e["value"]), replacements)
        elif "fieldRef" in (e.get("valueFrom") or {}):
            env[e["name"]] = field_values[e["valueFrom"]["fieldRef"]["fieldPath"]]
        # resourceFieldRef (GOMEMLIMIT, GOMAXPROCS from limits): left to the Go runtime's defaults
    # Written by write_identity() once the chart's ServiceAccount exists.
    kubeconfig = root / "identity" / "kubeconfig"
    env["KUBECONFIG"] = str(kubeconfig)
    ready_path = probe.get("path", "/readyz")
    scheme = (probe.get("scheme") or "HTTP").lower()
    ready_url = f"{scheme}://127.0.0.1:{ports[int(probe_port)]}{ready_path}" if probe_port else ""

    skipped = []
    launcher: list[str] = []
    if component == "kyverno":
        # Out of cluster, Kyverno registers its webhooks with url https://<serverIP><path> and issues its
        # certificate for that IP (cmd/kyverno --serverIP); it reads the kubeconfig from a flag only.
        webhook_port = ports[int(named.get("https", 9443))]
        argv = [a for a in argv if not a.startswith(("--serverIP", "--webhookServerHost"))]
        argv += [f"--serverIP=127.0.0.1:{webhook_port}", "--webhookServerHost=127.0.0.1", f"--kubeconfig={kubeconfig}"]
        if pod.get("initContainers"):
            skipped.append(f"init containers {[c['name'] for c in pod['initContainers']]} of {deployment_name} "
                           "(clean-ups of a previous installation; the cluster is new)")
    if component == "kueue":
        # Kueue's visibility API server writes certificates to a fixed /visibility and is reached only through
        # the APIService left out above: off (VisibilityOnDemand is a Kueue feature gate).
        argv.append("--feature-gates=VisibilityOnDemand=false")
        # With internal cert management off Kueue reads its metrics certificate from the fixed path
        # /etc/kueue/metrics/certs: provided in a private mount namespace (tests/e2e/kueue_e2e.py).
        launcher = _kueue_metrics_cert_launcher(root, certs)
    argv = launcher + argv

    # Webhook configurations: Service -> loopback URL with our CA.
    ca_bundle = base64.b64encode((plane.pki / "ca.crt").read_bytes()).decode()
    services = {o["metadata"]["name"]: o for o in by_kind("Service")}
    webhooks = []
    for o in objs:
        if o.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        for hook in o.get("webhooks", []):
            svc_ref = hook["clientConfig"].get("service")
            if not svc_ref:
                continue
            svc = services.get(svc_ref["name"])
            svc_port = int(svc_ref.get("port", 443))
            target = svc_port
            for sp in (svc or {}).get("spec", {}).get("ports", []):
                if int(sp["port"]) == svc_port:
                    tp = sp.get("targetPort", svc_port)
                    target = named.get(tp, tp) if isinstance(tp, str) else tp
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{ports[int(target)]}{svc_ref.get('path', '')}",
                                    "caBundle": ca_bundle}
        webhooks.append(o)

    apply_first = []
    for o in objs:
        kind = o.get("kind")
        if kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        if kind == "Deployment":
            if o is not deployment:
                skipped.append(f"Deployment {o['metadata']['name']} (not run by this simulation)")
            continue
        if kind == "APIService":
            skipped.append(f"APIService {o['metadata']['name']} (an aggregated API cannot point at a local process)")
            continue
        if kind in ("Pod", "Job", "CronJob") or (o.get("metadata", {}).get("annotations", {}).get("helm.sh/hook")):
            skipped.append(f"{kind} {o['metadata']['name']} (a Helm hook or a workload the simulation does not run)")
            continue
        apply_first.append(o)
    return LocalComponent(component, namespace, apply_first, webhooks, argv, env, root, ready_url, (namespace, sa),
                          skipped)


def write_identity(lc: LocalComponent, plane):
    """The process's kubeconfig: a token of the chart's ServiceAccount (apply the chart's objects first)."""
    service_account_kubeconfig(plane, pathlib.Path(lc.env["KUBECONFIG"]), *lc.service_account)


def _kueue_metrics_cert_launcher(root: pathlib.Path, certs: pathlib.Path) -> list[str]:
    sys.path.insert(0, str(HERE.parent / "e2e"))
    import kueue_e2e  # noqa: PLC0415
    work = root / "mountns"
    work.mkdir(exist_ok=True)
    return kueue_e2e._metrics_cert_launcher(work, certs)


def ready_check(url: str):
    s = requests.Session()
    s.trust_env = False
    return lambda: s.get(url, verify=False, timeout=3).status_code == 200
