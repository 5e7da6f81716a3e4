"""GPU-hour accounting, pure: the period, the Prometheus query and its chunks, samples integrated into hours, and
each group's usage per GPU class against its allocation. The HTTP client is prometheus_api.py.

What is counted is Kueue's `kueue_cluster_queue_resource_usage`: the quota admitted to a ClusterQueue on a
ResourceFlavor (borrowed quota included), not what the pods measured. Each series is sampled on the step grid
t = start, start + step, ... < end and integrated as a left Riemann sum, sum(value x step) / 3600, the last interval
cut at `end`. Against the gauge Prometheus recorded the error is at most one step per change of the value (a job
admitted or finished); against Kueue itself add one scrape interval.
"""

from __future__ import annotations

import math
import re
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, UTC
from itertools import groupby

from generator.builders.kueue import cluster_queue
from generator.errors import NoData
from generator.inventory import accelerators, duration
from generator.inventory.models import Inventory
from generator.inventory.contract import allocated_amount
from generator.inventory.naming import KUBERNETES_RESOURCE, flavor_name

METRIC = "kueue_cluster_queue_resource_usage"
# The inventory fields reported, in the report's order, and how many of the metric's unit make one of ours.
RESOURCES = ("gpus", "cpu", "memory")
UNIT_SIZE = {"gpus": 1, "cpu": 1, "memory": 2**30}  # GPUs, cores, GiB (Kueue reports memory in bytes)
UNIT = {"gpus": "GPU-h", "cpu": "CPU-h", "memory": "GiB-h"}
# Prometheus refuses a range query of more than 11,000 points per series.
MAX_POINTS = 10_000
DEFAULT_STEP = "30s"
DEFAULT_FROM = "30d"
# Bounds of what a report reads. Checked before any request: a period starts no earlier than Unix time 0 (Prometheus
# keeps nothing older) and holds at most MAX_PERIOD_POINTS steps (a leap year at the default 30s). Checked as the
# answers come (prometheus_api.py; how many series there are is Prometheus's to tell): one answer is read up to
# MAX_ANSWER_BYTES (parsed, JSON takes up to about twenty times its size), and all of them hold at most MAX_SAMPLES
# samples (16 bytes each once read). Together they keep a report within gpugen's memory bound.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_PERIOD_POINTS = 1_100_000
MAX_ANSWER_BYTES = 8 * 2**20
MAX_SAMPLES = 10_000_000
# No Kubernetes quantity is larger (int64): a usage beyond it is no usage Kueue reported.
MAX_USAGE = 2.0**63

SeriesKey = tuple[str, str, str]  # cluster_queue, flavor, Kubernetes resource


@dataclass(frozen=True)
class Period:
    """[start, end) in Unix seconds, sampled every `step` seconds."""

    start: int
    end: int
    step: int

    @property
    def hours(self) -> float:
        return (self.end - self.start) / 3600

    @property
    def points(self) -> int:
        return -(-(self.end - self.start) // self.step)

    def label(self) -> str:
        return f"{iso(self.start)} to {iso(self.end)}"


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def shown(text: str, limit: int = 40) -> str:
    """An option's or an answer's text quoted on one line, a long one cut."""
    quoted = repr(text)
    return quoted if len(quoted) <= limit else quoted[:limit] + "..."


def _duration(text: str, what: str) -> int:
    if not re.fullmatch(duration.PATTERN, text):
        raise ValueError(f"{what}: {shown(text)} is not a duration such as 30s, 90m, 1d12h")
    try:
        return duration.seconds(text)
    except ValueError:  # more digits than Python turns into a number
        raise ValueError(f"{what}: {shown(text)} is longer than any period") from None


def _instant(text: str, relative_to: datetime, what: str) -> datetime:
    """ISO 8601 (no offset: UTC), or a duration before `relative_to`; not before EPOCH."""
    if re.fullmatch(duration.PATTERN, text):
        seconds = _duration(text, what)
        if seconds > (relative_to - EPOCH).total_seconds():
            raise ValueError(f"{what}: {shown(text)} before {iso(relative_to.timestamp())} is before "
                             f"{iso(0)}, when Prometheus's time begins")
        return relative_to - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{what}: {shown(text)} is neither an ISO 8601 time (2026-11-01, 2026-11-01T08:00:00Z) "
                         "nor a duration (30d, 12h)") from None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment
    if moment < EPOCH:
        raise ValueError(f"{what}: {shown(text)} is before {iso(0)}, when Prometheus's time begins")
    return moment


