"""The Prometheus Operator's objects (monitoring.coreos.com/v1): a ServiceMonitor per installed controller, and
PrometheusRules with the accounting's recording rules and the alerts, per group and class and for the platform.

Every alert carries a summary a person can act on and a runbook_url into docs/monitoring.md (one section per
alert name, checked by the tests). Thresholds that the inventory knows (allocations, node counts, capacity) are
written into the expressions, so an alert needs no metric the cluster cannot give.

Kueue's metrics (pkg/metrics at the pinned version) carry `replica_role`: a follower replica keeps stale gauges,
so every expression reads the leader's (or a standalone replica's) series.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from generator.builders.common import metadata
from generator.freetext import double_quoted, go_template_text
from generator.components import COMPONENTS
from generator.inventory import duration
from generator.inventory.models import Group, Inventory, Monitoring
from generator.inventory.contract import allocated_amount
from generator.inventory import accelerators
from generator.inventory.naming import PLATFORM_RULES, flavor_name, group_rules_name
from generator.kinds import MONITORING

API_VERSION = MONITORING.api_version
# The label every controller's series carries (a ServiceMonitor relabeling): the alerts name components by it,
# whatever the site's job names are.
COMPONENT_LABEL = "gpugen_component"
RUNBOOK = "docs/monitoring.md"
# A leader's or standalone replica's series; a follower's gauges are stale.
NOT_FOLLOWER = 'replica_role!="follower"'
SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"

# Recording rules: the accounting reads these names (gpugen report, the dashboards).
GPUS_IN_USE = "gpugen:group_class_gpus_in_use"
ALLOCATED_GPUS = "gpugen:group_class_gpus_allocated"
USAGE = "gpugen:cluster_queue_resource_usage"
NOMINAL_QUOTA = "gpugen:cluster_queue_nominal_quota"


def promql_string(value: str) -> str:
    """A PromQL string literal (Go's escapes: freetext.double_quoted)."""
    return double_quoted(value)


_REGEX_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


def promql_literal_regex(text: str) -> str:
    """RE2 matching exactly `text`."""
    return _REGEX_SPECIAL.sub(r"\\\1", text)


def promql_one_of(names: list[str]) -> str:
    """RE2 matching exactly one of `names` (Prometheus anchors label regexes)."""
    return "|".join(promql_literal_regex(name) for name in sorted(names))


def _number(value: Decimal) -> str:
    return format(value.normalize(), "f")


def _monitoring(inventory: Inventory) -> Monitoring:
    assert inventory.cluster.monitoring is not None
    return inventory.cluster.monitoring


def _labels(inventory: Inventory, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {**_monitoring(inventory).selectorLabels, **(extra or {})}


# ------------------------------------------------------------------ ServiceMonitors

def service_monitor(inventory: Inventory, name: str, namespace: str) -> dict[str, Any]:
    """Scrapes one component's metrics Services from the monitoring namespace (namespaceSelector), so the
    gpugen Application writes into one namespace of the platform's components: the monitoring one."""
    monitoring = _monitoring(inventory)
    endpoint_facts = COMPONENTS[name].chart.metrics
    assert endpoint_facts is not None
    endpoint: dict[str, Any] = {
        "port": endpoint_facts.port,
        "scheme": endpoint_facts.scheme,
        "path": "/metrics",
        "interval": f"{duration.seconds(monitoring.scrapeInterval)}s",
        "relabelings": [{"action": "replace", "targetLabel": COMPONENT_LABEL, "replacement": name}],
    }
    if endpoint_facts.scheme == "https":
        # controller-runtime's metrics server: a self-signed certificate, and an authorizing filter that checks
        # the scraper's token (TokenReview, then a SubjectAccessReview of GET /metrics: rbac.metrics_reader).
        endpoint["bearerTokenFile"] = SERVICE_ACCOUNT_TOKEN
        endpoint["tlsConfig"] = {"insecureSkipVerify": True}
    return {
        "apiVersion": API_VERSION,
        "kind": "ServiceMonitor",
        "metadata": metadata(inventory, name, namespace=monitoring.namespace, labels=_labels(inventory)),
        "spec": {
            "namespaceSelector": {"matchNames": [namespace]},
            "selector": {"matchLabels": dict(endpoint_facts.service_labels)},
            "endpoints": [endpoint],
        },
    }


def service_monitors(inventory: Inventory) -> list[dict[str, Any]]:
    monitoring = inventory.cluster.monitoring
    if monitoring is None or monitoring.scrape == "none":
        return []
    # Only what gpugen installs: an adopted installation's Services are the site's to scrape.
    return [service_monitor(inventory, name, component.namespace)
            for name, component in inventory.cluster.components.by_name().items()
            if component.install and COMPONENTS[name].chart.metrics is not None]


# ------------------------------------------------------------------ rules

def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str,
           inventory: Inventory, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": for_,
        "labels": {"severity": severity, **(labels or {})},
        # Prometheus expands every annotation as a Go template: the runbook's URL comes from the inventory.
        "annotations": {"summary": summary, "description": description,
                        "runbook_url": go_template_text(runbook_url(inventory, name))},
    }


def runbook_url(inventory: Inventory, alert: str) -> str:
    """The alert's section of the runbooks page: the inventory's, else docs/monitoring.md in the GitOps
    repository's web view."""
    anchor = alert.lower()
    page = _monitoring(inventory).runbookURL
    if page:
        return f"{page}#{anchor}"
    gitops = inventory.cluster.gitops
    base = gitops.repoURL.removesuffix(".git").removesuffix("/")
    if base.startswith(("https://", "http://")):
        return f"{base}/blob/{gitops.targetRevision}/{RUNBOOK}#{anchor}"
    return f"{RUNBOOK}#{anchor}"


def _metric_label_name(label_key: str) -> str:
    """kube-state-metrics' name of a Kubernetes label: label_ and the key with every other character as _."""
    return "label_" + re.sub(r"[^a-zA-Z0-9_]", "_", label_key)


def platform_recording_rules() -> list[dict[str, Any]]:
    """Kueue's admitted quota and nominal quota per ClusterQueue, flavor and resource, from the leader."""
    return [
        {"record": USAGE, "expr": f"max by (cluster_queue, flavor, resource) "
                                  f"(kueue_cluster_queue_resource_usage{{{NOT_FOLLOWER}}})"},
        {"record": NOMINAL_QUOTA, "expr": f"max by (cluster_queue, flavor, resource) "
                                          f"(kueue_cluster_queue_nominal_quota{{{NOT_FOLLOWER}}})"},
    ]


def group_recording_rules(inventory: Inventory, group_name: str, group: Group) -> list[dict[str, Any]]:
    """Per class of the group: its admitted GPUs under the inventory's names, and its allocation as a series
    (the dashboards and alerts compare the two)."""
    rules: list[dict[str, Any]] = []
    for class_name, allocation in group.allocations.items():
        gpu_class = inventory.classes[class_name]
        labels = {"group": group_name, "class": class_name}
        selector = (f"cluster_queue={promql_string(group_name)}, "
                    f"flavor={promql_string(flavor_name(class_name, gpu_class))}, "
                    f"resource={promql_string(accelerators.resource(gpu_class))}")
        rules.append({"record": GPUS_IN_USE, "expr": f"max({USAGE}{{{selector}}})", "labels": labels})
        rules.append({"record": ALLOCATED_GPUS,
                      "expr": f"vector({_number(allocated_amount(inventory, class_name, allocation, 'gpus'))})",
                      "labels": labels})
    return rules


def _group_resources(inventory: Inventory, group: Group) -> list[str]:
    """The accelerator resources of the group's classes, in the ClusterQueue's order."""
    held = {accelerators.resource(inventory.classes[name]) for name in group.allocations}
    return [resource for resource in accelerators.resources(inventory) if resource in held]


def _resource_matcher(resources: list[str]) -> str:
    """A PromQL matcher of Kueue's `resource` label: one resource, or any of several."""
    if len(resources) == 1:
        return f"resource={promql_string(resources[0])}"
    return f"resource=~{promql_string(promql_one_of(resources))}"


def group_alerts(inventory: Inventory, group_name: str, group: Group) -> list[dict[str, Any]]:
    alerts = []
    cq = promql_string(group_name)
    pending = f"max(kueue_pending_workloads{{cluster_queue={cq}, status=\"active\", {NOT_FOLLOWER}}}) > 0"
    # GPUs the group's pending jobs ask for; Kueue cannot say on which class before it assigns a flavor.
    pending_gpus = (f"max(kueue_cluster_queue_resource_pending{{cluster_queue={cq}, "
                    f"{_resource_matcher(_group_resources(inventory, group))}, {NOT_FOLLOWER}}}) > 0")
    for class_name, allocation in group.allocations.items():
        labels = {"group": group_name, "class": class_name}
        mine = f'{{group={promql_string(group_name)}, class={promql_string(class_name)}}}'
        allocated = _number(allocated_amount(inventory, class_name, allocation, "gpus"))
        alerts.append(_alert(
            "GPUGroupPendingBelowAllocation",
            f"({GPUS_IN_USE}{mine} < {ALLOCATED_GPUS}{mine}) and on () ({pending_gpus})",
            "30m", "warning",
            f"{group_name}'s GPU jobs have waited 30 minutes although it holds fewer {class_name} GPUs than "
            "its allocation",
            f"{group_name} holds {{{{ $value }}}} of its {allocated} {class_name} GPUs while its jobs asking "
            "for GPUs wait: lent GPUs are not coming back, a node is missing, or the jobs ask for more than "
            "the group can ever get.",
            inventory, labels))
        alerts.append(_alert(
            "GPUGroupBorrowingLong",
            f"{GPUS_IN_USE}{mine} > {ALLOCATED_GPUS}{mine}",
            "24h", "info",
            f"{group_name} has held more {class_name} GPUs than its allocation for a day",
            f"{group_name} runs on {{{{ $value }}}} {class_name} GPUs, borrowed beyond its allocation from its "
            "cohort: its jobs there are preempted when the lenders take their GPUs back.",
            inventory, labels))
    alerts.append(_alert(
        "GPUGroupJobsPendingLong",
        pending, "2h", "info",
        f"{group_name}'s jobs have been pending for two hours",
        f"{{{{ $value }}}} jobs wait in {group_name}'s queue: its allocation and what the cohort lends are "
        "busy; `kubectl get workloads -n <namespace>` shows them in order.",
        inventory, {"group": group_name}))
    return alerts


def platform_alerts(inventory: Inventory) -> list[dict[str, Any]]:
    alerts = []
    installed = [name for name, component in inventory.cluster.components.by_name().items()
                 if component.install and COMPONENTS[name].chart.metrics is not None]
    for name in installed:
        up = f"up{{{COMPONENT_LABEL}={promql_string(name)}}}"
        alerts.append(_alert(
            "GPUPlatformControllerDown",
            f"(max({up}) or vector(0)) == 0", "5m", "critical",
            f"No {name} controller answers its metrics endpoint",
            f"Every {name} target is down or missing for 5 minutes. " + COMPONENTS[name].when_down,
            inventory, {"component": name}))
    label = _metric_label_name(inventory.cluster.gpuClassLabel)
    for class_name, gpu_class in inventory.classes.items():
        product = gpu_class.nodeSelector.get(inventory.cluster.gpuClassLabel)
        if product is not None:
            ready = (f"(sum(kube_node_status_condition{{condition=\"Ready\", status=\"true\"}} * on (node) "
                     f"group_left () max by (node) (kube_node_labels{{{label}={promql_string(product)}}})) "
                     "or vector(0))")
            alerts.append(_alert(
                "GPUClassNoReadyNodes", f"{ready} == 0", "5m", "critical",
                f"No {class_name} node is Ready",
                f"None of the {gpu_class.nodes} {class_name} nodes is Ready: every job of the class waits.",
                inventory, {"class": class_name}))
            alerts.append(_alert(
                "GPUClassNodesMissing", f"{ready} > 0 < {gpu_class.nodes}", "15m", "warning",
                f"Fewer {class_name} nodes are Ready than the inventory lists",
                f"{{{{ $value }}}} of {gpu_class.nodes} {class_name} nodes are Ready: the groups' quotas exceed "
                "what the class can run.",
                inventory, {"class": class_name}))
        flavor = promql_string(flavor_name(class_name, gpu_class))
        resource = accelerators.resource(gpu_class)
        capacity = gpu_class.nodes * gpu_class.perNode.gpus
        allocated = [g for g, group in inventory.groups.items() if class_name in group.allocations]
        if allocated:
            queues = promql_one_of(allocated)
            alerts.append(_alert(
                "GPUsIdleWhileJobsPending",
                f"(sum({USAGE}{{flavor={flavor}, resource={promql_string(resource)}}}) or vector(0)) < {capacity} "
                f"and on () (sum(kueue_cluster_queue_resource_pending{{cluster_queue=~{promql_string(queues)}, "
                f"resource={promql_string(resource)}, {NOT_FOLLOWER}}}) > 0)",
                "15m", "warning",
                f"{class_name} GPUs sit idle while jobs that could use them wait",
                f"Only {{{{ $value }}}} of {capacity} {class_name} GPUs are admitted while jobs of the groups "
                "allocated on it are pending: a quota, a borrowing limit or a stuck workload keeps them idle.",
                inventory, {"class": class_name}))
    alerts.append(_alert(
        "GPUJobsEvictedPodsNotReady",
        f"sum by (cluster_queue) (increase(kueue_evicted_workloads_total{{reason=\"PodsReadyTimeout\", "
        f"{NOT_FOLLOWER}}}[1h])) > 0",
        "0m", "warning",
        "Jobs of {{ $labels.cluster_queue }} were evicted because their pods never became ready",
        "Jobs of {{ $labels.cluster_queue }} lost their quota in the last hour because their pods did "
        f"not all run within {inventory.cluster.components.kueue.podsReadyTimeout}: an image that cannot be "
        "pulled, a missing claim, or a node that cannot start them.",
        inventory))
    return alerts


def _prometheus_rule(inventory: Inventory, name: str, groups: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "PrometheusRule",
        "metadata": metadata(inventory, name, namespace=_monitoring(inventory).namespace, labels=_labels(inventory)),
        "spec": {"groups": groups},
    }


def prometheus_rules(inventory: Inventory) -> list[dict[str, Any]]:
    """One PrometheusRule for the platform, one per research group: a change to a group touches its own object,
    and none grows with the number of groups."""
    if inventory.cluster.monitoring is None:
        return []
    return [
        _prometheus_rule(inventory, PLATFORM_RULES, [
            {"name": "gpugen.platform.accounting", "rules": platform_recording_rules()},
            {"name": "gpugen.platform.alerts", "rules": platform_alerts(inventory)}]),
        *(_prometheus_rule(inventory, group_rules_name(group_name), [
            {"name": f"gpugen.{group_name}.accounting", "rules": group_recording_rules(inventory, group_name, group)},
            {"name": f"gpugen.{group_name}.alerts", "rules": group_alerts(inventory, group_name, group)}])
          for group_name, group in inventory.groups.items()),
    ]


def monitoring_objects(inventory: Inventory) -> list[dict[str, Any]]:
    return [*service_monitors(inventory), *prometheus_rules(inventory)]
