"""Kubeflow Trainer: the ClusterTrainingRuntime and TrainJob CRDs, and the controller that turns a TrainJob into a
JobSet from its runtime."""

from __future__ import annotations

from generator.components.facts import (CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, SECRET, WEBHOOKS, Chart,
                                        ComponentFacts, MetricsEndpoint)

FACTS = ComponentFacts(
    "trainer", "kubeflow-system",
    "the ClusterTrainingRuntime/TrainJob CRDs and the Trainer controller",
    Chart("ghcr.io/kubeflow/charts", True, "kubeflow-trainer", "TRAINER_CHART_VERSION",
          "github.com/kubeflow/trainer/v2", "TRAINER_VERSION",
          (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS), (*NAMESPACED_BASICS, SECRET), ("kubeflow-trainer-webhook-cert",),
          MetricsEndpoint((("app.kubernetes.io/component", "manager"),
                           ("app.kubernetes.io/instance", "kubeflow-trainer")), "monitoring-port", "https")),
    # The chart's name as release makes the controller kubeflow-trainer-controller-manager, as in upstream's
    # manifests. After JobSet: its controller watches JobSets.
    release="kubeflow-trainer", wave="1", service_account="kubeflow-trainer-controller-manager")
