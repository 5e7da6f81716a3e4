"""Rules that span several parts of the inventory, checked before anything is written.

Some of these mirror checks that only Kueue's admission webhook makes (no schema, no CEL), so a server-side
dry-run without Kueue running would let them through and the sync would fail in the cluster. Others guard
what no Kubernetes component checks at all: Kueue never compares quotas with node capacity.
Each rule returns (location, reason) pairs, or (location, reason, other location) when the reason names a second
place in the file (at ELSEWHERE); load.py turns locations into file:line:column.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

from generator.components import COMPONENTS
from generator.inventory.models import Allocation, Inventory, ResourceAmounts
from generator.inventory.quantity import MAX_QUANTITY, exact_arithmetic, format_total, parse_quantity
from generator.inventory import accelerators, clusters, duration, servers
from generator.inventory.rendered_names import RenderedName, rendered_names
from generator.limits import MAX_NAME
from generator.inventory.contract import (SHARED_BY_A_NODE_POOL, allocated_amount, allocated_pods, default_priority,
                                          node_pools, pods_per_node, walltime_seconds)
from generator.inventory.naming import KUBERNETES_RESOURCE, flavor_name, reserved_namespaces, runtime_name

Loc = tuple[str | int, ...]
Finding = tuple[Loc, str] | tuple[Loc, str, Loc]
# Where a reason names the other location of a three-part finding; load.py writes FILE:LINE:COL there.
ELSEWHERE = "{elsewhere}"

# Kueue v1beta2's CRD limits on what the inventory sizes (maxProperties/maxItems): ResourceFlavor nodeLabels and
# tolerations, and the flavors of one ClusterQueue resource group.
FLAVOR_MAX_NODE_LABELS = 8
FLAVOR_MAX_TOLERATIONS = 8
CLUSTER_QUEUE_MAX_FLAVORS = 64
# ...and the resources it covers: cpu, memory, pods and each of the group's classes' accelerator resources.
CLUSTER_QUEUE_MAX_RESOURCES = 64

# Variables the seed page promises; each must point under the home mount so caches survive pod restarts.
REQUIRED_CACHE_ENV = ("HF_HOME", "TORCH_HOME", "PIP_CACHE_DIR", "XDG_CACHE_HOME", "TRITON_CACHE_DIR")
RESERVED_MOUNT_PATHS = ("/dev/shm",)
# Inventory resource fields whose totals messages show with binary suffixes (512Gi rather than 549755813888).
BINARY_RESOURCES = ("memory",)


def check_inventory(inventory: Inventory) -> list[Finding]:
    with exact_arithmetic():  # totals of many large quotas keep every digit
        return _findings(inventory)


def _findings(inventory: Inventory) -> list[Finding]:
    return [
        *_check_cluster(inventory),
        *_check_clusters(inventory),
        *_check_components(inventory),
        *_check_classes(inventory),
        *_check_groups(inventory),
        *_check_access(inventory),
        *_check_capacity(inventory),
        *_check_priorities(inventory),
        *_check_walltimes(inventory),
        *_check_file_names(inventory),
        *_check_rendered_names(inventory),
    ]


def _check_rendered_names(inventory: Inventory) -> Iterator[Finding]:
    """No two rendered objects of one kind, namespace and name on one cluster (whichever fields their names come
    from: rendered_names.py lists them), reported once per pair of places, at the later one; and the Applications
    the ApplicationSet makes, which limits.py never sees rendered, within Kubernetes' name length."""
    first: dict[tuple[str | None, str, str | None, str], RenderedName] = {}
    reported: set[tuple[Loc, Loc]] = set()
    for entry in rendered_names(inventory):
        if entry.kind == "Application" and len(entry.name) > MAX_NAME:
            yield entry.source, (f"{entry.owner} would be named {entry.name[:40]}... ({len(entry.name)} characters); "
                                 f"Kubernetes allows {MAX_NAME}: shorten cluster.gitops.applicationName or the "
                                 "cluster's name")
        earlier = first.setdefault(entry.key, entry)
        if earlier is entry or (entry.source, earlier.source) in reported:
            continue
        reported.add((entry.source, earlier.source))
        if earlier.owner == entry.owner:
            reason = f"{entry.owner} would render {entry.shown()} twice (also from {ELSEWHERE})"
        else:
            reason = (f"{entry.owner} and {earlier.owner} ({ELSEWHERE}) would both render {entry.shown()}: "
                      "Kubernetes keeps one object of a name; rename one of them")
        yield entry.source, reason, earlier.source


