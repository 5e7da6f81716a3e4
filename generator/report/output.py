"""A usage report (usage.py) as the user reads it: a terminal table, CSV with stable columns, and a
stacked area chart of the GPUs each group held per class (PNG or SVG). Returns text or bytes; the use case writes.
"""

from __future__ import annotations

import csv
import importlib.util
import io
from datetime import datetime, UTC
from pathlib import Path

from generator.freetext import matplotlib_text
from generator.report.usage import RESOURCES, Report, Usage, bucket_means, iso
from generator.errors import OutputRefused

CSV_COLUMNS = ("period_start", "period_end", "step_seconds", "group", "class",
               "gpu_hours", "allocated_gpu_hours", "gpu_percent_of_allocation",
               "cpu_hours", "allocated_cpu_hours", "cpu_percent_of_allocation",
               "memory_gib_hours", "allocated_memory_gib_hours", "memory_percent_of_allocation",
               "gpu_unit")
TABLE_COLUMNS = ("group", "class", "GPU-h", "allocation GPU-h", "% of allocation", "CPU-h", "memory GiB-h")
# The table's last column, when a class counts another unit than whole GPUs: what its "GPU-h" are hours of.
UNIT_COLUMN = "GPU-h are hours of one"
CHART_FORMATS = ("png", "svg")
# A chart wider than this many columns shows nothing more; longer periods are averaged into as many buckets
# (an average keeps the area, so the picture's GPU-hours stay the table's).
_CHART_COLUMNS = 2000


def _hours(value: float) -> str:
    # Two places: a minute of one GPU (0.02 h) must not read as nothing.
    return f"{value:,.2f}"


def _percent(usage: Usage) -> str:
    return "-" if usage.percent is None else f"{usage.percent:.1f}"


def table(report: Report) -> str:
    """Aligned columns, one line per group and class, under a line saying what was counted."""
    period = report.period
    lines = [f"GPU-hours from {period.label()} ({period.hours:,.1f} h, step {period.step}s), "
             f"admitted quota per Kueue at {report.source}", ""]
    # Classes of whole GPUs only: the table as it always was; otherwise each row names its class's unit.
    units = set(report.units.values()) != {"GPU"}
    rows = [TABLE_COLUMNS + ((UNIT_COLUMN,) if units else ())] + [
        (group, gpu_class, _hours(used["gpus"].used), _hours(used["gpus"].allocated), _percent(used["gpus"]),
         _hours(used["cpu"].used), _hours(used["memory"].used)) + ((report.units[gpu_class],) if units else ())
        for group, gpu_class, used in report.rows()]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        cells = [cell.ljust(width) if column < 2 or column == len(TABLE_COLUMNS) else cell.rjust(width)
                 for column, (cell, width) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _number(value: float | None, places: int) -> str:
    return "" if value is None else f"{value:.{places}f}"


def csv_text(report: Report) -> str:
    """A header row and one row per group and class (CSV_COLUMNS; hours to 4 places, an empty percent without
    an allocation); the period is on every row, so monthly files concatenate."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    period = report.period
    for group, gpu_class, used in report.rows():
        cells: list[str] = [iso(period.start), iso(period.end), str(period.step), group, gpu_class]
        for resource in RESOURCES:
            usage = used[resource]
            cells += [_number(usage.used, 4), _number(usage.allocated, 4), _number(usage.percent, 2)]
        writer.writerow(cells + [report.units[gpu_class]])
    return out.getvalue()


def check_chart(path: Path) -> str:
    """The chart's format from its suffix; OutputRefused when it is neither .png nor .svg, or matplotlib (the
    `report` extra) is not installed."""
    chart_format = path.suffix.lower().lstrip(".")
    if chart_format not in CHART_FORMATS:
        raise OutputRefused(f"{path}: a chart is .png or .svg, chosen by the file's suffix")
    if importlib.util.find_spec("matplotlib") is None:
        raise OutputRefused(f"{path}: drawing a chart needs matplotlib: pip install 'gpugen[report]'")
    return chart_format


def chart(report: Report, chart_format: str) -> bytes:
    """Stacked areas of the GPUs each group held, one subplot per class, the class's GPUs as a dashed line."""
    # matplotlib is the `report` extra, imported only to draw; the figure API needs no global backend choice.
    from matplotlib import rc_context
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    period = report.period
    size = -(-period.points // _CHART_COLUMNS)
    times = [datetime.fromtimestamp(period.start + i * period.step, UTC)
             for i in range(0, period.points, size)]
    groups = sorted({group for by_group in report.gpus.values() for group in by_group})
    colors = {group: f"C{index % 10}" for index, group in enumerate(groups)}
    classes = sorted(report.gpus)
    figure = Figure(figsize=(10, 1.2 + 2.6 * len(classes)), layout="constrained")
    FigureCanvasAgg(figure)
    figure.suptitle(f"GPUs admitted by Kueue per class, {period.label()}"
                    if set(report.units.values()) == {"GPU"} else
                    f"Accelerators admitted by Kueue per class, each in its unit, {period.label()}")
    axes = figure.subplots(len(classes), 1, sharex=True, squeeze=False)[:, 0]
    for ax, gpu_class in zip(axes, classes):
        by_group = report.gpus[gpu_class]
        names = sorted(by_group)
        stacks = [bucket_means(by_group[name], period, size) for name in names]
        # step="post": each value holds until the next point, as the table's left Riemann sum counts it.
        ax.stackplot(times, *stacks, labels=names, colors=[colors[name] for name in names], step="post")
        capacity = report.capacity[gpu_class]
        # The unit is the inventory's free text: matplotlib would read a pair of $ in it as mathtext.
        shown = matplotlib_text(report.units[gpu_class])
        unit = "GPUs" if report.units[gpu_class] == "GPU" else f"x {shown}"
        ax.axhline(capacity, color="0.3", linestyle="--", linewidth=1, label=f"{capacity} {unit} in the class")
        top = max([capacity] + [sum(column) for column in zip(*stacks)])
        ax.set_ylim(0, top * 1.15 or 1)
        ax.set_xlim(times[0], datetime.fromtimestamp(period.end, UTC))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(gpu_class, loc="left")
        ax.set_ylabel(unit if unit == "GPUs" else shown, wrap=True)
        ax.legend(loc="upper right", fontsize="small")
        locator = AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    out = io.BytesIO()
    # Same report, same bytes: no date in the SVG, fixed element ids.
    with rc_context({"svg.hashsalt": "gpugen-report"}):
        figure.savefig(out, format=chart_format, metadata={"Date": None} if chart_format == "svg" else None)
    return out.getvalue()
