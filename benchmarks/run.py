"""Render cost at national-platform scale, side by side with `kubectl kustomize`, and validation at scale.

    python -m benchmarks.run                     # print the results (Markdown)
    python -m benchmarks.run --write-readme      # ... and rewrite the results section of benchmarks/README.md
    python -m benchmarks.run --apiserver         # ... plus the kube-apiserver dry-run tier on the largest tree
    python -m benchmarks.run --quick             # small scales, to try the script itself

Every render is a whole process (`python -m generator render`, as `make render` runs it) timed from spawn to
exit, its peak RSS taken from os.wait4. Inventories and rendered trees live in a temporary directory, and
every render runs with that directory as its working directory and every output option pointed into it, so
nothing in the repository is ever written. Figures are medians over repetitions; nothing is tuned.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from benchmarks.common import (PYTHON, README, REPO, Renderer, bytecode_as_by_default,
                               conditions, load_average, median, run, settle, snapshot, spread, touched, write_readme)
from tests.support import synth

KUBECTL = os.environ.get("KUBECTL", "/usr/bin/kubectl")
BEGIN, END = "<!-- results -->", "<!-- /results -->"

# What a Python process that only imports the generator's libraries does. LITERAL imports the packages
# as named. pydantic imports lazily (`import pydantic` does not load BaseModel), and the render may not load
# every package (ruamel.yaml only serves `inventory` edits), so AS_LOADED imports exactly the modules of these
# packages that a FLAME render loads, read from `python -X importtime` of that render in the same run.
LITERAL = "import pydantic, ruamel.yaml, yaml, click, grafana_foundation_sdk"
AS_LOADED = "the library modules a FLAME render loads"
# grafana_foundation_sdk: FLAME's inventory renders dashboards (cluster.monitoring).
LIBRARIES = ("pydantic", "ruamel", "yaml", "click", "grafana_foundation_sdk")

FULL_SERIES = [(64, groups, 3) for groups in (125, 250, 500, 1000, 2000)]
QUICK_SERIES = [(8, groups, 2) for groups in (10, 20, 40)]

# Nothing the benchmark writes to disk is removed before the run ends, and before the first measurement it
# flushes, then waits out the inodes removed before the run (another run's clean-up, test suites). On a
# journal-less ext4 (this VM's disk) the kernel avoids reusing the inode of a file removed in the last 60 s,
# or 360 s while the block holding it is dirty (RECENTCY_MIN, RECENTCY_DIRTY in fs/ext4/ialloc.c): each new
# file's inode allocation scans past every such inode (recently_deleted() under ext4_create in a perf
# profile), kernel time that grows with the number of files removed. Renders started right after a tree of
# 8,000 files was removed took up to three times longer, all of it system time. New files land in the same
# inode blocks and dirty them again, so the 360 s bound is the one that holds: a run started 70 s after the
# previous one's clean-up still saw renders slowed two- to five-fold.
SETTLE_START_SECONDS = 370

TARGET_FLAME_RATIO = 1.5
TARGET_LARGE_SECONDS = 3.0
TARGET_LARGE_MB = 300
TARGET_DOUBLING = 2.2


# --------------------------------------------------------------------------------------------- processes

















# --------------------------------------------------------------------------------------------- rendering







@dataclass
class ObjectStats:
    objects: int = 0
    files: int = 0
    bytes: int = 0
    per_kind: dict[str, int] = field(default_factory=dict)
    # kind -> [file name, YAML bytes, JSON bytes (compact, what an apply request carries before managedFields)]
    largest: dict[str, list] = field(default_factory=dict)
    kyverno_namespace_values: int = 0


def object_stats(paths: list[Path]) -> ObjectStats:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    stats = ObjectStats()
    per_kind: dict[str, int] = defaultdict(int)
    for root in paths:
        files = sorted(root.rglob("*")) if root.is_dir() else [root]
        for path in files:
            if not path.is_file():
                continue
            stats.files += 1
            data = path.read_bytes()
            stats.bytes += len(data)
            if path.suffix != ".yaml" or path.name == "kustomization.yaml":
                continue
            obj = yaml.load(data, Loader=loader)
            kind = obj["kind"]
            stats.objects += 1
            per_kind[kind] += 1
            json_size = len(json.dumps(obj, separators=(",", ":")).encode())
            if kind not in stats.largest or json_size > stats.largest[kind][2]:
                stats.largest[kind] = [path.name, len(data), json_size]
            if obj["apiVersion"].startswith("policies.kyverno.io/"):
                selector = obj.get("spec", {}).get("matchConstraints", {}).get("namespaceSelector", {})
                values = sum(len(e.get("values", [])) for e in selector.get("matchExpressions", []))
                stats.kyverno_namespace_values = max(stats.kyverno_namespace_values, values)
    stats.per_kind = dict(sorted(per_kind.items()))
    return stats


# --------------------------------------------------------------------------------------------- measurements

@dataclass
class ScaleResult:
    label: str
    classes: int
    groups: int
    namespaces: int
    inventory_bytes: int
    render_runs: list[float]
    render_rss_mb: list[float]
    noop_runs: list[float]
    noop_touched: dict[str, int]
    kustomize_runs: list[float]
    kustomize_rss_mb: list[float]
    kustomize_bytes: int
    stats: ObjectStats
    edit_seconds: float
    edit_touched: dict[str, int]
    tmpfs_runs: list[float]

    @property
    def render(self) -> float:
        return median(self.render_runs)

    @property
    def kustomize(self) -> float:
        return median(self.kustomize_runs)

    @property
    def rss(self) -> float:
        return max(self.render_rss_mb)


def kustomize(out: Path, work: Path, reps: int, budget: float) -> tuple[list[float], list[float], int]:
    """Time `kubectl kustomize OUT`; repeat up to reps while the runs so far took less than budget seconds."""
    times, rss = [], []
    target = work / "kustomize.out.yaml"
    while len(times) < reps and (not times or sum(times) < budget):
        result = run([KUBECTL, "kustomize", str(out)], cwd=work, stdout_path=target)
        times.append(result.seconds)
        rss.append(result.max_rss_mb)
    size = target.stat().st_size
    target.unlink()
    return times, rss, size






def edited_copy(inventory: Path, work: Path) -> Path:
    """The inventory with one group's description changed: the smallest edit a platform engineer makes."""
    text = inventory.read_text(encoding="utf-8")
    groups_at = re.search(r"^groups:\s*$", text, re.MULTILINE)
    match = re.compile(r"^(    description: )(.*)$", re.MULTILINE).search(text, groups_at.end() if groups_at else 0)
    if match is None:
        raise RuntimeError(f"{inventory}: no group description to edit")
    # Same file name: the generated headers name the inventory file, and must not change with the edit.
    (work / "edited").mkdir(exist_ok=True)
    edited = work / "edited" / inventory.name
    edited.write_text(text[:match.start(2)] + match.group(2) + " (edited)" + text[match.end(2):], encoding="utf-8")
    return edited