# Linux NAME_MAX: each object is written to <name>.yaml (or <namespace>.<name>.yaml); a name valid for Kubernetes
# (253 characters) must still fit. limits.py checks every rendered path again, without a line to point at.
_MAX_STEM = 255 - len(".yaml")


def _check_file_names(inventory: Inventory) -> Iterator[Finding]:
    for name, gpu_class in inventory.classes.items():
        flavor = flavor_name(name, gpu_class)
        if len(flavor.encode()) > _MAX_STEM:
            where = ("classes", name) + (("flavor",) if gpu_class.flavor else ())
            yield where, f"flavor name is {len(flavor)} characters: its file {flavor[:20]}....yaml would pass the " \
                         f"255-byte file-name limit; use at most {_MAX_STEM}"
    for name in inventory.groups:
        if len(name.encode()) > _MAX_STEM:
            yield ("groups", name), f"group name is {len(name)} characters: its ClusterQueue file would pass the " \
                                    f"255-byte file-name limit; use at most {_MAX_STEM}"


def _check_cluster(inventory: Inventory) -> Iterator[Finding]:
    storage = inventory.cluster.storage
    home = storage.home.mountPath
    env = inventory.cluster.cacheEnv
    for name in REQUIRED_CACHE_ENV:
        if name not in env:
            yield ("cluster", "cacheEnv"), f"{name} is missing: the runtimes must point it under {home}"
    for name, value in env.items():
        if not (value == home or value.startswith(home + "/")):
            yield ("cluster", "cacheEnv", name), (
                f"{value!r} is not under the home mount {home}: caches there do not survive pod restarts")
    if storage.workspace.mountPath == home:
        yield ("cluster", "storage", "workspace", "mountPath"), f"home and workspace cannot both mount at {home}"
    if storage.workspace.claimName == storage.home.claimName:
        yield ("cluster", "storage", "workspace", "claimName"), "home and workspace must be different claims"
    for which in ("home", "workspace"):
        if getattr(storage, which).mountPath in RESERVED_MOUNT_PATHS:
            yield ("cluster", "storage", which, "mountPath"), "/dev/shm is the runtimes' memory-backed shared memory"


def _check_clusters(inventory: Inventory) -> Iterator[Finding]:
    """Several clusters: one manager, each GPU class on one worker, no worker without a class, no API server
    twice; monitoring is built for one cluster only."""
    clusters = inventory.clusters
    if clusters is None:
        for name, gpu_class in inventory.classes.items():
            if gpu_class.cluster is not None:
                yield ("classes", name, "cluster"), (
                    f"names cluster {gpu_class.cluster!r}, but the inventory declares no clusters: it is one "
                    "cluster, so leave cluster: out")
        return
    if inventory.cluster.gitops.groupApplications is not None:
        yield ("cluster", "gitops", "groupApplications"), (
            "splits the tree of one cluster; with clusters: each cluster's tree is an Application of its own, so "
            "leave groupApplications out")
    if inventory.cluster.monitoring is not None:
        yield ("cluster", "monitoring"), ("gpugen monitors one cluster; with clusters: remove monitoring: "
                                          "(docs/multi-cluster.md): its alerts would watch GPU nodes the manager "
                                          "does not have")
    managers = [name for name, member in clusters.items() if member.role == "manager"]
    if not managers:
        yield ("clusters",), "no cluster has role: manager; exactly one admits and dispatches the jobs"
    for name in managers[1:]:
        yield ("clusters", name, "role"), f"{managers[0]!r} is already the manager; exactly one cluster is"
    server_of: dict[str, str] = {}
    for name, member in clusters.items():
        server = servers.parse(member.server)
        if member.role == "worker" and server.in_cluster:
            yield ("clusters", name, "server"), (
                f"{member.server} is the in-cluster address, where Argo CD reaches the manager (its own Applications "
                f"go to {servers.IN_CLUSTER}): this worker's tree would land on the manager; give the worker's own "
                "API server")
            continue
        other = server_of.setdefault(server.normalised, name)
        if other != name:
            same = "" if clusters[other].server == member.server else f", written {clusters[other].server}"
            yield (("clusters", name, "server"),
                   f"{member.server} is already the API server of cluster {other!r} ({ELSEWHERE}{same}): two clusters "
                   "cannot share one",
                   ("clusters", other, "server"))
    workers = [name for name, member in clusters.items() if member.role == "worker"]
    named = ", ".join(workers) or "none: declare a cluster with role: worker"
    busy: set[str] = set()
    for name, gpu_class in inventory.classes.items():
        if gpu_class.cluster is None:
            yield ("classes", name), f"must name the worker that runs it with cluster: (workers: {named})"
        elif gpu_class.cluster not in clusters:
            yield ("classes", name, "cluster"), f"unknown cluster {gpu_class.cluster!r} (workers: {named})"
        elif clusters[gpu_class.cluster].role == "manager":
            yield ("classes", name, "cluster"), (
                f"{gpu_class.cluster!r} is the manager: it admits and dispatches jobs and runs no GPU class; name a "
                f"worker ({named})")
        else:
            busy.add(gpu_class.cluster)
    for name in workers:
        if name not in busy:
            yield ("clusters", name), f"worker {name!r} runs no GPU class: name it in a class's cluster:, or remove it"