def parse_period(start: str, end: str | None, step: str, now: datetime) -> Period:
    """The period asked for on the command line: `end` defaults to `now` and may not be later, a relative `start`
    counts back from `end`, a relative `end` from `now`; at most MAX_PERIOD_POINTS steps, the step no longer than
    the period. ValueError names the option at fault."""
    step_seconds = _duration(step, "--step")
    if step_seconds < 1:
        raise ValueError("--step: must be at least 1s")
    end_time = now if end is None else _instant(end, now, "--to")
    if end_time > now:
        # The allocation would count hours no job could have used yet.
        raise ValueError(f"--to ({iso(end_time.timestamp())}) is in the future; leave it out to report until now")
    start_time = _instant(start, end_time, "--from")
    # Whole seconds: the grid's timestamps come back exact.
    period = Period(math.floor(start_time.timestamp()), math.floor(end_time.timestamp()), step_seconds)
    if period.start >= period.end:
        raise ValueError(f"--from ({iso(period.start)}) must be before --to ({iso(period.end)})")
    length = period.end - period.start
    if step_seconds > length:
        raise ValueError(f"--step: {shown(step)} is longer than the period ({duration.show(length)}); at most "
                         "the period")
    if period.points > MAX_PERIOD_POINTS:
        raise ValueError(
            f"--from, --to, --step: {duration.show(length)} every {duration.show(step_seconds)} is "
            f"{period.points:,} points per series; a report reads at most {MAX_PERIOD_POINTS:,}: ask for a --step "
            f"of at least {duration.show(-(-length // MAX_PERIOD_POINTS))} or a shorter period")
    return period


def chunks(period: Period, max_points: int = MAX_POINTS) -> list[tuple[int, int]]:
    """(first, last) grid times of each range query: consecutive, disjoint, at most `max_points` points each,
    together exactly the grid points in [start, end)."""
    return [(period.start + first * period.step,
             period.start + (min(first + max_points, period.points) - 1) * period.step)
            for first in range(0, period.points, max_points)]


def usage_query(inventory: Inventory) -> str:
    """One series per (ClusterQueue, flavor, resource): Kueue's replicas (replica_role), a restarted pod and
    several Prometheus targets can each export the same gauge, so the copies are merged with max, never summed.
    The accelerators are every class's resource."""
    names = [name for field in RESOURCES for name in (accelerators.resources(inventory) if field == "gpus"
                                                      else [KUBERNETES_RESOURCE[field]])]
    wanted = "|".join(re.escape(name) for name in names)
    # A PromQL string is Go-quoted: the regex's backslashes are doubled.
    quoted = '"' + wanted.replace("\\", "\\\\") + '"'
    return f"max by (cluster_queue, flavor, resource) ({METRIC}{{resource=~{quoted}}})"


@dataclass
class Samples:
    """One series' samples in time order, compact: a year at 30s is a million points."""

    times: array
    values: array


def collect(results: Iterable[list[dict]]) -> dict[SeriesKey, Samples]:
    """The `result` of each chunk's matrix answer (as prometheus_api.py has checked it), in time order, as samples
    per series; a series without a sample is no series. Copies of one series (in one answer) are merged with max.
    A value that is not a finite number is a ValueError: never counted as zero, nor left out."""
    collected: dict[SeriesKey, Samples] = {}
    for result in results:
        chunk = _merged(result)
        del result  # the next answer is read while this one would still be held
        for key, points in chunk.items():
            if not points:
                continue
            samples = collected.setdefault(key, Samples(array("d"), array("d")))
            for timestamp in sorted(points):
                samples.times.append(timestamp)
                samples.values.append(points[timestamp])
    return collected


def _merged(result: list[dict]) -> dict[SeriesKey, dict[float, float]]:
    """One answer's samples by series and time, copies merged with max."""
    chunk: dict[SeriesKey, dict[float, float]] = {}
    for series in result:
        metric = series["metric"]
        key = (metric.get("cluster_queue", ""), metric.get("flavor", ""), metric.get("resource", ""))
        points = chunk.setdefault(key, {})
        for timestamp, text in series["values"]:
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(f"sample {text!r} of {key} at {timestamp} is not a finite number")
            points[float(timestamp)] = max(value, points.get(float(timestamp), value))
    return chunk


def integrate(samples: Samples, period: Period) -> float:
    """Hours of the series' unit (value x hours): each sample holds until the next grid point or `end`."""
    total = 0.0
    for timestamp, value in zip(samples.times, samples.values):
        if period.start <= timestamp < period.end:
            total += value * min(period.step, period.end - timestamp)
    return total / 3600


@dataclass(frozen=True)
class Usage:
    """A group's use of one resource on one class over the period, and its allocation, in UNIT[resource]."""

    group: str
    gpu_class: str
    resource: str  # an inventory field: gpus, cpu, memory
    used: float
    allocated: float

    @property
    def percent(self) -> float | None:
        """Of the allocation (over 100 when the group borrowed); None without an allocation."""
        return 100 * self.used / self.allocated if self.allocated else None


