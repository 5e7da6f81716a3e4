"""The Prometheus HTTP API, as much as `gpugen report` needs: a range query split into chunks Prometheus accepts,
with a timeout per request and a progress callback. Every failure is a PrometheusUnavailable naming the URL and
what to check, on one line, never a traceback. urllib only: a report needs no HTTP library.

Each answer is read as a schema before anything of it counts: a matrix of series, each with its labels (strings)
and its samples [time, "value"], every time on the query's grid within the chunk asked for, every value a decimal
number from 0 to MAX_USAGE. An answer is read up to MAX_ANSWER_BYTES: a chunk whose answer is larger is asked again
in halves (many series), down to one point per series; all answers together hold at most MAX_SAMPLES samples.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator

from generator.report.usage import MAX_ANSWER_BYTES, MAX_POINTS, MAX_SAMPLES, MAX_USAGE, Period, chunks, iso, shown
from generator.errors import PrometheusUnavailable

REQUEST_TIMEOUT = 60.0  # seconds per request; also sent as the query's own timeout, so Prometheus gives up too
_MESSAGE_LIMIT = 300  # characters of an error body quoted in a message
_ERROR_BODY_BYTES = 64 * 2**10  # of an HTTP error's body, read for its message
# A sample's value as Prometheus writes it (Go's strconv.FormatFloat); NaN and infinities are named apart.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# What to check after an HTTP status, in the user's terms.
_HINTS = {
    400: "check --from, --to and --step",
    401: "the server asks for credentials; give a URL gpugen can read without them (e.g. through kubectl port-forward)",
    403: "the server asks for credentials; give a URL gpugen can read without them (e.g. through kubectl port-forward)",
    404: "check that --prometheus is Prometheus's base URL (without /api/v1)",
    422: "check --from, --to and --step",
}


def check_url(url: str) -> str:
    """The base URL without a trailing slash; ValueError unless it is http(s)://HOST[:PORT][/PATH], its port from 1
    to 65535, without credentials (they would be printed in every message)."""
    problem = f"{shown(url, 80)} is not an http(s):// base URL of Prometheus (e.g. http://127.0.0.1:9090)"
    if any(char.isspace() or not char.isprintable() for char in url):
        raise ValueError(problem)
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
        host = parts.hostname
        if host:
            host.encode("idna")
    except ValueError:  # a port out of range, an IPv6 literal unclosed, a host name IDNA refuses
        raise ValueError(problem) from None
    if parts.scheme not in ("http", "https") or not host or parts.query or parts.fragment or port == 0:
        raise ValueError(problem)
    if parts.username is not None or parts.password is not None:
        without = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        raise ValueError(f"{shown(without, 80)} with credentials: give the URL without them; gpugen reads Prometheus "
                         "without credentials (e.g. through kubectl port-forward)")
    return url.rstrip("/")


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."


class _TooLarge(Exception):
    """An answer over MAX_ANSWER_BYTES (internal: the chunk is asked again in halves)."""


def matrix_problem(data: dict, first: int, last: int, step: int) -> str | None:
    """What is wrong with a range query's `data` for the grid first, first + step, ..., last, or None: Kueue's
    usage as Prometheus answers it is a matrix of series, each with string labels and [time, "value"] samples."""
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        return "without a matrix"
    for number, series in enumerate(data["result"], 1):
        if not isinstance(series, dict):
            return f"whose series {number} is {type(series).__name__}, not an object"
        metric = series.get("metric")
        if not isinstance(metric, dict):
            return f"whose series {number} has {'no' if metric is None else 'a ' + type(metric).__name__} metric"
        for label, value in metric.items():
            if not isinstance(value, str):
                return f"whose series {number} has label {shown(label)} = {shown(json.dumps(value))}, not a string"
        values = series.get("values")
        if not isinstance(values, list):
            return (f"whose series {_labels(metric)} has {'no' if values is None else 'a ' + type(values).__name__} "
                    "list of values")
        problem = _samples_problem(values, first, last, step)
        if problem:
            return f"whose series {_labels(metric)} has {problem}"
    return None


def _samples_problem(values: list, first: int, last: int, step: int) -> str | None:
    decimal = _DECIMAL.fullmatch
    for sample in values:  # the common case checked fast (JSON gives exactly these types), any doubt told apart
        if type(sample) is not list or len(sample) != 2:
            return f"a sample {shown(json.dumps(sample))}, not [time, \"value\"]"
        at, text = sample
        if (type(at) is not int and type(at) is not float) or not first <= at <= last or (at - first) % step \
                or type(text) is not str or not decimal(text) or not 0 <= float(text) <= MAX_USAGE:
            return _sample_problem(at, text, first, last, step)
    return None


def _sample_problem(at: object, text: object, first: int, last: int, step: int) -> str:
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at):
        return f"a sample time {shown(json.dumps(at))}, not a number of seconds"
    if not first <= at <= last or (at - first) % step:
        return f"a sample at {shown(json.dumps(at))}, off the query's grid ({iso(first)} to {iso(last)} every {step}s)"
    if not isinstance(text, str):
        return f"a sample value {shown(json.dumps(text))}, not a string"
    if not _DECIMAL.fullmatch(text):
        named = text.lstrip("+-").lower() in ("nan", "inf", "infinity")
        return f"a sample value {shown(text)}, " + ("where Kueue's usage is a finite number" if named else
                                                    "not a number")
    return f"a sample value {shown(text)}, where Kueue's usage is from 0 to 2^63"


def _labels(metric: dict) -> str:
    return shown("{" + ", ".join(f"{k}={v}" for k, v in sorted(metric.items())) + "}", 120)


class Prometheus:
    """A Prometheus server at `url` (its base URL, as a browser opens its UI)."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT):
        self.url = check_url(url)
        self.timeout = timeout

    def query_range(self, query: str, period: Period,
                    progress: Callable[[int, int], None] | None = None) -> Iterator[list[dict]]:
        """The matrix `result` of each chunk of the period, checked (matrix_problem), in time order;
        `progress(points done, points)` before the first and after each."""
        pending = deque(chunks(period))
        most = MAX_POINTS  # points per series a request asks for: halved while answers are too large
        done = samples = 0
        if progress is not None:
            progress(0, period.points)
        while pending:
            first, last = pending.popleft()
            points = (last - first) // period.step + 1
            if points > most:
                pending.extendleft(reversed(chunks(Period(first, last + 1, period.step), most)))
                continue
            try:
                data = self._get("/api/v1/query_range", {"query": query, "start": first, "end": last,
                                                         "step": period.step, "timeout": f"{self.timeout:g}s"})
            except _TooLarge:
                if points == 1:
                    raise PrometheusUnavailable(
                        f"Prometheus at {self.url} answered a range query of one point per series with more than "
                        f"{MAX_ANSWER_BYTES // 2**20} MiB, the most gpugen reads of an answer; is --prometheus a "
                        "Prometheus server?") from None
                most = points // 2
                pending.appendleft((first, last))
                continue
            problem = matrix_problem(data, first, last, period.step)
            if problem:
                raise PrometheusUnavailable(f"Prometheus at {self.url} answered a range query {problem}; is "
                                            "--prometheus a Prometheus server that scrapes Kueue?")
            result = data["result"]
            del data
            samples += sum(len(series["values"]) for series in result)
            if samples > MAX_SAMPLES:
                raise PrometheusUnavailable(
                    f"Prometheus at {self.url} answered more than {MAX_SAMPLES:,} samples for the period, the most "
                    f"a report holds ({len(result)} series in the last answer); ask for a larger --step or a shorter "
                    "period")
            yield result
            del result  # the next answer is read while this one would still be held
            done += points
            if progress is not None:
                progress(done, period.points)

    def _get(self, path: str, params: dict) -> dict:
        """The `data` of a successful API answer; _TooLarge beyond MAX_ANSWER_BYTES."""
        request = urllib.request.Request(f"{self.url}{path}?{urllib.parse.urlencode(params)}",
                                         headers={"Accept": "application/json", "User-Agent": "gpugen-report"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                length = response.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > MAX_ANSWER_BYTES:
                    raise _TooLarge()
                body = response.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as error:
            raise PrometheusUnavailable(self._http_error(error)) from None
        except TimeoutError:
            raise PrometheusUnavailable(self._timed_out()) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, (TimeoutError, socket.timeout)):
                raise PrometheusUnavailable(self._timed_out()) from None
            reason = error.reason if isinstance(error.reason, str) else getattr(error.reason, "strerror", None)
            said = _one_line(str(reason or error.reason))
            raise PrometheusUnavailable(f"cannot reach Prometheus at {self.url}: {said}; check --prometheus and that "
                                        "Prometheus is running and reachable from here") from None
        # Reset, closed mid-answer, not HTTP at all; a URL or an answer the HTTP client cannot take (ValueError).
        except (OSError, http.client.HTTPException, ValueError) as error:
            said = _one_line(str(error)) or type(error).__name__
            raise PrometheusUnavailable(f"cannot read Prometheus at {self.url}: {said}; check --prometheus and that "
                                        "Prometheus is running") from None
        if len(body) > MAX_ANSWER_BYTES:
            raise _TooLarge()
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's parser goes
            answer = None
        del body
        if not isinstance(answer, dict) or "status" not in answer:
            raise PrometheusUnavailable(f"{self.url} did not answer with Prometheus's API (JSON with a status); "
                                        "is --prometheus a Prometheus server?")
        if answer["status"] != "success":
            said = _one_line(str(answer.get("error", "")))
            raise PrometheusUnavailable(f"Prometheus at {self.url} refused the query: "
                                        f"{_one_line(str(answer.get('errorType', 'error')))}: {said}")
        if not isinstance(answer.get("data"), dict):
            raise PrometheusUnavailable(f"Prometheus at {self.url} answered a query without its data object; is "
                                        "--prometheus a Prometheus server?")
        return answer["data"]

    def _timed_out(self) -> str:
        return (f"Prometheus at {self.url} did not answer within {self.timeout:g}s; check its load, or ask for a "
                "shorter period or a larger --step")

    def _http_error(self, error: urllib.error.HTTPError) -> str:
        try:
            detail = json.loads(error.read(_ERROR_BODY_BYTES)).get("error", "")
        except (ValueError, RecursionError, AttributeError, OSError, http.client.HTTPException):
            detail = ""
        hint = _HINTS.get(error.code, "check Prometheus's health and logs")
        said = f": {_one_line(str(detail))}" if detail else ""
        return f"Prometheus at {self.url} answered HTTP {error.code} {_one_line(str(error.reason))}{said}; {hint}"