def _check_components(inventory: Inventory) -> Iterator[Finding]:
    """Each component installed or declared existing, not both: on the one cluster, or on each of several with its
    own settings (clusters.components_on), reported where the setting is written."""
    seen: set[Loc] = set()
    for cluster in inventory.clusters or [None]:
        settings = (inventory.cluster.components if cluster is None
                    else clusters.components_on(inventory, cluster))
        own = inventory.clusters[cluster].components if cluster is not None else None
        for name, component in settings.by_name().items():
            where: Loc = (("clusters", cluster, "components", name) if own is not None and getattr(own, name)
                          else ("cluster", "components", name))
            on = f" on cluster {cluster!r}" if cluster is not None else ""
            needs = COMPONENTS[name].needs
            if not component.install and not component.existing and where + ("install",) not in seen:
                seen.add(where + ("install",))
                yield where + ("install",), (
                    f"{name} is not installed{on} and no existing installation is declared, but the rendered tree "
                    f"needs {needs}: set install: true, or existing: true if the cluster already runs it")
            if component.install and component.existing and where + ("existing",) not in seen:
                seen.add(where + ("existing",))
                yield where + ("existing",), (
                    f"{name}: existing: true declares an installation gpugen does not manage; with install: true "
                    f"gpugen would install a second one{on}. Choose one")


def _check_classes(inventory: Inventory) -> Iterator[Finding]:
    label = inventory.cluster.gpuClassLabel
    class_by_value: dict[str, str] = {}
    for name, gpu_class in inventory.classes.items():
        where = ("classes", name)
        if len(runtime_name(name)) > 63:
            yield where, f"runtime name {runtime_name(name)!r} is longer than 63 characters: shorten the class name"
        value = gpu_class.nodeSelector.get(label)
        resource = accelerators.resource(gpu_class)
        if value is None:
            yield where + ("nodeSelector",), (
                f"must set the cluster's GPU class label {label!r}: Kueue matches flavors only on keys they declare, "
                "so a class without it would match every node")
        elif (value, resource) in class_by_value:
            # Classes on the same nodes (MIG's mixed strategy: one class per profile) differ by their resource,
            # which is how Kueue tells their flavors apart; the same resource too would be one class twice.
            yield where + ("nodeSelector", label), (
                f"{label}={value} already selects class {class_by_value[value, resource]!r}, which requests "
                f"{resource} too: classes on the same nodes must request different resources")
        else:
            class_by_value[value, resource] = name
        yield from _check_vendor(gpu_class, where + ("accelerator",))
        slicing = gpu_class.accelerator.timeSlicing
        if slicing is not None and gpu_class.perNode.gpus % slicing.replicas:
            yield where + ("perNode", "gpus"), (
                f"{gpu_class.perNode.gpus} is not a whole number of GPUs shared {slicing.replicas} ways: perNode.gpus "
                f"counts the time-slices a node advertises (its GPUs x {slicing.replicas})")
        if gpu_class.numNodes > gpu_class.nodes:
            yield where + ("numNodes",), (
                f"default numNodes {gpu_class.numNodes} exceeds the class's {gpu_class.nodes} nodes")
        # The class's nodeSelector and tolerations are its ResourceFlavor's nodeLabels and tolerations, and the
        # Kueue CRD holds at most FLAVOR_MAX_NODE_LABELS and FLAVOR_MAX_TOLERATIONS of them.
        if len(gpu_class.nodeSelector) > FLAVOR_MAX_NODE_LABELS:
            yield where + ("nodeSelector",), (
                f"{len(gpu_class.nodeSelector)} labels; the class's Kueue ResourceFlavor holds at most "
                f"{FLAVOR_MAX_NODE_LABELS} node labels")
        if len(gpu_class.tolerations) > FLAVOR_MAX_TOLERATIONS:
            yield where + ("tolerations",), (
                f"{len(gpu_class.tolerations)} tolerations; the class's Kueue ResourceFlavor holds at most "
                f"{FLAVOR_MAX_TOLERATIONS}")
        for index, toleration in enumerate(gpu_class.tolerations):
            if toleration.operator == "Exists" and toleration.value is not None:
                yield where + ("tolerations", index, "value"), "must be empty when operator is Exists"
            if toleration.key is None and toleration.operator != "Exists":
                yield where + ("tolerations", index, "operator"), "must be Exists when key is empty"
            if toleration.tolerationSeconds is not None and toleration.effect != "NoExecute":
                yield where + ("tolerations", index, "tolerationSeconds"), "needs effect NoExecute"