@dataclass(frozen=True)
class Report:
    period: Period
    source: str  # the Prometheus URL
    usage: list[Usage]  # by group, class, then RESOURCES' order
    gpus: dict[str, dict[str, Samples]]  # class -> group -> GPUs admitted over time (the chart)
    capacity: dict[str, int]  # class -> its GPUs (nodes x per node)
    ignored: list[str]  # queues and flavors with series that the inventory does not name
    units: dict[str, str]  # class -> what one unit of its accelerator is (GPU, 1g.10gb MIG slice, ...)

    def rows(self) -> list[tuple[str, str, dict[str, Usage]]]:
        """(group, class, {resource: usage}) in the report's order."""
        rows: dict[tuple[str, str], dict[str, Usage]] = {}
        for usage in self.usage:
            rows.setdefault((usage.group, usage.gpu_class), {})[usage.resource] = usage
        return [(group, gpu_class, by_resource) for (group, gpu_class), by_resource in rows.items()]


def usage_report(inventory: Inventory, period: Period, series: dict[SeriesKey, Samples], source: str) -> Report:
    """Each group's usage per class and resource against its allocation. NoData when Prometheus had no series at
    all, or none of this inventory's queues and flavors: a report of zeros would read as idle groups."""
    if not series:
        raise NoData(f"Prometheus at {source} has no {METRIC} series from {period.label()}; check that it scrapes "
                     "Kueue's metrics endpoint, that Kueue's Configuration has metrics.enableClusterQueueResources, "
                     "and that the period is one it kept")
    resource_field = {KUBERNETES_RESOURCE[field]: field for field in RESOURCES if field != "gpus"}
    # A flavor covers the other classes' accelerators at a quota of 0: only its own class's is its `gpus`.
    accelerator_of = {flavor_name(name, gpu_class): accelerators.resource(gpu_class)
                      for name, gpu_class in inventory.classes.items()}
    others = set(accelerators.resources(inventory))
    # The names as the builders render them: the ClusterQueue of each group, the ResourceFlavor of each class.
    queues = {cluster_queue(inventory, name, group)["metadata"]["name"]: name
              for name, group in inventory.groups.items()}
    flavors = {flavor_name(name, gpu_class): name for name, gpu_class in inventory.classes.items()}
    by_key: dict[tuple[str, str, str], Samples] = {}
    ignored: dict[str, None] = {}
    for (queue, flavor, resource), samples in sorted(series.items()):
        field = "gpus" if resource == accelerator_of.get(flavor) else resource_field.get(resource)
        if queue in queues and flavor in flavors and field is not None:
            by_key[(queues[queue], flavors[flavor], field)] = samples
        elif queue in queues and flavor in flavors and resource in others:
            continue  # another class's accelerator on this flavor: its quota is 0
        else:
            ignored[f"ClusterQueue {queue!r} on flavor {flavor!r}"] = None
    if not by_key:
        raise NoData(f"Prometheus at {source} has {METRIC} series from {period.label()}, but none of this "
                     f"inventory's ClusterQueues ({', '.join(sorted(queues))}) on its flavors "
                     f"({', '.join(sorted(flavors))}); check --inventory and that Prometheus scrapes this cluster")
    usage = []
    gpus: dict[str, dict[str, Samples]] = {}
    for group_name, group in sorted(inventory.groups.items()):
        for class_name, allocation in sorted(group.allocations.items()):
            for field in RESOURCES:
                samples = by_key.get((group_name, class_name, field))
                used = integrate(samples, period) if samples else 0.0
                allocated = float(allocated_amount(inventory, class_name, allocation, field)) * period.hours
                usage.append(Usage(group_name, class_name, field, used / UNIT_SIZE[field],
                                   allocated / UNIT_SIZE[field]))
            gpus.setdefault(class_name, {})[group_name] = (by_key.get((group_name, class_name, "gpus"))
                                                           or Samples(array("d"), array("d")))
    capacity = {name: gpu_class.nodes * gpu_class.perNode.gpus for name, gpu_class in inventory.classes.items()}
    units = {name: accelerators.unit(gpu_class) for name, gpu_class in inventory.classes.items()}
    return Report(period, source, usage, gpus, capacity, list(ignored), units)


def bucket_means(samples: Samples, period: Period, size: int) -> list[float]:
    """The series' mean over each run of `size` grid points (the last run may be shorter), a point without a sample
    counting 0 (nothing admitted that Prometheus saw): a chart's columns, without the whole grid in memory."""
    def index(timestamp: float) -> int:
        return round((timestamp - period.start) / period.step)

    means = [0.0] * -(-period.points // size)
    inside = (item for item in zip(samples.times, samples.values) if 0 <= index(item[0]) < period.points)
    for bucket, items in groupby(inside, key=lambda item: index(item[0]) // size):
        means[bucket] = sum(value for _, value in items) / min(size, period.points - bucket * size)
    return means
