"""`gpugen report` against a stand-in Prometheus: a small HTTP server on 127.0.0.1, started and stopped here, that
answers the range queries with random well-formed and malformed bodies. Whatever it answers, the report exits 0
with the hours its samples make (a left Riemann sum computed here, apart from generator/report/usage.py), or exits 1
or 2 with exactly one line on stderr naming the culprit, writes nothing, and never shows a traceback nor a table
of zeros for no data. Most cases run in-process (click's CliRunner); a few run `python -m generator` for real,
under gpugen's memory bound.

CI runs GPUGEN_PROPERTY_EXAMPLES / 4 examples (default 75) with a fixed seed.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable
from contextlib import contextmanager
from datetime import datetime, UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from generator.report import prometheus_api
from generator.report.usage import MAX_ANSWER_BYTES
from generator.cli import main
from tests.support import INVENTORY, REPO
from simulation.waiting import ceiling

T0 = int(datetime(2026, 11, 30, tzinfo=UTC).timestamp())
EXAMPLES = max(20, int(os.environ.get("GPUGEN_PROPERTY_EXAMPLES", "300")) // 4)
# FLAME: both groups hold gh200 (flavor gh200); physics-lab is a queue the inventory does not name.
GROUPS = ("vision-lab", "nlp-lab")
QUEUES = (*GROUPS, "physics-lab")
RESOURCES = {"gpus": "nvidia.com/gpu", "cpu": "cpu", "memory": "memory"}
COLUMNS = {"gpus": "gpu_hours", "cpu": "cpu_hours", "memory": "memory_gib_hours"}
UNIT = {"gpus": 1, "cpu": 1, "memory": 2**30}

Answer = tuple[int, str, bytes]  # HTTP status, Content-Type, body
Respond = Callable[[dict[str, str]], Answer]


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        params = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
        status, content_type, body = self.server.respond(params)
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading an answer too large: as it should

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def stand_in():
    """A stand-in Prometheus on 127.0.0.1: (its URL, a function setting how it answers). Stopped after the module."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.respond = lambda params: (503, "text/plain", b"not set")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def answer_with(respond: Respond) -> None:
        server.respond = respond

    yield f"http://127.0.0.1:{server.server_address[1]}", answer_with
    server.shutdown()
    server.server_close()
    thread.join(10)


# ------------------------------------------------------------------ well-formed answers and the hours they make

Series = tuple[dict[str, str], dict[int, str]]  # labels, {time: value}


def matrix(series: list[Series], start: int, end: int) -> bytes:
    """A success answer holding each series' samples from start to end, as Prometheus writes them."""
    result = [{"metric": labels, "values": [[t, value] for t, value in sorted(samples.items()) if start <= t <= end]}
              for labels, samples in series]
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode()


def serving(series: list[Series]) -> Respond:
    def respond(params: dict[str, str]) -> Answer:
        return 200, "application/json", matrix(series, int(params["start"]), int(params["end"]))
    return respond


def expected_hours(series: list[Series], start: int, end: int, step: int) -> dict[tuple[str, str], float] | None:
    """(group, inventory field) -> hours over [start, end): copies merged with max, each sample held one step (the
    last cut at end). None when no series of the inventory's queues and flavor has a sample: no data."""
    merged: dict[tuple[str, str, str], dict[int, float]] = {}
    for labels, samples in series:
        at = merged.setdefault((labels["cluster_queue"], labels["flavor"], labels["resource"]), {})
        for t, value in samples.items():
            at[t] = max(float(value), at.get(t, float(value)))
    hours = {}
    seen = False
    for group in GROUPS:
        for field, resource in RESOURCES.items():
            samples = merged.get((group, "gh200", resource), {})
            seen = seen or bool(samples)
            hours[(group, field)] = sum(v * min(step, end - t) for t, v in samples.items()) / 3600 / UNIT[field]
    return hours if seen else None


