"""The rendered PrometheusRules against the real promtool of the pinned Prometheus: every rule file passes
`promtool check rules`, and every alert has a `promtool test rules` case that fires it and one where a healthy
series keeps it quiet (FLAME's inventory: two GH200 nodes of one GPU, vision-lab and nlp-lab allocated one each).

The cases below are written by hand: the series, when the alert fires, its labels and its `$value`. The
annotations are the rendered templates with that value and those labels filled in, so a case checks the
expression, its `for`, its labels and what the templates make of them.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from generator.components import COMPONENTS
from simulation.go_tools import tool_bin
from simulation.pins import versions
from tests.support import REPO, require_tool

RULES_DIR = REPO / "rendered" / "monitoring" / "prometheusrule"
RUNBOOK = REPO / "docs" / "monitoring.md"

# Every component that serves metrics (FLAME installs each).
UP = {name: f'up{{gpugen_component="{name}", instance="{name}:8443"}}' for name, facts in COMPONENTS.items()
      if facts.chart.metrics}
HEALTHY_UP = [(series, "1x400") for series in UP.values()]


def up_but(name: str, values: str | None) -> list[tuple[str, str]]:
    """Every component's target up, but `name`'s: these values, or gone when None."""
    return [(series, "1x400") for other, series in UP.items() if other != name] + (
        [(UP[name], values)] if values is not None else [])
READY = 'kube_node_status_condition{{node="{}", condition="Ready", status="true"}}'
GH200 = 'kube_node_labels{{node="{}", label_nvidia_com_gpu_product="NVIDIA-GH200-480GB"}}'
USAGE = ('kueue_cluster_queue_resource_usage{{cluster_queue="{}", flavor="gh200", resource="nvidia.com/gpu", '
         'cohort="flame", replica_role="leader"}}')
PENDING_GPUS = ('kueue_cluster_queue_resource_pending{{cluster_queue="{}", resource="nvidia.com/gpu", '
                'replica_role="leader"}}')
PENDING = 'kueue_pending_workloads{{cluster_queue="{}", status="active", replica_role="leader"}}'
EVICTED = ('kueue_evicted_workloads_total{{cluster_queue="{}", reason="PodsReadyTimeout", underlying_cause="", '
           'replica_role="leader"}}')


def nodes(ready0: str, ready1: str) -> list[tuple[str, str]]:
    return [(READY.format("gh200-0"), ready0), (READY.format("gh200-1"), ready1),
            (GH200.format("gh200-0"), "1x400"), (GH200.format("gh200-1"), "1x400")]


# alert -> [(case, input series, eval time, [(labels, $value)] expected; [] means quiet)]
CASES = {
    "GPUPlatformControllerDown": [
        ("kueue's target down", up_but("kueue", "0x20"), "6m",
         [({"component": "kueue", "severity": "critical"}, "0")]),
        ("jobset's target gone", up_but("jobset", None), "6m",
         [({"component": "jobset", "severity": "critical"}, "0")]),
        ("all up", HEALTHY_UP, "6m", []),
        ("down for less than 5 minutes", up_but("kueue", "1x3 0x3"), "6m", []),
    ],
    "GPUClassNoReadyNodes": [
        ("both nodes NotReady", nodes("0x20", "0x20"), "6m", [({"class": "gh200", "severity": "critical"}, "0")]),
        ("both Ready", nodes("1x20", "1x20"), "6m", []),
    ],
    "GPUClassNodesMissing": [
        ("one of two Ready", nodes("1x20", "0x20"), "16m", [({"class": "gh200", "severity": "warning"}, "1")]),
        ("both Ready", nodes("1x20", "1x20"), "16m", []),
        ("none Ready is the critical alert's", nodes("0x20", "0x20"), "16m", []),
    ],
    "GPUsIdleWhileJobsPending": [
        ("one GPU idle while nlp-lab waits for one",
         [(USAGE.format("vision-lab"), "1x20"), (USAGE.format("nlp-lab"), "0x20"),
          (PENDING_GPUS.format("nlp-lab"), "1x20")], "16m", [({"class": "gh200", "severity": "warning"}, "1")]),
        ("both GPUs busy while nlp-lab waits",
         [(USAGE.format("vision-lab"), "2x20"), (USAGE.format("nlp-lab"), "0x20"),
          (PENDING_GPUS.format("nlp-lab"), "1x20")], "16m", []),
        ("idle and nobody waits",
         [(USAGE.format("vision-lab"), "0x20"), (USAGE.format("nlp-lab"), "0x20"),
          (PENDING_GPUS.format("nlp-lab"), "0x20")], "16m", []),
    ],
    "GPUJobsEvictedPodsNotReady": [
        ("one eviction", [(EVICTED.format("vision-lab"), "0x5 1x10")], "10m",
         [({"cluster_queue": "vision-lab", "severity": "warning"}, None)]),
        ("no eviction", [(EVICTED.format("vision-lab"), "0x15")], "10m", []),
    ],
    "GPUGroupPendingBelowAllocation": [
        ("vision-lab holds none of its GPU and waits",
         [(USAGE.format("vision-lab"), "0x40"), (PENDING_GPUS.format("vision-lab"), "1x40")], "32m",
         [({"group": "vision-lab", "class": "gh200", "severity": "warning"}, "0")]),
        ("vision-lab holds its allocation and waits for more",
         [(USAGE.format("vision-lab"), "1x40"), (PENDING_GPUS.format("vision-lab"), "1x40")], "32m", []),
    ],
    "GPUGroupBorrowingLong": [
        ("vision-lab on both GPUs for a day", [(USAGE.format("vision-lab"), "2x1500")], "1441m",
         [({"group": "vision-lab", "class": "gh200", "severity": "info"}, "2")]),
        ("vision-lab on its own GPU", [(USAGE.format("vision-lab"), "1x1500")], "1441m", []),
    ],
    "GPUGroupJobsPendingLong": [
        ("three nlp-lab jobs wait two hours", [(PENDING.format("nlp-lab"), "3x130")], "121m",
         [({"group": "nlp-lab", "severity": "info"}, "3")]),
        ("the queue empties", [(PENDING.format("nlp-lab"), "3x60 0x70")], "121m", []),
    ],
}


def rule_files() -> dict[str, dict]:
    return {path.stem.partition(".")[2]: yaml.safe_load(path.read_text()) for path in sorted(RULES_DIR.glob("*.yaml"))}


def alerts() -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for rule in rule_files().values():
        for group in rule["spec"]["groups"]:
            for r in group["rules"]:
                if "alert" in r:
                    found.setdefault(r["alert"], []).append(r)
    return found


def _fill(template: str, labels: dict[str, str], value: str | None) -> str:
    text = template.replace("{{ $value }}", value if value is not None else "{{ $value }}")
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], text)


def expected_alerts(alert: str, expected: list[tuple[dict[str, str], str | None]]) -> list[dict]:
    out = []
    for labels, value in expected:
        # The rule these labels come from: a group's or class's own, else the one rule of that name.
        candidates = [r for r in alerts()[alert]
                      if all(labels.get(k) == v for k, v in r["labels"].items())]
        assert len(candidates) == 1, (alert, labels)
        annotations = {k: _fill(v, labels, value) for k, v in candidates[0]["annotations"].items()}
        out.append({"exp_labels": labels, "exp_annotations": annotations})
    return out


@pytest.fixture(scope="module")
def promtool():
    return require_tool(tool_bin("promtool"), f"promtool {versions()['PROMETHEUS_VERSION']}",
                        "run `make tools` (tools/build.sh promtool)")


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory):
    """Each PrometheusRule's spec as a plain rule file, as the Prometheus Operator hands it to Prometheus."""
    directory = tmp_path_factory.mktemp("rules")
    for name, rule in rule_files().items():
        (directory / f"{name}.yaml").write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    return directory