def _check_vendor(gpu_class, where) -> Iterator[Finding]:
    """A resource under a known vendor's domain is one its device plugin advertises; any other needs
    unknownVendor: true, which a resource gpugen knows does not take. A time-sliced name needs timeSlicing."""
    accelerator = gpu_class.accelerator
    resource = accelerator.resource
    advertised = accelerators.advertised(resource)
    vendor = accelerators.VENDOR_BY_DOMAIN.get(accelerators.domain(resource))
    if advertised and accelerator.unknownVendor:
        yield where + ("unknownVendor",), (
            f"{resource} is a resource {vendor.name}'s device plugin advertises, which gpugen knows: remove "
            "unknownVendor (it would give up the checks gpugen makes for that vendor)")
    elif advertised is False and not accelerator.unknownVendor:
        yield where + ("resource",), (
            f"{vendor.name}'s device plugin advertises no {resource} (it advertises {vendor.forms}): check the "
            "name against the node (kubectl get node NODE -o jsonpath='{.status.allocatable}'), or set "
            "accelerator.unknownVendor: true if a plugin gpugen does not know advertises it")
    elif advertised is None and not accelerator.unknownVendor:
        known = ", ".join(v.domain for v in accelerators.VENDORS)
        yield where + ("resource",), (
            f"gpugen knows no device plugin under {accelerators.domain(resource)} (it knows {known}): set "
            "accelerator.unknownVendor: true to use it; gpugen then cannot check the name, nor refuse the variables, "
            "mounts and annotations through which its container runtime could give a container devices it did not "
            "request")
    if accelerators.shared_name(resource) and accelerator.timeSlicing is None:
        yield where + ("resource",), (
            f"the device plugin names a resource {resource} when it shares each device in turn: say how, with "
            "accelerator.timeSlicing.replicas")


def _check_groups(inventory: Inventory) -> Iterator[Finding]:
    # A namespace in two groups, or twice in one, would render its objects twice: _check_rendered_names.
    for name, group in inventory.groups.items():
        if not inventory.cluster.queueing.fairSharing and str(group.weight) != "1":
            yield ("groups", name, "weight"), (
                "a weight needs cluster.queueing.fairSharing: true (Kueue ignores it otherwise)")
        if len(group.allocations) > CLUSTER_QUEUE_MAX_FLAVORS:
            yield ("groups", name, "allocations"), (
                f"allocations on {len(group.allocations)} classes; the group's ClusterQueue lists each class's "
                f"flavor in one resource group (they cover the same resources), and Kueue holds at most "
                f"{CLUSTER_QUEUE_MAX_FLAVORS} flavors there")
        kinds = {accelerators.resource(inventory.classes[c]) for c in group.allocations if c in inventory.classes}
        if len(kinds) + 3 > CLUSTER_QUEUE_MAX_RESOURCES:
            yield ("groups", name, "allocations"), (
                f"allocations on classes of {len(kinds)} accelerator resources; the group's ClusterQueue covers "
                f"each with cpu, memory and pods, and Kueue holds at most {CLUSTER_QUEUE_MAX_RESOURCES} "
                "resources there")
        for class_name, allocation in group.allocations.items():
            where = ("groups", name, "allocations", class_name)
            if class_name not in inventory.classes:
                yield where, f"unknown class {class_name!r} (classes: {', '.join(sorted(inventory.classes))})"
                continue
            yield from _check_limits(inventory, group.cohort, class_name, allocation, where)
            yield from _check_derived_pods(inventory, class_name, allocation, where)


