"""Kyverno: the admission controller that enforces the guardrails (the CEL policies of builders/kyverno.py), and
the cleanup controller that runs their DeletingPolicy."""

from __future__ import annotations

from generator.components.facts import (CRD, NAMESPACED_BASICS, RBAC_CLUSTER_KINDS, WEBHOOKS_DOWN, Chart,
                                        ChartDependency, ComponentFacts, MetricsEndpoint, Process, Simulation, Tool)
from generator.components.kyverno.settings import KyvernoComponent
from generator.components.kyverno.values import values
from generator.kinds import KYVERNO

# Kyverno's http library refuses loopback and private addresses unless told otherwise (--httpBlocklist, or this
# variable); the tests' image registry listens on loopback, where a cluster's registries never are (cloud metadata
# addresses stay refused). The policy tests give the kyverno CLI the same.
HTTP_BLOCKLIST = ("FLAG_HTTP_BLOCKLIST", "169.254.0.0/16,metadata.google.internal")

FACTS = ComponentFacts(
    "kyverno", "kyverno",
    "the ValidatingPolicy/MutatingPolicy CRDs and admission webhooks that enforce the guardrails",
    # Kyverno registers its webhook configurations itself, at run time.
    Chart("https://kyverno.github.io/kyverno/", False, "kyverno", "KYVERNO_CHART_VERSION",
          (CRD, *RBAC_CLUSTER_KINDS), (*NAMESPACED_BASICS, {"group": "batch", "kind": "Job"}),
          module="github.com/kyverno/kyverno", app_version_pin="KYVERNO_VERSION",
          # Its admission, background, cleanup and reports controllers, each behind a <name>-metrics Service.
          metrics=MetricsEndpoint((("app.kubernetes.io/instance", "kyverno"),
                                   ("app.kubernetes.io/part-of", "kyverno")), "metrics-port", "http"),
          # Its CRDs' chart, shipped by the kyverno/api module at the version the pinned Kyverno requires.
          dependencies=(ChartDependency("kyverno-api", "github.com/kyverno/api", "charts/kyverno-api"),)),
    release="kyverno",
    # Needs no other component: sharing Kueue's wave overlaps the two longest installs, both dominated by
    # their CRDs.
    wave="2",
    api_groups=(KYVERNO,),
    crds=("config/crds/policies.kyverno.io/policies.kyverno.io_*.yaml",),
    # Built by tools/kyverno.sh (build_tool in tools/build.sh): the CLI judges the policy corpus; the admission and
    # cleanup controllers run in the simulated FLAME. The -patched variants carry
    # tools/patches/kyverno-sdk-index-platform.patch (nothing requires them).
    tools=(Tool("kyverno"), Tool("kyverno-controller"), Tool("kyverno-cleanup-controller"),
           Tool("kyverno-patched", optional=True), Tool("kyverno-controller-patched", optional=True)),
    simulation=Simulation(
        (Process("admission-controller", "kyverno-controller", ("--webhookServerHost", "--metricsHost"),
                 (HTTP_BLOCKLIST,)),
         # It runs the DeletingPolicies (finished TrainJobs).
         Process("cleanup-controller", "kyverno-cleanup-controller", ("--cleanupServerHost", "--metricsHost"))),
        not_run=(("kyverno-background-controller", "Kyverno's background controller (generate and mutate-existing "
                                                   "policies; the platform's policies are admission-time only)"),
                 ("kyverno-reports-controller", "Kyverno's reports controller (policy reports)")),
        # Its post-upgrade migration, which Argo CD runs as a PostSync hook, is its CLI.
        hook_images=(("kyverno-cli", "kyverno"),)),
    when_down=WEBHOOKS_DOWN,
    settings=KyvernoComponent, values=values)
