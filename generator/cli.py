"""Command line: parses options, runs one use case (generator/usecases.py) and maps its refusals
(generator/errors.py) to messages and exit codes; no logic of its own."""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from datetime import datetime, UTC
from pathlib import Path

import click

from generator import usecases
from generator.report.usage import (DEFAULT_FROM, DEFAULT_STEP, MAX_ANSWER_BYTES, MAX_PERIOD_POINTS, MAX_SAMPLES,
                                  parse_period)
from generator.errors import (BaseUnreadable, EditRefused, InventoryInvalid, NoData, OutputRefused, OverLimits, Problem,
                              PrometheusUnavailable)
from generator.files.fs import describe_os_error

EXIT_STALE = 1
EXIT_NO_REPORT = 1  # report: Prometheus unreachable or without the data; nothing written
EXIT_INVALID = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """gpugen: render a GPU cluster's Kubeflow Trainer runtimes, Kueue queues, Kyverno policies, RBAC
    and Argo CD Application from the inventory gpu_classes.yaml, and report the GPU-hours its groups used.
    An inventory with clusters: renders one tree per cluster (OUT/<cluster>/) and an Argo CD ApplicationSet,
    with Kueue's MultiKueue dispatching from the manager to the worker of each class."""


def _exit_invalid(invalid: InventoryInvalid, inventory_path: Path, summary: str) -> None:
    for problem in invalid.problems:
        click.echo(str(problem), err=True)
    # Only the summary is a template: the path may hold braces.
    click.echo(f"{inventory_path}: {summary.format(count=len(invalid.problems))}", err=True)
    sys.exit(EXIT_INVALID)


_INVALID = "{count} problem(s); nothing written."
_OVER_LIMITS = "{count} rendered object(s) over Kubernetes' limits; nothing written."


@contextmanager
def _inventory_refusals(inventory_path: Path, invalid: str = _INVALID, over_limits: str = _OVER_LIMITS):
    """An invalid inventory, or rendered objects over Kubernetes' limits (reported like inventory problems, with no
    line to point at), listed with a summary naming the inventory; exit 2."""
    try:
        yield
    except InventoryInvalid as problems:
        _exit_invalid(problems, inventory_path, invalid)
    except OverLimits as over:
        _exit_invalid(InventoryInvalid([Problem(str(inventory_path), 0, 0, f"rendered {path}", reason)
                                        for path, reason in over.problems]), inventory_path, over_limits)


def _refused(where: str, error: Exception, tail: str) -> None:
    """An output or the file system refused: one line, exit 2."""
    reason = describe_os_error(error) if isinstance(error, OSError) else str(error)
    click.echo(f"{where}{reason}{tail}", err=True)
    sys.exit(EXIT_INVALID)


# The inventory this run reads and its command, for the one message given after click has returned (out of memory).
_RUN = {"inventory": "gpu_classes.yaml", "command": ""}


