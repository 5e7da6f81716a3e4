"""Grafana dashboards, built with the Grafana Foundation SDK and shipped as ConfigMaps for Grafana's dashboard
sidecar (kube-prometheus-stack's `grafana_dashboard: "1"`; label and value from `cluster.monitoring`).

Two kinds of dashboard, both from the inventory:

- the platform (`gpugen-<cluster>-platform`): per GPU class the GPUs Kueue has admitted against the groups'
  nominal quotas summed (and the class's capacity), pending and admitted workloads per ClusterQueue, admission
  wait time (p50/p90 of Kueue's histogram), evictions by reason, the controllers' `up`, and with
  `dcgmExporter` the GPUs' utilisation and memory per class from NVIDIA's DCGM exporter;
- one per research group (`gpugen-<cluster>-<group>`): per class it has an allocation on, GPUs, CPU and memory
  admitted against its nominal quota and borrowing limit; its pending workloads (ClusterQueue and each
  LocalQueue), admitted workloads, admission wait time, evictions, and its allocation as the inventory has it.

Queries read Kueue's own metrics (pkg/metrics of the pinned Kueue; `kueue_cluster_queue_resource_usage` needs
`metrics.enableClusterQueueResources`, which the Kueue configuration sets with monitoring). A follower replica's
series are left out and the rest wrapped in `max by (...)`, so replicas or a double scrape never count twice.
Names (ClusterQueues, flavors, LocalQueues, resources) come from the Kueue builder and inventory/naming.py.
The Prometheus data source is the dashboard variable `datasource`, so a dashboard works on any Grafana.

The dashboard JSON is deterministic: uids derived from the names, panel ids in order, no timestamps, keys
sorted. The SDK is imported only when a dashboard is built: a render without monitoring never loads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from generator import freetext
from generator.builders import kueue
from generator.builders.common import metadata
from generator.builders.prometheus import (COMPONENT_LABEL, NOT_FOLLOWER, promql_literal_regex, promql_one_of,
                                          promql_string)
from generator.inventory.models import Group, Inventory, ResourceAmounts
# The dashboards' uids, their ConfigMaps' names, come from inventory/naming.py (UID_MAX for the tests' sake).
from generator.inventory import accelerators
from generator.inventory.contract import allocated_pods
from generator.inventory.naming import KUBERNETES_RESOURCE, UID_MAX, flavor_name, group_uid, platform_uid  # noqa: F401
from generator.kinds import CORE

if TYPE_CHECKING:
    from grafana_foundation_sdk.cog.builder import Builder

API_VERSION = CORE.api_version
DATASOURCE_VARIABLE = "datasource"
DATASOURCE_TYPE = "prometheus"
# Grafana's rate window: at least four scrape intervals of the data source, whatever the panel's resolution.
RATE_INTERVAL = "$__rate_interval"
# The inventory's resources a group dashboard shows, with their title and Grafana unit (Kueue reports CPU in
# cores, memory in bytes, GPUs as a count).
RESOURCES = {"gpus": ("GPUs", "none"), "cpu": ("CPU", "short"), "memory": ("Memory", "bytes")}
# DCGM exporter's metrics: utilisation in percent, framebuffer used in MiB; UUID names one GPU.
DCGM_UTILISATION = "DCGM_FI_DEV_GPU_UTIL"
DCGM_MEMORY_USED = "DCGM_FI_DEV_FB_USED"
DCGM_MODEL_LABEL = "modelName"
DCGM_GPU_LABEL = "UUID"
# The MIG profile of a MIG instance's series (the exporter's GPU_I_PROFILE, beside GPU_I_ID).
DCGM_MIG_PROFILE_LABEL = "GPU_I_PROFILE"


def _units(gpu_class) -> str:
    """What a class's panels count: GPUs, or the class's own units (`1g.10gb MIG slices`)."""
    if accelerators.resource(gpu_class) == accelerators.NVIDIA_GPU and not gpu_class.accelerator.unit:
        return "GPUs"
    return accelerators.unit_plural(gpu_class)


# ------------------------------------------------------------------ names

def group_title(inventory: Inventory, group_name: str) -> str:
    """The group dashboard's title, as the users' page names it."""
    return f"{inventory.cluster.name}: {group_name}"


# ------------------------------------------------------------------ PromQL text

def _selector(metric: str, *matchers: str) -> str:
    return f"{metric}{{{', '.join(matchers)}}}"


def _eq(label: str, value: str) -> str:
    return f"{label}={promql_string(value)}"


def _match(label: str, regex: str) -> str:
    return f"{label}=~{promql_string(regex)}"


def dcgm_model_regex(product: str) -> str:
    """The DCGM exporter's `modelName` of a class's GPUs, as RE2, from the class's node selector value of
    `cluster.gpuClassLabel` (nvidia.com/gpu.product).

    gpu-feature-discovery writes that label from the product name NVML reports with every space replaced by '-'
    (`NVIDIA GH200 480GB` -> `NVIDIA-GH200-480GB`); DCGM's modelName is the same NVML name unchanged. So each '-'
    of the label matches '-' or ' ' ('[- ]'), and every other character itself. A label gpu-feature-discovery
    decorates beyond that (`-SHARED` for time-sliced GPUs, a MIG profile under the mixed strategy) matches no
    DCGM model: its class gets no DCGM series.
    """
    return "".join("[- ]" if char == "-" else promql_literal_regex(char) for char in product)


# ------------------------------------------------------------------ what the dashboards show

def _cluster_queue_name(inventory: Inventory, group_name: str, group: Group) -> str:
    return kueue.cluster_queue(inventory, group_name, group)["metadata"]["name"]


def _local_queues(inventory: Inventory, cluster_queue: str) -> list[tuple[str, str]]:
    """(namespace, name) of each LocalQueue feeding `cluster_queue`, in the Kueue builder's order."""
    return [(lq["metadata"]["namespace"], lq["metadata"]["name"]) for lq in kueue.local_queues(inventory)
            if lq["spec"]["clusterQueue"] == cluster_queue]


