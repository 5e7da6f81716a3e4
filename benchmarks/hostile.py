"""The bound "any inventory is rendered or refused within 500 MB and 20 s", as figures.

Runs `python -m generator render` as a separate process (with its memory bound, as users run it) over the
largest inventories gpugen accepts and over hostile ones built to cost the most per input byte, and reports
for each: exit code, wall time, CPU time (user + system: wall time on this shared 2-core VM includes other
people's work), peak RSS (os.wait4) and the first line of stderr. A figure above the bound is flagged in the
table; nothing here is a timed test.

    .venv/bin/python -m benchmarks.hostile                 # print the table
    .venv/bin/python -m benchmarks.hostile --write-readme  # also rewrite its table in benchmarks/README.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEMORY_BOUND_MB = 500
TIME_BOUND_S = 20
BEGIN, END = "<!-- hostile -->", "<!-- /hostile -->"
FLAME = (REPO / "gpu_classes.yaml").read_text()
# The inventories are made by a child process (--make): a child forked from a parent holding them would
# report the parent's memory as part of its own peak RSS.
load_module = reading = synth = None


def alias_bomb() -> str:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 12)]
    return "\n".join(lines) + "\n" + FLAME


def many_nodes() -> str:
    """As many nodes as the input-size limit allows: a flow sequence of one-letter scalars."""
    count = (reading.MAX_INPUT_BYTES - len(FLAME) - 20) // 2
    return FLAME + "x: [" + ",".join(["a"] * count) + "]\n"


def group_with_namespaces(count: int, identities: int = 1) -> str:
    names = ", ".join(f"ns-{i}" for i in range(count))
    lines = []
    for line in FLAME.splitlines():
        if line.strip().startswith("namespaces: [vision-lab]"):
            line = line.replace("[vision-lab]", f"[{names}]")
        lines.append(line)
    text = "\n".join(lines) + "\n"
    return (text.replace("        - oidc:vision-lab\n", "".join(f"        - oidc:g{i}\n" for i in range(identities)), 1)
            if identities > 1 else text)


def cases(work: Path) -> list[tuple[str, str, str]]:
    """(name, what it is, inventory path)."""
    def put(name: str, text: str) -> str:
        path = work / f"{name}.yaml"
        path.write_text(text)
        return str(path)

    entries = load_module.MAX_ENTRIES
    groups = (entries - 64) // 4 - 20
    return [
        ("flame", "the committed inventory", put("flame", FLAME)),
        ("national", "64 classes x 2,000 groups x 3 namespaces (0.8 MB)",
         put("national", synth.to_yaml(synth.build(64, 2000, 3)))),
        ("largest-accepted", f"64 classes x {groups:,} groups x 3 namespaces, just under MAX_ENTRIES ({entries:,})",
         put("largest", synth.to_yaml(synth.build(64, groups, 3)))),
        ("namespaces-in-one-group", f"{entries - 100:,} namespaces in one group",
         put("namespaces", group_with_namespaces(entries - 100))),
        ("namespaces-x-identities", "2,000 namespaces x 1,000 identities in one group (RoleBinding subjects multiply)",
         put("product", group_with_namespaces(2000, 1000))),
        ("alias-bomb", "9^12 nodes through 12 levels of aliases", put("bomb", alias_bomb())),
        ("deep-nesting", "100,000 nested flow sequences",
         put("deep", FLAME + "x: " + "[" * 100_000 + "]" * 100_000 + "\n")),
        ("max-nodes", f"{reading.MAX_INPUT_BYTES // 2:,} one-letter scalars in one flow sequence",
         put("nodes", many_nodes())),
        ("long-description", "a 4 MB description", put("description", FLAME.replace(
            "description: NVIDIA",
            "description: " + "x" * (reading.MAX_INPUT_BYTES - len(FLAME) - 100) + " NVIDIA", 1))),
        ("dev-zero", "/dev/zero as the inventory", "/dev/zero"),
    ]


def measure(inventory: str, work: Path, name: str) -> dict:
    # A fresh directory per case, nothing removed until the end: on this VM's journal-less ext4, creating files
    # right after thousands were removed costs seconds of system time (see benchmarks/README.md).
    out = work / f"out-{name}"
    argv = [sys.executable, "-m", "generator", "render", "--inventory", inventory, "--out", str(out / "r"),
            "--bootstrap-out", str(out / "b"), "--docs-out", str(out / "d.md")]
    stderr = work / "stderr"
    started = time.monotonic()
    with open(stderr, "wb") as err:
        process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    lines = stderr.read_text(errors="replace").splitlines()
    return {"exit": os.waitstatus_to_exitcode(status), "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "user": usage.ru_utime, "sys": usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024, "stderr": lines[0] if lines else "",
            "files": sum(1 for p in out.rglob("*") if p.is_file()) if out.exists() else 0}


def table(results: list[tuple[str, str, dict]]) -> str:
    rows = ["| case | what | exit | files written | wall | CPU (user + sys) | peak RSS | first line of stderr |",
            "|---|---|---:|---:|---:|---:|---:|---|"]
    for name, what, r in results:
        over = " **over**" if r["rss_mb"] > MEMORY_BOUND_MB or r["cpu"] > TIME_BOUND_S else ""
        message = r["stderr"].split(": ", 1)[-1][:110].replace("|", "\\|")
        rows.append(f"| {name}{over} | {what} | {r['exit']} | {r['files']:,} | {r['wall']:.2f} s | "
                    f"{r['cpu']:.2f} s ({r['user']:.2f} + {r['sys']:.2f}) | {r['rss_mb']:.0f} MB | {message} |")
    return "\n".join(rows)


def make(work: Path) -> None:
    global load_module, reading, synth
    from tests.support import synth as synth_module

    from generator.inventory import load, reading as reading_module

    load_module, reading, synth = load, reading_module, synth_module
    json.dump(cases(work), sys.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-readme", action="store_true", help="rewrite the table in benchmarks/README.md")
    parser.add_argument("--make", metavar="DIR", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.make:
        make(Path(options.make))
        return
    # The raw tuple: benchmarks.common is imported only once the renders are measured, so that this process stays
    # as small as the comment on load_module asks.
    load_at_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="gpugen-hostile-"))
    try:
        results = []
        made = subprocess.run([sys.executable, "-m", "benchmarks.hostile", "--make", str(work)], capture_output=True,
                              text=True, check=True, cwd=REPO)
        for name, what, inventory in json.loads(made.stdout):
            result = measure(inventory, work, name)
            results.append((name, what, result))
            print(f"{name}: exit {result['exit']}, {result['wall']:.2f} s wall, {result['cpu']:.2f} s CPU, "
                  f"{result['rss_mb']:.0f} MB, {result['stderr'][:100]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    from benchmarks.common import conditions, write_readme
    text = (conditions(load_at_start) + f" Bound: {MEMORY_BOUND_MB} MB peak RSS and {TIME_BOUND_S} s of CPU; "
            "a case over it is marked **over**.\n\n" + table(results))
    print(text)
    if options.write_readme:
        write_readme(text, BEGIN, END)
        print("rewrote the hostile table of benchmarks/README.md")


if __name__ == "__main__":
    main()
