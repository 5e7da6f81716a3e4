"""Monitoring and accounting on the simulated FLAME, after the journeys (this module runs last on the cluster,
tests/flame/conftest.py): the site's real Prometheus (simulation/prometheus.py) scrapes the real controllers as the
rendered ServiceMonitors say, evaluates the rendered rules on their metrics, and the GPU-hours it and `gpugen report`
give per group match what Kueue's Workloads held (simulation/ledger.py), to within one scrape interval per
spell of reserved quota."""

from __future__ import annotations

import csv
import io
import json
import time
import urllib.parse
import urllib.request

import pytest
from click.testing import CliRunner

from generator.cli import main as gpugen
from generator.inventory import duration
from tests.flame.flame_support import poll
from simulation.waiting import REQUEST, wait_for

pytestmark = pytest.mark.tools

GH200 = "gh200"


def query(prometheus, expr: str, at: float | None = None) -> list[dict]:
    params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
    url = f"{prometheus.url}/api/v1/query?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=REQUEST) as r:
        answer = json.load(r)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


@pytest.fixture(scope="module")
def prometheus(flame_cluster):
    if flame_cluster.prometheus is None:
        pytest.fail("the FLAME inventory sets cluster.monitoring: the simulation must run its Prometheus")
    return flame_cluster.prometheus


def interval_seconds(flame_cluster) -> int:
    return duration.seconds(flame_cluster.inventory.cluster.monitoring.scrapeInterval)


def test_prometheus_scrapes_every_installed_controller(flame_cluster, prometheus):
    """Every ServiceMonitor yields targets, and each controller the simulation runs answers its scrape: the https
    ones only because the rendered metrics-reader binding lets Prometheus' token GET /metrics."""
    components = {"kueue", "trainer", "jobset", "kyverno"}

    def all_up():
        up = query(prometheus, 'max by (gpugen_component) (up{gpugen_component!=""})')
        return {r["metric"]["gpugen_component"] for r in up if r["value"][1] == "1"} >= components

    def targets():
        with urllib.request.urlopen(f"{prometheus.url}/api/v1/targets", timeout=REQUEST) as r:
            return "not every controller is scraped: " + "; ".join(
                f"{t['labels'].get('job')} {t['scrapeUrl']} {t['health']} {t.get('lastError', '')}"
                for t in json.load(r)["data"]["activeTargets"])
    # Three scrapes usually suffice.
    wait_for(all_up, "every controller scraped", 3 * interval_seconds(flame_cluster), interval=2,
             describe=targets)
    # Kueue's queue metrics, through the rendered recording rules (evaluated every 30 s).
    groups = set(flame_cluster.inventory.groups)

    def recorded():
        return {r["metric"]["cluster_queue"] for r in query(
            prometheus, 'gpugen:cluster_queue_resource_usage{resource="nvidia.com/gpu"}')} >= groups

    def raw():
        series = query(prometheus, 'count by (__name__) ({__name__=~"kueue_cluster_queue_.*"})')
        return f"no recorded GPU usage for every group; Kueue's queue series: {series}"
    # Two rule evaluations usually suffice.
    wait_for(recorded, "GPU usage recorded for every group", 60, interval=3, describe=raw)


def test_gpu_hours_match_what_kueue_admitted(flame_cluster, prometheus, tmp_path, request):
    ledger = flame_cluster.ledger
    interval = interval_seconds(flame_cluster)
    # Every spell has ended and been scraped at least once since.
    poll(lambda: all(s.end is not None for s in ledger.spells), 20, "every Workload's quota released")
    time.sleep(interval + 2)
    end = time.time()
    truth = ledger.gpu_seconds(until=end)
    spells = ledger.spell_count()
    start = min((s.start for s in ledger.spells), default=end) - interval
    window = int(end - start) + 1
    assert any(seconds > 0 for seconds in truth.values()), "the journeys ran no GPU job"

    # Straight from Prometheus: Kueue's admitted GPUs per queue on gh200, integrated over the window.
    measured = {}
    for group in flame_cluster.inventory.groups:
        result = query(prometheus, f'sum_over_time((max(kueue_cluster_queue_resource_usage{{cluster_queue="{group}", '
                                   f'flavor="{GH200}", resource="nvidia.com/gpu", replica_role!="follower"}}))'
                                   f'[{window}s:1s])', at=end)
        measured[group] = float(result[0]["value"][1]) if result else 0.0

    # And with gpugen report over the same window.
    runner = CliRunner()
    out = tmp_path / "report.csv"
    result = runner.invoke(gpugen, [
        "report", "--inventory", str(flame_cluster.inventory_file), "--prometheus", prometheus.url,
        "--from", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
        "--to", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end)),
        "--step", "1s", "--format", "csv", "--output", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    reported = {row["group"]: float(row["gpu_hours"]) * 3600 for row in rows if row["class"] == GH200}

    lines = []
    for group in flame_cluster.inventory.groups:
        expected = truth.get((group, GH200), 0.0)
        # A spell starts and ends up to one scrape late; both ends move alike, so its length is off by at most
        # one interval (a spell shorter than the interval may be missed whole).
        tolerance = interval * max(1, spells.get(group, 0)) * max(1.0, max(
            (s.gpus.get(GH200, 0) for s in ledger.spells if s.cluster_queue == group), default=1.0))
        lines.append(f"{group}: Kueue {expected:.0f} GPU-s, Prometheus {measured[group]:.0f}, report "
                     f"{reported.get(group, 0.0):.0f}, tolerance {tolerance:.0f} ({spells.get(group, 0)} spells)")
        assert abs(measured[group] - expected) <= tolerance, lines[-1]
        assert abs(reported.get(group, 0.0) - expected) <= tolerance, lines[-1]
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter and capture:  # the figures, in the FLAME tier's output
        with capture.global_and_fixture_disabled():
            reporter.write_line("\nGPU-seconds on gh200 since the start: " + "; ".join(lines))
