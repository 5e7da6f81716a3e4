"""`gpugen report` end to end: a real Prometheus (promtool-backfilled Kueue usage on FLAME, tests/support/
report_example.py) answers the range queries; GPU-hours per group within one step per job, the CSV's columns, the
PNG and SVG charts, and every refusal (unreachable, HTTP errors, API errors, no data, bad options) one line with
the right exit code and no traceback."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
from datetime import datetime, UTC
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from generator.report.usage import parse_period
from generator.cli import main
from generator.errors import PrometheusUnavailable
from generator.inventory import load_inventory
from generator.report.prometheus_api import Prometheus
from tests.support import INVENTORY, REPO
from tests.support.report_example import FOREIGN_QUEUE, JOBS, T0, expected_hours, openmetrics, serving, window
from simulation.waiting import ceiling

CSV_HEADER = ["period_start", "period_end", "step_seconds", "group", "class",
              "gpu_hours", "allocated_gpu_hours", "gpu_percent_of_allocation",
              "cpu_hours", "allocated_cpu_hours", "cpu_percent_of_allocation",
              "memory_gib_hours", "allocated_memory_gib_hours", "memory_percent_of_allocation", "gpu_unit"]
FIELD_COLUMN = {"gpus": "gpu_hours", "cpu": "cpu_hours", "memory": "memory_gib_hours"}


def report(*args: str):
    return CliRunner().invoke(main, ["report", "--inventory", str(INVENTORY), *args])


def refused(result, code: int, *phrases: str) -> None:
    """One `gpugen report:` line on stderr, nothing on stdout, no traceback."""
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("gpugen report: "), result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


def tolerance(group: str, field: str, step: int) -> float:
    """One step of each of the group's jobs (memory in GiB)."""
    unit = 2**30 if field == "memory" else 1
    return sum(getattr(job, field) for job in JOBS if job.group == group) * step / 3600 / unit


# ------------------------------------------------------------------ a real Prometheus


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    with serving(openmetrics(load_inventory(INVENTORY)), tmp_path_factory.mktemp("prometheus")) as url:
        yield url


