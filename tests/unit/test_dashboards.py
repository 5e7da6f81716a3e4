"""The Grafana dashboards (generator/builders/grafana.py) against the other side of each seam: the Grafana
Foundation SDK's own dashboard model reads each one back unchanged, Prometheus' own PromQL parser (the pinned
Prometheus module's promql/parser, tests/oracles/promqlparse) parses every query, and every Kueue metric and
label a query names is one the pinned Kueue's pkg/metrics registers.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache

import pytest
import yaml
from tests.support import ORACLES, REPO, of_kind
from tests.support.inventories import edited, flame_data, inventory, setting
from simulation.go_tools import ModuleUnavailable, go_program, module_dir
from simulation.prerequisites import unavailable

from generator.builders import grafana, kueue
from generator.builders.prometheus import COMPONENT_LABEL
from generator.inventory.naming import KUBERNETES_RESOURCE
from generator.limits import object_problems
from generator.versions import pin
from simulation.waiting import ceiling

PROMQLPARSE_SOURCE = ORACLES / "promqlparse" / "main.go"
# The Prometheus module whose parser the queries must satisfy: the pinned one.
PROMETHEUS_MODULE_VERSION = pin("PROMETHEUS")
# What Grafana puts in place of its variables before a query reaches Prometheus.
GRAFANA_INTERPOLATION = {"$__rate_interval": "2m"}
# The series the dashboards read besides Kueue's, and the labels they may use of each.
OTHER_METRICS = {"up": {COMPONENT_LABEL},
                 grafana.DCGM_UTILISATION: {grafana.DCGM_MODEL_LABEL, grafana.DCGM_GPU_LABEL,
                                            grafana.DCGM_MIG_PROFILE_LABEL},
                 grafana.DCGM_MEMORY_USED: {grafana.DCGM_MODEL_LABEL, grafana.DCGM_GPU_LABEL,
                                            grafana.DCGM_MIG_PROFILE_LABEL}}
H100 = {"description": "NVIDIA H100 SXM", "arch": "amd64", "flavor": "hopper-80g",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "image": "ghcr.io/urcf/pytorch:2.9.1-cuda12.9", "nodes": 1,
        "perNode": {"gpus": 8, "cpu": 192, "memory": "1900Gi"}}


def monitored(monitoring: dict | None = None, *changes):
    return inventory(edited(flame_data(), setting("cluster.monitoring", monitoring or {}), *changes))


def with_h100(data: dict) -> None:
    """A second class, with a flavor of its own name, allocated to vision-lab only (with a borrowing limit)."""
    data["classes"]["h100"] = H100
    data["groups"]["vision-lab"]["allocations"]["h100"] = {"gpus": 4, "cpu": 96, "memory": "950Gi",
                                                           "borrowingLimit": {"gpus": 2}}


@pytest.fixture(scope="module")
def plain():
    return monitored()


@pytest.fixture(scope="module")
def two_classes():
    return monitored({"dcgmExporter": True}, with_h100)


@pytest.fixture(scope="module")
def mixed():
    """Every accelerator kind (examples/mixed-accelerators), with the DCGM exporter."""
    path = REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["cluster"]["monitoring"]["dcgmExporter"] = True
    return inventory(data, str(path))


def test_mixed_panels_count_each_class_in_its_unit(mixed):
    platform = boards(mixed)[grafana.platform_uid(mixed)]
    shown = titles(platform)
    assert "gh200: GPUs admitted vs nominal quota" in shown
    assert "a100-1g: units of 1g.10gb slice of an A100 admitted vs nominal quota" in shown
    queries = [expr for _, expr in grafana.panel_queries(platform)]
    assert any('resource="nvidia.com/mig-1g.10gb"' in q for q in queries)
    assert any(r'GPU_I_PROFILE=~"1g\\.10gb"' in q for q in queries), queries
    # DCGM reports NVIDIA's GPUs only: no DCGM query for the AMD and Gaudi classes.
    assert not any("mi300x" in q or "gaudi3" in q for q in queries if "DCGM" in q)


def boards(inv) -> dict[str, dict]:
    return {uid: json.loads(text) for uid, text in grafana.dashboard_json(inv).items()}


def titles(board: dict) -> list[str]:
    return [panel["title"] for panel in board["panels"]]


# ------------------------------------------------------------------ the ConfigMaps

def test_one_configmap_per_dashboard_for_the_sidecar(two_classes):
    monitoring = two_classes.cluster.monitoring
    maps = grafana.dashboards(two_classes)
    assert [m["metadata"]["name"] for m in maps] == [grafana.platform_uid(two_classes)] + [
        grafana.group_uid(two_classes, name) for name in sorted(two_classes.groups)]
    for config_map in maps:
        meta = config_map["metadata"]
        assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
        assert meta["namespace"] == monitoring.namespace
        assert meta["labels"][monitoring.dashboardLabel] == monitoring.dashboardLabelValue
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "gpugen"
        ((key, text),) = config_map["data"].items()
        assert key == f"{meta['name']}.json"
        assert json.loads(text)["uid"] == meta["name"]
        assert object_problems(config_map, f"monitoring/{meta['name']}.yaml", text.encode()) == []


def test_the_sidecar_label_is_the_inventorys():
    inv = monitored({"namespace": "observability", "dashboardLabel": "example.org/dashboard",
                     "dashboardLabelValue": "gpu"})
    for config_map in grafana.dashboards(inv):
        assert config_map["metadata"]["namespace"] == "observability"
        assert config_map["metadata"]["labels"]["example.org/dashboard"] == "gpu"


def test_no_dashboards_without_monitoring_or_with_dashboards_off():
    without = inventory(edited(flame_data(), lambda d: d["cluster"].pop("monitoring", None)))
    assert without.cluster.monitoring is None
    assert grafana.dashboards(without) == [] and grafana.queries(without) == []
    assert grafana.dashboards(monitored({"dashboards": False})) == []


def test_a_render_without_dashboards_never_imports_the_sdk():
    """Its import costs every render; only building a dashboard loads it."""
    script = """
