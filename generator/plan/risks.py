"""The changes a reviewer must not wave through: per kind of object, what its change or removal risks, one rule a
function, listed in the tables at the end (the plan lists a change's risks in the tables' order)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from generator.builders import kyverno
from generator.inventory import duration
from generator.inventory.contract import JOB_LIMITS
from generator.inventory.naming import GPU_CLASS_ANNOTATION
from generator.inventory.quantity import parse_quantity
from generator.kinds import SYNCED_KINDS
from generator.plan.diff import ObjectChange, matches
from generator.plan.objects import Key, class_flavor, flavor_classes, flavors_used, quotas_by_class

RECREATE = "delete and recreate"
WAITS_ON_WORKLOADS = "waits on running workloads"
PREEMPTS = "preempts running work"
MOVES = "moves between Applications"
# A preemption setting's values, from the one that stops the fewest running jobs.
_PREEMPTION_ORDER = {"Never": 0, "LowerPriority": 1, "LowerOrNewerEqualPriority": 2, "Any": 3}


@dataclass(frozen=True)
class Risk:
    key: Key
    what: str


@dataclass(frozen=True)
class Trees:
    """The two trees' objects a rule reads, with the GPU class each flavor serves in each."""

    base: dict[Key, dict[str, Any]]
    new: dict[Key, dict[str, Any]]
    base_classes: dict[str, str]
    new_classes: dict[str, str]


Rule = Callable[[ObjectChange, Trees], Iterator[str]]


# ------------------------------------------------------------------ a changed object

def immutable_field_changed(change: ObjectChange, trees: Trees) -> Iterator[str]:
    known = SYNCED_KINDS.get(change.key[0])
    for pattern in known.immutable_fields if known else ():
        touched = sorted({fc.path for fc in change.fields if matches(fc.path, pattern)})
        if touched:
            yield (f"{RECREATE}: {', '.join(touched)} is immutable; the server refuses the change in place and the "
                   "sync fails")


def flavor_nodes_changed_under_topology(change: ObjectChange, trees: Trees) -> Iterator[str]:
    if "topologyName" in trees.base[change.key]["spec"] and any(
            fc.path.startswith(("spec.nodeLabels", "spec.tolerations")) for fc in change.fields):
        yield f"{RECREATE}: nodeLabels and tolerations are immutable while topologyName is set"


def preemption_widened(change: ObjectChange, trees: Trees) -> Iterator[str]:
    old_pre = trees.base[change.key]["spec"].get("preemption", {})
    new_pre = trees.new[change.key]["spec"].get("preemption", {})
    for field_name, whose in (("reclaimWithinCohort", "other groups' jobs running on GPUs this group lent"),
                              ("withinClusterQueue", "the group's own running jobs of lower priority")):
        before, after = old_pre.get(field_name, "Never"), new_pre.get(field_name, "Never")
        if _PREEMPTION_ORDER.get(after, 0) > _PREEMPTION_ORDER.get(before, 0):
            yield f"{PREEMPTS}: preemption.{field_name} {before} -> {after}; Kueue may now stop {whose}"


def fair_sharing_weight_lowered(change: ObjectChange, trees: Trees) -> Iterator[str]:
    old_weight = trees.base[change.key]["spec"].get("fairSharing", {}).get("weight")
    new_weight = trees.new[change.key]["spec"].get("fairSharing", {}).get("weight")
    if (old_weight is not None and new_weight is not None
            and parse_quantity(str(new_weight)) < parse_quantity(str(old_weight))):
        yield (f"{PREEMPTS}: fair-sharing weight {old_weight} -> {new_weight}; the group's jobs on borrowed GPUs may "
               "be preempted by the groups that lent them")


def quota_reduced(change: ObjectChange, trees: Trees) -> Iterator[str]:
    before = quotas_by_class(trees.base[change.key], trees.base_classes)
    after = quotas_by_class(trees.new[change.key], trees.new_classes)
    for (gpu_class, resource), (flavor, amount) in sorted(before.items()):
        if (gpu_class, resource) not in after:
            yield (f"quota reduction: {resource} on flavor {flavor} removed (was {amount}); workloads needing it can "
                   "no longer be admitted")
            continue
        new_flavor, new_amount = after[(gpu_class, resource)]
        if parse_quantity(new_amount) < parse_quantity(amount):
            renamed = f" (now flavor {new_flavor})" if new_flavor != flavor else ""
            yield (f"quota reduction: {resource} on flavor {flavor}{renamed} {amount} -> {new_amount}; admitted "
                   "workloads keep running, new ones may wait")


def finished_trainjobs_deleted_sooner(change: ObjectChange, trees: Trees) -> Iterator[str]:
    old_ttl = kyverno.finished_ttl_seconds(trees.base[change.key])
    new_ttl = kyverno.finished_ttl_seconds(trees.new[change.key])
    if old_ttl is not None and new_ttl is not None and new_ttl < old_ttl:
        yield (f"finished TrainJobs deleted sooner: {duration.show(old_ttl)} -> {duration.show(new_ttl)} after they "
               "end; those that ended longer ago go at the next run, with their logs")