def _quota(metric: str, cluster_queue: str, flavor: str, resource: str) -> str:
    """One ClusterQueue's series of a per-flavor, per-resource Kueue gauge, replicas folded."""
    selector = _selector(metric, _eq("cluster_queue", cluster_queue), _eq("flavor", flavor),
                         _eq("resource", resource), NOT_FOLLOWER)
    return f"max by (cluster_queue, flavor, resource) ({selector})"


def _class_total(metric: str, cluster_queues: list[str], flavor: str, resource: str) -> str:
    """A per-flavor, per-resource Kueue gauge summed over `cluster_queues`, replicas folded."""
    selector = _selector(metric, _match("cluster_queue", promql_one_of(cluster_queues)), _eq("flavor", flavor),
                         _eq("resource", resource), NOT_FOLLOWER)
    return f"sum(max by (cluster_queue, flavor, resource) ({selector}))"


def _wait_quantile(quantile: str, cluster_queues: list[str]) -> str:
    selector = _selector("kueue_admission_wait_time_seconds_bucket",
                         _match("cluster_queue", promql_one_of(cluster_queues)), NOT_FOLLOWER)
    return (f"histogram_quantile({quantile}, sum by (le) (max by (cluster_queue, priority_class, le) "
            f"(rate({selector}[{RATE_INTERVAL}]))))")


def _evictions(cluster_queues: list[str]) -> str:
    """Evictions per minute by reason."""
    selector = _selector("kueue_evicted_workloads_total", _match("cluster_queue", promql_one_of(cluster_queues)),
                         NOT_FOLLOWER)
    return (f"60 * sum by (reason) (max by (cluster_queue, reason, underlying_cause, priority_class) "
            f"(rate({selector}[{RATE_INTERVAL}])))")


def _pending(cluster_queues: list[str]) -> str:
    selector = _selector("kueue_pending_workloads", _match("cluster_queue", promql_one_of(cluster_queues)),
                         NOT_FOLLOWER)
    return f"max by (cluster_queue, status) ({selector})"


def _admitted(cluster_queues: list[str]) -> str:
    selector = _selector("kueue_admitted_active_workloads", _match("cluster_queue", promql_one_of(cluster_queues)),
                         NOT_FOLLOWER)
    return f"max by (cluster_queue) ({selector})"