def measure_scale(renderer: Renderer, label: str, inventory: Path, work: Path, reps: int, kustomize_budget: float,
                  shape: tuple[int, int, int], log) -> ScaleResult:
    work.mkdir(parents=True, exist_ok=True)
    renders, rss = [], []
    for rep in range(reps):
        # A fresh directory per repetition; nothing is removed before the run ends (see SETTLE_START_SECONDS).
        tree = work / f"cold-{rep}"
        tree.mkdir()
        settle()
        result = renderer.render(inventory, tree)
        renders.append(result.seconds)
        rss.append(result.max_rss_mb)
        log(f"  render {rep + 1}/{reps}: {result.seconds:.2f} s, {result.max_rss_mb:.0f} MB")
    # `tree` is the last repetition's: the no-op, kustomize and edit measurements below run on it.
    tmpfs = tmpfs_renders(inventory, renderer, reps, log)
    outputs = list(renderer.paths(tree).values())
    noops, touches = [], {}
    for _ in range(reps):
        settle()
        before = snapshot(outputs)
        result = renderer.render(inventory, tree)
        after = snapshot(outputs)
        noops.append(result.seconds)
        counts = touched(before, after)
        touches = {key: max(touches.get(key, 0), value) for key, value in counts.items()}
    log(f"  no-op re-render: {median(noops):.2f} s, {touches}")
    stats = object_stats(outputs)
    settle()
    k_times, k_rss, k_bytes = kustomize(renderer.paths(tree)["--out"], work, reps, kustomize_budget)
    log(f"  kubectl kustomize: {', '.join(f'{t:.2f}' for t in k_times)} s, {k_bytes} bytes")
    # Last, as it changes the tree: the render after a one-group edit (the whole tree is swapped in).
    edited = edited_copy(inventory, work)
    settle()
    before = snapshot(outputs)
    result = renderer.render(edited, tree)
    edit_touched = touched(before, snapshot(outputs))
    log(f"  render after a one-group edit: {result.seconds:.2f} s, {edit_touched}")
    edit_seconds = result.seconds
    renderer.render(inventory, tree)  # untimed: back to the benchmark's tree, for --apiserver and --profile
    classes, groups, namespaces = shape
    return ScaleResult(label, classes, groups, namespaces, inventory.stat().st_size, renders, rss, noops, touches,
                       k_times, k_rss, k_bytes, stats, edit_seconds, edit_touched, tmpfs)