import sys
from tests.support.inventories import edited, flame_data, inventory, setting
from generator.builders import grafana
assert grafana.dashboards(inventory(edited(flame_data(), lambda d: d["cluster"].pop("monitoring", None)))) == []
assert grafana.dashboards(inventory(edited(flame_data(), setting("cluster.monitoring", {"dashboards": False})))) == []
assert not any(m.startswith("grafana_foundation_sdk") for m in sys.modules), "imported without a dashboard"
grafana.dashboards(inventory(edited(flame_data(), setting("cluster.monitoring", {}))))
assert "grafana_foundation_sdk" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=ceiling(12))
    assert done.returncode == 0, done.stderr


def test_the_same_inventory_gives_the_same_bytes(two_classes):
    """Twice in this process, and in processes with other hash seeds (set and dict orders)."""
    first = grafana.dashboard_json(two_classes)
    assert grafana.dashboard_json(two_classes) == first
    script = """
import json
from tests.unit.test_dashboards import monitored, with_h100
from generator.builders import grafana
print(json.dumps(grafana.dashboard_json(monitored({"dcgmExporter": True}, with_h100))))
"""
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True,
                              timeout=ceiling(12), env={**os.environ, "PYTHONHASHSEED": seed})
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == first
    for text in first.values():
        assert re.search(r"20\d\d-\d\d-\d\d", text) is None, "a date in the dashboard"
        board = json.loads(text)
        assert "version" not in board and "id" not in board
        assert text == json.dumps(board, sort_keys=True, indent=2) + "\n"


# ------------------------------------------------------------------ uids

def test_uids_are_stable_short_and_grafana_valid():
    long_name = "computational-neuroscience-and-cognition.example"
    inv = monitored({}, lambda d: d["groups"].__setitem__("platform", d["groups"].pop("nlp-lab")),
                    lambda d: d["groups"].__setitem__(long_name, d["groups"].pop("vision-lab")))
    uids = list(grafana.dashboard_json(inv))
    assert uids[0] == "gpugen-flame-platform"
    assert len(set(uids)) == len(uids) == 3, uids
    for uid in uids:
        assert len(uid) <= grafana.UID_MAX and re.fullmatch(r"[a-z0-9-]+", uid), uid
    assert grafana.group_uid(inv, long_name) == grafana.group_uid(inv, long_name)
    assert grafana.group_uid(inv, long_name).startswith("gpugen-flame-computational")
    assert grafana.group_uid(monitored(), "vision-lab") == "gpugen-flame-vision-lab"


# ------------------------------------------------------------------ the SDK's model