def _check_access(inventory: Inventory) -> Iterator[Finding]:
    """Research namespaces are never the platform's own; each identity belongs to one group.

    A research namespace gets the researcher RoleBinding, a `default` LocalQueue, Kueue's job management and
    the Pod Security labels: in kube-system or a controller's namespace that would hand researchers the
    platform. An identity in two groups would be a member of both, which no reader of either group expects.
    """
    reserved = set(reserved_namespaces(inventory))
    member_of: dict[tuple[str, str], str] = {}
    for name, group in inventory.groups.items():
        for index, namespace in enumerate(group.namespaces):
            if namespace in reserved:
                yield ("groups", name, "namespaces", index), (
                    f"namespace {namespace!r} belongs to the platform (system, component, Argo CD or monitoring "
                    f"namespaces: {', '.join(sorted(reserved))}) and cannot be a research namespace")
            elif namespace.startswith("kube-"):
                yield ("groups", name, "namespaces", index), (
                    f"namespace {namespace!r}: the kube- prefix is reserved for Kubernetes' own namespaces")
        for kind in ("groups", "users"):
            for index, identity in enumerate(getattr(group.identities, kind)):
                where = ("groups", name, "identities", kind, index)
                other = member_of.setdefault((kind, identity), name)
                if other == name and identity in getattr(group.identities, kind)[:index]:
                    yield where, f"{kind[:-1]} {identity!r} is listed twice"
                elif other != name:
                    yield where, (
                        f"{kind[:-1]} {identity!r} already belongs to group {other!r}: an identity is in one group")


def _check_derived_pods(inventory: Inventory, class_name: str, allocation: Allocation, where) -> Iterator[Finding]:
    """A pods quota derived from the GPUs must still fit the int64 every Kubernetes quantity is held in."""
    if allocation.pods is not None:
        return
    pods = allocated_pods(inventory, class_name, allocation)
    if pods > MAX_QUANTITY:
        gpu_class = inventory.classes[class_name]
        yield where + ("gpus",), (
            f"{allocation.gpus} GPUs at {pods_per_node(inventory, class_name)} pods per {gpu_class.perNode.gpus} "
            "GPUs make a pods "
            f"quota of {pods}, larger than Kubernetes can hold "
            f"(at most 2^63-1 = {MAX_QUANTITY}); set pods explicitly")


def _check_limits(inventory: Inventory, cohort: str | None, class_name: str, allocation: Allocation,
                  where) -> Iterator[Finding]:
    # Kueue's webhook: limits need a cohort; lendingLimit <= nominalQuota.
    for kind in ("borrowingLimit", "lendingLimit"):
        limits: ResourceAmounts | None = getattr(allocation, kind)
        if limits is None:
            continue
        if cohort is None:
            yield where + (kind,), f"{kind} needs the group to have a cohort"
        if kind != "lendingLimit":
            continue
        for resource in KUBERNETES_RESOURCE:
            limit = getattr(limits, resource)
            if limit is None:
                continue
            nominal = allocated_amount(inventory, class_name, allocation, resource)
            if parse_quantity(str(limit)) > nominal:
                yield where + (kind, resource), (
                    f"lends {limit}, more than the nominal {resource} quota {_show(resource, nominal)}")


def _show(resource: str, value: Decimal) -> str:
    return format_total(value, binary=resource in BINARY_RESOURCES)