def _note_inventory(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    _RUN["inventory"] = str(value)
    return value


INVENTORY_OPTION = click.option("--inventory", "inventory_path", default="gpu_classes.yaml", show_default=True,
                                type=click.Path(dir_okay=False, path_type=Path), callback=_note_inventory,
                                help="Inventory to render.")


@main.command()
@INVENTORY_OPTION
@click.option("--out", "out_dir", default="rendered", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Tree Argo CD syncs, with its own kustomization.yaml (with clusters: one such tree per cluster, "
                   "OUT/<cluster>/). Replaced whole: stale files disappear.")
@click.option("--bootstrap-out", "bootstrap_dir", default="bootstrap", show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where the Argo CD app-of-apps goes (outside the synced tree).")
@click.option("--docs-out", "docs_path", default="docs/runtimes.md", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="The users' 'Available runtimes' page.")
@click.option("--check", is_flag=True,
              help="Write nothing; exit 1 listing added, changed and removed files if any output is stale.")
def render(inventory_path: Path, out_dir: Path, bootstrap_dir: Path, docs_path: Path, check: bool) -> None:
    """Render the inventory into OUT, BOOTSTRAP-OUT and DOCS-OUT.

    Exit codes: 0 written or up to date; 1 stale (--check); 2 invalid inventory, nothing written.
    """
    # Rendering builds acyclic data: the cyclic collector only costs time (measurably at national scale).
    collecting = gc.isenabled()
    gc.disable()
    try:
        _render(inventory_path, out_dir, bootstrap_dir, docs_path, check)
    finally:
        if collecting:
            gc.enable()


def _render(inventory_path: Path, out_dir: Path, bootstrap_dir: Path, docs_path: Path, check: bool) -> None:
    try:
        with _inventory_refusals(inventory_path):
            result = usecases.render(inventory_path, usecases.Outputs(out_dir, bootstrap_dir, docs_path), check=check)
    except OutputRefused as refused:
        _refused("error: ", refused, "")
    except OSError as error:
        _refused("error: ", error, "; the outputs were left as they were.")
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if check:
        for line in result.stale:
            click.echo(line)
        if result.stale:
            click.echo(f"Stale: run `make render` and commit the result ({len(result.stale)} file(s) differ).",
                       err=True)
            sys.exit(EXIT_STALE)
        click.echo(f"Up to date: {out_dir}/, {bootstrap_dir}/ and {docs_path} match {inventory_path}.")
        return
    for written in result.written:
        changes = written.changes
        summary = (f"{len(changes.added)} added, {len(changes.changed)} changed, {len(changes.removed)} removed"
                   if changes else "up to date")
        click.echo(f"{written.label}: {summary} ({written.files} files)")


@main.command()
@INVENTORY_OPTION
@click.option("--out", "out_dir", default="rendered", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="The synced tree, as committed in git.")
@click.option("--base", default="HEAD", show_default=True, help="Git revision whose OUT tree is the starting point.")
@click.option("--format", "output_format", type=click.Choice(["text", "markdown"]), default="text", show_default=True,
              help="markdown: a pull-request comment, truncated under GitHub's 65,536 characters.")
def plan(inventory_path: Path, out_dir: Path, base: str, output_format: str) -> None:
    """Show what rendering the inventory changes against OUT at BASE: objects added, removed and changed per
    kind, field by field, with risk flags (delete-and-recreate changes, quota reductions, removed classes). A tree
    split into Applications (cluster.gitops.groupApplications): each change's Application, and the objects that
    move to another. With clusters: one plan per cluster, and the classes that move from one worker to another.

    Writes nothing. Exit codes: 0 plan shown; 2 invalid inventory or unreadable base.
    """
    from generator.plan import output  # plan-only imports stay off the render path

    try:
        with _inventory_refusals(inventory_path):
            result = usecases.plan(inventory_path, out_dir, base)
    except BaseUnreadable as unreadable:
        _refused("error: ", unreadable, "")
    click.echo(output.write(result, output_format), nl=False)


@main.group()
def inventory() -> None:
    """Edit gpu_classes.yaml keeping its comments, key order and layout.

    Every edit validates the result like a render would and refuses to write an invalid inventory (exit 2).
    Run `make render` afterwards.
    """


def _apply(inventory_path: Path, edit_name: str, *args, **kwargs) -> None:
    """Run generator.inventory.edit.<edit_name>(*args, **kwargs) on the file."""
    from generator.inventory import edit  # ruamel.yaml is imported only when editing

    try:
        with _inventory_refusals(inventory_path, "{count} problem(s) before or after the edit; nothing written.",
                                 "the edit would render {count} object(s) over Kubernetes' limits; nothing written."):
            usecases.edit_inventory(inventory_path, getattr(edit, edit_name)(*args, **kwargs))
    except (EditRefused, OutputRefused, OSError) as refused:
        _refused(f"{inventory_path}: ", refused, "; nothing written.")
    click.echo(f"updated {inventory_path}; run `make render` to update the rendered tree.")


@inventory.command("add-class")
@INVENTORY_OPTION
@click.argument("name")
@click.option("--arch", type=click.Choice(["arm64", "amd64"]), required=True)
@click.option("--label-value", required=True, help="Value of the cluster's gpuClassLabel on this class's nodes.")
@click.option("--image", required=True, help="Default runtime image (pinned tag or digest).")
@click.option("--nodes", type=int, required=True)
@click.option("--gpus-per-node", type=int, required=True)
@click.option("--cpu-per-node", required=True)
@click.option("--memory-per-node", required=True)
@click.option("--flavor", help="ResourceFlavor name (default: the class name).")
@click.option("--description")
def add_class_command(inventory_path, name, arch, label_value, image, nodes, gpus_per_node, cpu_per_node,
                      memory_per_node, flavor, description):
    """Add GPU class NAME (its runtime will be torch-NAME)."""
    _apply(inventory_path, "add_class", name, arch=arch, label_value=label_value, image=image, nodes=nodes,
           gpus=gpus_per_node, cpu=cpu_per_node, memory=memory_per_node, flavor=flavor, description=description)


@inventory.command("set-image")
@INVENTORY_OPTION
@click.argument("class_name", metavar="CLASS")
@click.argument("image")
def set_image_command(inventory_path, class_name, image):
    """Set the default runtime image of CLASS."""
    _apply(inventory_path, "set_image", class_name, image)


@inventory.command("add-group")
@INVENTORY_OPTION
@click.argument("name")
@click.option("--namespace", "namespaces", multiple=True, required=True, help="Repeat for several namespaces.")
@click.option("--class", "class_name", required=True, help="Class of the group's first allocation.")
@click.option("--gpus", type=int, required=True)
@click.option("--cpu", required=True)
@click.option("--memory", required=True)
@click.option("--cohort", help="Share idle quota with the groups of this cohort.")
@click.option("--description")
@click.option("--oidc-group", "identity_groups", multiple=True,
              help="A member group as the API server names it (e.g. oidc:physics-lab); repeatable.")
@click.option("--user", "users", multiple=True, help="A member user as the API server names it; repeatable.")
def add_group_command(inventory_path, name, namespaces, class_name, gpus, cpu, memory, cohort, description,
                      identity_groups, users):
    """Add research group NAME with its namespaces, members and a first allocation."""
    _apply(inventory_path, "add_group", name, namespaces=list(namespaces), class_name=class_name, gpus=gpus,
           cpu=cpu, memory=memory, cohort=cohort, description=description, identity_groups=list(identity_groups),
           users=list(users))


@inventory.command("add-namespace")
@INVENTORY_OPTION
@click.argument("group")
@click.argument("namespace")
def add_namespace_command(inventory_path, group, namespace):
    """Add NAMESPACE to GROUP (it gets a `default` LocalQueue)."""
    _apply(inventory_path, "add_namespace", group, namespace)


@inventory.command("set-allocation")
@INVENTORY_OPTION
@click.argument("group")
@click.argument("class_name", metavar="CLASS")
@click.option("--gpus", type=int)
@click.option("--cpu")
@click.option("--memory")
def set_allocation_command(inventory_path, group, class_name, gpus, cpu, memory):
    """Set GROUP's nominal quota on CLASS (creates the allocation when all three are given)."""
    _apply(inventory_path, "set_allocation", group, class_name, gpus=gpus, cpu=cpu, memory=memory)


@main.command()
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here (only when it changes) instead of printing.")
def schema(out_path: Path | None) -> None:
    """Export the inventory's JSON Schema (committed as schema/gpu_classes.schema.json for editors)."""
    text, written = usecases.export_schema(out_path)
    if out_path is None:
        click.echo(text, nl=False)
    elif written:
        click.echo(f"wrote {out_path}")


def _prometheus_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from generator.report.prometheus_api import check_url  # urllib is imported only to report

    try:
        return check_url(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


@contextmanager
def _progress(enabled: bool):
    """A progress callback drawing click's progress bar on stderr, or None."""
    if not enabled:
        yield None
        return
    bars: list = []

    def update(done: int, total: int) -> None:
        if not bars:
            bars.append(click.progressbar(length=total, label="Querying Prometheus", file=sys.stderr).__enter__())
        bars[0].update(done - bars[0].pos)

    try:
        yield update
    finally:
        if bars:
            bars[0].__exit__(None, None, None)


def _report_refused(message: str, code: int) -> None:
    click.echo(f"gpugen report: {message}", err=True)
    sys.exit(code)


class _OneLineUsageErrors(click.Command):
    """A command whose wrong options are refused on one line naming the option, like its other refusals (a
    script reading stderr gets one line per refusal), not click's usage block."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as error:
            _report_refused(" ".join(error.format_message().split()), EXIT_INVALID)


REPORT_HELP = f"""Report the GPU-hours (and CPU-hours, memory GiB-hours) each research group used per GPU class over a
    period, against its allocation, from Kueue's kueue_cluster_queue_resource_usage in Prometheus: the quota Kueue
    admitted, not the utilisation the GPUs measured.

    Bounds: a period from 1970-01-01 at the earliest, of at most {MAX_PERIOD_POINTS:,} steps per series
    ({MAX_PERIOD_POINTS * 30 // 86400} days at 30s), checked before any request; each answer of Prometheus at most
    {MAX_ANSWER_BYTES // 2**20} MiB (a larger one is asked again in halves), {MAX_SAMPLES:,} samples in all.

    Exit codes: 0 reported; 1 Prometheus unreachable, refusing the query, answering what is not Kueue's usage (a
    value that is not a finite number from 0, a field missing or of the wrong type, an answer too large) or without
    Kueue's usage for the period; 2 invalid options or inventory, or an output that cannot be written. Each refusal
    is one line naming the option, the URL or the answer (an invalid inventory: a line per problem). Nothing is
    written unless every query succeeded.
    """


@main.command(cls=_OneLineUsageErrors, help=REPORT_HELP)
@click.option("--inventory", "inventory_path", default="gpu_classes.yaml", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), callback=_note_inventory,
              help="Inventory naming the groups, classes and allocations to report.")
@click.option("--prometheus", "prometheus_url", required=True, metavar="URL", callback=_prometheus_url,
              help="Base URL of a Prometheus that scrapes Kueue's metrics, e.g. http://127.0.0.1:9090.")
@click.option("--from", "start", default=DEFAULT_FROM, show_default=True, metavar="TIME",
              help="Start: ISO 8601 (UTC unless it has an offset), or a duration before --to (30d, 12h).")
@click.option("--to", "end", metavar="TIME", help="End: ISO 8601, or a duration before now.  [default: now]")
@click.option("--step", default=DEFAULT_STEP, show_default=True, metavar="DURATION",
              help="Resolution: Kueue's usage is sampled every STEP (at most one STEP of error per job start or end), "
                   f"at most {MAX_PERIOD_POINTS:,} times over the period.")
@click.option("--format", "output_format", type=click.Choice(["table", "csv"]), default="table", show_default=True,
              help="csv: a header row and one row per group and class, with stable columns.")
@click.option("--output", "output_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report (in --format) to this file instead of stdout.")
@click.option("--chart", "chart_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Draw the GPUs in use over time, one plot per class, one band per group: FILE.png or FILE.svg "
                   "(needs matplotlib: pip install 'gpugen[report]').")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar on stderr.  [default: when stderr is a terminal]")
def report(inventory_path: Path, prometheus_url: str, start: str, end: str | None, step: str, output_format: str,
           output_path: Path | None, chart_path: Path | None, progress: bool | None) -> None:
    _RUN["command"] = "report"
    try:
        period = parse_period(start, end, step, datetime.now(UTC))
    except ValueError as error:
        _report_refused(f"{error}; nothing written.", EXIT_INVALID)
    try:
        with _inventory_refusals(inventory_path, "{count} problem(s); nothing reported."), \
                _progress(sys.stderr.isatty() if progress is None else progress) as callback:
            result = usecases.report(inventory_path, prometheus_url, period, output_format, output_path, chart_path,
                                     callback)
    except (PrometheusUnavailable, NoData) as refused:
        _report_refused(f"{refused}; nothing written.", EXIT_NO_REPORT)
    except OutputRefused as refused:
        _report_refused(f"{refused}; nothing written.", EXIT_INVALID)
    except OSError as error:
        _report_refused(describe_os_error(error), EXIT_INVALID)
    if result.ignored:
        listed = "; ".join(result.ignored[:5]) + (" ..." if len(result.ignored) > 5 else "")
        click.echo(f"warning: not counted (not in {inventory_path}): {listed}", err=True)
    for written in (chart_path, output_path):
        if written is not None:
            click.echo(f"wrote {written}", err=True)
    if result.text is not None:
        click.echo(result.text, nl=False)


# A process-wide bound on memory, whatever the inventory: the input limits keep every inventory we could
# construct under it (the hostile-input benchmark), and this makes the bound hold for the ones we did not.
MEMORY_LIMIT_MB = 500


def run() -> None:
    """Entry point of `python -m generator` and the `gpugen` script: main() under the memory bound. (Tests
    call main() in-process, without it.)"""
    import os
    import resource

    limit_mb = int(os.environ.get("GPUGEN_MEMORY_LIMIT_MB", MEMORY_LIMIT_MB))
    if limit_mb > 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        wanted = limit_mb * 1024 * 1024
        if soft == resource.RLIM_INFINITY or soft > wanted:
            allowed = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(resource.RLIMIT_AS, (allowed, hard))
    try:
        main()
    except MemoryError:
        if _RUN["command"] == "report":  # the report's bounds keep its answers under the limit: a last resort
            click.echo(f"gpugen report: the answers of Prometheus need more than {limit_mb} MB of memory "
                       "(GPUGEN_MEMORY_LIMIT_MB); ask for a larger --step or a shorter period; nothing written.",
                       err=True)
            sys.exit(EXIT_NO_REPORT)
        click.echo(f"error: {_RUN['inventory']}: refused: this needs more than {limit_mb} MB of memory "
                   "(GPUGEN_MEMORY_LIMIT_MB); the outputs were left as they were.", err=True)
        sys.exit(EXIT_INVALID)
