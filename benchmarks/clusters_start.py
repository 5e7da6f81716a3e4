"""How long the simulated platform of several clusters takes to come up, and how much memory it holds.

Starts simulation/several_clusters.py (a manager and two workers: tests/support/inventories.platform_data(),
delivered by the real Argo CD) from an empty directory `--runs` times. While it starts, and for `--hold` seconds
after (its controllers settle), it samples every 0.5 s the resident memory (RSS, from /proc) of every process it
started, and prints per run the harness's phases, the machine's CPU-seconds over the start, the peak of the sum over
all processes, and that peak per kind of process (etcd, kube-apiserver, kueue, ...). The processes it starts are
stopped by it, also on Ctrl-C.

    .venv/bin/python -m benchmarks.clusters_start [--runs N] [--hold SECONDS] [--work DIR] [--write-readme]

--write-readme rewrites the table between the clusters_start markers in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import statistics
import sys
import tempfile
import time

from benchmarks.common import TICKS, MemorySampler, conditions, median, resident_mb, write_readme
from simulation import several_clusters
from tests.support.inventories import platform_data, to_text

REPO = pathlib.Path(__file__).resolve().parents[1]

BEGIN, END = "<!-- clusters_start -->", "<!-- /clusters_start -->"


def descendants(root: int) -> list[int]:
    """Every live descendant of `root` (from /proc's parent links)."""
    children = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = pathlib.Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children[int(fields[1])].append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def sample() -> dict[str, float]:
    """Process name -> summed RSS in MB (10^6 bytes) over this process's descendants."""
    out: dict[str, float] = collections.defaultdict(float)
    for pid in descendants(os.getpid()):
        try:
            name = pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        mb = resident_mb(pid)
        if mb is not None:
            out[name.split("-v")[0].rstrip("-")] += mb
    return out


def machine_cpu_seconds() -> float:
    """CPU time the whole machine has spent (user, nice, system, irq, softirq), from /proc/stat."""
    fields = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    return sum(int(fields[i]) for i in (0, 1, 2, 5, 6)) / TICKS


# The start's phases (simulation/several_clusters.py timings), as the table names them; a cluster's name is when its
# Kubernetes was ready.
PHASES = {"argocd": "Argo CD running, with access to the workers",
          "workers synced": "every Application Synced and Healthy but the manager's tree",
          "synced": "every Application Synced and Healthy",
          "connected": "MultiKueue connected to both workers"}


def one_run(work: pathlib.Path, hold: float) -> tuple[dict[str, float], float, float, dict[str, float]]:
    """The start's timings, the machine's CPU-seconds over the start, the peak RSS of every process and per kind."""
    inventory_file = work / "platform.yaml"
    inventory_file.write_text(to_text(platform_data()))
    sampler = MemorySampler(sample)
    sampler.start()
    platform = None
    cpu0 = machine_cpu_seconds()
    try:
        platform = several_clusters.start_clusters(work / "run", inventory_file, log=lambda line: None)
        cpu = machine_cpu_seconds() - cpu0
        time.sleep(hold)
    finally:
        sampler.finish()
        if platform is not None:
            platform.stop()
    return platform.timings, cpu, sampler.peak_total, dict(sampler.peak)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--hold", type=float, default=30.0, help="seconds to keep sampling once started")
    parser.add_argument("--work", type=pathlib.Path, default=None)
    parser.add_argument("--write-readme", action="store_true", help="rewrite the table in benchmarks/README.md")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()
    starts, cpus, peaks, all_timings, all_by_name = [], [], [], [], []
    for run in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="gpugen-clusters-", dir=args.work) as tmp:
            timings, cpu, peak, by_name = one_run(pathlib.Path(tmp), args.hold)
        starts.append(timings["connected"])
        cpus.append(cpu)
        peaks.append(peak)
        all_timings.append(timings)
        all_by_name.append(by_name)
        print(f"run {run + 1}: " + ", ".join(f"{k} at {v:.1f}s" for k, v in timings.items())
              + f"; {cpu:,.0f} CPU-seconds; peak RSS {peak / 1000:.2f} GB")
        print("  peak RSS by process (MB, summed over its copies): " + ", ".join(
            f"{name} {mb:.0f}" for name, mb in sorted(by_name.items(), key=lambda kv: -kv[1]) if mb >= 10))
    print(f"start (MultiKueue connected): median {statistics.median(starts):.1f}s over {args.runs} runs; "
          f"peak RSS median {statistics.median(peaks) / 1000:.2f} GB")
    lines = [conditions(load_at_start), "",
             f"{args.runs} start(s), medians; memory sampled every 0.5 s over the start and {args.hold:.0f} s after.",
             "",
             "| figure | value |", "|---|---:|"]
    lines += [f"| {PHASES.get(phase, phase + ': Kubernetes ready')} at | "
              f"{median([t[phase] for t in all_timings if phase in t]):.1f} s |"
              for phase in all_timings[0]]
    lines.append(f"| CPU-seconds of the machine over the start | {median(cpus):,.0f} s |")
    lines.append(f"| **peak RSS, every process it started** | **{median(peaks) / 1000:.2f} GB** |")
    names = {name for by_name in all_by_name for name in by_name}
    peak_by_name = {name: median([by_name.get(name, 0.0) for by_name in all_by_name]) for name in names}
    lines += [f"| &nbsp; {name} (summed over the clusters) | {mb:,.0f} MB |"
              for name, mb in sorted(peak_by_name.items(), key=lambda kv: -kv[1]) if mb >= 10]
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        write_readme(text, BEGIN, END)
        print("rewrote the clusters_start table of benchmarks/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
