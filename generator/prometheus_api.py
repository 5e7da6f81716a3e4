"""The Prometheus HTTP API, as much as `gpugen report` needs: a range query split into chunks Prometheus accepts,
with a timeout per request and a progress callback. Every failure is a PrometheusUnavailable naming the URL and
what to check, never a traceback. urllib only: a report needs no HTTP library.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator

from generator.accounting import Period, chunks
from generator.errors import PrometheusUnavailable

REQUEST_TIMEOUT = 60.0  # seconds per request; also sent as the query's own timeout, so Prometheus gives up too
_MESSAGE_LIMIT = 300  # characters of an error body quoted in a message
# What to check after an HTTP status, in the user's terms.
_HINTS = {
    400: "check --from, --to and --step",
    401: "the server asks for credentials; give a URL gpugen can read without them (e.g. through kubectl port-forward)",
    403: "the server asks for credentials; give a URL gpugen can read without them (e.g. through kubectl port-forward)",
    404: "check that --prometheus is Prometheus's base URL (without /api/v1)",
    422: "check --from, --to and --step",
}


def check_url(url: str) -> str:
    """The base URL without a trailing slash; ValueError unless it is http(s)://HOST[:PORT][/PATH]."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"{url!r} is not an http(s):// base URL of Prometheus (e.g. http://127.0.0.1:9090)")
    return url.rstrip("/")


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "..."


class Prometheus:
    """A Prometheus server at `url` (its base URL, as a browser opens its UI)."""

    def __init__(self, url: str, timeout: float = REQUEST_TIMEOUT):
        self.url = check_url(url)
        self.timeout = timeout

    def query_range(self, query: str, period: Period,
                    progress: Callable[[int, int], None] | None = None) -> Iterator[list[dict]]:
        """The matrix `result` of each chunk of the period, in time order; `progress(done, total)` before the first
        and after each."""
        spans = chunks(period)
        if progress is not None:
            progress(0, len(spans))
        for done, (first, last) in enumerate(spans, 1):
            data = self._get("/api/v1/query_range", {"query": query, "start": first, "end": last,
                                                     "step": period.step, "timeout": f"{self.timeout:g}s"})
            if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
                raise PrometheusUnavailable(f"Prometheus at {self.url} answered a range query without a matrix; "
                                            "is --prometheus a Prometheus server?")
            yield data["result"]
            if progress is not None:
                progress(done, len(spans))

    def _get(self, path: str, params: dict) -> dict:
        """The `data` of a successful API answer."""
        request = urllib.request.Request(f"{self.url}{path}?{urllib.parse.urlencode(params)}",
                                         headers={"Accept": "application/json", "User-Agent": "gpugen-report"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            raise PrometheusUnavailable(self._http_error(error)) from None
        except (TimeoutError, socket.timeout):
            raise PrometheusUnavailable(self._timed_out()) from None
        except urllib.error.URLError as error:
            if isinstance(error.reason, (TimeoutError, socket.timeout)):
                raise PrometheusUnavailable(self._timed_out()) from None
            reason = error.reason if isinstance(error.reason, str) else getattr(error.reason, "strerror", None)
            raise PrometheusUnavailable(f"cannot reach Prometheus at {self.url}: {reason or error.reason}; check "
                                        "--prometheus and that Prometheus is running and reachable from here") from None
        except (OSError, http.client.HTTPException) as error:  # reset, closed mid-answer, not HTTP at all
            said = _one_line(str(error)) or type(error).__name__
            raise PrometheusUnavailable(f"cannot read Prometheus at {self.url}: {said}; check --prometheus and that "
                                        "Prometheus is running") from None
        try:
            answer = json.loads(body)
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "status" not in answer:
            raise PrometheusUnavailable(f"{self.url} did not answer with Prometheus's API (JSON with a status); "
                                        "is --prometheus a Prometheus server?")
        if answer["status"] != "success" or not isinstance(answer.get("data"), dict):
            said = _one_line(str(answer.get("error", "")))
            raise PrometheusUnavailable(f"Prometheus at {self.url} refused the query: "
                                        f"{answer.get('errorType', 'error')}: {said}")
        return answer["data"]

    def _timed_out(self) -> str:
        return (f"Prometheus at {self.url} did not answer within {self.timeout:g}s; check its load, or ask for a "
                "shorter period or a larger --step")

    def _http_error(self, error: urllib.error.HTTPError) -> str:
        try:
            detail = json.loads(error.read()).get("error", "")
        except (ValueError, AttributeError, OSError):
            detail = ""
        hint = _HINTS.get(error.code, "check Prometheus's health and logs")
        said = f": {_one_line(str(detail))}" if detail else ""
        return f"Prometheus at {self.url} answered HTTP {error.code} {error.reason}{said}; {hint}"