def rows_of(text: str) -> dict[str, dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == CSV_HEADER
    return {row["group"]: row for row in reader}


@pytest.mark.tools
@pytest.mark.parametrize("step", [30, 1])  # 1 s: 43,200 points, five range queries
def test_gpu_hours_per_group_within_one_step_per_job(prometheus, step):
    start, end = window()
    result = report("--prometheus", prometheus, "--from", start, "--to", end, "--step", f"{step}s", "--format", "csv")
    assert result.exit_code == 0, result.stderr
    rows = rows_of(result.stdout)
    assert sorted(rows) == ["nlp-lab", "vision-lab"]
    for group, row in rows.items():
        assert (row["period_start"], row["period_end"], row["step_seconds"], row["class"]) == (start, end, str(step),
                                                                                              "gh200")
        for field, column in FIELD_COLUMN.items():
            expected = pytest.approx(expected_hours(group, field), abs=tolerance(group, field, step))
            assert float(row[column]) == expected, (group, field)
        # FLAME allocates each group 1 GPU, 36 cores and 240G on gh200; the window is 12 h.
        assert float(row["allocated_gpu_hours"]) == 12.0
        assert float(row["allocated_cpu_hours"]) == 36 * 12.0
        assert float(row["allocated_memory_gib_hours"]) == pytest.approx(240e9 / 2**30 * 12, abs=1e-4)
        assert float(row["gpu_percent_of_allocation"]) == pytest.approx(100 * float(row["gpu_hours"]) / 12, abs=0.01)
    # The replaced Kueue pod's copies overlap its successor's for five minutes: merged with max, not summed.
    assert float(rows["nlp-lab"]["gpu_hours"]) < expected_hours("nlp-lab", "gpus") + tolerance("nlp-lab", "gpus", step)
    assert f"warning: not counted (not in {INVENTORY}): ClusterQueue '{FOREIGN_QUEUE}' on flavor 'gh200'\n" \
        in result.stderr


@pytest.mark.tools
def test_the_table(prometheus):
    start, end = window()
    result = report("--prometheus", prometheus, "--from", start, "--to", end)
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (f"GPU-hours from {start} to {end} (12.0 h, step 30s), admitted quota per Kueue at "
                        f"{prometheus}")
    assert lines[2].split() == ["group", "class", "GPU-h", "allocation", "GPU-h", "%", "of", "allocation", "CPU-h",
                                "memory", "GiB-h"]
    by_group = {line.split()[0]: line.split() for line in lines[3:]}
    assert by_group["vision-lab"][:5] == ["vision-lab", "gh200", "4.25", "12.00", "35.4"]  # 4.25 GPU-h within 30 s
    assert by_group["nlp-lab"][:5] == ["nlp-lab", "gh200", "5.00", "12.00", "41.7"]


@pytest.mark.tools
def test_the_chart_png_and_svg(prometheus, tmp_path):
    start, end = window()
    png, svg, out = tmp_path / "usage.png", tmp_path / "usage.svg", tmp_path / "usage.csv"
    # The installed entry point, under gpugen's memory bound, matplotlib included.
    done = subprocess.run([sys.executable, "-m", "generator", "report", "--inventory", str(INVENTORY),
                           "--prometheus", prometheus, "--from", start, "--to", end, "--chart", str(png),
                           "--format", "csv", "--output", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=ceiling(30))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert f"wrote {png}" in done.stderr and f"wrote {out}" in done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(rows_of(out.read_text())) == ["nlp-lab", "vision-lab"]
    result = report("--prometheus", prometheus, "--from", start, "--to", end, "--chart", str(svg))
    assert result.exit_code == 0, result.stderr
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    for label in ("gh200", "vision-lab", "nlp-lab", "2 GPUs in the class"):
        assert label in text, label
    again = tmp_path / "again.svg"
    assert report("--prometheus", prometheus, "--from", start, "--to", end, "--chart", str(again)).exit_code == 0
    assert again.read_bytes() == svg.read_bytes()  # same report, same bytes


@pytest.mark.tools
def test_an_empty_window_is_refused_and_nothing_written(prometheus, tmp_path):
    out, chart = tmp_path / "usage.csv", tmp_path / "usage.png"
    result = report("--prometheus", prometheus, "--from", "2026-11-20", "--to", "2026-11-21", "--format", "csv",
                    "--output", str(out), "--chart", str(chart))
    refused(result, 1, f"gpugen report: Prometheus at {prometheus} has no kueue_cluster_queue_resource_usage series "
                       "from 2026-11-20T00:00:00Z to 2026-11-21T00:00:00Z; check that it scrapes Kueue's metrics",
            "nothing written")
    assert not out.exists() and not chart.exists()


@pytest.mark.tools
def test_progress_on_request(prometheus):
    start, end = window()
    result = report("--prometheus", prometheus, "--from", start, "--to", end, "--progress")
    assert result.exit_code == 0, result.stderr
    assert "Querying Prometheus" in result.stderr
    assert "Querying Prometheus" not in report("--prometheus", prometheus, "--from", start, "--to", end).stderr


@pytest.mark.tools
def test_a_query_prometheus_refuses_is_named(prometheus):
    period = parse_period("1h", None, "30s", datetime.fromtimestamp(T0 + 3600, UTC))
    with pytest.raises(PrometheusUnavailable) as error:
        list(Prometheus(prometheus).query_range("max by (", period))
    assert str(error.value).startswith(f"Prometheus at {prometheus} answered HTTP 400 Bad Request: ")
    assert str(error.value).endswith("check --from, --to and --step")


# ------------------------------------------------------------------ refusals without a Prometheus


def free_url() -> str:
    import socket
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"  # closed again: nothing listens there


def test_an_unreachable_prometheus_is_refused():
    url = free_url()
    refused(report("--prometheus", url), 1, f"gpugen report: cannot reach Prometheus at {url}: Connection refused; "
                                           "check --prometheus and that Prometheus is running", "nothing written")


class _Stub(BaseHTTPRequestHandler):
    answers: dict[str, tuple[int, str, str]] = {}

    def do_GET(self):
        status, content_type, body = self.answers[self.server.name]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture()
def stub():
    """A server answering every request with one canned answer; its URL."""
    servers = []

    def serve(status: int, content_type: str, body: str) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
        server.name = f"stub{len(servers)}"
        _Stub.answers[server.name] = (status, content_type, body)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


ERROR = json.dumps({"status": "error", "errorType": "execution", "error": "query processing would load too many "
                    "samples into memory in query execution"})


@pytest.mark.parametrize("status, content_type, body, phrases", [
    (503, "text/html", "<html>Service Unavailable</html>",
     ["answered HTTP 503 Service Unavailable; check Prometheus's health and logs"]),
    (422, "application/json", ERROR, ["answered HTTP 422 Unprocessable Entity: query processing would load too many "
                                      "samples into memory in query execution; check --from, --to and --step"]),
    (404, "text/plain", "404 page not found", ["answered HTTP 404 Not Found; check that --prometheus is Prometheus's "
                                               "base URL (without /api/v1)"]),
    (200, "application/json", ERROR, ["refused the query: execution: query processing would load too many"]),
    (200, "text/html", "<html>Grafana</html>", ["did not answer with Prometheus's API (JSON with a status); is "
                                                "--prometheus a Prometheus server?"]),
    (200, "application/json", json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}),
     ["answered a range query without a matrix"]),
])
def test_prometheus_errors_are_refused(stub, status, content_type, body, phrases):
    url = stub(status, content_type, body)
    refused(report("--prometheus", url, "--from", "1h"), 1, "gpugen report: ", url, *phrases, "nothing written")


