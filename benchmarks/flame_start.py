"""How much the simulated FLAME's start costs (what `make demo` waits for): CPU seconds per process, wall time, and
where the time goes.

Starts the simulated FLAME (simulation/flame.py) from an empty directory, each start in a fresh Python process, and
stops it again (every process it started, also on Ctrl-C). Per start: the CPU seconds every process used until the
FLAME was ready (its descendants included; the harness with what it ran), the harness's phases, and, from the real
Argo CD application controller's log, when each Application's first sync began and when it was last seen Synced
and Healthy. CPU seconds travel between machines better than wall time; the machine's bare import
(`python -c 'import pydantic, yaml, click'`) and its load average at the start are printed beside them, so that its
speed and how busy it was are on record.

    .venv/bin/python -m benchmarks.flame_start [--runs N] [--against REV] [--work DIR] [--write-readme]

--against REV starts the FLAME of git revision REV (a temporary worktree of this repository) in turn with this
checkout's, A B A B ..., the way to show what a change saves on the same machine in one run; its column is headed
"against REV", so a table kept in benchmarks/README.md is best made without it. --write-readme rewrites the table
between the flame_start markers in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- flame_start -->", "<!-- /flame_start -->"


def _time(text: str) -> datetime.datetime:
    """An RFC 3339 timestamp, as Argo CD logs and the API server stamps them."""
    return datetime.datetime.fromisoformat(text)


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
        elif message.endswith(("-> Synced", "-> Healthy")):
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


def measure_one(source: pathlib.Path, work: pathlib.Path) -> dict:
    """One start of the FLAME of the checkout `source` (this process imports its simulation), measured. Nothing of
    this checkout's generator, simulation or tests may be imported before, or `source` would run with them: the
    other benchmarks' helpers are imported where the table is made, in the parent process."""
    sys.path.insert(0, str(source))
    os.chdir(source)
    from simulation import flame as flame_mod
    harness_before = harness_cpu()
    started = time.monotonic()
    flame = flame_mod.start_flame(work, log=lambda message: print(f"  {message}", file=sys.stderr, flush=True))
    try:
        wall = time.monotonic() - started
        cpu = cpu_seconds(flame, harness_before)
        timeline = application_timeline(flame.argocd.controller.log)
        establishing = crd_establishing(flame.admin)
    finally:
        flame.stop()
    return {"wall": wall, "timings": flame.timings, "cpu": cpu, "timeline": timeline, "establishing": establishing}


def _start(source: pathlib.Path, work: pathlib.Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.flame_start", "--one", str(source), "--work", str(work)],
                          cwd=REPO, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the FLAME of {source} did not start (exit {done.returncode}); its log is above")
    return json.loads(done.stdout)


def _worktree(revision: str, into: pathlib.Path) -> pathlib.Path:
    path = into / f"at-{revision}"
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(path), revision], cwd=REPO, check=True)
    return path


def table(results: dict[str, list[dict]], load_at_start: tuple[float, ...]) -> str:
    """CPU seconds per process (median over the runs) for each checkout measured, with wall times and totals."""
    from benchmarks.common import conditions, median as _median
    labels = list(results)
    names = sorted({n for runs in results.values() for r in runs for n in r["cpu"]},
                   key=lambda n: -max(_median([r["cpu"].get(n, 0.0) for r in runs]) for runs in results.values()))
    lines = [conditions(load_at_start), "", f"{len(next(iter(results.values())))} start(s) of each, medians.", "",
             "| CPU seconds to ready | " + " | ".join(labels) + " |",
             "|---|" + "---:|" * len(labels)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(f"{_median([r['cpu'].get(name, 0.0) for r in results[label]]):.1f}"
                                                 for label in labels) + " |")
    lines.append("| **total** | " + " | ".join(f"**{_median([sum(r['cpu'].values()) for r in results[label]]):.1f}**"
                                                for label in labels) + " |")
    lines.append("| wall time to ready (what `make demo` waits for) | "
                 + " | ".join(f"{_median([r['wall'] for r in results[label]]):.1f} s" for label in labels) + " |")
    for phase in ("kubernetes", "argocd", "synced"):
        lines.append(f"| &nbsp; {phase} at | " + " | ".join(
            f"{_median([r['timings'].get(phase, float('nan')) for r in results[label]]):.1f} s" for label in labels)
            + " |")
    if len(labels) == 2:
        a, b = (_median([sum(r["cpu"].values()) for r in results[label]]) for label in labels)
        lines += ["", f"CPU total {labels[0]} / {labels[1]}: {a / b:.2f}"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--against", metavar="REV", help="also start the FLAME of this git revision, in turn")
    parser.add_argument("--work", type=pathlib.Path, help="keep each run's directory (logs) under DIR")
    parser.add_argument("--write-readme", action="store_true", help="rewrite the table in benchmarks/README.md")
    parser.add_argument("--one", type=pathlib.Path, help=argparse.SUPPRESS)  # one measured start, JSON on stdout
    args = parser.parse_args(argv)
    if args.one:
        json.dump(measure_one(args.one, args.work), sys.stdout)
        return 0
    load_at_start = os.getloadavg()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="flame-start-"))
    sources = {"this checkout": REPO}
    try:
        if args.against:
            sources[f"against {args.against}"] = _worktree(args.against, scratch)
        results: dict[str, list[dict]] = {label: [] for label in sources}
        for run in range(1, args.runs + 1):
            for label, source in sources.items():
                work = pathlib.Path(tempfile.mkdtemp(prefix=f"flame-{run}-", dir=args.work or scratch))
                print(f"run {run}, {label}:", flush=True)
                result = _start(source, work)
                results[label].append(result)
                print(f"  ready in {result['wall']:.1f} s, {sum(result['cpu'].values()):.1f} CPU seconds: "
                      + ", ".join(f"{name} {seconds:.1f}" for name, seconds in
                                  sorted(result["cpu"].items(), key=lambda item: -item[1])), flush=True)
                print("  Application (seconds from the bootstrap's first sync): first sync -> Synced and Healthy")
                for app, (start, end) in result["timeline"].items():
                    print(f"  {app:28} {start:6.1f} -> {end:6.1f}  ({end - start:5.1f} s)")
                print("  CRDs by API group: how many, seconds from creation to Established (median, max)")
                for group, delays in sorted(result["establishing"].items()):
                    print(f"  {group:32} {len(delays):3}  {statistics.median(delays):5.1f}  {max(delays):5.1f}")
        text = table(results, load_at_start)
        print("\n" + text)
        if args.write_readme:
            from benchmarks.common import write_readme
            write_readme(text, BEGIN, END)
            print("rewrote the flame_start table of benchmarks/README.md")
    finally:
        if args.against:
            subprocess.run(["git", "worktree", "remove", "--force", str(scratch / f"at-{args.against}")], cwd=REPO)
        if not args.work:
            subprocess.run(["rm", "-rf", str(scratch)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