def loaded_library_modules(renderer: Renderer, work: Path) -> list[str]:
    """Modules of LIBRARIES that a FLAME render imports, in import order (`python -X importtime`)."""
    flame = work / "flame-importtime"
    flame.mkdir(parents=True, exist_ok=True)
    result = run([PYTHON, "-X", "importtime", *renderer.command(REPO / "gpu_classes.yaml", flame)[1:]], cwd=work)
    modules = []
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name.split(".")[0] in LIBRARIES and name not in modules:
                modules.append(name)
    return modules


def measure_baseline(renderer: Renderer, work: Path, reps: int, log) -> tuple[dict[str, list[float]], list[str]]:
    """FLAME render vs. processes that only import the libraries, interleaved so drift hits all alike."""
    inventory = REPO / "gpu_classes.yaml"
    modules = loaded_library_modules(renderer, work)
    log(f"  a FLAME render loads {len(modules)} modules of {', '.join(LIBRARIES)}: "
        f"{', '.join(m for m in modules if m.count('.') == 0)} (top level)")
    baselines = {LITERAL: LITERAL, AS_LOADED: "\n".join(f"import {m}" for m in modules) or "pass"}
    times: dict[str, list[float]] = defaultdict(list)
    for rep in range(reps):
        for name, code in baselines.items():
            times[name].append(run([PYTHON, "-c", code], cwd=work).seconds)
        flame = work / f"flame-baseline-{rep}"
        flame.mkdir(parents=True)
        times["FLAME render"].append(renderer.render(inventory, flame).seconds)
        times["FLAME no-op re-render"].append(renderer.render(inventory, flame).seconds)
    log("  " + ", ".join(f"{name}: {median(values) * 1000:.0f} ms" for name, values in times.items()))
    return dict(times), modules


# --------------------------------------------------------------------------------------------- API server

