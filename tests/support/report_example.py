"""Twelve hours of Kueue usage on FLAME for `gpugen report`: the jobs, their kueue_cluster_queue_resource_usage
samples as OpenMetrics text, and a real Prometheus serving them (backfilled with promtool, started on 127.0.0.1).

Shared by tests/unit/test_report_cli.py and `python -m tests.support.report_example`, which draws the README's
picture, docs/report-example.png. Prometheus and promtool come from the tool cache; when missing, Unavailable
(skipped locally, a failure in CI).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path

from generator.inventory.models import Inventory
from generator.inventory.naming import KUBERNETES_RESOURCE, flavor_name
from simulation.control_plane import free_port
from simulation.go_tools import tool_bin
from simulation.prerequisites import Unavailable
from simulation.processes import stop_process
from tests.support import INVENTORY, REPO
from simulation.waiting import PROBE, ceiling

T0 = int(datetime(2026, 11, 30, tzinfo=UTC).timestamp())
HOURS = 12
SCRAPE = 15  # seconds between samples, as Prometheus scrapes Kueue
RESTART = 6 * 3600  # Kueue's pod is replaced here: two copies of every series overlap for Prometheus' lookback
CLASS = "gh200"
FOREIGN_QUEUE = "physics-lab"  # a ClusterQueue the inventory does not name (its group was removed)


@dataclass(frozen=True)
class Job:
    """Quota Kueue admitted to a group's ClusterQueue from `start` to `end` (seconds after T0)."""

    group: str
    gpus: int
    cpu: int
    memory: int  # bytes
    start: int
    end: int


# Starts and ends fall on the scrape interval but off the report's default 30 s grid.
JOBS = [
    Job("vision-lab", 1, 36, 240 * 10**9, 3600 + 45, 3 * 3600 + 45),  # 1 GPU for 2 h
    Job("nlp-lab", 2, 64, 400 * 2**30, 3 * 3600 + 1800 + 15, 4 * 3600 + 15),  # 2 GPUs (one borrowed) for 30 min
    Job("nlp-lab", 1, 16, 128 * 2**30, 5 * 3600, 9 * 3600),  # 1 GPU for 4 h, across the restart
    Job("vision-lab", 1, 8, 64 * 2**30, 6 * 3600 + 30, 8 * 3600 + 900 + 30),  # 1 GPU for 2 h 15 min
]


def held(group: str, field: str, at: int) -> int:
    """What the group held of an inventory resource field at `at` seconds after T0."""
    return sum(getattr(job, field) for job in JOBS if job.group == group and job.start <= at < job.end)


def expected_hours(group: str, field: str) -> float:
    """The group's resource-hours over the window (memory in GiB-hours), from the jobs themselves."""
    unit = 2**30 if field == "memory" else 1
    return sum(getattr(job, field) * (job.end - job.start) for job in JOBS if job.group == group) / 3600 / unit


def openmetrics(inventory: Inventory) -> str:
    """Kueue's gauge per ClusterQueue, flavor and resource every SCRAPE seconds, 0 when nothing is admitted (Kueue
    exports every quota of a queue), from the pod before RESTART and from its successor after it, plus a queue the
    inventory does not name. Names come from the inventory as the builders render them."""
    flavor = flavor_name(CLASS, inventory.classes[CLASS])
    lines = ["# HELP kueue_cluster_queue_resource_usage Reports the cluster_queue's total resource usage within all "
             "the flavors", "# TYPE kueue_cluster_queue_resource_usage gauge"]
    queues = sorted(inventory.groups) + [FOREIGN_QUEUE]
    pods = [("kueue-controller-manager-7d9f", 0, RESTART), ("kueue-controller-manager-5c2a", RESTART, HOURS * 3600)]
    for queue in queues:
        for field in ("gpus", "cpu", "memory"):
            for pod, first, last in pods:
                labels = (f'cohort="flame",cluster_queue="{queue}",flavor="{flavor}",'
                          f'resource="{KUBERNETES_RESOURCE[field]}",replica_role="leader",pod="{pod}"')
                for at in range(first, last + 1, SCRAPE):
                    value = held(queue, field, at) if queue != FOREIGN_QUEUE else 0
                    lines.append(f"kueue_cluster_queue_resource_usage{{{labels}}} {value} {T0 + at}")
    return "\n".join(lines + ["# EOF"]) + "\n"


def tool(name: str) -> Path:
    """A tool as tools/build.sh builds it, at its pin (tools/tools.list)."""
    pinned = tool_bin(name)
    if not os.access(pinned, os.X_OK):
        raise Unavailable(f"{name} not found ({pinned}); run `make tools` (tools/build.sh {name})")
    return pinned


@contextmanager
def serving(text: str, work: Path, timeout: float = 60) -> Iterator[str]:
    """A Prometheus on 127.0.0.1 serving `text` (OpenMetrics) backfilled with promtool; its URL. Stopped on exit."""
    source, data, config = work / "usage.om.txt", work / "data", work / "prometheus.yml"
    source.write_text(text)
    backfill = subprocess.run([tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", source, data],
                              capture_output=True, text=True, timeout=ceiling(30))
    assert backfill.returncode == 0, f"promtool could not backfill:\n{backfill.stdout}{backfill.stderr}"
    config.write_text("global:\n  scrape_interval: 15s\n")  # nothing scraped: the blocks are all it serves
    url = f"http://127.0.0.1:{free_port()}"
    log = (work / "prometheus.log").open("w")
    # Retention counts back from the newest block; 100y keeps the backfilled past whatever the clock says.
    process = subprocess.Popen([tool("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={data}",
                                "--storage.tsdb.retention.time=100y", f"--web.listen-address={url[7:]}"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=PROBE) as ready:
                    if ready.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                log_text = (work / "prometheus.log").read_text()
                raise AssertionError(f"Prometheus did not become ready:\n{log_text[-3000:]}")
            time.sleep(0.2)
        yield url
    finally:
        stop_process(process)
        log.close()


def window() -> tuple[str, str]:
    """--from and --to of the example's twelve hours."""
    def show(seconds):
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    return show(T0), show(T0 + HOURS * 3600)


def main() -> None:
    """Draw docs/report-example.png (and print the table) from the example, with the FLAME inventory."""
    from generator import usecases
    from generator.report.usage import DEFAULT_STEP, parse_period
    from generator.inventory import load_inventory

    start, end = window()
    period = parse_period(start, end, DEFAULT_STEP, datetime.now(UTC))
    picture = REPO / "docs" / "report-example.png"
    with (tempfile.TemporaryDirectory(prefix="gpugen-report-example-") as work,
          serving(openmetrics(load_inventory(INVENTORY)), Path(work)) as url):
        result = usecases.report(INVENTORY, url, period, chart=picture)
    sys.stdout.write(result.text or "")
    print(f"wrote {picture.relative_to(REPO)}")


if __name__ == "__main__":
    main()
