"""A plan of several clusters (docs/multi-cluster.md): one plan per cluster's tree, and the GPU classes that move
from one worker to another."""

from __future__ import annotations

from dataclasses import dataclass

from generator.layout import cluster_folders
from generator.plan.objects import Files, Key, flavor_classes, objects_of
from generator.plan.plans import Plan, make_plan


@dataclass(frozen=True)
class ClassMove:
    gpu_class: str
    old: str  # the worker that ran it at the base ("" when new)
    new: str  # the worker that runs it now ("" when removed)


@dataclass
class ClusterPlans:
    """A render of several clusters against its base: one Plan per cluster, and the classes that change worker."""

    plans: dict[str, Plan]
    moves: list[ClassMove]


def cluster_trees(files: Files) -> dict[str, Files]:
    """A tree of several clusters split by cluster ({cluster: {path in its tree: bytes}}); {} for a tree of one
    cluster (layout.cluster_folders)."""
    out: dict[str, Files] = {name: {} for name in sorted(cluster_folders(files))}
    for path, content in files.items():
        cluster, _, rest = path.partition("/")
        if cluster in out:
            out[cluster][rest] = content
    return out


def _worker_classes(objects: dict[Key, dict]) -> set[str] | None:
    """The GPU classes a worker's tree runs (its flavors' classes); None for the manager (MultiKueue's clusters)."""
    if any(kind == "MultiKueueCluster" for kind, _, _ in objects):
        return None
    return set(flavor_classes(objects).values())


def make_cluster_plans(base_files: Files, new_files: Files) -> ClusterPlans:
    """Per cluster of either render its plan (a cluster only one of them has: everything added, or removed), and
    the classes whose worker changes. A base of one cluster counts as no cluster: all is added."""
    base, new = cluster_trees(base_files), cluster_trees(new_files)
    plans = {name: make_plan(base.get(name, {}), new.get(name, {})) for name in sorted(base.keys() | new.keys())}

    def placement(trees: dict[str, Files]) -> dict[str, str]:
        where = {}
        for name, files in trees.items():
            for gpu_class in _worker_classes(objects_of(files)) or ():
                where[gpu_class] = name
        return where
    old, now = placement(base), placement(new)
    moves = [ClassMove(c, old.get(c, ""), now.get(c, "")) for c in sorted(old.keys() | now.keys())
             if old.get(c) and now.get(c) and old[c] != now[c]]
    return ClusterPlans(plans, moves)
