"""Kyverno: the admission controller that enforces the guardrails (the CEL policies of builders/kyverno.py), and
the cleanup controller that runs their DeletingPolicy."""

from __future__ import annotations

from generator.components.facts import CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, Chart, ComponentFacts, MetricsEndpoint

FACTS = ComponentFacts(
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
    wave="2")
