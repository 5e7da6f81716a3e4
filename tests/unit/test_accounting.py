"""GPU-hour accounting, pure (generator/report/usage.py): the period, the chunks of a range query, integration into
hours, copies of a series merged with max, usage against allocation, and no data refused."""

from __future__ import annotations

import itertools
from datetime import datetime, UTC

import pytest

from generator.report.usage import (MAX_PERIOD_POINTS, MAX_POINTS, Period, bucket_means, chunks, collect, integrate,
                                  parse_period, usage_query, usage_report)
from generator.errors import NoData

NOW = datetime(2026, 12, 5, 12, 0, 0, tzinfo=UTC)
T0 = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp())
GIB = 2**30


def answer(queue, flavor, resource, points, **labels):
    """One series of a matrix answer, as Prometheus writes it (timestamps as numbers, values as strings)."""
    return {"metric": {"cluster_queue": queue, "flavor": flavor, "resource": resource, **labels},
            "values": [[t, str(v)] for t, v in points]}


def grid(period, value_at):
    return [(t, value_at(t)) for t in range(period.start, period.end, period.step)]


@pytest.mark.parametrize("start, end, step, expected", [
    ("30d", None, "30s", Period(int(NOW.timestamp()) - 30 * 86400, int(NOW.timestamp()), 30)),
    ("2026-12-01", "2026-12-02T00:00:00Z", "1m", Period(T0, T0 + 86400, 60)),
    ("2026-12-01T01:00:00+01:00", "2026-12-01T02:00", "15s", Period(T0, T0 + 7200, 15)),  # an offset, then UTC
    ("1d", "2026-12-02", "1h", Period(T0, T0 + 86400, 3600)),  # relative to --to
    ("2026-12-05", "2h", "30s", Period(int(NOW.timestamp()) - 12 * 3600, int(NOW.timestamp()) - 7200, 30)),
])
def test_the_period_from_the_options(start, end, step, expected):
    assert parse_period(start, end, step, NOW) == expected


@pytest.mark.parametrize("start, end, step, message", [
    ("yesterday", None, "30s", "--from: 'yesterday' is neither an ISO 8601 time"),
    ("1d", "soon", "30s", "--to: 'soon'"),
    ("1d", None, "30", "--step: '30' is not a duration"),
    ("1d", None, "0s", "--step: must be at least 1s"),
    ("2026-12-06", None, "30s", "--from (2026-12-06T00:00:00Z) must be before --to (2026-12-05T12:00:00Z)"),
    ("0s", None, "30s", "must be before --to"),
    ("1d", "2026-12-06", "30s", "--to (2026-12-06T00:00:00Z) is in the future; leave it out to report until now"),
    # Too far back: before Unix time 0, however it is written (a duration Python's dates cannot even hold).
    ("99999999999d", None, "30s", "--from: '99999999999d' before 2026-12-05T12:00:00Z is before 1970-01-01T00:00:00Z"),
    ("9" * 5000 + "s", None, "30s", "--from: '" + "9" * 39 + "... is longer than any period"),
    ("0001-01-01T00:00:00+01:00", None, "30s", "--from: '0001-01-01T00:00:00+01:00' is before 1970-01-01T00:00:00Z"),
    ("1969-12-31T23:59:59Z", None, "30s", "--from: '1969-12-31T23:59:59Z' is before 1970-01-01"),
    ("1d", "1960-01-01", "30s", "--to: '1960-01-01' is before 1970-01-01"),
    ("1d", "30000d", "30s", "--to: '30000d' before 2026-12-05T12:00:00Z is before 1970-01-01"),
    # More points than a report reads, or a step longer than the period.
    ("30d", None, "1s", "--from, --to, --step: 30d every 1s is 2,592,000 points per series; a report reads at most "
                        "1,100,000: ask for a --step of at least 3s or a shorter period"),
    ("1h", None, "2h", "--step: '2h' is longer than the period (1h); at most the period"),
    ("1h", None, "9" * 60 + "s", "--step: '" + "9" * 39 + "... is longer than the period"),
])
def test_bad_options_are_named(start, end, step, message):
    with pytest.raises(ValueError) as refused:
        parse_period(start, end, step, NOW)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 300


