"""A plan of one tree: its changes (diff.py) and their risks (risks.py). Pure: compares two rendered trees
({path: bytes}); reading the base tree from git is gitfiles.py's."""

from __future__ import annotations

from dataclasses import dataclass

from generator.kinds import SYNCED_KINDS
from generator.plan.diff import ObjectChange, diff
from generator.plan.objects import Files, objects_of
from generator.plan.risks import Risk, risks


@dataclass
class Plan:
    changes: list[ObjectChange]
    risks: list[Risk]

    def by_kind(self) -> dict[str, list[ObjectChange]]:
        grouped: dict[str, list[ObjectChange]] = {}
        for change in self.changes:
            grouped.setdefault(change.key[0], []).append(change)
        order = {kind: i for i, kind in enumerate(SYNCED_KINDS)}  # what users touch first
        return dict(sorted(grouped.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def make_plan(base_files: Files, new_files: Files) -> Plan:
    base, new = objects_of(base_files), objects_of(new_files)
    changes = diff(base, new)
    return Plan(changes, risks(base, new, changes))
