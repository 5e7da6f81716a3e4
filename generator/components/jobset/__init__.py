"""JobSet: the CRD and controller every TrainJob runs through (Trainer's runtimes make JobSets)."""

from __future__ import annotations

from generator.components.facts import (CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, SECRET, WEBHOOKS, Chart,
                                        ComponentFacts, MetricsEndpoint)

FACTS = ComponentFacts(
    "jobset", "kubeflow-system",
    "the JobSet CRD and controller every TrainJob runs through",
    Chart("registry.k8s.io/jobset/charts", True, "jobset", "JOBSET_CHART_VERSION",
          "sigs.k8s.io/jobset", "JOBSET_VERSION",
          (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS), (*NAMESPACED_BASICS, SECRET), ("jobset-webhook-server-cert",),
          MetricsEndpoint((("app.kubernetes.io/component", "controller"),
                           ("app.kubernetes.io/instance", "jobset")), "https", "https")),
    # fullnameOverride "jobset" (as Trainer's chart sets for its bundled copy) makes the service account
    # jobset-controller.
    release="jobset", wave="0", service_account="jobset-controller")
