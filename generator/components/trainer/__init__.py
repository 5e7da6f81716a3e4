"""Kubeflow Trainer: the ClusterTrainingRuntime and TrainJob CRDs, and the controller that turns a TrainJob into a
JobSet from its runtime."""

from __future__ import annotations

from generator.components.facts import (CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, SECRET, WEBHOOKS, WEBHOOKS_DOWN,
                                        Chart, ChartDependency, ComponentFacts, MetricsEndpoint, Process, Simulation,
                                        Tool)
from generator.components.trainer.values import values
from generator.kinds import TRAINER

FACTS = ComponentFacts(
    "trainer", "kubeflow-system",
    "the ClusterTrainingRuntime/TrainJob CRDs and the Trainer controller",
    Chart("ghcr.io/kubeflow/charts", True, "kubeflow-trainer", "TRAINER_CHART_VERSION",
          (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS), (*NAMESPACED_BASICS, SECRET),
          module="github.com/kubeflow/trainer/v2", app_version_pin="TRAINER_VERSION",
          cert_secrets=("kubeflow-trainer-webhook-cert",),
          metrics=MetricsEndpoint((("app.kubernetes.io/component", "manager"),
                                   ("app.kubernetes.io/instance", "kubeflow-trainer")), "monitoring-port", "https"),
          # Its bundled JobSet, disabled by the values (JobSet has its own Application), from JobSet's module.
          dependencies=(ChartDependency("jobset", "sigs.k8s.io/jobset", "charts/jobset", "JOBSET_VERSION"),)),
    # The chart's name as release makes the controller kubeflow-trainer-controller-manager, as in upstream's
    # manifests. After JobSet: its controller watches JobSets.
    release="kubeflow-trainer", wave="1", service_account="kubeflow-trainer-controller-manager",
    api_groups=(TRAINER,),
    crds=("manifests/base/crds/trainer.kubeflow.org_*.yaml",),
    tools=(Tool("trainer", "github.com/kubeflow/trainer/v2",
                "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"),),
    # Several clusters: on the manager too, whose webhook judges the researcher's TrainJob and whose controller
    # must leave a job MultiKueue manages alone.
    simulation=Simulation((Process("controller-manager", "trainer"),)),
    when_down=WEBHOOKS_DOWN,
    values=values)