def apiserver_tier(out: Path, bootstrap: Path | None, work: Path, log) -> dict:
    """tests/apiserver/test_apiserver.py pointed at another tree (GPUGEN_RENDERED_DIR, GPUGEN_BOOTSTRAP_DIR)."""
    junit = work / "apiserver-junit.xml"
    env = {**os.environ, "GPUGEN_RENDERED_DIR": str(out),
           # manifest_files() also reads the bootstrap tree: the Application of THIS render, never the repository's.
           "GPUGEN_BOOTSTRAP_DIR": str(bootstrap or work / "no-bootstrap")}
    env.pop("CI", None)  # a missing binary is then a skip with its reason, reported below, not a crash
    cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=line", f"--junitxml={junit}"]
    cmd.append("tests/apiserver/test_apiserver.py")
    log(f"  {' '.join(cmd)}  (GPUGEN_RENDERED_DIR={out})")
    result = run(cmd, cwd=REPO, env=env, check=False)
    rows: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    failures: list[str] = []
    if junit.exists():
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = case.get("name", "")
            test, _, param = name.partition("[")
            param = param.rstrip("]")
            if "/" in param:
                parts = Path(param).parts
                kind = parts[-2] if len(parts) >= 2 else "?"
            elif test == "test_runtime_pod_template_is_a_valid_job":
                kind = "clustertrainingruntime"
            elif test == "test_broken_object_is_rejected":
                kind = "(broken corpus)"
            else:
                kind = "(whole tree)"
            outcome = "passed"
            for tag in ("failure", "error", "skipped"):
                element = case.find(tag)
                if element is not None:
                    outcome = tag
                    if tag != "skipped" and len(failures) < 10:
                        failures.append(f"{name}: {(element.get('message') or '')[:300]}")
                    if tag == "skipped" and len(failures) < 10:
                        failures.append(f"skipped {name}: {(element.get('message') or '')[:300]}")
            rows[(test, kind)][outcome] += 1
    tail = (result.stdout.strip().splitlines() or [""])[-1]
    log(f"  apiserver tier: exit {result.returncode}, {result.seconds:.0f} s: {tail}")
    return {
        "exit": result.returncode, "seconds": result.seconds, "summary": tail,
        "rows": [{"test": test, "kind": kind, **counts} for (test, kind), counts in sorted(rows.items())],
        "failures": failures,
    }


# --------------------------------------------------------------------------------------------- profile

PHASES = r"""
import gc, sys, time, tempfile
from pathlib import Path
gc.disable()  # as `render` does
t0 = time.perf_counter()
from generator.inventory.yaml11 import parse_inventory
from generator.inventory.models import Inventory
from generator.inventory.rules import check_inventory
from generator.builders import synced_objects, bootstrap_objects
from generator.tree import render_trees
from generator.files.staging import apply_outputs, pending_tree
t1 = time.perf_counter()
text = Path(sys.argv[1]).read_text(encoding="utf-8")
document, _ = parse_inventory(text, sys.argv[1]); t2 = time.perf_counter()
inventory = Inventory.model_validate(document); t3 = time.perf_counter()
check_inventory(inventory); t4 = time.perf_counter()
synced_objects(inventory); bootstrap_objects(inventory); t5 = time.perf_counter()
trees = render_trees(inventory, "inventory.yaml"); t6 = time.perf_counter()
with tempfile.TemporaryDirectory() as d:
    apply_outputs([pending_tree(trees.synced, Path(d) / "out")]); t7 = time.perf_counter()
    apply_outputs([pending_tree(trees.synced, Path(d) / "out")]); t8 = time.perf_counter()
print(f"imports (generator modules)|{t1 - t0:.3f}")
print(f"parse inventory (YAML to dicts; positions only for problems)|{t2 - t1:.3f}")
print(f"schema (pydantic)|{t3 - t2:.3f}")
print(f"cross rules|{t4 - t3:.3f}")
print(f"build objects (dicts)|{t5 - t4:.3f}")
print(f"render_trees (build again + emit YAML + docs)|{t6 - t5:.3f}")
print(f"write tree (temp dir + swap)|{t7 - t6:.3f}")
print(f"no-op write (read + compare)|{t8 - t7:.3f}")
"""


