"""What gpugen does for its user, one function each: render, check, plan, edit the inventory, export its schema,
report the GPU-hours each group used.

Render, check, plan and edit read the inventory, build with the pure core and touch the file system only through
`_locked`: outputs resolved (a symlink is written through), refused when they coincide, nest or would replace an
input, then one lock over all of them and the leftovers of a killed run removed, before anything is read or staged.
The schema and the report write single files of their own, each replaced whole (write_file_atomically). The CLI
parses options, calls one of these and maps the exceptions of generator/errors.py to messages and exit codes.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from generator.errors import BaseUnreadable, EditRefused, GitError, OutputRefused
from generator.inventory import clusters, load_inventory
from generator.layout import directory_size_warning
from generator.tree import RenderedTrees, render_trees
from generator.files.fs import write_file_atomically
from generator.files.lock import output_lock, remove_leftovers
from generator.files.paths import check_outputs_apart, resolve_output
from generator.files.scan import Changes, generated_by_us
from generator.files.staging import Pending, apply_outputs, pending_file, pending_tree

if TYPE_CHECKING:
    from generator.report.usage import Period


@dataclass(frozen=True)
class Outputs:
    """Where a render writes: the synced tree, the app-of-apps tree and the users' runtimes page."""

    synced: Path
    bootstrap: Path
    docs: Path


@dataclass(frozen=True)
class Written:
    label: str  # the output, as the user gave it
    changes: Changes
    files: int


@dataclass(frozen=True)
class RenderResult:
    written: list[Written]  # in Outputs' order; nothing when checking
    stale: list[str]  # "added: PATH" lines when checking; nothing when writing
    warnings: list[str]


def render_inventory(inventory_path: Path) -> RenderedTrees:
    """Load, validate and build: raises InventoryInvalid or OverLimits, writes nothing."""
    return render_trees(load_inventory(inventory_path), inventory_path.name)


@contextmanager
def _locked(trees: list[Path], files: list[Path], inputs: list[Path], shared: bool) -> Iterator[list[Path]]:
    """The outputs (`trees`, directories replaced whole, then `files`) resolved, checked apart from each other and
    from the inputs, and locked (shared to read, exclusive to write, when the leftovers of a killed run are
    removed first)."""
    resolved_trees, resolved_files = [resolve_output(p) for p in trees], [resolve_output(p) for p in files]
    check_outputs_apart(resolved_trees, resolved_files, [resolve_output(path) for path in inputs])
    resolved = resolved_trees + resolved_files
    # Read and write under one lock: a concurrent run on the same outputs waits, so neither sees the other's
    # half-swapped state.
    with output_lock(resolved, shared=shared):
        if not shared:
            for target in resolved:
                remove_leftovers(target)
        yield resolved


def render(inventory_path: Path, outputs: Outputs, check: bool = False) -> RenderResult:
    """Write the three outputs, all or nothing, touching no file whose content is unchanged; with `check`,
    write nothing and list what is stale."""
    trees = render_inventory(inventory_path)
    warning = directory_size_warning(trees.synced)
    warnings = [*trees.unguarded, *([warning] if warning else [])]
    with _locked([outputs.synced, outputs.bootstrap], [outputs.docs], [inventory_path],
                 shared=check) as (synced, bootstrap, docs):
        pending: list[Pending] = [pending_tree(trees.synced, synced), pending_tree(trees.bootstrap, bootstrap),
                                  pending_file(trees.docs, docs)]
        if check:
            return RenderResult([], [line for output in pending for line in output.stale_lines()], warnings)
        changes = apply_outputs(pending)
    return RenderResult([Written(output.label, change, output.count) for output, change in zip(pending, changes)],
                        [], warnings)