def test_no_series_at_all_is_refused(stub, tmp_path):
    url = stub(200, "application/json", json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                                                 "result": []}}))
    refused(report("--prometheus", url, "--from", "1h", "--chart", str(tmp_path / "c.png")), 1,
            f"gpugen report: Prometheus at {url} has no kueue_cluster_queue_resource_usage series from ")
    assert not (tmp_path / "c.png").exists()


@pytest.mark.parametrize("args, phrase", [
    (["--prometheus", "localhost:9090"], "Invalid value for '--prometheus': 'localhost:9090' is not an http(s)://"),
    (["--prometheus", "http://x", "--step", "0s"], "--step: must be at least 1s"),
    (["--prometheus", "http://x", "--from", "last week"], "--from: 'last week' is neither an ISO 8601 time"),
    (["--prometheus", "http://x", "--from", "2026-12-02", "--to", "2026-12-01"], "must be before --to"),
    (["--prometheus", "http://x", "--format", "xlsx"], "Invalid value for '--format'"),
    (["--from", "1d"], "Missing option '--prometheus'"),
    (["--prometheus", "http://127.0.0.1:99999"], "'http://127.0.0.1:99999' is not an http(s):// base URL"),
    (["--prometheus", "http://" + "a" * 64 + ".example.org"], "is not an http(s):// base URL"),
    (["--prometheus", "http://user:secret@127.0.0.1:9090"], "'http://127.0.0.1:9090' with credentials"),
    (["--prometheus", "http://x\n"], "is not an http(s):// base URL"),
])
def test_bad_options_exit_2(args, phrase):
    result = report(*args)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()  # one line naming the option, not click's usage block
    assert line.startswith("gpugen report: ") and phrase in line, result.stderr
    assert "secret" not in line


def test_a_chart_is_png_or_svg_before_any_query(tmp_path):
    result = report("--prometheus", free_url(), "--chart", str(tmp_path / "usage.jpg"))
    refused(result, 2, f"gpugen report: {tmp_path / 'usage.jpg'}: a chart is .png or .svg, chosen by the file's "
                       "suffix; nothing written")


@pytest.mark.parametrize("args, message", [
    (["--output", str(INVENTORY)], f"{INVENTORY}: would replace the input {INVENTORY}: give an output elsewhere"),
    (["--output", "{tmp}/missing/usage.csv"], "{tmp}/missing/usage.csv: no such directory"),
    (["--output", "{tmp}/usage.svg", "--chart", "{tmp}/usage.svg"], "{tmp}/usage.svg: given as two outputs"),
])
def test_outputs_are_checked_before_any_query(tmp_path, args, message):
    """Prometheus is not even asked (nothing listens at the URL): the refusal names the output."""
    result = report("--prometheus", free_url(), *[arg.format(tmp=tmp_path) for arg in args])
    refused(result, 2, f"gpugen report: {message.format(tmp=tmp_path)}")
    assert list(tmp_path.iterdir()) == []


def test_an_invalid_inventory_exits_2(tmp_path):
    broken = tmp_path / "gpu_classes.yaml"
    broken.write_text(INVENTORY.read_text().replace("gpus: 1\n        cpu: 36", "gpus: -1\n        cpu: 36", 1))
    result = CliRunner().invoke(main, ["report", "--inventory", str(broken), "--prometheus", free_url()])
    assert result.exit_code == 2, result.output
    assert "problem(s); nothing reported." in result.stderr


def test_help_names_every_option():
    result = CliRunner().invoke(main, ["report", "--help"])
    for option in ("--prometheus", "--from", "--to", "--step", "--format", "--output", "--chart", "--inventory",
                   "--progress"):
        assert option in result.output
    assert "not the utilisation" in result.output
    # The bounds, as README states them.
    text = " ".join(result.output.split())
    assert "at most 1,100,000 steps per series (381 days at 30s)" in text and "at most 8 MiB" in text
    assert "10,000,000 samples in all" in text


def test_out_of_memory_in_a_report_blames_no_inventory(monkeypatch, capsys):
    """The report's bounds keep it within gpugen's memory bound; should it still run out, the one line says so for
    the answers of Prometheus, not for the inventory (whose message renders use)."""
    from generator import cli

    def exhausted() -> None:
        cli._RUN["command"] = "report"
        raise MemoryError
    monkeypatch.setattr(cli, "main", exhausted)
    monkeypatch.setitem(cli._RUN, "command", "")
    monkeypatch.setenv("GPUGEN_MEMORY_LIMIT_MB", "0")
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line == ("gpugen report: the answers of Prometheus need more than 0 MB of memory (GPUGEN_MEMORY_LIMIT_MB); "
                    "ask for a larger --step or a shorter period; nothing written.")