@pytest.fixture(scope="module")
def sdk():
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models import prometheus
    from grafana_foundation_sdk.models.dashboard import Dashboard, Panel, RowPanel
    register_default_plugins()  # the panels' and queries' own models, as the SDK decodes them
    return Dashboard, Panel, RowPanel, prometheus.Dataquery, JSONEncoder


@pytest.mark.parametrize("dcgm", [False, True])
def test_the_sdk_reads_each_dashboard_back_unchanged(sdk, dcgm):
    """Decoded into the SDK's typed model and encoded again, each dashboard is the same bytes: no field the model
    does not know, every panel and query of a type the SDK has a model for."""
    dashboard, panel_model, row_model, prometheus_query, encoder = sdk
    for uid, text in grafana.dashboard_json(monitored({"dcgmExporter": dcgm}, with_h100)).items():
        model = dashboard.from_json(json.loads(text))
        assert json.dumps(model, cls=encoder, sort_keys=True, indent=2) + "\n" == text, uid
        assert model.uid == uid
        assert [v.name for v in model.templating.list_val] == [grafana.DATASOURCE_VARIABLE]
        for panel in model.panels:
            assert isinstance(panel, (panel_model, row_model))
            if isinstance(panel, panel_model) and panel.type_val != "text":
                assert panel.datasource.uid == "${datasource}" and panel.datasource.type_val == "prometheus"
                assert panel.targets and all(isinstance(t, prometheus_query) for t in panel.targets)
        assert [p.id_val for p in model.panels] == list(range(1, len(model.panels) + 1))


def _group_titles(inv, group) -> list[str]:
    expected = ["Allocation"]
    for class_name in sorted(group.allocations):
        flavor = inv.classes[class_name].flavor or class_name
        expected.append(f"{class_name} (flavor {flavor})")
        for title in ("GPUs", "CPU", "Memory"):
            expected += [f"{title} on {class_name}", f"{title} on {class_name}: admitted vs quota"]
    return expected + ["Queue", "Pending workloads", "Admission wait time", "Admitted workloads",
                       "Evictions by reason"]


@pytest.mark.parametrize("case", ["flame", "two classes"])
def test_panels_per_group_follow_the_inventory(plain, two_classes, case):
    inv = plain if case == "flame" else two_classes
    built = boards(inv)
    for name, group in inv.groups.items():
        assert titles(built[grafana.group_uid(inv, name)]) == _group_titles(inv, group), name


def test_a_group_on_two_classes_gets_panels_for_both(two_classes):
    """vision-lab's dashboard reads both of its ClusterQueue's flavors, as the Kueue builder names them."""
    board = boards(two_classes)[grafana.group_uid(two_classes, "vision-lab")]
    cluster_queue = kueue.cluster_queue(two_classes, "vision-lab", two_classes.groups["vision-lab"])
    flavors = [f["name"] for f in cluster_queue["spec"]["resourceGroups"][0]["flavors"]]
    assert flavors == ["gh200", "hopper-80g"]
    for flavor in flavors:
        for resource in (KUBERNETES_RESOURCE[field] for field in grafana.RESOURCES):
            panels = [p for p in board["panels"] if any(f'flavor="{flavor}"' in t["expr"] and
                                                        f'resource="{resource}"' in t["expr"]
                                                        for t in p.get("targets", []))]
            assert [p["type"] for p in panels] == ["stat", "timeseries"], (flavor, resource)
            for panel in panels:
                exprs = [t["expr"] for t in panel["targets"]]
                assert [re.search(r"\((kueue_\w+)\{", e)[1] for e in exprs] == [
                    "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota",
                    "kueue_cluster_queue_borrowing_limit"]
                assert all(f'cluster_queue="{cluster_queue["metadata"]["name"]}"' in e for e in exprs)
    allocation = next(p for p in board["panels"] if p["title"] == "Allocation")["options"]["content"]
    # 4 of the class's 8 GPUs per node: 55 of its 110 pods.
    assert "| h100 | hopper-80g | 4 | 96 | 950Gi | 55 | gpus 2 | none |" in allocation
    # nlp-lab has no H100 allocation: no H100 panel.
    assert not any("h100" in title for title in titles(boards(two_classes)[grafana.group_uid(two_classes, "nlp-lab")]))