def plan(inventory_path: Path, out_dir: Path, base: str):
    """What rendering the inventory changes against OUT as committed at BASE (generator.plan.plans.Plan; for an
    inventory of several clusters generator.plan.clusters.ClusterPlans, per cluster)."""
    from generator.plan.gitfiles import files_at  # plan-only imports stay off the render path
    from generator.plan.clusters import make_cluster_plans
    from generator.plan.plans import make_plan

    inventory = load_inventory(inventory_path)
    trees = render_trees(inventory, inventory_path.name)
    try:
        base_files = files_at(base, out_dir)
    except (GitError, OSError, ValueError) as error:  # ValueError: --out outside the repository
        raise BaseUnreadable(f"cannot read {out_dir}/ at {base}: {' '.join(str(error).split())}") from None
    foreign = sorted(path for path, content in base_files.items() if not generated_by_us(content))
    if foreign:
        listed = ", ".join(foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise BaseUnreadable(f"{out_dir}/ at {base} holds files gpugen did not write ({listed}): is --out the "
                             "rendered tree?")
    # Several clusters: a plan per cluster's folder. A tree of one cluster split into Applications has folders too,
    # one plan over them (plans.Plan names each change's folder).
    if clusters.several(inventory):
        return make_cluster_plans(base_files, trees.synced)
    return make_plan(base_files, trees.synced)


def _refuse_read_only(target: Path) -> None:
    # Someone made the file read-only on purpose; editors refuse to write it, and so do we. The replace
    # itself would succeed (it renames over the file), and root passes os.access, hence the mode bits too.
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return  # reading reports it
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise EditRefused(f"the file is read-only (mode {mode:04o}); make it writable (chmod u+w) to edit it")


def edit_inventory(path: Path, edit) -> str:
    """Apply an inventory edit (generator.inventory.edit) to the file at `path` (through a symlink: the link
    stays, its target is edited); write it only if the result is a valid inventory that renders within
    Kubernetes' limits. Returns the new text. Under the same lock as a render, so two edits cannot lose one
    another's change; the file keeps its mode and owner, and no temporary file is left on any failure."""
    from generator.inventory.edit import edit_text  # ruamel.yaml is imported only when editing
    from generator.inventory.load import load_inventory_text
    from generator.inventory.reading import decode_inventory, read_inventory_bytes

    with _locked([], [path], [], shared=False) as (target,):
        _refuse_read_only(target)
        original = decode_inventory(read_inventory_bytes(target), str(path))
        # Validate the starting point too: editing a broken file would blame the edit for old problems.
        load_inventory_text(original, str(path))
        edited = edit_text(original, edit)
        inventory = load_inventory_text(edited, f"{path} (after the edit)")
        render_trees(inventory, target.name)  # raises OverLimits, as a render would
        if edited != original:
            write_file_atomically(target, edited.encode("utf-8"))
    return edited


def export_schema(out_path: Path | None) -> tuple[str, bool]:
    """The inventory's JSON Schema text, and whether it was written to `out_path` (only when it changed)."""
    from generator.inventory.models import json_schema

    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if out_path is None or (out_path.is_file() and out_path.read_text(encoding="utf-8") == text):
        return text, False
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomically(out_path, text.encode("utf-8"))
    return text, True


@dataclass(frozen=True)
class ReportResult:
    text: str | None  # the report for stdout; None when it was written to a file
    ignored: list[str]  # series Prometheus has that the inventory does not name


def report(inventory_path: Path, prometheus_url: str, period: Period, output_format: str = "table",
           output: Path | None = None, chart: Path | None = None,
           progress: Callable[[int, int], None] | None = None) -> ReportResult:
    """Each group's GPU-, CPU- and memory-hours per class over `period` from Kueue's metrics in
    Prometheus, against its allocation: the report as text (table or csv), or written to `output`, and the chart
    to `chart` (PNG or SVG by its suffix). Raises InventoryInvalid, OutputRefused (a chart it cannot draw),
    PrometheusUnavailable, NoData, OSError; writes nothing before every answer is in."""
    from generator.report import output as report_output, usage  # report-only imports stay off the render path
    from generator.report.prometheus_api import Prometheus

    inventory = load_inventory(inventory_path)
    # Refused before minutes of queries, not after.
    chart_format = report_output.check_chart(chart) if chart is not None else None
    files = [resolve_output(path) for path in (output, chart) if path is not None]
    check_outputs_apart([], files, [resolve_output(inventory_path)])
    for path in files:
        if not path.parent.is_dir():
            raise OutputRefused(f"{path}: no such directory")
    client = Prometheus(prometheus_url)
    series = usage.collect(client.query_range(usage.usage_query(inventory), period, progress))
    result = usage.usage_report(inventory, period, series, client.url)
    text = report_output.csv_text(result) if output_format == "csv" else report_output.table(result)
    if chart is not None:
        write_file_atomically(chart, report_output.chart(result, chart_format))
    if output is not None:
        write_file_atomically(output, text.encode("utf-8"))
    return ReportResult(None if output is not None else text, result.ignored)
