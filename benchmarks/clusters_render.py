"""The render of a national-scale platform spread over several clusters, against the single-cluster targets.

The synthetic inventory (tests/support/synth.py, 64 classes x 2,000 groups x 3 namespaces by default) is rendered
twice over with `python -m generator render`: as one cluster, and spread over a manager and `--clusters` workers.
Per run: wall time and peak RSS (os.wait4, benchmarks/common.py: the largest of the render's processes; a large
render forks one child, generator/parallel.py, which shares the parent's pages; the disk settled before each), the
files written, and a no-op re-render, which must write nothing.

    .venv/bin/python -m benchmarks.clusters_render [--clusters 8] [--classes 64] [--groups 2000] [--reps 3]
                                                  [--work /dev/shm] [--write-readme]

--write-readme rewrites the table between the clusters_render markers in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Renderer, conditions, settle, snapshot, spread, touched, write_readme
from tests.support import synth

BEGIN, END = "<!-- clusters_render -->", "<!-- /clusters_render -->"


def files(paths: list[Path]) -> int:
    return sum(1 for root in paths if root.is_dir() for p in root.rglob("*.yaml"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clusters", type=int, default=8)
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--namespaces", type=int, default=3)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None, help="where to write (/dev/shm: without the disk)")
    parser.add_argument("--write-readme", action="store_true", help="rewrite the table in benchmarks/README.md")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()
    size = f"{args.classes} x {args.groups} x {args.namespaces}"
    with tempfile.TemporaryDirectory(prefix="gpugen-clusters-render-", dir=args.work) as tmp:
        tmp = Path(tmp)
        one = synth.write(tmp / "one.yaml", args.classes, args.groups, args.namespaces)
        spread_over = synth.write(tmp / "several.yaml", args.classes, args.groups, args.namespaces,
                                  clusters=args.clusters)
        renderer = Renderer()
        rows = []
        for label, inventory in ((f"{size}, one cluster", one),
                                 (f"{size} over 1 manager + {args.clusters} workers", spread_over)):
            def render(work, inventory=inventory):
                return renderer.render(inventory, work)

            def paths(work):
                return list(renderer.paths(work).values())

            times, rss = [], []
            for rep in range(args.reps):
                work = tmp / f"work-{len(rows)}-{rep}"
                work.mkdir()
                settle()  # each timed process starts from the same quiet disk (benchmarks/common.py)
                result = render(work)
                times.append(result.seconds)
                rss.append(result.max_rss_mb)
            written = files(paths(work))
            before = snapshot(paths(work))
            settle()
            render(work)
            after = snapshot(paths(work))
            noop = touched(before, after)
            rows.append((label, spread(times), max(rss), written, noop["changed"] + noop["added"] + noop["removed"]))
    where = args.work or Path(tempfile.gettempdir())
    where = "on tmpfs" if str(where).startswith("/dev/shm") else f"under {where}"
    lines = [conditions(load_at_start), "",
             f"Outputs written {where}; {args.reps} cold render(s) of each, the disk settled before each.", "",
             "| render | time, median (range) | peak RSS | YAML files | files a no-op re-render touches |",
             "|---|---|---:|---:|---:|"]
    lines += [f"| {label} | {time_} | {rss_:.0f} MB | {written:,} | {noop} |"
              for label, time_, rss_, written, noop in rows]
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        write_readme(text, BEGIN, END)
        print("rewrote the clusters_render table of benchmarks/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