def test_each_local_queue_has_its_pending_workloads(two_classes):
    for name, group in two_classes.groups.items():
        board = boards(two_classes)[grafana.group_uid(two_classes, name)]
        pending = next(p for p in board["panels"] if p["title"] == "Pending workloads")
        local_queues = [(q["metadata"]["namespace"], q["metadata"]["name"]) for q in of_kind(
            kueue.local_queues(two_classes), "LocalQueue") if q["spec"]["clusterQueue"] == name]
        assert len(local_queues) == len(group.namespaces)
        exprs = [t["expr"] for t in pending["targets"]]
        assert exprs[0].startswith("max by (cluster_queue, status) (kueue_pending_workloads{")
        assert [re.findall(r'namespace="([^"]+)", name="([^"]+)"', e)[0] for e in exprs[1:]] == local_queues


def test_platform_panels_and_dcgm_only_with_the_exporter(plain, two_classes):
    platform = boards(plain)[grafana.platform_uid(plain)]
    assert titles(platform) == [
        "GPUs by class", "gh200: GPUs admitted vs nominal quota", "Queues", "Pending workloads per ClusterQueue",
        "Admitted workloads per ClusterQueue", "Admission wait time", "Evictions by reason", "Controllers",
        "Controllers up"]
    assert "DCGM" not in json.dumps(platform)
    with_dcgm = boards(two_classes)[grafana.platform_uid(two_classes)]
    assert titles(with_dcgm) == [
        "GPUs by class", "gh200: GPUs admitted vs nominal quota", "h100: GPUs admitted vs nominal quota", "Queues",
        "Pending workloads per ClusterQueue", "Admitted workloads per ClusterQueue", "Admission wait time",
        "Evictions by reason", "Controllers", "Controllers up", "GPUs (DCGM exporter)", "GPU utilisation per class",
        "GPU memory used per class"]
    for title in ("GPU utilisation per class", "GPU memory used per class"):
        panel = next(p for p in with_dcgm["panels"] if p["title"] == title)
        assert [t["legendFormat"] for t in panel["targets"]] == ["gh200", "h100"]
        assert [re.search(r'modelName=~"([^"]+)"', t["expr"])[1] for t in panel["targets"]] == [
            "NVIDIA[- ]GH200[- ]480GB", "NVIDIA[- ]H100[- ]80GB[- ]HBM3"]
    # Capacity from the inventory: 2 GH200 nodes x 1 GPU, 1 H100 node x 8.
    capacity = [t["expr"] for p in with_dcgm["panels"] for t in p.get("targets", []) if t["expr"].startswith("vector(")]
    assert capacity == ["vector(2)", "vector(8)"]


@pytest.mark.parametrize("product, model, other", [
    ("NVIDIA-GH200-480GB", "NVIDIA GH200 480GB", "NVIDIA GH200 480GBX"),
    ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3e"),
    ("Tesla-V100-SXM2-16GB", "Tesla V100-SXM2-16GB", "Tesla V100 SXM2 32GB"),
    ("NVIDIA-A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 40GB"),
    ("GPU.1+x", "GPU.1+x", "GPUa1+x"),
])
def test_the_dcgm_model_regex_matches_the_nvml_name(product, model, other):
    """gpu-feature-discovery's label is NVML's name with spaces as '-' (some names have '-' of their own); the
    regex matches the name exactly, as Prometheus anchors it."""
    regex = grafana.dcgm_model_regex(product)
    assert re.fullmatch(regex, model) and re.fullmatch(regex, product)
    assert not re.fullmatch(regex, other)


# ------------------------------------------------------------------ Prometheus' parser, Kueue's metrics

def interpolated(expr: str) -> str:
    for variable, value in GRAFANA_INTERPOLATION.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a Grafana variable the test does not interpolate: {expr}"
    return expr


@pytest.fixture(scope="module")
def promql(tmp_path_factory):
    """tests/oracles/promqlparse built against the pinned Prometheus module (cached by source and version).
    A missing Go toolchain skips locally and fails in CI; a failed build always fails."""
    binary = go_program(PROMQLPARSE_SOURCE, "gpugen.local/promqlparse",
                        [f"github.com/prometheus/prometheus@{PROMETHEUS_MODULE_VERSION}"], tmp_path_factory)

    def parse(expressions: dict[str, str]) -> dict[str, dict]:
        done = subprocess.run([str(binary)], input=json.dumps([{"id": k, "expression": v}
                                                               for k, v in expressions.items()]),
                              capture_output=True, text=True, timeout=ceiling(12))
        assert done.returncode == 0, done.stderr
        return {r["id"]: r for r in json.loads(done.stdout)}

    return parse


