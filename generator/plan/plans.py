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


def _folder(folder: str | None) -> str:
    return f"{folder}/" if folder else "the whole tree"


def make_plan(base_files: Files, new_files: Files) -> Plan:
    (base, base_folders), (new, new_folders) = read_tree(base_files), read_tree(new_files)
    changes = diff(base, new)
    found = risks(base, new, changes)
    # An object changes Application only when its folder is renamed (splitting or joining the tree, another number
    # of groups' Applications): the old Application goes with the change, deleted without its objects (gpugen's
    # Applications carry no resources finalizer), and the new one adopts the object in place.
    moved = [key for key in sorted(base.keys() & new.keys()) if base_folders.get(key) != new_folders.get(key)]
    found += [Risk(key, f"{MOVES}: from the Application of {_folder(base_folders.get(key))} to that of "
                        f"{_folder(new_folders.get(key))}; the first is deleted without its objects and the second "
                        "adopts this one in place, neither deleting nor recreating it")
              for key in moved]
    changed = {change.key for change in changes}
    changes = sorted(changes + [ObjectChange(key, "moved") for key in moved if key not in changed],
                     key=lambda change: change.key)
    return Plan(changes, found, {change.key: new_folders.get(change.key) or base_folders.get(change.key, "")
                                 for change in changes if change.key in new_folders or change.key in base_folders})