def test_every_rule_file_passes_promtool_check(promtool, rules_dir):
    files = sorted(str(p) for p in rules_dir.glob("*.yaml"))
    assert files
    result = subprocess.run([promtool, "check", "rules", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_firing_and_a_quiet_case_and_a_runbook():
    runbook = RUNBOOK.read_text()
    assert set(CASES) == set(alerts())
    for alert, cases in CASES.items():
        assert any(expected for *_, expected in cases), alert
        assert any(not expected for *_, expected in cases), alert
        assert f"\n### {alert}\n" in runbook, f"docs/monitoring.md has no runbook section for {alert}"
        for rule in alerts()[alert]:
            assert rule["annotations"]["runbook_url"].endswith(f"docs/monitoring.md#{alert.lower()}")
            assert rule["annotations"]["summary"]


@pytest.mark.parametrize("alert", sorted(CASES))
def test_promtool_unit_tests(promtool, rules_dir, alert):
    tests = []
    for name, series, eval_time, expected in CASES[alert]:
        tests.append({
            "name": f"{alert}: {name}",
            "interval": "1m",
            "input_series": [{"series": s, "values": v} for s, v in series],
            "alert_rule_test": [{"eval_time": eval_time, "alertname": alert,
                                 "exp_alerts": expected_alerts(alert, expected)}],
        })
    test_file = rules_dir / f"test-{alert}.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": sorted(p.name for p in rules_dir.glob("*.yaml") if not p.name.startswith("test-")),
        "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True,
                            cwd=rules_dir)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_mixed_accelerators_rules_pass_promtool_check(promtool, tmp_path):
    """examples/mixed-accelerators: each class's rules select its own resource (MIG slices, time-slices, AMD,
    Gaudi), and promtool accepts them."""
    from generator.builders import prometheus
    from generator.inventory import load_inventory

    mixed = load_inventory(REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml")
    rules = [obj for obj in prometheus.monitoring_objects(mixed) if obj["kind"] == "PrometheusRule"]
    text = "\n".join(yaml.safe_dump(rule["spec"]) for rule in rules)
    for resource in ("nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared", "amd.com/gpu", "habana.ai/gaudi"):
        assert f'resource="{resource}"' in text, resource
    files = []
    for index, rule in enumerate(rules):
        files.append(tmp_path / f"{index}.yaml")
        files[-1].write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    result = subprocess.run([promtool, "check", "rules", *map(str, files)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_runbook_url_from_the_inventory_reaches_the_alert_as_written(promtool, tmp_path):
    """Prometheus expands every alert annotation as a Go template: a runbook URL holding template delimiters is
    written so that the firing alert carries it unchanged (freetext.go_template_text), not executed or refused."""
    from generator.builders import prometheus
    from generator.inventory import load_inventory_text

    url = "https://wiki.example.org/{{.Labels}}/gpu}}{{x"
    flame = (REPO / "gpu_classes.yaml").read_text(encoding="utf-8")
    line = "    runbookURL: https://github.com/urcf/flame-gitops/blob/main/docs/monitoring.md\n"
    assert line in flame
    inventory = load_inventory_text(flame.replace(line, f"    runbookURL: '{url}'\n"), "gpu_classes.yaml")
    rules = [obj for obj in prometheus.monitoring_objects(inventory) if obj["kind"] == "PrometheusRule"]
    files = []
    for index, rule in enumerate(rules):
        files.append(tmp_path / f"{index}.yaml")
        files[-1].write_text(yaml.safe_dump(rule["spec"], sort_keys=False))
    alert = "GPUJobsEvictedPodsNotReady"
    name, series, eval_time, expected = CASES[alert][0]
    [firing] = expected_alerts(alert, expected)
    firing["exp_annotations"]["runbook_url"] = f"{url}#{alert.lower()}"
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({
        "rule_files": [f.name for f in files], "evaluation_interval": "1m",
        "tests": [{"name": name, "interval": "1m", "input_series": [{"series": s, "values": v} for s, v in series],
                   "alert_rule_test": [{"eval_time": eval_time, "alertname": alert, "exp_alerts": [firing]}]}]},
        sort_keys=False))
    result = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
