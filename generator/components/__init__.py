"""The platform's components: one row per upstream controller that gpugen installs from its Helm chart or adopts.

Everything else reads this table: the inventory schema (`cluster.components.<name>`, its default namespace), the
rules (what the rendered tree needs from a component that is neither installed nor declared existing), the
controller identities the policies let through, and the app-of-apps (chart, release, sync wave, the kinds its
AppProject allows). A component's Helm values are built by builders/bootstrap.py (`VALUES`), the one builder a new
component adds to.

Rows are in install order, which is also the order of the inventory's keys and of bootstrap/platform.
"""

from __future__ import annotations

from dataclasses import dataclass

ApiKind = dict[str, str]  # {"group": ..., "kind": ...}, as an AppProject's resource whitelists write it

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
    name: str  # key under cluster.components; suffix of its Application and AppProject
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


COMPONENTS: dict[str, ComponentFacts] = {c.name: c for c in (
    ComponentFacts(
        "kyverno", "kyverno",
        "the ValidatingPolicy/MutatingPolicy CRDs and admission webhooks that enforce the guardrails",
        # Kyverno registers its webhook configurations itself, at run time.
        Chart("https://kyverno.github.io/kyverno/", False, "kyverno", "KYVERNO_CHART_VERSION",
              "github.com/kyverno/kyverno", "KYVERNO_VERSION",
              (CRD, *RBAC_CLUSTER_KINDS), (*NAMESPACED_BASICS, {"group": "batch", "kind": "Job"}),
              # Its admission, background, cleanup and reports controllers, each behind a <name>-metrics Service.
              metrics=MetricsEndpoint((("app.kubernetes.io/instance", "kyverno"),
                                       ("app.kubernetes.io/part-of", "kyverno")), "metrics-port", "http")),
        release="kyverno",
        # Needs no other component: sharing Kueue's wave overlaps the two longest installs, both dominated by
        # their CRDs.
        wave="2"),
    ComponentFacts(
        "jobset", "kubeflow-system",
        "the JobSet CRD and controller every TrainJob runs through",
        Chart("registry.k8s.io/jobset/charts", True, "jobset", "JOBSET_CHART_VERSION",
              "sigs.k8s.io/jobset", "JOBSET_VERSION",
              (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS), (*NAMESPACED_BASICS, SECRET), ("jobset-webhook-server-cert",),
              MetricsEndpoint((("app.kubernetes.io/component", "controller"),
                               ("app.kubernetes.io/instance", "jobset")), "https", "https")),
        # fullnameOverride "jobset" (as Trainer's chart sets for its bundled copy) makes the service account
        # jobset-controller.
        release="jobset", wave="0", service_account="jobset-controller"),
    ComponentFacts(
        "trainer", "kubeflow-system",
        "the ClusterTrainingRuntime/TrainJob CRDs and the Trainer controller",
        Chart("ghcr.io/kubeflow/charts", True, "kubeflow-trainer", "TRAINER_CHART_VERSION",
              "github.com/kubeflow/trainer/v2", "TRAINER_VERSION",
              (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS), (*NAMESPACED_BASICS, SECRET), ("kubeflow-trainer-webhook-cert",),
              MetricsEndpoint((("app.kubernetes.io/component", "manager"),
                               ("app.kubernetes.io/instance", "kubeflow-trainer")), "monitoring-port", "https")),
        # The chart's name as release makes the controller kubeflow-trainer-controller-manager, as in upstream's
        # manifests. After JobSet: its controller watches JobSets.
        release="kubeflow-trainer", wave="1", service_account="kubeflow-trainer-controller-manager"),
    ComponentFacts(
        "kueue", "kueue-system",
        "the ResourceFlavor/ClusterQueue/LocalQueue CRDs and the Kueue controller",
        Chart("registry.k8s.io/kueue/charts", True, "kueue", "KUEUE_CHART_VERSION",
              "sigs.k8s.io/kueue", "KUEUE_VERSION",
              (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS, {"group": "apiregistration.k8s.io", "kind": "APIService"}),
              (*NAMESPACED_BASICS, SECRET), ("kueue-webhook-server-cert",),
              MetricsEndpoint((("app.kubernetes.io/component", "metrics-service"),
                               ("app.kubernetes.io/instance", "kueue")), "https", "https")),
        # After Trainer and JobSet: its TrainJob and JobSet integrations start with their CRDs present.
        release="kueue", wave="2", service_account="kueue-controller-manager"),
)}