VALUES = st.one_of(st.integers(0, 8).map(str), st.sampled_from(["0.5", "1.25", "36", "257698037760", "1e3", ".5"]))


@st.composite
def usage(draw, start: int, end: int, step: int) -> list[Series]:
    """Random series of Kueue's gauge: the inventory's queues and a foreign one, FLAME's flavor and another, copies
    of one series (Kueue's replicas), samples on some grid points."""
    grid = list(range(start, end, step))
    series = []
    for _ in range(draw(st.integers(0, 6))):
        labels = {"cluster_queue": draw(st.sampled_from(QUEUES)),
                  "flavor": draw(st.sampled_from(["gh200", "gh200", "gh200", "h100"])),
                  "resource": draw(st.sampled_from(list(RESOURCES.values())))}
        if draw(st.booleans()):
            labels["pod"] = draw(st.sampled_from(["kueue-a", "kueue-b"]))
        times = draw(st.lists(st.sampled_from(grid), max_size=len(grid), unique=True))
        series.append((labels, {t: draw(VALUES) for t in times}))
    return series


# ------------------------------------------------------------------ malformed answers

NOT_A_VALUE = ["NaN", "+Inf", "-Inf", "Inf", "nan", "", "abc", "1_000", " 1", "0x10", "-1", "1e400", None, 1, 1.5,
               True, [], {}]
NOT_A_TIME = ["2026-11-30", None, True, [], {}, 0.5, -1, 10**30, 1e400]


def corrupt(kind: str, draw, start: int, end: int) -> Answer:
    """An answer that is not Kueue's usage as Prometheus gives it, in one of many ways."""
    good = {"metric": {"cluster_queue": "vision-lab", "flavor": "gh200", "resource": "nvidia.com/gpu"},
            "values": [[start, "1"]]}
    def ok(data) -> Answer:
        return 200, "application/json", json.dumps({"status": "success", "data": data}).encode()

    def series(*items) -> Answer:
        return ok({"resultType": "matrix", "result": [good, *items]})
    if kind == "value":
        return series({**good, "values": [[start, draw(st.sampled_from(NOT_A_VALUE))]]})
    if kind == "time":
        return series({**good, "values": [[draw(st.sampled_from(NOT_A_TIME)), "1"]]})
    if kind == "off-grid":
        return series({**good, "values": [[draw(st.sampled_from([start + 1, start - 60, end + 60])), "1"]]})
    if kind == "sample-shape":
        return series({**good, "values": [draw(st.sampled_from([[start], [start, "1", "2"], {}, "1", None, []]))]})
    if kind == "series-field":
        field = draw(st.sampled_from(["metric", "values"]))
        broken = dict(good)
        if draw(st.booleans()):
            del broken[field]
        else:
            broken[field] = draw(st.sampled_from([None, "x", 1, []] if field == "metric" else [None, "x", 1, {}]))
        return series(broken)
    if kind == "label":
        return series({**good, "metric": {**good["metric"], "flavor": draw(st.sampled_from([None, 1, [], True]))}})
    if kind == "series":
        return series(draw(st.sampled_from([None, 1, "x", []])))
    if kind == "data":
        return ok(draw(st.sampled_from([{"resultType": "vector", "result": []}, {"resultType": "matrix"},
                                        {"resultType": "matrix", "result": None}, {"result": []}])))
    if kind == "envelope":
        return 200, "application/json", json.dumps(draw(st.sampled_from([
            {"status": "success"}, {"status": "success", "data": None}, {"status": "success", "data": []},
            {"status": "error", "errorType": "bad_data", "error": "line\none"}, {"data": {}}, [], None, "x", 1,
        ]))).encode()
    if kind == "not-json":
        return 200, draw(st.sampled_from(["application/json", "text/html"])), draw(st.sampled_from([
            b"", b"<html>Grafana</html>", b'{"status": "success", "data": {', b"[" * 100_000, b"\xff\xfe",
            b'{"status": "success", "data": {"resultType": "matrix", "result": [' + b"1" * 5000 + b"]}}"]))
    if kind == "http":
        status = draw(st.sampled_from([400, 401, 403, 404, 422, 500, 502, 503]))
        return status, "application/json", draw(st.sampled_from([
            b"", b"not json\nsecond line", json.dumps({"status": "error", "error": "a\nb\r\nc"}).encode(),
            b"[" * 100_000, json.dumps({"error": {"nested": ["x"] * 10}}).encode()]))
    raise AssertionError(kind)


