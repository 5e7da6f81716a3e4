"""What ran, as Kueue's own API tells it: every Workload's spells of reserved quota, with the ClusterQueue, the
flavor and the units of each (of the flavor's class's accelerator resource: GPUs, MIG slices, time-slices, ...),
recorded from the simulated cluster's start until it stops. The accounting test compares Prometheus' and
`gpugen report`'s GPU-hours (unit-hours) with this.

A poll every second reads each Workload's QuotaReserved and Finished conditions, whose transition times (whole
seconds) bound a spell; a Workload deleted between two polls ends at the poll that missed it.
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
from collections.abc import Iterable

from generator.inventory import accelerators

WORKLOADS = ("kueue.x-k8s.io/v1beta2", "Workload")


@dataclasses.dataclass
class Spell:
    namespace: str
    name: str
    cluster_queue: str
    gpus: dict[str, float]  # flavor -> units of its class's accelerator held
    start: float  # Unix seconds
    end: float | None = None

    def gpu_seconds(self, flavor: str, until: float) -> float:
        return self.gpus.get(flavor, 0.0) * ((self.end if self.end is not None else until) - self.start)


def _time(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp).timestamp()


def _condition(workload: dict, kind: str) -> dict | None:
    return next((c for c in workload.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _gpus(workload: dict, resources: Iterable[str]) -> dict[str, float]:
    """flavor -> units held, of each of `resources` the Workload's pod sets were assigned (a flavor is one class,
    whose quota of the other classes' resources is 0, so its units are of one resource)."""
    held: dict[str, float] = {}
    for assignment in workload["status"]["admission"].get("podSetAssignments", []):
        for resource in resources:
            flavor = assignment.get("flavors", {}).get(resource)
            amount = assignment.get("resourceUsage", {}).get(resource)
            if flavor and amount is not None:
                held[flavor] = held.get(flavor, 0.0) + float(str(amount))
    return held


class WorkloadLedger:
    def __init__(self, admin, inventory, interval: float = 1.0):
        self.admin = admin
        # Each class's accelerator resource, as the Kueue builder covers them (FLAME: nvidia.com/gpu alone).
        self.resources = tuple(accelerators.resources(inventory))
        self.interval = interval
        self.spells: list[Spell] = []
        self._open: dict[str, Spell] = {}  # workload uid -> its current spell
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="workload-ledger", daemon=True)

    def start(self) -> WorkloadLedger:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                items = self.admin.list(*WORKLOADS)
            except Exception:  # noqa: BLE001 - the API server is going away with the simulation
                continue
            self.observe(items, time.time())

    def observe(self, workloads: list[dict], now: float) -> None:
        with self._lock:
            seen = set()
            for w in workloads:
                uid = w["metadata"]["uid"]
                seen.add(uid)
                reserved = _condition(w, "QuotaReserved")
                finished = _condition(w, "Finished")
                holding = (reserved is not None and reserved["status"] == "True" and w["status"].get("admission")
                           and not (finished and finished["status"] == "True"))
                spell = self._open.get(uid)
                if holding and spell is None:
                    spell = Spell(w["metadata"]["namespace"], w["metadata"]["name"],
                                  w["status"]["admission"]["clusterQueue"], _gpus(w, self.resources),
                                  _time(reserved["lastTransitionTime"]))
                    self._open[uid] = spell
                    self.spells.append(spell)
                elif not holding and spell is not None:
                    ended = finished if finished and finished["status"] == "True" else reserved
                    spell.end = _time(ended["lastTransitionTime"]) if ended else now
                    del self._open[uid]
            for uid in set(self._open) - seen:
                self._open.pop(uid).end = now

    def gpu_seconds(self, until: float | None = None) -> dict[tuple[str, str], float]:
        """(ClusterQueue, flavor) -> unit-seconds held (GPU-seconds for whole GPUs), open spells counted until
        `until` (default now)."""
        until = until if until is not None else time.time()
        totals: dict[tuple[str, str], float] = {}
        with self._lock:
            for spell in self.spells:
                for flavor in spell.gpus:
                    key = (spell.cluster_queue, flavor)
                    totals[key] = totals.get(key, 0.0) + spell.gpu_seconds(flavor, until)
        return totals

    def spell_count(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for spell in self.spells:
                counts[spell.cluster_queue] = counts.get(spell.cluster_queue, 0) + 1
            return counts