def _job_limits(change: ObjectChange, trees: Trees) -> tuple[dict[str, str], dict[str, str]] | None:
    if change.key[2] != JOB_LIMITS:
        return None
    return trees.base[change.key].get("data", {}), trees.new[change.key].get("data", {})


def walltime_maximum_lowered(change: ObjectChange, trees: Trees) -> Iterator[str]:
    limits = _job_limits(change, trees)
    if limits is None:
        return
    old_data, new_data = limits
    for name in sorted(old_data):
        # Per class (the class-less maximum is the strictest of them: reported through its class).
        if name.endswith(".walltime.maximum") and name in new_data and int(new_data[name]) < int(old_data[name]):
            where = f" on {name.removesuffix('.walltime.maximum')}"
            yield (f"walltime maximum lowered{where}: {duration.show(int(old_data[name]))} -> "
                   f"{duration.show(int(new_data[name]))}; jobs asking for more are refused at submission (running "
                   "jobs keep the limit they were admitted with)")


def priority_dropped(change: ObjectChange, trees: Trees) -> Iterator[str]:
    limits = _job_limits(change, trees)
    if limits is None:
        return
    old_priorities, new_priorities = (set(filter(None, data.get("priorities", "").split(","))) for data in limits)
    if old_priorities - new_priorities:
        dropped = ", ".join(sorted(old_priorities - new_priorities))
        yield f"priority no longer allowed here: {dropped}; jobs naming it are refused at submission"


# ------------------------------------------------------------------ a removed object

def flavor_removed(change: ObjectChange, trees: Trees) -> Iterator[str]:
    name = change.key[2]
    users = sorted(k[2] for k, obj in trees.base.items() if k[0] == "ClusterQueue" and name in flavors_used(obj))
    still = sorted(k[2] for k, obj in trees.new.items() if k[0] == "ClusterQueue" and name in flavors_used(obj))
    if still:
        yield (f"flavor removed but ClusterQueues still use it: {', '.join(still)}; its resource-in-use finalizer "
               "blocks deletion")
    elif users:
        successor = [flavor for flavor, gpu_class in trees.new_classes.items()
                     if gpu_class == trees.base_classes.get(name) and flavor != name]
        renamed = f"; class {trees.base_classes[name]} now uses flavor {successor[0]}" if successor else ""
        yield (f"flavor removed that ClusterQueues used: {', '.join(users)}; workloads admitted on it keep running "
               f"until they finish{renamed}")


def class_removed(change: ObjectChange, trees: Trees) -> Iterator[str]:
    name = change.key[2]
    gpu_class = trees.base[change.key]["metadata"].get("annotations", {}).get(GPU_CLASS_ANNOTATION, name)
    holders = sorted(k[2] for k, obj in trees.base.items() if k[0] == "ClusterQueue"
                     and class_flavor(trees.base, gpu_class) in flavors_used(obj))
    held = f" while groups held allocations on it: {', '.join(holders)}" if holders else ""
    yield f"class {gpu_class} removed{held}; TrainJobs naming {name} can no longer be created"


def local_queue_removed(change: ObjectChange, trees: Trees) -> Iterator[str]:
    yield "local queue removed: jobs in this namespace are no longer admitted"


def priority_class_removed(change: ObjectChange, trees: Trees) -> Iterator[str]:
    yield (f"priority class {change.key[2]} removed: jobs naming it are refused at submission; queued jobs keep the "
           "priority they were given")


def cluster_queue_removed(change: ObjectChange, trees: Trees) -> Iterator[str]:
    yield (f"{WAITS_ON_WORKLOADS}: Kueue keeps the ClusterQueue Terminating (resource-in-use finalizer) until the "
           "workloads reserving quota in it finish; the sync itself completes (the Application prunes last)")


# ------------------------------------------------------------------ the tables

# Every changed object: its immutable fields (kinds.py).
ON_ANY_CHANGE: tuple[Rule, ...] = (immutable_field_changed,)
ON_CHANGE: dict[str, tuple[Rule, ...]] = {
    "ResourceFlavor": (flavor_nodes_changed_under_topology,),
    "ClusterQueue": (preemption_widened, fair_sharing_weight_lowered, quota_reduced),
    "DeletingPolicy": (finished_trainjobs_deleted_sooner,),
    "ConfigMap": (walltime_maximum_lowered, priority_dropped),
}
ON_REMOVE: dict[str, tuple[Rule, ...]] = {
    "ResourceFlavor": (flavor_removed,),
    "ClusterTrainingRuntime": (class_removed,),
    "LocalQueue": (local_queue_removed,),
    "WorkloadPriorityClass": (priority_class_removed,),
    "ClusterQueue": (cluster_queue_removed,),
}


def risks(base: dict[Key, dict], new: dict[Key, dict], changes: list[ObjectChange]) -> list[Risk]:
    """Each change's risks, in the order of the changes and of the tables."""
    trees = Trees(base, new, flavor_classes(base), flavor_classes(new))
    found = []
    for change in changes:
        kind = change.key[0]
        rules = ((*ON_ANY_CHANGE, *ON_CHANGE.get(kind, ())) if change.action == "changed"
                 else ON_REMOVE.get(kind, ()) if change.action == "removed" else ())
        found += [Risk(change.key, what) for rule in rules for what in rule(change, trees)]
    return found
