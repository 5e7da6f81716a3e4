"""The site's Prometheus in the simulated FLAME: the pinned server (tools/build.sh prometheus), in the
simulation's network namespace, scraping the platform's controllers as the rendered ServiceMonitors say and
evaluating the rendered PrometheusRules.

What is real: Prometheus' Kubernetes service discovery against the simulated API server (the charts' Services
and their Endpoints, the pods the charts' Deployments made), the controllers' metrics endpoints, and their
authorization of the scrape (a TokenReview of Prometheus' service-account token, then a SubjectAccessReview of
GET /metrics, which only the rendered `metrics-reader` binding allows: the site's own role here grants discovery
alone). What is a model: the Prometheus Operator's translation of a ServiceMonitor into a scrape job (its
`generateServiceMonitorConfig`: endpoints discovery in the selected namespaces, the selector and port as keep
rules, the namespace/service/pod/job/endpoint target labels, then the monitor's relabelings). The operator
itself is not run: its newest module the proxy serves (v0.93) takes minutes to build and predates the CRDs.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import yaml

from simulation import go_tools
from simulation.cluster import service_account_kubeconfig
from simulation.control_plane import free_port
from simulation.processes import Process, Processes, wait_ready
from simulation.waiting import PROBE

# Where a pod's service-account token is mounted: what a ServiceMonitor's bearerTokenFile names.
POD_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# The Prometheus CR's default evaluation interval (the operator writes it into the global section).
EVALUATION_INTERVAL = "30s"


def _sanitize(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def scrape_job(monitor: dict, index: int, endpoint: dict, token_file: pathlib.Path,
               kubeconfig: pathlib.Path) -> dict:
    """One ServiceMonitor endpoint as the Prometheus Operator writes its scrape job (the model, see above)."""
    meta, spec = monitor["metadata"], monitor["spec"]
    namespaces = spec.get("namespaceSelector", {}).get("matchNames") or [meta["namespace"]]
    relabel = [{"source_labels": ["job"], "target_label": "__tmp_prometheus_job_name"}]
    for key, value in sorted(spec["selector"].get("matchLabels", {}).items()):
        relabel.append({"action": "keep", "regex": f"({re.escape(value)});true",
                        "source_labels": [f"__meta_kubernetes_service_label_{_sanitize(key)}",
                                          f"__meta_kubernetes_service_labelpresent_{_sanitize(key)}"]})
    target = ("__meta_kubernetes_endpoint_address_target_kind", "__meta_kubernetes_endpoint_address_target_name")
    relabel += [
        {"action": "keep", "source_labels": ["__meta_kubernetes_endpoint_port_name"],
         "regex": re.escape(endpoint["port"])},
        {"source_labels": [*target],
         "separator": ";", "regex": "Node;(.*)", "replacement": "${1}", "target_label": "node"},
        {"source_labels": [*target],
         "separator": ";", "regex": "Pod;(.*)", "replacement": "${1}", "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
        {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
        {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
        {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job", "replacement": "${1}"},
        {"target_label": "endpoint", "replacement": endpoint["port"]},
    ]
    for r in endpoint.get("relabelings", []):
        relabel.append({{"sourceLabels": "source_labels", "targetLabel": "target_label"}.get(k, k): v
                        for k, v in r.items()})
    job = {
        "job_name": f"serviceMonitor/{meta['namespace']}/{meta['name']}/{index}",
        "honor_labels": False,
        "kubernetes_sd_configs": [{"role": "endpoints", "kubeconfig_file": str(kubeconfig),
                                   "namespaces": {"names": namespaces}}],
        "scrape_interval": endpoint.get("interval", "30s"),
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
        "relabel_configs": relabel,
    }
    tls = endpoint.get("tlsConfig")
    if tls:
        job["tls_config"] = {"insecure_skip_verify": bool(tls.get("insecureSkipVerify"))}
    if endpoint.get("bearerTokenFile"):
        # The pod's token path, here the file holding Prometheus' service-account token.
        assert endpoint["bearerTokenFile"] == POD_TOKEN, endpoint["bearerTokenFile"]
        job["authorization"] = {"credentials_file": str(token_file)}
    return job


def configuration(monitors: list[dict], rule_files: list[pathlib.Path], token_file: pathlib.Path,
                  kubeconfig: pathlib.Path) -> dict:
    jobs = [scrape_job(m, i, ep, token_file, kubeconfig)
            for m in monitors for i, ep in enumerate(m["spec"]["endpoints"])]
    return {"global": {"evaluation_interval": EVALUATION_INTERVAL, "scrape_interval": "30s"},
            "rule_files": [str(f) for f in rule_files],
            "scrape_configs": jobs}


@dataclasses.dataclass
class SitePrometheus:
    url: str  # reachable from the host and inside the network namespace
    process: Process
    config: pathlib.Path


def start_prometheus(work: pathlib.Path, procs: Processes, plane, tree_objects: list[dict], inventory,
                     netns) -> SitePrometheus | None:
    monitoring = inventory.cluster.monitoring
    if monitoring is None:
        return None
    binary = go_tools.tool_bin("prometheus")
    home = work / "prometheus"
    (home / "rules").mkdir(parents=True, exist_ok=True)
    kubeconfig = service_account_kubeconfig(plane, home / "kubeconfig", monitoring.namespace,
                                            monitoring.prometheusServiceAccount)
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    token_file = home / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    rule_files = []
    for rule in (o for o in tree_objects if o["kind"] == "PrometheusRule"):
        path = home / "rules" / f"{rule['metadata']['namespace']}-{rule['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
        rule_files.append(path)
    monitors = [o for o in tree_objects if o["kind"] == "ServiceMonitor"]
    config = home / "prometheus.yml"
    config.write_text(yaml.safe_dump(configuration(monitors, rule_files, token_file, kubeconfig), sort_keys=False))
    port = free_port()
    process = procs.start("prometheus", [
        binary, f"--config.file={config}", f"--storage.tsdb.path={home / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=2d", "--log.level=warn",
    ], work / "logs" / "prometheus.log", netns=netns)
    netns.forward(port)
    url = f"http://127.0.0.1:{port}"

    def ready():
        import urllib.request
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=PROBE) as answer:
                return answer.status == 200
        except OSError:
            return False
    wait_ready(process, ready, 60, f"prometheus on {url}")
    return SitePrometheus(url, process, config)
