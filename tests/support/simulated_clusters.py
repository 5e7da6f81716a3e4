"""The life of a module's simulated cluster (tests/clusters, tests/accelerators): started with its log shown, a
missing tool or network namespace a prerequisite, stopped with its timings reported and none of its processes left."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from simulation import prerequisites
from simulation.cluster import ToolMissing
from simulation.netns import NetworkUnavailable
from simulation.processes import leftover_processes


def cluster_for_module(request, title: str, start: Callable[[Callable[[str], None]], Any],
                       pids: Callable[[Any], Iterable[int]]) -> Iterator[Any]:
    """For a module fixture (`yield from`): `start(log)` started, then yielded; at the end stopped, its
    `timings` shown under `title` beside pytest's own output, and every process of `pids(started)` checked gone."""
    log: list[str] = []
    try:
        started = start(log.append)
    except (ToolMissing, NetworkUnavailable) as e:
        prerequisites.unavailable(str(e))
    finally:
        print("\n".join(log))
    started_pids = list(pids(started))
    try:
        yield started
    finally:
        started.stop()
        reporter = request.config.pluginmanager.getplugin("terminalreporter")
        capture = request.config.pluginmanager.getplugin("capturemanager")
        if reporter and capture:
            with capture.global_and_fixture_disabled():
                reporter.write_line(f"\n{title}, timings: " + ", ".join(
                    f"{k} {v:.1f}s" for k, v in started.timings.items()))
        left = leftover_processes(started_pids)
        assert not left, f"processes still running after stop: {left}"
