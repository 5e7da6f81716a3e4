"""The research-computing contract, from the inventory: what each group's jobs may ask for (priorities, run time),
and how much of each resource it holds (its quota, and the most it can reach with its cohort's loans). The rules,
the guardrails, the queues and the users' page read it from here."""

from __future__ import annotations

from decimal import Decimal

from generator.inventory import duration
from generator.inventory.models import Allocation, Group, Inventory
from generator.inventory.quantity import parse_quantity

# The ConfigMap in each research namespace that tells the guardrails, at admission, the group's limits.
JOB_LIMITS = "job-limits"


def allowed_priorities(inventory: Inventory, group: Group) -> list[str]:
    """The priority classes the group's jobs may name, in the inventory's order of `priorities`."""
    if group.priorities is None:
        return list(inventory.priorities)
    return [name for name in inventory.priorities if name in group.priorities]


def default_priority(inventory: Inventory, group: Group) -> str | None:
    """The priority class a job of the group gets when it names none (None: the inventory has no priorities)."""
    if group.defaultPriority is not None:
        return group.defaultPriority
    return next((name for name, priority in inventory.priorities.items() if priority.default), None)


def walltime_seconds(inventory: Inventory, group: Group, class_name: str) -> tuple[int, int]:
    """(default, maximum) run time in seconds of the group's jobs on the class: the group's override, else the
    class's."""
    class_walltime = inventory.classes[class_name].walltime
    override = group.walltime.get(class_name)
    default = override.default if override and override.default else class_walltime.default
    maximum = override.maximum if override and override.maximum else class_walltime.maximum
    return duration.seconds(default), duration.seconds(maximum)


def reachable(inventory: Inventory, resource: str) -> dict[tuple[str, str], Decimal]:
    """(group, class) -> the most of `resource` on the class the group's jobs can ever hold at once: its nominal
    quota plus what its cohort could lend it (each other member's lending limit, else its nominal quota), within
    its borrowing limit. A job asking for more waits forever: Kueue never admits it. Linear in the allocations:
    each cohort's lendable total is summed once."""
    def lendable(allocation: Allocation, class_name: str) -> Decimal:
        limit = getattr(allocation.lendingLimit, resource, None) if allocation.lendingLimit else None
        return (parse_quantity(str(limit)) if limit is not None
                else allocated_amount(inventory, class_name, allocation, resource))

    cohort_total: dict[tuple[str, str], Decimal] = {}
    for group in inventory.groups.values():
        if group.cohort is None:
            continue
        for class_name, allocation in group.allocations.items():
            key = (group.cohort, class_name)
            cohort_total[key] = cohort_total.get(key, Decimal(0)) + lendable(allocation, class_name)
    reach = {}
    for group_name, group in inventory.groups.items():
        for class_name, allocation in group.allocations.items():
            own = allocated_amount(inventory, class_name, allocation, resource)
            if group.cohort is None:
                reach[(group_name, class_name)] = own
                continue
            borrowable = cohort_total[(group.cohort, class_name)] - lendable(allocation, class_name)
            limit = getattr(allocation.borrowingLimit, resource, None) if allocation.borrowingLimit else None
            if limit is not None:
                borrowable = min(borrowable, parse_quantity(str(limit)))
            reach[(group_name, class_name)] = own + borrowable
    return reach


# What classes on the same nodes share, so that their quotas add up against the nodes (each class keeps its own
# accelerator resource).
SHARED_BY_A_NODE_POOL = ("cpu", "memory", "pods")


def node_pools(inventory: Inventory) -> dict[str, list[str]]:
    """class -> the classes on the same nodes, itself included, in the inventory's order: those whose nodeSelector
    gives the cluster's GPU class label the same value (MIG profiles of one node pool). They share the nodes' CPU,
    memory and pod slots."""
    if _pools_of[0] is not inventory:
        by_value: dict[str, list[str]] = {}
        for name, gpu_class in inventory.classes.items():
            # A class without the label (refused by the rules) is a pool of its own.
            value = gpu_class.nodeSelector.get(inventory.cluster.gpuClassLabel, f"\0{name}")
            by_value.setdefault(value, []).append(name)
        _pools_of[:] = [inventory, {name: pool for pool in by_value.values() for name in pool}]
    return _pools_of[1]


# The pools of the last inventory asked about: a render asks once per allocation.
_pools_of: list = [None, {}]


def pods_per_node(inventory: Inventory, class_name: str) -> int:
    """The pod slots of one node that the class's derived pod quotas share out: the node's, split evenly between
    the classes on it (so that their quotas together fit the node)."""
    return inventory.classes[class_name].perNode.pods // len(node_pools(inventory)[class_name])


def allocated_amount(inventory: Inventory, class_name: str, allocation: Allocation, resource: str) -> Decimal:
    """A group's nominal quota of one inventory resource field on a class (pods as allocated_pods says)."""
    if resource == "pods":
        return Decimal(allocated_pods(inventory, class_name, allocation))
    return parse_quantity(str(getattr(allocation, resource)))


def allocated_pods(inventory: Inventory, class_name: str, allocation: Allocation) -> int:
    """Pods quota: explicit, or the share of the class's pod slots (pods_per_node) that matches the GPU share."""
    if allocation.pods is not None:
        return allocation.pods
    return allocation.gpus * pods_per_node(inventory, class_name) // inventory.classes[class_name].perNode.gpus