@cache
def kueue_metrics() -> dict[str, set[str]]:
    """Series name -> label names, of every metric the pinned Kueue's pkg/metrics registers (a histogram's
    _bucket, _sum and _count series included)."""
    try:
        source_dir = module_dir("sigs.k8s.io/kueue", pin("KUEUE"))
    except ModuleUnavailable as missing:
        unavailable(f"sigs.k8s.io/kueue@{pin('KUEUE')} is not in the Go module cache: {missing}")
    constants = dict(re.findall(r'^\s*(\w+)\s*=\s*"([^"]*)"',
                                (source_dir / "pkg" / "constants" / "constants.go").read_text(), flags=re.MULTILINE))
    source = (source_dir / "pkg" / "metrics" / "metrics.go").read_text()
    metrics: dict[str, set[str]] = {}
    for kind, body in re.findall(r"prometheus\.New(Counter|Gauge|Histogram)Vec\((.*?)\)\n", source, flags=re.DOTALL):
        subsystem = re.search(r"Subsystem:\s*constants\.(\w+)", body)
        name = re.search(r'Name:\s*"(\w+)"', body)
        labels = re.search(r"\[\]string\{([^}]*)\}", body[name.end():] if name else "")
        assert subsystem and name and labels, body[:300]
        full = f"{constants[subsystem[1]]}_{name[1]}"
        label_names = set(re.findall(r'"(\w+)"', labels[1]))
        if kind == "Histogram":
            metrics |= {f"{full}_bucket": label_names | {"le"}, f"{full}_sum": label_names,
                        f"{full}_count": label_names}
        else:
            metrics[full] = label_names
    assert len(metrics) > 40 and "kueue_pending_workloads" in metrics, sorted(metrics)
    return metrics


def every_query(inv) -> dict[str, str]:
    return {where: expr for board in boards(inv).values() for where, expr in grafana.panel_queries(board)}


@pytest.mark.tools
def test_every_query_parses_with_prometheus_and_names_kueues_metrics(promql, two_classes, plain, mixed):
    found = {**every_query(two_classes), **{f"plain:{k}": v for k, v in every_query(plain).items()},
             **{f"mixed:{k}": v for k, v in every_query(mixed).items()}}
    assert sorted(grafana.queries(two_classes)) == sorted(every_query(two_classes).values())
    assert len(found) > 50, len(found)
    # Must not parse, so the check can fail: a range function on an instant vector, an aggregation grouping by
    # a label the one below it dropped.
    broken = {"broken:rate": "rate(kueue_pending_workloads)",
              "broken:dropped": "max by (status) (sum by (cluster_queue) (kueue_pending_workloads))"}
    results = promql({**{k: interpolated(v) for k, v in found.items()}, **broken})
    assert {k for k, r in results.items() if r["error"]} == set(broken), {k: r["error"] for k, r in results.items()
                                                                          if r["error"]}
    wrong = []
    for where in found:
        result = results[where]
        if result["type"] != "vector":
            wrong.append(f"{where}: a {result['type']}, not an instant vector")
        for selector in result["selectors"]:
            metric, used = selector["metric"], set(selector["labels"])
            known = kueue_metrics().get(metric, OTHER_METRICS.get(metric))
            if known is None:
                wrong.append(f"{where}: {metric} is neither Kueue's nor one the dashboards may read")
            elif used - known:
                wrong.append(f"{where}: {metric} has no label {sorted(used - known)} (it has {sorted(known)})")
    assert wrong == []


def test_queries_quote_names_the_inventory_may_hold():
    """A group name with a dot is a regex metacharacter in a ClusterQueue alternation; it is escaped."""
    inv = monitored({}, lambda d: d["groups"].__setitem__("vision.lab", d["groups"].pop("vision-lab")))
    pending = next(q for q in grafana.queries(inv) if q.startswith("max by (cluster_queue, status)"))
    assert 'cluster_queue=~"nlp-lab|vision\\\\.lab"' in pending
    assert re.fullmatch(json.loads(re.search(r'cluster_queue=~("[^"]*")', pending)[1]), "vision.lab")
    assert not re.fullmatch(json.loads(re.search(r'cluster_queue=~("[^"]*")', pending)[1]), "visionxlab")
