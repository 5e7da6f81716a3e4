"""A plan of one tree: its changes (diff.py) and their risks (risks.py). Pure: compares two rendered trees
({path: bytes}); reading the base tree from git is gitfiles.py's."""

from __future__ import annotations

from dataclasses import dataclass, field

from generator.kinds import SYNCED_KINDS
from generator.plan.diff import ObjectChange, diff
from generator.plan.objects import Files, Key, read_tree
from generator.plan.risks import MOVES, Risk, risks


@dataclass
class Plan:
    changes: list[ObjectChange]
    risks: list[Risk]
    # A tree split into Applications: the folder of the Application each changed object is in (the base's for a
    # removed one); {} for a tree one Application syncs.
    applications: dict[Key, str] = field(default_factory=dict)

    def by_kind(self) -> dict[str, list[ObjectChange]]:
        grouped: dict[str, list[ObjectChange]] = {}
        for change in self.changes:
            grouped.setdefault(change.key[0], []).append(change)
        order = {kind: i for i, kind in enumerate(SYNCED_KINDS)}  # what users touch first
        return dict(sorted(grouped.items(), key=lambda item: (order.get(item[0], len(order)), item[0])))


def make_plan(base_files: Files, new_files: Files) -> Plan:
    (base, base_folders), (new, new_folders) = read_tree(base_files), read_tree(new_files)
    changes = diff(base, new)
    found = risks(base, new, changes)
    # An object whose Application changes is pruned by the one and created by the other: whatever runs on it stops.
    found += [Risk(key, f"{MOVES}: from the Application of {base_folders.get(key) or 'the whole tree'} to that of "
                        f"{new_folders.get(key) or 'the whole tree'}; the first prunes it, the second creates it anew")
              for key in sorted(base.keys() & new.keys()) if base_folders.get(key) != new_folders.get(key)]
    return Plan(changes, found, {change.key: new_folders.get(change.key) or base_folders.get(change.key, "")
                                 for change in changes if change.key in new_folders or change.key in base_folders})
