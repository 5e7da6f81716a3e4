"""How long the simulated FLAME takes to come up (what `make demo` waits for), and where that time goes.

Starts the simulated FLAME (simulation/flame.py) from an empty directory `--runs` times, stops it each time,
and prints, per run, the harness's phases and, read from the real Argo CD application controller's log, when
each Application's first sync began and when it was last seen Synced and Healthy, relative to the bootstrap's
first sync. The processes it starts are stopped by it, also on Ctrl-C.

    .venv/bin/python -m benchmarks.flame_start [--runs N] [--work DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import statistics
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]

from simulation import flame as flame_mod  # noqa: E402


def _time(text: str) -> datetime.datetime:
    """An RFC 3339 timestamp, as Argo CD logs and the API server stamps them."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _at(entry: dict) -> datetime.datetime:
    return _time(entry["time"])


def application_timeline(controller_log: pathlib.Path) -> dict[str, tuple[float, float]]:
    """Application -> (seconds from the first sync of any Application to its own first sync, to the moment it was
    last reported Synced or Healthy, whichever came later)."""
    began: dict[str, datetime.datetime] = {}
    settled: dict[str, datetime.datetime] = {}
    for line in controller_log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        app, message = entry.get("application"), entry.get("msg", "")
        if not app:
            continue
        if message.startswith("Initiated automated sync"):
            began.setdefault(app, _at(entry))
        elif message.endswith("-> Synced") or message.endswith("-> Healthy"):
            settled[app] = max(settled.get(app, _at(entry)), _at(entry))
    if not began:
        return {}
    zero = min(began.values())
    return {app: ((began[app] - zero).total_seconds(), (settled.get(app, began[app]) - zero).total_seconds())
            for app in sorted(began, key=began.get)}


def crd_establishing(admin) -> dict[str, list[float]]:
    """API group -> seconds from each CRD's creation to its Established condition (whole seconds, as the API server
    stamps them)."""
    out: dict[str, list[float]] = {}
    for crd in admin.list("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        created = _time(crd["metadata"]["creationTimestamp"])
        for condition in crd.get("status", {}).get("conditions", []):
            if condition["type"] == "Established" and condition["status"] == "True":
                established = _time(condition["lastTransitionTime"])
                out.setdefault(crd["spec"]["group"], []).append((established - created).total_seconds())
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--work", type=pathlib.Path, help="keep each run's directory (logs) under DIR")
    args = parser.parse_args(argv)
    totals = []
    for run in range(1, args.runs + 1):
        work = pathlib.Path(tempfile.mkdtemp(prefix=f"flame-start-{run}-", dir=args.work))
        flame = flame_mod.start_flame(work, log=lambda message: print(f"  {message}", flush=True))
        try:
            totals.append(flame.timings["ready"])
            timeline = application_timeline(flame.argocd.controller.log)
            establishing = crd_establishing(flame.admin)
        finally:
            flame.stop()
        print(f"run {run}: ready in {flame.timings['ready']:.1f} s ("
              + ", ".join(f"{phase} at {seconds:.1f} s" for phase, seconds in flame.timings.items()) + ")")
        print("  Application (seconds from the bootstrap's first sync): first sync -> Synced and Healthy")
        for app, (start, end) in timeline.items():
            print(f"  {app:28} {start:6.1f} -> {end:6.1f}  ({end - start:5.1f} s)")
        print("  CRDs by API group: how many, seconds from creation to Established (median, max; the API server's "
              "timestamps)")
        for group, delays in sorted(establishing.items()):
            print(f"  {group:32} {len(delays):3}  {statistics.median(delays):5.1f}  {max(delays):5.1f}")
    if len(totals) > 1:
        print(f"ready: median {statistics.median(totals):.1f} s, min {min(totals):.1f} s, max {max(totals):.1f} s "
              f"over {len(totals)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
