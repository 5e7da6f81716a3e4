"""Kueue: the ResourceFlavor, ClusterQueue and LocalQueue CRDs, and the controller that admits jobs against the
groups' quotas (MultiKueue on the manager of several clusters)."""

from __future__ import annotations

from generator.components.facts import (CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, SECRET, WEBHOOKS, WEBHOOKS_DOWN,
                                        Chart, ComponentFacts, MetricsEndpoint, Process, Simulation, Tool)
from generator.components.kueue.settings import KueueComponent
from generator.components.kueue.values import values
from generator.kinds import KUEUE

FACTS = ComponentFacts(
    "kueue", "kueue-system",
    "the ResourceFlavor/ClusterQueue/LocalQueue CRDs and the Kueue controller",
    Chart("registry.k8s.io/kueue/charts", True, "kueue", "KUEUE_CHART_VERSION",
          (CRD, *RBAC_CLUSTER_KINDS, *WEBHOOKS, {"group": "apiregistration.k8s.io", "kind": "APIService"}),
          (*NAMESPACED_BASICS, SECRET), module="sigs.k8s.io/kueue", app_version_pin="KUEUE_VERSION",
          cert_secrets=("kueue-webhook-server-cert",),
          metrics=MetricsEndpoint((("app.kubernetes.io/component", "metrics-service"),
                                   ("app.kubernetes.io/instance", "kueue")), "https", "https")),
    # After Trainer and JobSet: its TrainJob and JobSet integrations start with their CRDs present.
    release="kueue", wave="2", service_account="kueue-controller-manager",
    # Its visibility server's RoleBinding (components/kueue/values.py).
    other_namespaces=("kube-system",),
    api_groups=(KUEUE,),
    crds=("config/components/crd/bases/kueue.x-k8s.io_*.yaml",),
    tools=(Tool("kueue", "sigs.k8s.io/kueue", "sigs.k8s.io/kueue/cmd/kueue",
                "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}"),),
    # Several clusters: MultiKueue on the manager, the workers' own Kueue admitting what it dispatches.
    simulation=Simulation((Process("controller-manager", "kueue"),)),
    when_down=WEBHOOKS_DOWN,
    settings=KueueComponent, values=values)
