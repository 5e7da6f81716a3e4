"""Kueue's own settings under cluster.components.kueue."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from generator.fields import Component


class KueueComponent(Component):
    # waitForPodsReady.timeout: an admitted job whose pods are not all ready by then gives its quota back.
    podsReadyTimeout: Annotated[str, StringConstraints(pattern=r"^([0-9]+(\.[0-9]+)?(h|m|s))+$")] = "10m"
    # Several clusters only (the manager's multiKueue.workerLostTimeout): how long a job dispatched to a worker the
    # manager can no longer reach keeps its admission before it is evicted and requeued.
    workerLostTimeout: Annotated[str, StringConstraints(pattern=r"^([0-9]+(\.[0-9]+)?(h|m|s))+$")] = "15m"