def tmpfs_renders(inventory: Path, renderer: Renderer, reps: int, log) -> list[float]:
    """The same cold render with every output on tmpfs (/dev/shm): what is left without the VM's disk."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        return []
    base = Path(tempfile.mkdtemp(prefix="gpugen-bench-", dir=shm))
    times = []
    try:
        for rep in range(reps):
            tree = base / f"cold-{rep}"
            tree.mkdir()
            settle()
            times.append(renderer.render(inventory, tree).seconds)
        log(f"  on tmpfs: {', '.join(f'{t:.2f}' for t in times)} s")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return times


def profile(inventory: Path, renderer: Renderer, work: Path, log, top: int = 25) -> dict:
    """Phase breakdown (in one process) and a cProfile of the whole render command."""
    phases = []
    result = run([PYTHON, "-c", PHASES, str(inventory)], cwd=work, check=False)
    if result.returncode == 0:
        phases = [line.split("|") for line in result.stdout.strip().splitlines()]
    else:
        log(f"  phase breakdown failed (generator internals changed?): {result.stderr[-500:]}")
    renderer.clear(work)
    prof = work / "render.prof"
    cmd = [PYTHON, "-m", "cProfile", "-o", str(prof), *renderer.command(inventory, work)[1:]]
    run(cmd, cwd=work)
    import io
    import pstats
    text = {}
    for order in ("cumulative", "tottime"):
        buffer = io.StringIO()
        pstats.Stats(str(prof), stream=buffer).strip_dirs().sort_stats(order).print_stats(top)
        text[order] = "\n".join(line for line in buffer.getvalue().splitlines() if line.strip())
    return {"phases": phases, "cprofile": text}


# --------------------------------------------------------------------------------------------- report

def machine() -> dict[str, str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        kib = int(next(line for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")).split()[1])
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    kubectl = subprocess.run([KUBECTL, "version", "--client"], capture_output=True, text=True).stdout
    libs = subprocess.run([PYTHON, "-c", "import pydantic, ruamel.yaml, yaml, click; "
                           "print(f'pydantic {pydantic.VERSION}, ruamel.yaml {ruamel.yaml.__version__}, '"
                           "f'PyYAML {yaml.__version__} (libyaml {getattr(yaml, \"__with_libyaml__\", False)}), '"
                           "f'click {__import__(\"importlib.metadata\").metadata.version(\"click\")}')"],
                          capture_output=True, text=True).stdout.strip()
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": memory,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "libraries": libs,
        "kubectl": " / ".join(line.strip() for line in kubectl.splitlines() if line.strip()),
        "kernel": platform.release(),
    }


def busy() -> str:
    go = subprocess.run(["pgrep", "-c", "-f", "go build"], capture_output=True, text=True).stdout.strip() or "0"
    return f"load average {load_average()}; `go build` processes: {go}"


def verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def report(results: dict) -> str:
    m = results["machine"]
    lines = [
        f"Generated by `{results['command']}` (took {results['took_s']:.0f} s).",
        "",
        results["conditions"],
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory']} memory, {m['python']}, Linux {m['kernel']}; "
        f"{m['libraries']}; kubectl: {m['kubectl']}.",
        f"Machine load at start: {results['busy_start']}; at end: {results['busy_end']}.",
        f"Python: {results.get('bytecode', 'bytecode setting not recorded')}.",
        "",
    ]
    base = results["baseline"]
    reps = len(base["FLAME render"])
    lines += [f"### FLAME vs. importing the libraries (median of {reps}, whole process)", "",
              "| process | median | min | max |", "|---|---:|---:|---:|"]
    for name, values in base.items():
        label = name if name.startswith("FLAME") else ("`python -c` " + (f"`{name}`" if name == LITERAL else name))
        lines.append(f"| {label} | "
                     f"{median(values) * 1000:.0f} ms | {min(values) * 1000:.0f} ms | {max(values) * 1000:.0f} ms |")
    tops = sorted({m.split(".")[0] for m in results.get("loaded_modules", [])})
    lines += ["", f"{AS_LOADED[0].upper() + AS_LOADED[1:]}: `import` of each of the "
              f"{len(results.get('loaded_modules', []))} modules of "
              f"{', '.join(LIBRARIES)} that `python -X importtime` shows a FLAME render loading (packages: "
              f"{', '.join(tops)}).", ""]

    scales: list[ScaleResult] = results["scales"]
    lines += ["### Render vs. `kubectl kustomize` over the same tree", "",
              "Render: cold (into a fresh directory), median of the repetitions (min–max); "
              "no-op: the same render again. "
              "kustomize: median of its runs (repeated only while they stay short).", "",
              "Render on tmpfs: the same cold render with its outputs on /dev/shm instead of the VM's disk "
              "(diagnostic: "
              "what the generator costs without the disk; the targets use the render column).", "",
              "| classes × groups × ns | inventory | objects | files | bytes written | render | render on tmpfs | "
              "peak RSS | "
              "no-op re-render | files touched by no-op | kubectl kustomize | kustomize RSS | render / kustomize | "
              "render after a one-group edit (files touched) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in scales:
        touched_total = (s.noop_touched.get("changed", 0) + s.noop_touched.get("added", 0)
                         + s.noop_touched.get("removed", 0))
        lines.append(
            f"| {s.label} | {s.inventory_bytes / 1e3:.0f} kB | {s.stats.objects:,} | {s.stats.files:,} | "
            f"{s.stats.bytes / 1e6:.2f} MB | {spread(s.render_runs)} | {spread(s.tmpfs_runs)} | {s.rss:.0f} MB | "
            f"{median(s.noop_runs):.2f} s | {touched_total} | {s.kustomize:.2f} s (n={len(s.kustomize_runs)}) | "
            f"{max(s.kustomize_rss_mb):.0f} MB | {s.render / s.kustomize:.2f} | {s.edit_seconds:.2f} s "
            f"({sum(s.edit_touched.get(k, 0) for k in ('changed', 'added', 'removed')):,}) |")
    lines.append("")

    series = [s for s in scales if s.label != "FLAME"]
    series.sort(key=lambda s: (s.classes, s.namespaces, s.groups))
    steps = []
    for a, b in itertools.pairwise(series):
        if (a.classes, a.namespaces) == (b.classes, b.namespaces) and b.groups == 2 * a.groups:
            steps.append((a, b))
    if steps:
        lines += ["### Doubling series", "",
                  "| step (groups) | render t(2N)/t(N) | (render − import-only time) ratio | "
                  "render on tmpfs t(2N)/t(N) | "
                  "kustomize t(2N)/t(N) |", "|---|---:|---:|---:|---:|"]
        floor = median(base[AS_LOADED])
        for a, b in steps:
            marginal = (b.render - floor) / (a.render - floor) if a.render > floor else float("nan")
            tmpfs_ratio = median(b.tmpfs_runs) / median(a.tmpfs_runs) if a.tmpfs_runs and b.tmpfs_runs else float("nan")
            lines.append(f"| {a.groups} → {b.groups} | {b.render / a.render:.2f} | {marginal:.2f} | "
                         f"{tmpfs_ratio:.2f} | {b.kustomize / a.kustomize:.2f} |")
        lines.append("")

    largest = max(series, key=lambda s: (s.classes * s.groups * s.namespaces)) if series else None
    if largest:
        lines += [f"### Largest object per kind at {largest.label}", "",
                  "JSON bytes: the object as compact JSON, about what an apply request carries and etcd stores "
                  "before managedFields (etcd's request limit is 1.5 MiB = 1,572,864 bytes).", "",
                  "| kind | objects | largest file | YAML bytes | JSON bytes | % of 1.5 MiB |",
                  "|---|---:|---|---:|---:|---:|"]
        for kind, count in largest.stats.per_kind.items():
            name, ybytes, jbytes = largest.stats.largest[kind]
            lines.append(f"| {kind} | {count:,} | {name} | {ybytes:,} | {jbytes:,} | {jbytes / 1572864 * 100:.1f} % |")
        lines += ["", f"Kyverno policies list up to {largest.stats.kyverno_namespace_values:,} namespace names in "
                  "their namespaceSelector.", ""]

    api = results.get("apiserver")
    if api:
        lines += [f"### kube-apiserver dry-run tier on {largest.label if largest else '?'}", "",
                  f"`tests/apiserver/test_apiserver.py` with GPUGEN_RENDERED_DIR/GPUGEN_BOOTSTRAP_DIR pointed at the "
                  f"rendered tree: exit {api['exit']}, {api['seconds']:.0f} s, `{api['summary']}`.",
                  "",
                  "| test | kind | passed | failed | errors | skipped |", "|---|---|---:|---:|---:|---:|"]
        for row in api["rows"]:
            lines.append(f"| {row['test']} | {row['kind']} | {row.get('passed', 0)} | {row.get('failure', 0)} | "
                         f"{row.get('error', 0)} | {row.get('skipped', 0)} |")
        if api["failures"]:
            lines += ["", "First problems:", ""] + [f"- `{f}`" for f in api["failures"]]
        lines.append("")
    elif results.get("apiserver_skipped"):
        lines += ["### kube-apiserver dry-run tier", "", results["apiserver_skipped"], ""]

    lines += ["### Targets", "", "| target | figure | verdict |", "|---|---|---|"]
    flame = median(base["FLAME render"])
    ratio = flame / median(base[AS_LOADED])
    lines.append(f"| FLAME render ≤ {TARGET_FLAME_RATIO}× a process that only imports the same libraries "
                 f"({AS_LOADED}) | {flame * 1000:.0f} ms / {median(base[AS_LOADED]) * 1000:.0f} ms = {ratio:.2f}× | "
                 f"{verdict(ratio <= TARGET_FLAME_RATIO)} |")
    ratio = flame / median(base[LITERAL])
    lines.append(f"| (for reference, not the target: `{LITERAL}`, which loads a fraction of pydantic and a "
                 f"library the render does not load) | {flame * 1000:.0f} ms / {median(base[LITERAL]) * 1000:.0f} ms "
                 f"= {ratio:.2f}× | — |")
    if largest:
        lines.append(f"| {largest.label}: render ≤ {TARGET_LARGE_SECONDS:.0f} s | {largest.render:.2f} s "
                     f"(diagnostic, outputs on tmpfs: {median(largest.tmpfs_runs):.2f} s) | "
                     f"{verdict(largest.render <= TARGET_LARGE_SECONDS)} |")
        lines.append(f"| {largest.label}: render no slower than kubectl kustomize over its output | "
                     f"{largest.render:.2f} s vs {largest.kustomize:.2f} s | "
                     f"{verdict(largest.render <= largest.kustomize)} |")
        lines.append(f"| {largest.label}: peak memory < {TARGET_LARGE_MB} MB | {largest.rss:.0f} MB | "
                     f"{verdict(largest.rss < TARGET_LARGE_MB)} |")
    if steps:
        worst = max(b.render / a.render for a, b in steps)
        worst_tmpfs = max((median(b.tmpfs_runs) / median(a.tmpfs_runs) for a, b in steps
                           if a.tmpfs_runs and b.tmpfs_runs), default=float("nan"))
        lines.append(f"| doubling series t(2N)/t(N) ≤ {TARGET_DOUBLING} at every step | worst {worst:.2f} "
                     f"(diagnostic, on tmpfs: worst {worst_tmpfs:.2f}) | "
                     f"{verdict(worst <= TARGET_DOUBLING)} |")
    noop_files = max((s.noop_touched.get("changed", 0) + s.noop_touched.get("added", 0)
                      + s.noop_touched.get("removed", 0) for s in scales), default=0)
    noop_dirs = max((s.noop_touched.get("dirs_changed", 0) for s in scales), default=0)
    lines.append(f"| no-op re-render writes 0 files (every scale, inode and mtime compared) | {noop_files} files "
                 f"({noop_dirs} directories) | {verdict(noop_files == 0 and noop_dirs == 0)} |")
    if api:
        lines.append(f"| largest render passes the kube-apiserver dry-run tier | exit {api['exit']} | "
                     f"{verdict(api['exit'] == 0)} |")
    lines.append("")

    prof = results.get("profile")
    if prof and prof.get("phases"):
        lines += [f"### Where the time goes at {largest.label if largest else '?'} (one in-process run)", "",
                  "| phase | seconds |", "|---|---:|"]
        lines += [f"| {name} | {float(seconds):.2f} |" for name, seconds in prof["phases"]]
        lines.append("")

    return "\n".join(lines)




# --------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small scales (8 classes x 10..40 groups x 2 ns)")
    parser.add_argument("--groups", help="comma-separated group counts of the series (default 125,250,500,1000,2000)")
    parser.add_argument("--classes", type=int, default=64, help="classes in the series (default 64)")
    parser.add_argument("--namespaces", type=int, default=3, help="namespaces per group in the series (default 3)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions per synthetic scale (default 5)")
    parser.add_argument("--baseline-reps", type=int, default=None, help="FLAME/import repetitions (default 15)")
    parser.add_argument("--kustomize-budget", type=float, default=60.0,
                        help="repeat kubectl kustomize at a scale only while its runs took less than this (s)")
    parser.add_argument("--apiserver", action="store_true",
                        help="run tests/apiserver/test_apiserver.py against the largest rendered tree")
    parser.add_argument("--profile", action="store_true", help="phase breakdown and cProfile of the largest render")
    parser.add_argument("--write-readme", action="store_true", help=f"rewrite the results section of {README}")
    parser.add_argument("--json", type=Path, help="also write the raw results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--settle-start", type=float, default=SETTLE_START_SECONDS,
                        help="seconds to wait after a sync before the first measurement "
                             f"(default {SETTLE_START_SECONDS})")
    args = parser.parse_args(argv)
    reps = args.reps or (2 if args.quick else 5)
    baseline_reps = args.baseline_reps or (3 if args.quick else 15)
    series = QUICK_SERIES if args.quick else FULL_SERIES
    if args.groups or args.classes != 64 or args.namespaces != 3:
        counts = [int(g) for g in args.groups.split(",")] if args.groups else [g for _, g, _ in series]
        series = [(args.classes, g, args.namespaces) for g in counts]

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.monotonic()
    command = "python -m benchmarks.run " + " ".join(a for a in (argv if argv is not None else sys.argv[1:]))
    load_at_start = os.getloadavg()
    results: dict = {"command": command.strip(), "machine": machine(), "busy_start": busy()}
    results["bytecode"] = bytecode_as_by_default(log)
    renderer = Renderer()
    work = Path(tempfile.mkdtemp(prefix="gpugen-bench-"))
    log(f"work directory: {work}")
    if args.settle_start > 0:
        log(f"sync, then {args.settle_start:.0f} s for files removed before the run to stop counting as recent")
        os.sync()
        time.sleep(args.settle_start)
    try:
        log("FLAME vs. import-only processes")
        results["baseline"], results["loaded_modules"] = measure_baseline(renderer, work, baseline_reps, log)
        scales = []
        log("FLAME")
        scales.append(measure_scale(renderer, "FLAME", REPO / "gpu_classes.yaml", work / "flame", reps,
                                    args.kustomize_budget, (1, 2, 0), log))
        for classes, groups, namespaces in series:
            label = f"{classes} × {groups:,} × {namespaces}"
            log(label)
            inventory = work / f"inventory-{classes}x{groups}x{namespaces}.yaml"
            synth.write(inventory, classes, groups, namespaces)
            scales.append(measure_scale(renderer, label, inventory, work / f"s-{classes}x{groups}x{namespaces}",
                                        reps, args.kustomize_budget, (classes, groups, namespaces), log))
        results["scales"] = scales
        classes, groups, namespaces = max(series, key=lambda s: s[0] * s[1] * s[2])
        largest_work = work / f"s-{classes}x{groups}x{namespaces}" / f"cold-{reps - 1}"
        largest_inventory = work / f"inventory-{classes}x{groups}x{namespaces}.yaml"
        if args.apiserver:
            log("kube-apiserver dry-run tier on the largest tree")
            if (REPO / "tests/apiserver/test_apiserver.py").exists():
                paths = renderer.paths(largest_work)
                results["apiserver"] = apiserver_tier(paths["--out"], paths.get("--bootstrap-out"), work, log)
            else:
                results["apiserver_skipped"] = "tests/apiserver/test_apiserver.py does not exist (yet)."
        if args.profile:
            log("profile of the largest render")
            results["profile"] = profile(largest_inventory, renderer, largest_work, log)
        results["busy_end"] = busy()
        results["conditions"] = conditions(load_at_start)
        results["took_s"] = time.monotonic() - started
        text = report(results)
        print(text)
        if results.get("profile"):
            print("\n### cProfile of the largest render (cumulative)\n\n```\n"
                  + results["profile"]["cprofile"]["cumulative"]
                  + "\n```\n\n### cProfile (tottime)\n\n```\n" + results["profile"]["cprofile"]["tottime"] + "\n```")
        if args.write_readme:
            write_readme(text, BEGIN, END)
            log(f"rewrote the results section of {README}")
        if args.json:
            serial = {**results, "scales": [{**asdict(s), "render_median": s.render, "kustomize_median": s.kustomize}
                                            for s in results["scales"]]}
            args.json.write_text(json.dumps(serial, indent=2, default=str))
    finally:
        if args.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
