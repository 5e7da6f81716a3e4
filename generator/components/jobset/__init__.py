"""JobSet: the CRD and controller every TrainJob runs through (Trainer's runtimes make JobSets)."""

from __future__ import annotations

from generator.components.facts import (CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, SECRET, WEBHOOKS, Chart,
                                        ComponentFacts, MetricsEndpoint, Process, Simulation, Tool)
from generator.components.jobset.values import values
from generator.kinds import JOBSET

FACTS = ComponentFacts(
    "jobset", "kubeflow-system",
    "the JobSet CRD and controller every TrainJob runs through",
    Chart("registry.k8s.io/jobset/charts", True, "jobset", "JOBSET_CHART_VERSION",
          (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS), (*NAMESPACED_BASICS, SECRET),
          module="sigs.k8s.io/jobset", app_version_pin="JOBSET_VERSION",
          cert_secrets=("jobset-webhook-server-cert",),
          metrics=MetricsEndpoint((("app.kubernetes.io/component", "controller"),
                                   ("app.kubernetes.io/instance", "jobset")), "https", "https")),
    # fullnameOverride "jobset" (as Trainer's chart sets for its bundled copy) makes the service account
    # jobset-controller.
    release="jobset", wave="0", service_account="jobset-controller",
    when_down="TrainJobs stop being turned into pods.",
    api_groups=(JOBSET,),
    crds=("config/components/crd/bases/jobset.x-k8s.io_*.yaml",),
    # The module's root package is its controller's main.
    tools=(Tool("jobset", "sigs.k8s.io/jobset", "sigs.k8s.io/jobset"),),
    # Several clusters: the workers run the jobs.
    simulation=Simulation((Process("controller", "jobset"),)),
    values=values)
