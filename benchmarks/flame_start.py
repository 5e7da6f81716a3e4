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
import os
import pathlib
import resource
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


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of the process and of the children it has reaped), for every live process."""
    table = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state ppid ... utime(12) stime(13) cutime(14) cstime(15), counted from state = 0.
        table[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / _TICK)
    return table


def harness_cpu() -> float:
    """CPU seconds of this Python process and of every child it has reaped (helm, git, kubectl, hook Jobs)."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def cpu_seconds(flame, harness_before: float = 0.0) -> dict[str, float]:
    """CPU seconds (user + system) each process of the simulated FLAME has used so far, its descendants included
    (helm under the repo-server, a container under its namespace wrapper), and the harness itself (this Python
    process and every child it has reaped: helm, git, kubectl, finished hook Jobs)."""
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)

    def tree(pid: int) -> float:
        return table.get(pid, (0, 0.0))[1] + sum(tree(child) for child in children.get(pid, []))
    out: dict[str, float] = {}
    for process in flame.procs.started:
        name = process.name.removeprefix("pod ").rsplit("-", 2)[0] if process.name.startswith("pod ") else process.name
        out[name] = out.get(name, 0.0) + tree(process.popen.pid)
    out["the harness (Python, and what it ran)"] = harness_cpu() - harness_before
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--work", type=pathlib.Path, help="keep each run's directory (logs) under DIR")
    args = parser.parse_args(argv)
    totals = []
    for run in range(1, args.runs + 1):
        work = pathlib.Path(tempfile.mkdtemp(prefix=f"flame-start-{run}-", dir=args.work))
        harness_before = harness_cpu()
        flame = flame_mod.start_flame(work, log=lambda message: print(f"  {message}", flush=True))
        try:
            totals.append(flame.timings["ready"])
            cpu = cpu_seconds(flame, harness_before)
            timeline = application_timeline(flame.argocd.controller.log)
            establishing = crd_establishing(flame.admin)
        finally:
            flame.stop()
        print(f"run {run}: ready in {flame.timings['ready']:.1f} s ("
              + ", ".join(f"{phase} at {seconds:.1f} s" for phase, seconds in flame.timings.items()) + ")")
        print(f"  CPU seconds to ready: {sum(cpu.values()):.1f} in all (two cores give {2 * flame.timings['ready']:.0f} "
              f"in {flame.timings['ready']:.0f} s)")
        for name, seconds in sorted(cpu.items(), key=lambda item: -item[1]):
            print(f"  {name:40} {seconds:7.1f}")
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
