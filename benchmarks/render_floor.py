"""The render against its floors, side by side in one run (issue: a render near the file system's floor).

- National scale (64 classes x 2,000 groups x 3 namespaces, tests/support/synth.py): a cold render into a fresh
  directory on tmpfs, against the floor: a Python process, interpreter start included, that creates the same
  files with the same bytes (directories first, then each file opened, written and closed). Target: at most 2x.
- FLAME (the committed gpu_classes.yaml): a cold render, against a process that only runs
  `import pydantic, yaml, click` (the libraries' bare import). Target: at most 1.5x. Beside them, a process that
  only imports the inventory's pydantic classes (generator.inventory.models), where every render starts.

Runs are interleaved, so drift in the machine's load hits both sides alike; each side's figure is the median.
Every render's output is compared byte for byte: FLAME's with the committed rendered/, bootstrap/ and
docs/runtimes.md, each national render's with the first one. Everything is written under a temporary directory
on /dev/shm, removed at the end.

    .venv/bin/python -m benchmarks.render_floor [--reps N] [--write-readme]

--write-readme rewrites the table between the render_floor markers in benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import hashlib
import marshal
import os
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.common import (BARE_IMPORT, PYTHON, REPO, Renderer, bytecode_as_by_default, conditions, median, run,
                            write_readme)

BEGIN, END = "<!-- render_floor -->", "<!-- /render_floor -->"
# The inventory's pydantic classes alone: what any render that validates the inventory with them starts from.
SCHEMA_IMPORT = "import generator.inventory.models"
NATIONAL = {"classes": 64, "groups": 2000, "namespaces": 3}
NATIONAL_TARGET = 2.0
FLAME_TARGET = 1.5
# Creates the files listed in the marshal file argv[1] under the directory argv[2]: the floor of any render.
FLOOR_PROGRAM = """
import marshal, os, sys
root = sys.argv[2]
with open(sys.argv[1], "rb") as f:
    directories, files = marshal.load(f)
for d in directories:
    os.mkdir(os.path.join(root, d))
for path, data in files:
    with open(os.path.join(root, path), "wb") as out:
        out.write(data)
"""


def tree_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for path, data in sorted(files.items()):
        h.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def floor_payload(files: dict[str, bytes], out: Path) -> None:
    """`files` (relative path -> bytes) as (directories, parents first; [(path, bytes)]) in a marshal file."""
    directories = {str(parent) for path in files for parent in Path(path).parents if str(parent) != "."}
    with open(out, "wb") as f:
        marshal.dump((sorted(directories, key=lambda d: (d.count("/"), d)), list(files.items())), f)


def committed_flame() -> dict[str, bytes]:
    """What a FLAME render writes, as committed: rendered/, bootstrap/ and docs/runtimes.md under the names the
    benchmark's work directory gives them."""
    files = {f"out/{k}": v for k, v in tree_files(REPO / "rendered").items()}
    files.update({f"bootstrap-out/{k}": v for k, v in tree_files(REPO / "bootstrap").items()})
    files["docs-out"] = (REPO / "docs" / "runtimes.md").read_bytes()
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="interleaved runs of each side (default 7)")
    parser.add_argument("--write-readme", action="store_true", help="rewrite the table in benchmarks/README.md")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()
    renderer = Renderer()
    if set(renderer.outputs) != {"--out", "--bootstrap-out", "--docs-out"}:
        print(f"render's outputs are now {sorted(renderer.outputs)}: update committed_flame()", file=sys.stderr)
        return 2
    print(bytecode_as_by_default(lambda _: None))  # for every process alike
    base = Path(tempfile.mkdtemp(prefix="gpugen-floor-", dir="/dev/shm"))
    try:
        inventory = base / "national.yaml"
        run([PYTHON, "-m", "tests.support.synth", "--classes", str(NATIONAL["classes"]), "--groups",
             str(NATIONAL["groups"]), "--namespaces", str(NATIONAL["namespaces"]), "-o", str(inventory)], cwd=REPO)
        reference = base / "reference"
        reference.mkdir()
        renderer.render(inventory, reference)  # also primes the bytecode caches
        national_files = tree_files(reference)
        national_digest = digest(national_files)
        payload = base / "floor.marshal"
        floor_payload(national_files, payload)
        flame_expected = digest(committed_flame())
        times: dict[str, list[float]] = {"national render": [], "national floor": [], "FLAME render": [],
                                         "bare import": [], "schema import": []}
        for rep in range(args.reps):
            work = base / f"national-{rep}"
            work.mkdir()
            times["national render"].append(renderer.render(inventory, work).seconds)
            if digest(tree_files(work)) != national_digest:
                raise SystemExit(f"national render {rep} differs from the first one")
            floor = base / f"floor-{rep}"
            floor.mkdir()
            times["national floor"].append(run([PYTHON, "-c", FLOOR_PROGRAM, str(payload), str(floor)],
                                               cwd=base).seconds)
            if digest(tree_files(floor)) != national_digest:
                raise SystemExit("the floor program did not create the same files")
            flame = base / f"flame-{rep}"
            flame.mkdir()
            times["FLAME render"].append(renderer.render(REPO / "gpu_classes.yaml", flame).seconds)
            if digest(tree_files(flame)) != flame_expected:
                raise SystemExit("the FLAME render differs from the committed rendered/, bootstrap/, docs/runtimes.md")
            times["bare import"].append(run([PYTHON, "-c", BARE_IMPORT], cwd=base).seconds)
            times["schema import"].append(run([PYTHON, "-c", SCHEMA_IMPORT], cwd=REPO).seconds)
            for d in (work, floor, flame):
                shutil.rmtree(d)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    national, floor_s = median(times["national render"]), median(times["national floor"])
    flame_s, bare, schema = median(times["FLAME render"]), median(times["bare import"]), median(times["schema import"])
    lines = [conditions(load_at_start), "",
             f"{args.reps} interleaved runs of each process, medians, everything on tmpfs; every render's output "
             "byte-identical (FLAME's to the committed tree, each national render's to the first).", "",
             "| process | median |", "|---|---:|",
             f"| national render, {NATIONAL['classes']} × {NATIONAL['groups']:,} × {NATIONAL['namespaces']} "
             f"({len(national_files):,} files) | {national * 1000:,.0f} ms |",
             f"| creating the same files from Python (its floor) | {floor_s * 1000:,.0f} ms |",
             f"| FLAME render | {flame_s * 1000:,.0f} ms |",
             f"| `python -c '{BARE_IMPORT}'` (its floor) | {bare * 1000:,.0f} ms |",
             f"| `python -c '{SCHEMA_IMPORT}'` (the inventory's schema alone) | {schema * 1000:,.0f} ms |", "",
             "| ratio | figure | target | verdict |", "|---|---:|---:|---|"]
    for label, ratio, target in (("national render / its floor", national / floor_s, NATIONAL_TARGET),
                                 ("FLAME render / bare import", flame_s / bare, FLAME_TARGET)):
        lines.append(f"| {label} | {ratio:.2f}× | ≤ {target}× | **{'met' if ratio <= target else 'not met'}** |")
    lines.append(f"| the inventory's schema alone / bare import | {schema / bare:.2f}× | — | — |")
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        write_readme(text, BEGIN, END)
        print("rewrote the render_floor table of benchmarks/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