def _check_capacity(inventory: Inventory) -> Iterator[Finding]:
    """Sum of nominal quotas per class and resource <= nodes x per-node allocatable: Kueue never checks this.
    Classes on the same nodes (contract.node_pools: MIG profiles of one node pool) each hold their own accelerator
    resource, but share the nodes' CPU, memory and pod slots: those add up over the pool."""
    pools = node_pools(inventory)
    for class_name, gpu_class in inventory.classes.items():
        pool = pools[class_name]
        first = inventory.classes[pool[0]]
        shape = (gpu_class.nodes, gpu_class.perNode.cpu, gpu_class.perNode.memory, gpu_class.perNode.pods)
        if class_name != pool[0] and shape != (first.nodes, first.perNode.cpu, first.perNode.memory,
                                               first.perNode.pods):
            yield ("classes", class_name), (
                f"selects the nodes of class {pool[0]!r} (same {inventory.cluster.gpuClassLabel}) but says "
                f"otherwise of them: write the same nodes, perNode.cpu, perNode.memory and perNode.pods "
                f"({first.nodes}, {first.perNode.cpu}, {first.perNode.memory}, {first.perNode.pods})")
            continue
        for resource in KUBERNETES_RESOURCE:
            shared = resource in SHARED_BY_A_NODE_POOL and len(pool) > 1
            if shared and class_name != pool[-1]:
                continue  # a pool's CPU, memory and pods are checked once, at its last class
            members = pool if shared else [class_name]
            holders = [(group_name, member, group.allocations[member]) for member in members
                       for group_name, group in inventory.groups.items() if member in group.allocations]
            capacity = parse_quantity(str(getattr(gpu_class.perNode, resource))) * gpu_class.nodes
            running = Decimal(0)
            tipping_point = None  # the first allocation (in file order) that takes the sum past capacity
            for group_name, member, allocation in holders:
                running += allocated_amount(inventory, member, allocation, resource)
                if running > capacity and tipping_point is None:
                    tipping_point = ("groups", group_name, "allocations", member, resource)
            if tipping_point is not None:
                shares = ", ".join(
                    f"{group}{'' if not shared else ' on ' + member} "
                    f"{_show(resource, allocated_amount(inventory, member, allocation, resource))}"
                    for group, member, allocation in holders)
                what = f"class {class_name}" if not shared else f"the nodes of classes {', '.join(pool)}"
                unit = (f" ({accelerators.unit_plural(gpu_class)})"
                        if resource == "gpus" and accelerators.resource(gpu_class) != accelerators.NVIDIA_GPU else "")
                yield tipping_point, (
                    f"{what} {resource}{unit} oversubscribed: groups are allocated {_show(resource, running)} "
                    f"({shares}) but {gpu_class.nodes} nodes x {getattr(gpu_class.perNode, resource)} = "
                    f"{_show(resource, capacity)}")


def _check_priorities(inventory: Inventory) -> Iterator[Finding]:
    """One default priority; each group names priorities that exist, and its default is one it may use."""
    defaults = [name for name, priority in inventory.priorities.items() if priority.default]
    for name in defaults[1:]:
        yield ("priorities", name, "default"), (
            f"priority {defaults[0]!r} is already the default: exactly one priority is the default")
    if inventory.priorities and not defaults:
        yield ("priorities",), ("no priority is marked default: true; a job that names none would get Kueue's "
                                "priority 0 outside every class")
    known = ", ".join(inventory.priorities) or "none: the inventory lists no priorities"
    for group_name, group in inventory.groups.items():
        where = ("groups", group_name)
        seen: set[str] = set()
        for index, name in enumerate(group.priorities or []):
            if name not in inventory.priorities:
                yield where + ("priorities", index), f"unknown priority {name!r} (priorities: {known})"
            elif name in seen:
                yield where + ("priorities", index), f"priority {name!r} is listed twice"
            seen.add(name)
        if group.priorities == [] and inventory.priorities:
            yield where + ("priorities",), (
                "lists no priority: its jobs could not run at all (leave it out for every one)")
        if group.defaultPriority is not None and group.defaultPriority not in inventory.priorities:
            yield where + ("defaultPriority",), f"unknown priority {group.defaultPriority!r} (priorities: {known})"
            continue
        default = default_priority(inventory, group)
        if default is not None and group.priorities is not None and default not in group.priorities:
            field = ("defaultPriority",) if group.defaultPriority is not None else ("priorities",)
            yield where + field, (
                f"the group's default priority {default!r} is not among the priorities it may use "
                f"({', '.join(group.priorities) or 'none'}): its jobs that name none would be refused")


def _check_walltimes(inventory: Inventory) -> Iterator[Finding]:
    """default <= maximum, for each class and after each group's override; overrides name the group's classes."""
    for class_name, gpu_class in inventory.classes.items():
        default, maximum = (duration.seconds(gpu_class.walltime.default),
                            duration.seconds(gpu_class.walltime.maximum))
        if default > maximum:
            yield ("classes", class_name, "walltime", "default"), (
                f"default {gpu_class.walltime.default} is longer than the maximum {gpu_class.walltime.maximum}")
    for group_name, group in inventory.groups.items():
        for class_name, override in group.walltime.items():
            where = ("groups", group_name, "walltime", class_name)
            if class_name not in group.allocations:
                yield where, (f"the group has no allocation on class {class_name!r} "
                              f"(its classes: {', '.join(group.allocations)})")
                continue
            if class_name not in inventory.classes:
                continue  # reported with the allocation
            default, maximum = walltime_seconds(inventory, group, class_name)
            if default > maximum:
                field = "default" if override.default else "maximum"
                yield where + (field,), (
                    f"the group's default walltime {duration.show(default)} on {class_name} is longer than its "
                    f"maximum {duration.show(maximum)}")