def _local_queue_pending(namespace: str, name: str) -> str:
    selector = _selector("kueue_local_queue_pending_workloads", _eq("namespace", namespace), _eq("name", name),
                         NOT_FOLLOWER)
    return f"max by (namespace, name, status) ({selector})"


def _groups_on(inventory: Inventory, class_name: str) -> list[str]:
    """The ClusterQueues of the groups allocated on the class."""
    return sorted(_cluster_queue_name(inventory, name, group) for name, group in inventory.groups.items()
                  if class_name in group.allocations)


# ------------------------------------------------------------------ panels

class _Panels:
    """The SDK's builders, with the conventions every panel here shares."""

    def __init__(self) -> None:
        from grafana_foundation_sdk.builders import (common, dashboard, prometheus, stat, text,
                                                     timeseries)
        from grafana_foundation_sdk.models import common as common_model
        from grafana_foundation_sdk.models import dashboard as dashboard_model
        from grafana_foundation_sdk.models import text as text_model
        self.common, self.dashboard, self.prometheus = common, dashboard, prometheus
        self.stat_panel, self.text_panel, self.timeseries_panel = stat.Panel, text.Panel, timeseries.Panel
        self.common_model, self.model, self.text_model = common_model, dashboard_model, text_model
        self.datasource = dashboard_model.DataSourceRef(type_val=DATASOURCE_TYPE, uid=f"${{{DATASOURCE_VARIABLE}}}")

    def _targets(self, panel: Builder, queries: list[tuple[str, str]]) -> Builder:
        for index, (expr, legend) in enumerate(queries):
            panel.with_target(self.prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(_ref_id(index)))
        return panel

    def timeseries(self, title: str, queries: list[tuple[str, str]], unit: str, *, width: int = 12,
                   height: int = 8, description: str = "") -> Builder:
        panel = (self.timeseries_panel().title(title).datasource(self.datasource).unit(unit).span(width)
                 .height(height).min(0)
                 .draw_style(self.common_model.GraphDrawStyle.LINE).fill_opacity(10)
                 .show_points(self.common_model.VisibilityMode.NEVER)
                 .legend(self.common.VizLegendOptions().show_legend(True)
                         .display_mode(self.common_model.LegendDisplayMode.LIST)
                         .placement(self.common_model.LegendPlacement.BOTTOM)))
        if description:
            panel.description(description)
        return self._targets(panel, queries)

    def stat(self, title: str, queries: list[tuple[str, str]], unit: str, *, width: int = 6, height: int = 8,
             description: str = "", mappings: list[Any] | None = None) -> Builder:
        panel = (self.stat_panel().title(title).datasource(self.datasource).unit(unit).span(width).height(height)
                 .reduce_options(self.common.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
                 .graph_mode(self.common_model.BigValueGraphMode.NONE)
                 .text_mode(self.common_model.BigValueTextMode.VALUE_AND_NAME))
        if description:
            panel.description(description)
        if mappings:
            panel.mappings(mappings)
        return self._targets(panel, queries)

    def markdown(self, title: str, content: str, *, width: int = 24, height: int = 8) -> Builder:
        return (self.text_panel().title(title).mode(self.text_model.TextMode.MARKDOWN).content(content)
                .span(width).height(height))

    def row(self, title: str) -> Builder:
        return self.dashboard.Row(title)

    def up_mappings(self) -> list[Any]:
        result = self.model.ValueMappingResult
        return [self.model.ValueMap(options={"0": result(text="down", color="red", index=0),
                                             "1": result(text="up", color="green", index=1)})]

    def new_dashboard(self, inventory: Inventory, title: str, uid: str, description: str) -> Builder:
        variable = (self.dashboard.DatasourceVariable(DATASOURCE_VARIABLE).label("Prometheus")
                    .type(DATASOURCE_TYPE))
        return (self.dashboard.Dashboard(title).uid(uid).description(description)
                .tags(["gpugen", inventory.cluster.name]).readonly().time("now-6h", "now").refresh("1m")
                .tooltip(self.model.DashboardCursorSync.CROSSHAIR).with_variable(variable)
                .link(self.dashboard.DashboardLink("gpugen dashboards").type(self.model.DashboardLinkType.DASHBOARDS)
                      .tags(["gpugen", inventory.cluster.name]).as_dropdown(True).include_vars(True).keep_time(True)))


def _ref_id(index: int) -> str:
    """A, B, ..., Z, AA, AB, ...: Grafana's query names."""
    letters = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        letters = chr(ord("A") + rest) + letters
    return letters


# ------------------------------------------------------------------ the dashboards

def _platform(inventory: Inventory, panels: _Panels) -> Builder:
    cluster = inventory.cluster
    all_queues = sorted(_cluster_queue_name(inventory, name, group) for name, group in inventory.groups.items())
    board = panels.new_dashboard(
        inventory, f"{cluster.name}: GPU platform", platform_uid(inventory),
        f"GPUs admitted per class, the queues and the controllers of {cluster.name} (rendered by gpugen from "
        "the inventory; edit gpu_classes.yaml, not this dashboard).")

    board.with_row(panels.row("GPUs by class"))
    for class_name, gpu_class in sorted(inventory.classes.items()):
        flavor = flavor_name(class_name, gpu_class)
        gpu, units = accelerators.resource(gpu_class), _units(gpu_class)
        queues = _groups_on(inventory, class_name)
        queries = [(f"vector({gpu_class.nodes * gpu_class.perNode.gpus})", "capacity (inventory)")]
        if queues:
            queries = [(_class_total("kueue_cluster_queue_resource_usage", queues, flavor, gpu), "admitted"),
                       (_class_total("kueue_cluster_queue_nominal_quota", queues, flavor, gpu),
                        "nominal quota (all groups)"), *queries]
        board.with_panel(panels.timeseries(
            f"{class_name}: {units} admitted vs nominal quota", queries, "none",
            # A panel's description is Markdown to Grafana.
            description=f"{freetext.markdown(units)} Kueue has admitted on flavor {flavor} summed over the groups "
                        f"allocated on {class_name} ({', '.join(queues) or 'none'}), against their nominal quotas "
                        f"summed and the class's {gpu_class.nodes} nodes x {gpu_class.perNode.gpus} "
                        f"{freetext.markdown(units)}."))

    board.with_row(panels.row("Queues"))
    board.with_panel(panels.timeseries(
        "Pending workloads per ClusterQueue", [(_pending(all_queues), "{{cluster_queue}} ({{status}})")], "none",
        description="active: in the admission queue; inadmissible: tried, and waiting for the cluster to change."))
    board.with_panel(panels.timeseries(
        "Admitted workloads per ClusterQueue", [(_admitted(all_queues), "{{cluster_queue}}")], "none"))
    board.with_panel(panels.timeseries(
        "Admission wait time", [(_wait_quantile("0.5", all_queues), "p50"), (_wait_quantile("0.9", all_queues), "p90")],
        "s", description="From creation or requeue to admission, over every group's ClusterQueue."))
    board.with_panel(panels.timeseries(
        "Evictions by reason", [(_evictions(all_queues), "{{reason}}")], "opm",
        description="Workloads evicted per minute: Preempted (reclaim, fair sharing, priority), "
                    "PodsReadyTimeout, Deactivated (walltime), ..."))

    board.with_row(panels.row("Controllers"))
    labelled = _selector("up", f"{COMPONENT_LABEL}!={promql_string('')}")
    board.with_panel(panels.stat(
        "Controllers up", [(f"min by ({COMPONENT_LABEL}) ({labelled})", f"{{{{{COMPONENT_LABEL}}}}}")], "none",
        width=24, height=4, mappings=panels.up_mappings(),
        description=f"The lowest `up` of each controller's scrape targets (gpugen's ServiceMonitors label them "
                    f"{COMPONENT_LABEL}; with scrape: none, nothing shows here)."))

    if cluster.monitoring is not None and cluster.monitoring.dcgmExporter:
        board.with_row(panels.row("GPUs (DCGM exporter)"))
        utilisation, memory = [], []
        for class_name, gpu_class in sorted(inventory.classes.items()):
            product = gpu_class.nodeSelector.get(cluster.gpuClassLabel)
            # DCGM reports NVIDIA's GPUs only; a MIG instance's series carry its profile in GPU_I_PROFILE. AMD's
            # exporter names no class its series could be selected by (docs/monitoring.md).
            if product is None or accelerators.domain(accelerators.resource(gpu_class)) != accelerators.NVIDIA.domain:
                continue
            model = _match(DCGM_MODEL_LABEL, dcgm_model_regex(product))
            profile = accelerators.mig_profile(accelerators.resource(gpu_class))
            if profile is not None:
                model += ", " + _match(DCGM_MIG_PROFILE_LABEL, promql_literal_regex(profile))
            utilisation.append((f"avg(max by ({DCGM_GPU_LABEL}) ({_selector(DCGM_UTILISATION, model)}))", class_name))
            memory.append((f"sum(max by ({DCGM_GPU_LABEL}) ({_selector(DCGM_MEMORY_USED, model)}))", class_name))
        board.with_panel(panels.timeseries(
            "GPU utilisation per class", utilisation, "percent",
            description=f"Mean {DCGM_UTILISATION} over the class's GPUs (DCGM's modelName, from the class's "
                        f"{cluster.gpuClassLabel})."))
        board.with_panel(panels.timeseries(
            "GPU memory used per class", memory, "mbytes",
            description=f"{DCGM_MEMORY_USED} summed over the class's GPUs."))
    return board


def _limits(limits: ResourceAmounts | None) -> str:
    if limits is None:
        return "none"
    set_ = {field: value for field, value in limits.model_dump().items() if value is not None}
    return ", ".join(f"{field} {value}" for field, value in set_.items()) or "none"


def allocation_markdown(inventory: Inventory, group_name: str, group: Group) -> str:
    """The group's allocation as the inventory has it, as Markdown."""
    cluster_queue = _cluster_queue_name(inventory, group_name, group)
    lines = [f"**{group_name}**" + (f": {freetext.markdown(group.description)}" if group.description else ""), "",
             f"ClusterQueue `{cluster_queue}`, cohort `{group.cohort}`" if group.cohort
             else f"ClusterQueue `{cluster_queue}`, no cohort (it neither borrows nor lends)",
             "", "LocalQueues: " + ", ".join(f"`{ns}/{name}`" for ns, name in _local_queues(inventory, cluster_queue)),
             "", "| class | flavor | GPUs | CPU | memory | pods | borrowing limit | lending limit |",
             "|---|---|---|---|---|---|---|---|"]
    for class_name, a in sorted(group.allocations.items()):
        gpu_class = inventory.classes[class_name]
        lines.append(f"| {class_name} | {flavor_name(class_name, gpu_class)} | {a.gpus} | {a.cpu} | {a.memory} | "
                     f"{allocated_pods(inventory, class_name, a)} | {_limits(a.borrowingLimit)} | "
                     f"{_limits(a.lendingLimit)} |")
    return "\n".join(lines) + "\n"


def _group(inventory: Inventory, group_name: str, group: Group, panels: _Panels) -> Builder:
    cluster_queue = _cluster_queue_name(inventory, group_name, group)
    board = panels.new_dashboard(
        inventory, group_title(inventory, group_name), group_uid(inventory, group_name),
        f"{group_name}'s GPUs, quotas and queue on {inventory.cluster.name} (rendered by gpugen from the inventory; "
        "edit gpu_classes.yaml, not this dashboard).")
    board.with_panel(panels.markdown("Allocation", allocation_markdown(inventory, group_name, group)))

    for class_name, allocation in sorted(group.allocations.items()):
        flavor = flavor_name(class_name, inventory.classes[class_name])
        board.with_row(panels.row(f"{class_name} (flavor {flavor})"))
        for field, (title, unit) in RESOURCES.items():
            resource = KUBERNETES_RESOURCE[field]
            if field == "gpus":
                gpu_class = inventory.classes[class_name]
                resource, title = accelerators.resource(gpu_class), _units(gpu_class)
            queries = [
                (_quota("kueue_cluster_queue_resource_usage", cluster_queue, flavor, resource), "admitted"),
                (_quota("kueue_cluster_queue_nominal_quota", cluster_queue, flavor, resource), "nominal quota"),
                # Kueue reports +Inf for no limit: no series then.
                (f"{_quota('kueue_cluster_queue_borrowing_limit', cluster_queue, flavor, resource)} < +Inf",
                 "borrowing limit"),
            ]
            description = (f"{freetext.markdown(title)} ({resource}) Kueue has admitted for {cluster_queue} on "
                           f"flavor {flavor}, its nominal quota ({getattr(allocation, field)} in the inventory) and "
                           "its borrowing limit: how much more than the quota it may borrow from its cohort (none "
                           "shown: no limit).")
            board.with_panel(panels.stat(f"{title} on {class_name}", queries, unit, description=description))
            board.with_panel(panels.timeseries(f"{title} on {class_name}: admitted vs quota", queries, unit,
                                               width=18, description=description))

    board.with_row(panels.row("Queue"))
    pending = [(_pending([cluster_queue]), "ClusterQueue {{cluster_queue}} ({{status}})")]
    pending += [(_local_queue_pending(namespace, name), "LocalQueue {{namespace}}/{{name}} ({{status}})")
                for namespace, name in _local_queues(inventory, cluster_queue)]
    board.with_panel(panels.timeseries(
        "Pending workloads", pending, "none",
        description="active: in the admission queue; inadmissible: tried, and waiting for the cluster to change."))
    board.with_panel(panels.timeseries(
        "Admission wait time",
        [(_wait_quantile("0.5", [cluster_queue]), "p50"), (_wait_quantile("0.9", [cluster_queue]), "p90")], "s",
        description="From creation or requeue to admission."))
    board.with_panel(panels.stat("Admitted workloads", [(_admitted([cluster_queue]), "{{cluster_queue}}")], "none",
                                 width=6))
    board.with_panel(panels.timeseries("Evictions by reason", [(_evictions([cluster_queue]), "{{reason}}")], "opm",
                                       width=18, description="Workloads evicted per minute."))
    return board


def _json(board: Builder) -> str:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    model = board.build()
    for index, panel in enumerate(model.panels or [], start=1):
        panel.id_val = index  # Grafana's panel ids: unique within the dashboard, here in order
    return json.dumps(model, cls=JSONEncoder, sort_keys=True, indent=2) + "\n"


def dashboard_json(inventory: Inventory) -> dict[str, str]:
    """{uid: dashboard JSON}: the platform's, then each group's, in name order; {} without dashboards."""
    monitoring = inventory.cluster.monitoring
    if monitoring is None or not monitoring.dashboards:
        return {}
    panels = _Panels()
    boards = {platform_uid(inventory): _platform(inventory, panels)}
    for group_name, group in sorted(inventory.groups.items()):
        boards[group_uid(inventory, group_name)] = _group(inventory, group_name, group, panels)
    return {uid: _json(board) for uid, board in boards.items()}


def dashboards(inventory: Inventory) -> list[dict[str, Any]]:
    """A ConfigMap per dashboard in the monitoring namespace, labelled for Grafana's dashboard sidecar; its one
    data key `<uid>.json` is the dashboard. The ConfigMap is named after the dashboard's uid."""
    monitoring = inventory.cluster.monitoring
    if monitoring is None:
        return []
    return [{
        "apiVersion": API_VERSION,
        "kind": "ConfigMap",
        "metadata": metadata(inventory, uid, namespace=monitoring.namespace,
                             labels={monitoring.dashboardLabel: monitoring.dashboardLabelValue}),
        "data": {f"{uid}.json": text},
    } for uid, text in dashboard_json(inventory).items()]


def panel_queries(board: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every query of a dashboard's JSON: where is `<uid>/<panel title>/<refId>`."""
    for panel in board.get("panels", []):
        for target in panel.get("targets", []):
            if "expr" in target:
                yield f"{board['uid']}/{panel.get('title', '')}/{target.get('refId', '')}", target["expr"]


def queries(inventory: Inventory) -> list[str]:
    """Every PromQL expression of the dashboards, read back from their JSON (`panel_queries` says where each is)."""
    return [expr for text in dashboard_json(inventory).values() for _, expr in panel_queries(json.loads(text))]
