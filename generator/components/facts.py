"""The shape every component folder fills (generator/components/<name>/__init__.py: FACTS): what gpugen needs
to know about an upstream controller it installs from its Helm chart or adopts.

Only the standard library and the other facts modules here: the tool scripts read these facts with the system's
python3 (`python3 -m generator.components`), before any virtualenv exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from generator import versions

ApiKind = dict[str, str]  # {"group": ..., "kind": ...}, as an AppProject's resource whitelists write it
# A cluster's role in a platform of several clusters (inventory clusters:).
Role = Literal["manager", "worker"]

CRD = {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition"}
RBAC_CLUSTER_KINDS = ({"group": "rbac.authorization.k8s.io", "kind": "ClusterRole"},
                      {"group": "rbac.authorization.k8s.io", "kind": "ClusterRoleBinding"})
WEBHOOKS = ({"group": "admissionregistration.k8s.io", "kind": "MutatingWebhookConfiguration"},
            {"group": "admissionregistration.k8s.io", "kind": "ValidatingWebhookConfiguration"})
NAMESPACED_BASICS = (*({"group": "", "kind": kind} for kind in ("ConfigMap", "Service", "ServiceAccount")),
                     {"group": "apps", "kind": "Deployment"},
                     {"group": "rbac.authorization.k8s.io", "kind": "Role"},
                     {"group": "rbac.authorization.k8s.io", "kind": "RoleBinding"})
SECRET = {"group": "", "kind": "Secret"}


@dataclass(frozen=True)
class MetricsEndpoint:
    """Where the chart's controllers serve Prometheus metrics: the labels of the metrics Services (all of them
    when there are several), the Service port's name, and its scheme. controller-runtime's https endpoints
    authorize the scraper with a SubjectAccessReview of GET /metrics; Kyverno's http ones do not."""

    service_labels: tuple[tuple[str, str], ...]
    port: str
    scheme: str


@dataclass(frozen=True)
class Chart:
    """An upstream Helm chart: where Argo CD pulls it from, where the pinned Go module ships it, and the kinds
    it renders (checked against `helm template` of the pinned charts; Helm hooks other than pre/post-install/
    upgrade, such as Kyverno's test Pods and pre-delete Jobs, are ignored by Argo CD)."""

    repo_url: str  # Argo CD's source.repoURL (an OCI registry path for OCI charts: no scheme)
    oci: bool
    name: str
    version_pin: str  # key in versions.env
    module: str  # Go module shipping charts/<name> at the app version
    app_version_pin: str
    cluster_kinds: tuple[ApiKind, ...]
    namespaced_kinds: tuple[ApiKind, ...]
    # Secrets the chart renders and the controller then fills with its webhook certificate (the name its
    # Configuration gives the cert manager): Argo CD must neither report nor undo that.
    cert_secrets: tuple[str, ...] = ()
    # Read from the chart's Services as rendered with the release name below (checked by the chart tier).
    metrics: MetricsEndpoint | None = None


@dataclass(frozen=True)
class ComponentFacts:
    name: str  # key under cluster.components; suffix of its Application and AppProject; its folder's name
    default_namespace: str  # where its upstream installation puts it
    needs: str  # what the rendered tree needs from it
    chart: Chart
    # Helm release name: it names the chart's objects, service accounts included.
    release: str
    # Argo CD sync wave of its Application in the app-of-apps: CRDs and webhooks before what uses them.
    wave: str
    # The service account the chart runs the controller as (serviceAccountName of its Deployment, under
    # `release`), when the policies must recognise that controller's requests; None when they need not.
    service_account: str | None = None

    def chart_version(self) -> str:
        return versions.pins()[self.chart.version_pin]

    def app_version(self) -> str:
        return versions.pins()[self.chart.app_version_pin]