def test_the_longest_period_a_report_reads():
    """A leap year at the default step is within the bound; one step more is not."""
    assert MAX_PERIOD_POINTS >= 366 * 2880
    assert parse_period(f"{MAX_PERIOD_POINTS * 30}s", "2026-12-05", "30s", NOW).points == MAX_PERIOD_POINTS
    with pytest.raises(ValueError, match="1,100,001 points per series"):
        parse_period(f"{MAX_PERIOD_POINTS * 30 + 1}s", "2026-12-05", "30s", NOW)


@pytest.mark.parametrize("seconds, step, max_points, expected", [
    (90, 30, 10, [(0, 60)]),  # 3 points
    (100, 30, 10, [(0, 90)]),  # 4 points: the last interval is cut at the end
    (300, 30, 5, [(0, 120), (150, 270)]),  # 10 points, two full chunks
    (330, 30, 5, [(0, 120), (150, 270), (300, 300)]),  # 11 points: a last chunk of one
    (30 * 86400, 30, MAX_POINTS, None),  # a month at 30s: 86,400 points in 9 requests
])
def test_chunks_cover_the_grid_exactly_once(seconds, step, max_points, expected):
    period = Period(T0, T0 + seconds, step)
    spans = chunks(period, max_points)
    if expected is not None:
        assert spans == [(T0 + first, T0 + last) for first, last in expected]
    points = [t for first, last in spans for t in range(first, last + 1, step)]
    assert points == list(range(period.start, period.end, step))
    assert all((last - first) // step + 1 <= max_points for first, last in spans)
    assert all(later[0] - earlier[1] == step for earlier, later in itertools.pairwise(spans))


@pytest.mark.parametrize("seconds, step, value_at, hours", [
    (7200, 30, lambda t: 1, 2.0),  # 1 GPU for 2 h
    (7200, 30, lambda t: 2 if t < T0 + 1800 else 0, 1.0),  # 2 GPUs for 30 min
    (100, 30, lambda t: 36, 1.0),  # 36 cores for 100 s: the last sample counts 10 s, not 30 s
    (7200, 7200, lambda t: 3, 6.0),  # one step over the whole period
])
def test_left_riemann_sum(seconds, step, value_at, hours):
    period = Period(T0, T0 + seconds, step)
    series = collect([[answer("q", "f", "cpu", grid(period, value_at))]])
    assert integrate(series[("q", "f", "cpu")], period) == pytest.approx(hours)


def test_integration_is_the_same_in_chunks():
    period = Period(T0, T0 + 10 * 3600, 30)

    def value_at(t):  # changes every 1000 s
        return (t - T0) // 1000 % 3

    whole = collect([[answer("q", "f", "nvidia.com/gpu", grid(period, value_at))]])
    in_chunks = collect([[answer("q", "f", "nvidia.com/gpu", [(t, value_at(t)) for t in range(first, last + 1, 30)])]
                         for first, last in chunks(period, 7)])
    key = ("q", "f", "nvidia.com/gpu")
    assert list(in_chunks[key].times) == list(whole[key].times)
    assert integrate(in_chunks[key], period) == pytest.approx(integrate(whole[key], period))


def test_copies_of_a_series_are_merged_with_max():
    """Kueue's replicas or a restarted pod export the same gauge twice: max, never the sum."""
    period = Period(T0, T0 + 120, 30)
    series = collect([[answer("q", "f", "nvidia.com/gpu", [(T0, 1), (T0 + 30, 1), (T0 + 60, 0)], pod="old"),
                       answer("q", "f", "nvidia.com/gpu", [(T0 + 30, 1), (T0 + 60, 1), (T0 + 90, 0)], pod="new")]])
    samples = series[("q", "f", "nvidia.com/gpu")]
    assert list(samples.times) == [T0, T0 + 30, T0 + 60, T0 + 90]
    assert list(samples.values) == [1, 1, 1, 0]
    assert integrate(samples, period) == pytest.approx(90 / 3600)


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf"])
def test_a_value_that_is_not_a_finite_number_is_never_counted(value):
    """Not as zero, nor left out (which reads as zero too): prometheus_api.py refuses such an answer first."""
    with pytest.raises(ValueError, match="is not a finite number"):
        collect([[answer("q", "f", "cpu", [(T0, 1), (T0 + 30, value)])]])


def test_a_series_without_samples_is_no_data(flame):
    """Series that exist but hold no sample in the period would otherwise be a table of zeros."""
    period = Period(T0, T0 + 3600, 30)
    empty = [answer(group, "gh200", resource, []) for group in ("vision-lab", "nlp-lab")
             for resource in ("nvidia.com/gpu", "cpu", "memory")]
    assert collect([empty]) == {}
    with pytest.raises(NoData):
        usage_report(flame, period, collect([empty, []]), "http://prometheus:9090")


def test_chart_columns_are_the_means_of_the_grid():
    """bucket_means, without the whole grid in memory, is the mean of each run of the grid (0 where no sample)."""
    period = Period(T0, T0 + 1000 * 30 + 7, 30)  # 1001 points: the last run is short
    points = [(t, (t // 30) % 5) for t in range(T0, period.end, 30) if (t // 30) % 7]
    samples = collect([[answer("q", "f", "nvidia.com/gpu", points)]])[("q", "f", "nvidia.com/gpu")]
    grid = [0.0] * period.points
    for t, value in points:
        grid[(t - T0) // 30] = float(value)
    for size in (1, 7, 100, 1001, 5000):
        runs = [grid[i:i + size] for i in range(0, len(grid), size)]
        assert bucket_means(samples, period, size) == [sum(run) / len(run) for run in runs]


def test_samples_outside_the_period_do_not_count():
    period = Period(T0, T0 + 60, 30)
    series = collect([[answer("q", "f", "cpu", [(T0 - 30, 5), (T0, 1), (T0 + 30, 1), (T0 + 60, 5)])]])
    assert integrate(series[("q", "f", "cpu")], period) == pytest.approx(60 / 3600)


def test_the_query_merges_copies_and_asks_for_the_reported_resources(flame):
    assert usage_query(flame) == ('max by (cluster_queue, flavor, resource) '
                             '(kueue_cluster_queue_resource_usage{resource=~"nvidia\\\\.com/gpu|cpu|memory"})')


def test_usage_against_allocation(flame):
    """FLAME: vision-lab holds 1 GPU for 2 h, nlp-lab 2 GPUs (one borrowed) for 30 min, over a day."""
    period = Period(T0, T0 + 86400, 30)

    def vision(t):
        return 1 if t < T0 + 7200 else 0

    def nlp(t):
        return 2 if T0 + 3600 <= t < T0 + 5400 else 0

    series = collect([[answer("vision-lab", "gh200", "nvidia.com/gpu", grid(period, vision)),
                       answer("vision-lab", "gh200", "cpu", grid(period, lambda t: 8 * vision(t))),
                       answer("vision-lab", "gh200", "memory", grid(period, lambda t: 64 * GIB * vision(t))),
                       answer("nlp-lab", "gh200", "nvidia.com/gpu", grid(period, nlp)),
                       answer("nlp-lab", "gh200", "cpu", grid(period, lambda t: 36 * nlp(t))),
                       answer("nlp-lab", "gh200", "memory", grid(period, lambda t: 0))]])
    report = usage_report(flame, period, series, "http://prometheus")
    used = {(u.group, u.gpu_class, u.resource): (round(u.used, 6), round(u.allocated, 6), u.percent)
            for u in report.usage}
    assert used == {
        ("nlp-lab", "gh200", "gpus"): (1.0, 24.0, pytest.approx(100 / 24)),
        ("nlp-lab", "gh200", "cpu"): (36.0, 36 * 24.0, pytest.approx(100 / 24)),
        ("nlp-lab", "gh200", "memory"): (0.0, round(240e9 / GIB * 24, 6), 0.0),
        ("vision-lab", "gh200", "gpus"): (2.0, 24.0, pytest.approx(100 / 12)),
        ("vision-lab", "gh200", "cpu"): (16.0, 36 * 24.0, pytest.approx(100 * 16 / 864)),
        ("vision-lab", "gh200", "memory"): (128.0, round(240e9 / GIB * 24, 6),
                                            pytest.approx(100 * 128 / (240e9 / GIB * 24))),
    }
    assert [(group, gpu_class) for group, gpu_class, _ in report.rows()] == [("nlp-lab", "gh200"),
                                                                              ("vision-lab", "gh200")]
    assert report.capacity == {"gh200": 2}
    assert report.ignored == []
    assert sorted(report.gpus["gh200"]) == ["nlp-lab", "vision-lab"]


def test_series_the_inventory_does_not_name_are_set_aside(flame):
    period = Period(T0, T0 + 3600, 30)
    series = collect([[answer("vision-lab", "gh200", "nvidia.com/gpu", grid(period, lambda t: 1)),
                       answer("physics-lab", "gh200", "nvidia.com/gpu", grid(period, lambda t: 1)),
                       answer("physics-lab", "gh200", "cpu", grid(period, lambda t: 1)),
                       answer("vision-lab", "h100", "nvidia.com/gpu", grid(period, lambda t: 1))]])
    report = usage_report(flame, period, series, "http://prometheus")
    assert report.ignored == ["ClusterQueue 'physics-lab' on flavor 'gh200'",
                              "ClusterQueue 'vision-lab' on flavor 'h100'"]
    # A group without series is reported as unused, not left out: its allocation still counts.
    assert [(u.group, u.resource, u.used) for u in report.usage if u.group == "nlp-lab"] == [
        ("nlp-lab", "gpus", 0.0), ("nlp-lab", "cpu", 0.0), ("nlp-lab", "memory", 0.0)]


@pytest.mark.parametrize("results, message", [
    ([], "has no kueue_cluster_queue_resource_usage series from 2026-12-01T00:00:00Z to 2026-12-01T01:00:00Z; "
         "check that it scrapes Kueue's metrics endpoint"),
    ([[], []], "has no kueue_cluster_queue_resource_usage series"),
    ([[answer("other-queue", "other-flavor", "cpu", [(T0, 1)])]],
     "none of this inventory's ClusterQueues (nlp-lab, vision-lab) on its flavors (gh200)"),
])
def test_no_data_is_refused_not_reported_as_zeros(flame, results, message):
    period = Period(T0, T0 + 3600, 30)
    with pytest.raises(NoData) as refused:
        usage_report(flame, period, collect(results), "http://prometheus:9090")
    assert str(refused.value).startswith("Prometheus at http://prometheus:9090 ")
    assert message in str(refused.value)


def test_each_class_is_counted_in_its_unit():
    """examples/mixed-accelerators: a MIG flavor's slices are its GPU-hours, in its unit; the 0 quota of another
    class's accelerator on the flavor is no foreign series."""
    from generator.inventory import load_inventory
    from generator.report import output
    from tests.support import REPO

    mixed = load_inventory(REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml")
    assert "|habana\\\\.ai/gaudi|" in usage_query(mixed)
    period = Period(T0, T0 + 3600, 30)
    series = collect([[answer("nlp-lab", "a100-1g", "nvidia.com/mig-1g.10gb", grid(period, lambda t: 7)),
                       answer("nlp-lab", "a100-1g", "nvidia.com/gpu", grid(period, lambda t: 0)),
                       answer("nlp-lab", "gaudi3", "habana.ai/gaudi", grid(period, lambda t: 8))]])
    report = usage_report(mixed, period, series, "http://prometheus.test")
    used = {(u.group, u.gpu_class, u.resource): u.used for u in report.usage}
    assert used[("nlp-lab", "a100-1g", "gpus")] == pytest.approx(7)
    assert used[("nlp-lab", "gaudi3", "gpus")] == pytest.approx(8)
    assert report.ignored == []
    table = output.table(report)
    assert "GPU-h are hours of one" in table.splitlines()[2] and "1g.10gb slice of an A100" in table
    rows = output.csv_text(report).splitlines()
    assert rows[0].endswith(",gpu_unit")
    assert [row.rsplit(",", 1)[1] for row in rows[1:] if ",a100-1g," in row] == ["1g.10gb slice of an A100"]
