"""The site's monitoring stack, as far as the rendered tree needs it: a cluster whose inventory sets
`cluster.monitoring` runs the Prometheus Operator (kube-prometheus-stack, say), which gpugen does not install.
Before the bootstrap, the simulated FLAME gets what such a site has: the operator's CRDs for the kinds the tree
renders (tools/crds.sh, from the pinned module), the monitoring namespace and Prometheus' service account."""

from __future__ import annotations

import pathlib
import subprocess

from simulation import manifests, pins
from simulation.kube import Client, apply_all

MONITORING_GROUP = "monitoring.coreos.com"
DISCOVERY = "site-prometheus-discovery"


def operator_crds() -> list[dict]:
    out = subprocess.run([str(pins.TOOLS / "crds.sh")], capture_output=True, text=True, check=True)
    crds = []
    for path in sorted(pathlib.Path(out.stdout.strip()).glob(f"{MONITORING_GROUP}_*.yaml")):
        crds += manifests.load_all(path.read_text())
    return crds


def install_site_monitoring(admin: Client, inventory) -> None:
    monitoring = inventory.cluster.monitoring
    if monitoring is None:
        return
    account = {"kind": "ServiceAccount", "name": monitoring.prometheusServiceAccount,
               "namespace": monitoring.namespace}
    apply_all(admin, [
        *operator_crds(),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": monitoring.namespace}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account["name"], "namespace": account["namespace"]}},
        # Service discovery only, unlike kube-prometheus' role: reading /metrics is what the rendered
        # metrics-reader binding must grant.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": DISCOVERY},
         "rules": [{"apiGroups": [""], "resources": ["services", "endpoints", "pods"],
                    "verbs": ["get", "list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                    "verbs": ["get", "list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": DISCOVERY},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": DISCOVERY},
         "subjects": [account]},
    ])