CORRUPTIONS = ["value", "time", "off-grid", "sample-shape", "series-field", "label", "series", "data", "envelope",
               "not-json", "http"]


# ------------------------------------------------------------------ running the report


def window(hours: int) -> tuple[str, str]:
    def show(seconds: int) -> str:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return show(T0), show(T0 + hours * 3600)


def run(url: str, out: Path, *args: str):
    return CliRunner().invoke(main, ["report", "--inventory", str(INVENTORY), "--prometheus", url, "--format", "csv",
                                     "--output", str(out), *args])


def one_line_refusal(result, code: int, *phrases: str) -> None:
    """Exit `code`, exactly one line on stderr naming the culprit, nothing on stdout, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("gpugen report: ") and lines[0].endswith("nothing written."), lines[0]
    assert "Traceback" not in result.stderr and result.stdout == ""
    for phrase in phrases:
        assert phrase in lines[0], lines[0]


def hours_of(csv_text: str) -> dict[tuple[str, str], float]:
    import csv
    import io
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert [(row["group"], row["class"]) for row in rows] == [("nlp-lab", "gh200"), ("vision-lab", "gh200")]
    return {(row["group"], field): float(row[column]) for row in rows for field, column in COLUMNS.items()}


@contextmanager
def answers_of_at_most(size: int | None):
    """Answers over `size` bytes are too large (the chunks then asked again in halves): None, the real bound."""
    if size is None:
        yield
        return
    with mock.patch.object(prometheus_api, "MAX_ANSWER_BYTES", size):
        yield


_EXAMPLE = itertools.count()


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_whatever_prometheus_answers_the_report_is_right_or_one_line(stand_in, tmp_path, data):
    url, answer_with = stand_in
    hours, step = data.draw(st.integers(1, 3)), data.draw(st.sampled_from([30, 60, 300]))
    start, end = T0, T0 + hours * 3600
    series = data.draw(usage(start, end, step))
    kind = data.draw(st.sampled_from(["well-formed"] * 8 + CORRUPTIONS))
    out = tmp_path / f"report-{next(_EXAMPLE)}.csv"  # tmp_path is one for all examples
    # Small answers make the client ask again in halves: the hours must not change.
    limit = data.draw(st.sampled_from([None, None, 4096, 20_000]))
    if kind == "well-formed":
        answer_with(serving(series))
    else:
        broken = corrupt(kind, data.draw, start, end - step)
        answer_with(lambda params: broken)
    with answers_of_at_most(limit):
        result = run(url, out, "--from", window(hours)[0], "--to", window(hours)[1], "--step", f"{step}s")
    expected = expected_hours(series, start, end, step)
    if kind != "well-formed":
        event(f"malformed: {kind}")
        one_line_refusal(result, 1, url)
        assert not out.exists()
    elif expected is None:
        event("well-formed, no data")
        one_line_refusal(result, 1, f"Prometheus at {url} has ", " kueue_cluster_queue_resource_usage series from ")
        assert not out.exists()
    elif limit and result.exit_code == 1 and "more than" in result.stderr:
        event("well-formed, one point per series still too large")  # many series under a tiny bound
        one_line_refusal(result, 1, url, "of one point per series")
    else:
        event("well-formed")
        assert result.exit_code == 0, result.stderr
        assert "Traceback" not in result.stderr
        got = hours_of(out.read_text())
        assert got == {key: pytest.approx(value, abs=1e-4) for key, value in expected.items()}


# ------------------------------------------------------------------ named cases


def test_nan_samples_are_refused_not_a_table_of_zeros(stand_in, tmp_path):
    url, answer_with = stand_in
    answer_with(serving([({"cluster_queue": group, "flavor": "gh200", "resource": resource},
                          dict.fromkeys(range(T0, T0 + 3600, 30), "NaN"))
                         for group in GROUPS for resource in RESOURCES.values()]))
    result = run(url, tmp_path / "r.csv", "--from", *window(1)[:1], "--to", window(1)[1])
    one_line_refusal(result, 1, f"Prometheus at {url} answered a range query whose series ",
                     "has a sample value 'NaN', where Kueue's usage is a finite number")
    assert not (tmp_path / "r.csv").exists()


def test_series_without_samples_are_no_data_not_zeros(stand_in, tmp_path):
    url, answer_with = stand_in
    answer_with(serving([({"cluster_queue": group, "flavor": "gh200", "resource": "cpu"}, {}) for group in GROUPS]))
    result = run(url, tmp_path / "r.csv", "--from", window(1)[0], "--to", window(1)[1])
    one_line_refusal(result, 1, f"Prometheus at {url} has no kueue_cluster_queue_resource_usage series from")


def test_an_answer_over_the_bound_is_the_servers_too_large_answer(stand_in, tmp_path):
    """Read up to the bound, never more; asked again in halves down to one point, then refused as the answer's
    fault (not the inventory's, not the options')."""
    url, answer_with = stand_in
    asked: list[tuple[int, int]] = []

    def huge(params: dict[str, str]) -> Answer:
        asked.append((int(params["start"]), int(params["end"])))
        return 200, "application/json", b'{"status": "success", "data": {"resultType": "matrix", "result": [' + \
            b"[]," * (MAX_ANSWER_BYTES // 3) + b"[]]}}"
    answer_with(huge)
    result = run(url, tmp_path / "r.csv", "--from", window(1)[0], "--to", window(1)[1], "--step", "60s")
    one_line_refusal(result, 1, f"Prometheus at {url} answered a range query of one point per series with more "
                                "than 8 MiB, the most gpugen reads of an answer")
    assert [(end - start) // 60 + 1 for start, end in asked] == [60, 30, 15, 7, 3, 1]
    assert "inventory" not in result.stderr and "gpu_classes.yaml" not in result.stderr


def test_the_samples_of_all_answers_are_bounded(stand_in, tmp_path):
    url, answer_with = stand_in
    answer_with(serving([({"cluster_queue": "vision-lab", "flavor": "gh200", "resource": "cpu"},
                          dict.fromkeys(range(T0, T0 + 3600, 30), "1"))]))
    with mock.patch.object(prometheus_api, "MAX_SAMPLES", 100):
        result = run(url, tmp_path / "r.csv", "--from", window(1)[0], "--to", window(1)[1])
    one_line_refusal(result, 1, f"Prometheus at {url} answered more than 100 samples for the period, the most a "
                                "report holds (1 series in the last answer); ask for a larger --step")


@pytest.mark.parametrize("args, phrase", [
    (["--from", "99999999999d"], "--from: '99999999999d' before "),
    (["--from", "0001-01-01", "--step", "1s"], "--from: '0001-01-01' is before 1970-01-01T00:00:00Z"),
    (["--from", "30d", "--step", "1s"], "--from, --to, --step: 30d every 1s is 2,592,000 points per series"),
    (["--step", "0s"], "--step: must be at least 1s"),
    (["--format", "xlsx"], "Invalid value for '--format'"),
    (["--bogus"], "No such option"),
])
def test_bad_options_are_one_line_before_any_request(stand_in, tmp_path, args, phrase):
    url, answer_with = stand_in
    asked = []
    answer_with(lambda params: asked.append(params) or (503, "text/plain", b""))
    result = run(url, tmp_path / "r.csv", *args)
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("gpugen report: ") and phrase in line, line
    assert "gpu_classes.yaml" not in line  # the options are at fault, not the inventory
    assert asked == []


@contextmanager
def raw_server(reply: bytes):
    """A TCP server on 127.0.0.1 that answers any request with `reply` (b"": closes at once), not HTTP."""
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def serve():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                connection.settimeout(2)
                try:
                    connection.recv(65536)
                    connection.sendall(reply)
                except OSError:
                    pass
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@pytest.mark.parametrize("reply", [
    b"", b"garbage\r\nmore garbage\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"status\"",
    b"HTTP/1.1 200 OK\r\n" + b"X: " + b"y" * 70_000 + b"\r\n\r\n", b"HTTP/1.1 999 \x00\x01\r\n\r\n",
    b"HTTP/1.1 500 Line one\r\nContent-Length: 11\r\n\r\nline\ntwo\r\n"])
def test_http_client_errors_are_one_line(tmp_path, reply):
    with raw_server(reply) as url:
        result = run(url, tmp_path / "r.csv", "--from", window(1)[0], "--to", window(1)[1])
    one_line_refusal(result, 1, url)


# ------------------------------------------------------------------ the installed entry point, for real


def entry_point(url: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "generator", "report", "--inventory", str(INVENTORY),
                           "--prometheus", url, "--format", "csv", "--output", str(out), *args],
                          cwd=REPO, capture_output=True, text=True, timeout=ceiling(30))


def test_the_entry_point_reports_hours(stand_in, tmp_path):
    url, answer_with = stand_in
    series = [({"cluster_queue": "vision-lab", "flavor": "gh200", "resource": "nvidia.com/gpu"},
               dict.fromkeys(range(T0, T0 + 1800, 30), "1")),
              ({"cluster_queue": "nlp-lab", "flavor": "gh200", "resource": "cpu"},
               dict.fromkeys(range(T0, T0 + 7200, 30), "36"))]
    answer_with(serving(series))
    done = entry_point(url, tmp_path / "r.csv", "--from", window(2)[0], "--to", window(2)[1])
    assert done.returncode == 0, done.stderr
    got = hours_of((tmp_path / "r.csv").read_text())
    assert got == {key: pytest.approx(value, abs=1e-4)
                   for key, value in expected_hours(series, T0, T0 + 7200, 30).items()}
    assert got[("vision-lab", "gpus")] == pytest.approx(0.5) and got[("nlp-lab", "cpu")] == pytest.approx(72)


@pytest.mark.parametrize("body, phrase", [
    # The shapes JSON costs the most memory for, at the bound: refused for what they are, within the memory bound.
    (b'{"status": "success", "data": {"resultType": "matrix", "result": [' + b"[]," * (MAX_ANSWER_BYTES // 3 - 30)
     + b"[]]}}", "whose series 1 is list, not an object"),
    (b'{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": ['
     + b'"ab",' * (MAX_ANSWER_BYTES // 5 - 30) + b'"a"]}]}}', """has a sample '"ab"', not [time, "value"]"""),
    (b"[" * 200_000, "did not answer with Prometheus's API"),
])
def test_the_entry_point_refuses_on_one_line_within_its_memory_bound(stand_in, tmp_path, body, phrase):
    url, answer_with = stand_in
    assert len(body) <= MAX_ANSWER_BYTES
    answer_with(lambda params: (200, "application/json", body))
    done = entry_point(url, tmp_path / "r.csv", "--from", window(1)[0], "--to", window(1)[1])
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("gpugen report: ") and url in line and phrase in line, line
    assert not (tmp_path / "r.csv").exists()


def test_the_entry_point_refuses_a_period_too_far_back_on_one_line(stand_in, tmp_path):
    url, _ = stand_in
    done = entry_point(url, tmp_path / "r.csv", "--from", "99999999999999999999d")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith("gpugen report: --from: ") and "before 1970-01-01T00:00:00Z" in line, line
