"""What an inventory change does to the cluster: objects added, removed and changed, field by field, with the
changes a reviewer must not wave through flagged.

Pure: compares two rendered trees ({path: bytes}); reading the base tree from git is the CLI's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from generator.inventory.quantity import parse_quantity
from generator.kinds import SYNCED_KINDS
from generator.layout import KUSTOMIZATION_FILE, cluster_folders
from generator.builders import kyverno
from generator.inventory import duration
from generator.inventory.contract import JOB_LIMITS
from generator.inventory.naming import GPU_CLASS_ANNOTATION

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
Files = dict[str, bytes]

GITHUB_COMMENT_LIMIT = 65_536
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # a national-scale plan reads two 8,000-file trees
RECREATE = "delete and recreate"

@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any  # None when added
    new: Any  # None when removed


@dataclass
class ObjectChange:
    key: Key
    action: str  # added | removed | changed
    fields: list[FieldChange] = field(default_factory=list)


@dataclass(frozen=True)
class Risk:
    key: Key
    what: str


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


def objects_of(files: Files) -> dict[Key, dict[str, Any]]:
    objects = {}
    for path, content in files.items():
        if path.endswith(KUSTOMIZATION_FILE) or not path.endswith(".yaml"):
            continue
        for obj in yaml.load_all(content, Loader=_Loader):
            if obj:
                meta = obj["metadata"]
                objects[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return objects


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf paths. Lists of named items are keyed by name (resources[nvidia.com/gpu]) so that reordering or
    inserting an item reads as what it is, not as every later index changing."""
    if isinstance(value, dict):
        if not value:
            return {prefix: {}}
        return {k: v for key, item in value.items()
                for k, v in flatten(item, f"{prefix}.{key}" if prefix else key).items()}
    if isinstance(value, list):
        if not value:
            return {prefix: []}
        if not all(isinstance(item, dict) for item in value):
            return {prefix: value}  # scalar lists (namespaces, verbs) compare as one value
        if all("name" in item for item in value):
            return {k: v for item in value for k, v in flatten({x: y for x, y in item.items() if x != "name"},
                                                               f"{prefix}[{item['name']}]").items()}
        return {k: v for index, item in enumerate(value) for k, v in flatten(item, f"{prefix}[{index}]").items()}
    return {prefix: value}


def _field_changes(old: dict[str, Any], new: dict[str, Any]) -> list[FieldChange]:
    before, after = flatten(old), flatten(new)
    return [FieldChange(path, before.get(path), after.get(path))
            for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)]


def _matches(path: str, pattern: str) -> bool:
    """pattern may use [*] for any named item; matches the field itself or anything below it."""
    parts, pattern_parts = path.split("."), pattern.split(".")
    if len(parts) < len(pattern_parts):
        return False
    for part, want in zip(parts, pattern_parts):
        if want.endswith("[*]"):
            if not (part.startswith(want[:-3] + "[") and part.endswith("]")):
                return False
        elif part != want:
            return False
    return True


def _nominal_quotas(queue: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(flavor["name"], resource["name"]): str(resource["nominalQuota"])
            for group in queue["spec"].get("resourceGroups", []) for flavor in group["flavors"]
            for resource in flavor["resources"]}


def _flavors_used(queue: dict[str, Any]) -> set[str]:
    return {flavor for flavor, _ in _nominal_quotas(queue)}


def _flavor_classes(objects: dict[Key, dict]) -> dict[str, str]:
    """Flavor name -> the GPU class it serves (its gpugen/gpu-class annotation; the flavor's name without one)."""
    return {name: obj["metadata"].get("annotations", {}).get(GPU_CLASS_ANNOTATION, name)
            for (kind, _, name), obj in objects.items() if kind == "ResourceFlavor"}


def _quotas_by_class(queue: dict[str, Any], flavor_classes: dict[str, str]) -> dict[tuple[str, str], tuple[str, str]]:
    """(class, resource) -> (flavor, nominal quota). Keyed by class so that renaming a class's flavor compares
    the same quota under its new name instead of reading as removed."""
    return {(flavor_classes.get(flavor, flavor), resource): (flavor, amount)
            for (flavor, resource), amount in _nominal_quotas(queue).items()}


def _immutable_fields(kind: str) -> tuple[str, ...]:
    known = SYNCED_KINDS.get(kind)
    return known.immutable_fields if known else ()


WAITS_ON_WORKLOADS = "waits on running workloads"
PREEMPTS = "preempts running work"
# A preemption setting's values, from the one that stops the fewest running jobs.
_PREEMPTION_ORDER = {"Never": 0, "LowerPriority": 1, "LowerOrNewerEqualPriority": 2, "Any": 3}


def _contract_risks(key: Key, old: dict[str, Any], new: dict[str, Any]) -> list[Risk]:
    """Changes to the research-computing contract that stop or preempt running work, or refuse resubmissions."""
    risks = []
    kind = key[0]
    if kind == "ClusterQueue":
        old_pre, new_pre = old["spec"].get("preemption", {}), new["spec"].get("preemption", {})
        for field_name, whose in (("reclaimWithinCohort", "other groups' jobs running on GPUs this group lent"),
                                  ("withinClusterQueue", "the group's own running jobs of lower priority")):
            before, after = old_pre.get(field_name, "Never"), new_pre.get(field_name, "Never")
            if _PREEMPTION_ORDER.get(after, 0) > _PREEMPTION_ORDER.get(before, 0):
                risks.append(Risk(key, f"{PREEMPTS}: preemption.{field_name} {before} -> {after}; Kueue may now stop "
                                       f"{whose}"))
        old_weight = old["spec"].get("fairSharing", {}).get("weight")
        new_weight = new["spec"].get("fairSharing", {}).get("weight")
        if (old_weight is not None and new_weight is not None
                and parse_quantity(str(new_weight)) < parse_quantity(str(old_weight))):
            risks.append(Risk(key, f"{PREEMPTS}: fair-sharing weight {old_weight} -> {new_weight}; the group's jobs "
                                   "on borrowed GPUs may be preempted by the groups that lent them"))
    old_ttl, new_ttl = kyverno.finished_ttl_seconds(old), kyverno.finished_ttl_seconds(new)
    if old_ttl is not None and new_ttl is not None and new_ttl < old_ttl:
        risks.append(Risk(key, f"finished TrainJobs deleted sooner: {duration.show(old_ttl)} -> "
                               f"{duration.show(new_ttl)} after they end; those that ended longer ago go at the next "
                               "run, with their logs"))
    if kind == "ConfigMap" and key[2] == JOB_LIMITS:
        old_data, new_data = old.get("data", {}), new.get("data", {})
        for name in sorted(old_data):
            # Per class (the class-less maximum is the strictest of them: reported through its class).
            if name.endswith(".walltime.maximum") and name in new_data and int(new_data[name]) < int(old_data[name]):
                where = f" on {name.removesuffix('.walltime.maximum')}"
                risks.append(Risk(key, f"walltime maximum lowered{where}: {duration.show(int(old_data[name]))} -> "
                                       f"{duration.show(int(new_data[name]))}; jobs asking for more are refused at "
                                       "submission (running jobs keep the limit they were admitted with)"))
        old_priorities = set(filter(None, old_data.get("priorities", "").split(",")))
        new_priorities = set(filter(None, new_data.get("priorities", "").split(",")))
        if old_priorities - new_priorities:
            dropped = ", ".join(sorted(old_priorities - new_priorities))
            risks.append(Risk(key, f"priority no longer allowed here: {dropped}; "
                                   "jobs naming it are refused at submission"))
    return risks


def _risks(base: dict[Key, dict], new: dict[Key, dict], changes: list[ObjectChange]) -> list[Risk]:
    risks: list[Risk] = []
    base_classes, new_classes = _flavor_classes(base), _flavor_classes(new)
    for change in changes:
        kind, _, name = change.key
        if change.action == "changed":
            for pattern in _immutable_fields(kind):
                touched = sorted({fc.path for fc in change.fields if _matches(fc.path, pattern)})
                if touched:
                    risks.append(Risk(change.key, f"{RECREATE}: {', '.join(touched)} is immutable; the server "
                                                  "refuses the change in place and the sync fails"))
            old_obj = base[change.key]
            if kind == "ResourceFlavor" and "topologyName" in old_obj["spec"] and any(
                    fc.path.startswith(("spec.nodeLabels", "spec.tolerations")) for fc in change.fields):
                risks.append(Risk(change.key, f"{RECREATE}: nodeLabels and tolerations are immutable "
                                              "while topologyName is set"))
            risks.extend(_contract_risks(change.key, old_obj, new[change.key]))
            if kind == "ClusterQueue":
                before = _quotas_by_class(old_obj, base_classes)
                after = _quotas_by_class(new[change.key], new_classes)
                for (gpu_class, resource), (flavor, amount) in sorted(before.items()):
                    if (gpu_class, resource) not in after:
                        risks.append(Risk(change.key,
                                          f"quota reduction: {resource} on flavor {flavor} removed (was {amount}); "
                                          "workloads needing it can no longer be admitted"))
                        continue
                    new_flavor, new_amount = after[(gpu_class, resource)]
                    if parse_quantity(new_amount) < parse_quantity(amount):
                        renamed = f" (now flavor {new_flavor})" if new_flavor != flavor else ""
                        risks.append(Risk(change.key, f"quota reduction: {resource} on flavor {flavor}{renamed} "
                                                      f"{amount} -> {new_amount}; "
                                                      "admitted workloads keep running, new ones may wait"))
        elif change.action == "removed":
            if kind == "ResourceFlavor":
                users = sorted(k[2] for k, obj in base.items() if k[0] == "ClusterQueue" and name in _flavors_used(obj))
                still = sorted(k[2] for k, obj in new.items() if k[0] == "ClusterQueue" and name in _flavors_used(obj))
                if still:
                    risks.append(Risk(change.key, f"flavor removed but ClusterQueues still use it: {', '.join(still)}; "
                                                  "its resource-in-use finalizer blocks deletion"))
                elif users:
                    successor = [flavor for flavor, gpu_class in new_classes.items()
                                 if gpu_class == base_classes.get(name) and flavor != name]
                    renamed = f"; class {base_classes[name]} now uses flavor {successor[0]}" if successor else ""
                    risks.append(Risk(change.key, f"flavor removed that ClusterQueues used: {', '.join(users)}; "
                                                  f"workloads admitted on it keep running until they finish{renamed}"))
            if kind == "ClusterTrainingRuntime":
                gpu_class = base[change.key]["metadata"].get("annotations", {}).get(GPU_CLASS_ANNOTATION, name)
                holders = sorted(k[2] for k, obj in base.items() if k[0] == "ClusterQueue"
                                 and _class_flavor(base, gpu_class) in _flavors_used(obj))
                held = f" while groups held allocations on it: {', '.join(holders)}" if holders else ""
                risks.append(Risk(change.key, f"class {gpu_class} removed{held}; TrainJobs naming {name} "
                                              "can no longer be created"))
            if kind == "LocalQueue":
                risks.append(Risk(change.key, "local queue removed: jobs in this namespace are no longer admitted"))
            if kind == "WorkloadPriorityClass":
                risks.append(Risk(change.key, f"priority class {name} removed: jobs naming it are refused at "
                                              "submission; queued jobs keep the priority they were given"))
            if kind == "ClusterQueue":
                risks.append(Risk(change.key, f"{WAITS_ON_WORKLOADS}: Kueue keeps the ClusterQueue Terminating "
                                              "(resource-in-use finalizer) until the workloads reserving quota in it "
                                              "finish; the sync itself completes (the Application prunes last)"))
    return risks


def _class_flavor(objects: dict[Key, dict], gpu_class: str) -> str:
    for (kind, _, name), obj in objects.items():
        if kind == "ResourceFlavor" and obj["metadata"].get("annotations", {}).get(GPU_CLASS_ANNOTATION) == gpu_class:
            return name
    return gpu_class


def make_plan(base_files: Files, new_files: Files) -> Plan:
    base, new = objects_of(base_files), objects_of(new_files)
    changes = []
    for key in sorted(set(base) | set(new)):
        if key not in base:
            changes.append(ObjectChange(key, "added"))
        elif key not in new:
            changes.append(ObjectChange(key, "removed"))
        else:
            fields = _field_changes(base[key], new[key])
            if fields:
                changes.append(ObjectChange(key, "changed", fields))
    return Plan(changes, _risks(base, new, changes))


def _name(key: Key) -> str:
    _kind, namespace, name = key
    return f"{namespace}/{name}" if namespace else name


_SHOWN = 120


def _value(value: Any, start: int = 0) -> str:
    if value is None:
        return "(none)"
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    if len(text) <= _SHOWN:
        return text
    if start:
        text = "..." + text[start:]
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _change(fc: FieldChange) -> str:
    """old -> new; for long values, both shown from a little before where they first differ."""
    old, new = _value(fc.old), _value(fc.new)
    if len(old) == len(new) == _SHOWN and old == new:
        full_old, full_new = (yaml.safe_dump(v, default_flow_style=True, width=1 << 16) for v in (fc.old, fc.new))
        first = next((i for i, (a, b) in enumerate(zip(full_old, full_new)) if a != b), 0)
        start = max(0, first - 30)
        old, new = _value(fc.old, start), _value(fc.new, start)
    return f"{old} -> {new}"


def _counts(plan: Plan) -> str:
    actions = [c.action for c in plan.changes]
    return (f"{actions.count('added')} added, {actions.count('changed')} changed, {actions.count('removed')} removed, "
            f"{len(plan.risks)} risk(s)")


def format_text(plan: Plan) -> str:
    if not plan.changes:
        return "No changes: the cluster state this render describes equals the base.\n"
    lines = [f"Plan: {_counts(plan)}"]
    if plan.risks:
        lines += ["", "RISKS"]
        lines += [f"  ! {risk.key[0]} {_name(risk.key)}: {risk.what}" for risk in plan.risks]
    for kind, changes in plan.by_kind().items():
        lines += ["", f"{kind}"]
        for change in changes:
            sign = {"added": "+", "removed": "-", "changed": "~"}[change.action]
            lines.append(f"  {sign} {_name(change.key)} ({change.action})")
            lines += [f"      {fc.path}: {_change(fc)}" for fc in change.fields]
    return "\n".join(lines) + "\n"


def _fit(lines: list[str], budget: int) -> list[str]:
    """The longest prefix of `lines` whose text fits in `budget` characters."""
    kept, size = [], 0
    for line in lines:
        if size + len(line) + 1 > budget:
            break
        kept.append(line)
        size += len(line) + 1
    return kept


def format_markdown(plan: Plan, limit: int = GITHUB_COMMENT_LIMIT - 512) -> str:
    """A PR comment under `limit` characters (room left for a workflow's marker). When too long, the
    per-object details are cut first, then the risk list, each with a note saying so."""
    title = ["### gpugen plan", ""]
    if not plan.changes:
        return "\n".join(title + ["No changes to the cluster."]) + "\n"
    title += [f"**{_counts(plan)}**", ""]
    risks = [f"- **{risk.key[0]} `{_name(risk.key)}`**: {risk.what}" for risk in plan.risks]
    summary = ["| kind | added | changed | removed |", "|---|---:|---:|---:|"]
    for kind, changes in plan.by_kind().items():
        actions = [c.action for c in changes]
        summary.append(
            f"| {kind} | {actions.count('added')} | {actions.count('changed')} | {actions.count('removed')} |")
    summary.append("")
    details: list[str] = []
    for kind, changes in plan.by_kind().items():
        details += [f"<details><summary>{kind} ({len(changes)})</summary>", ""]
        for change in changes:
            details.append(f"- `{_name(change.key)}` {change.action}")
            details += [f"  - `{fc.path}`: `{_change(fc).replace(' -> ', '` → `')}`" for fc in change.fields]
        details += ["", "</details>", ""]

    def assemble(risk_lines: list[str], detail_lines: list[str], note: str = "") -> str:
        risk_block = ["#### :warning: Risks", "", *risk_lines, ""] if risk_lines else []
        return "\n".join(title + risk_block + summary + detail_lines) + "\n" + note

    text = assemble(risks, details)
    if len(text) <= limit:
        return text
    note = "\n_Truncated to fit a GitHub comment: run `python -m generator plan` for the full list._\n"
    budget = limit - len(assemble(risks, [], note)) - 32
    if budget > 0:
        kept = _fit(details, budget)
        if kept.count("</details>") < sum(line.startswith("<details>") for line in kept):
            kept += ["", "</details>"]  # close the section the cut fell in
        return assemble(risks, kept, note)
    # Even the risks do not fit: keep as many as fit, say how many are missing, drop the details.
    budget = limit - len(assemble([], [], note)) - 128
    shown = _fit(risks, budget)
    shown.append(f"- _... and {len(risks) - len(shown)} more risk(s)_")
    return assemble(shown, [], note)


# ------------------------------------------------------------------ several clusters (docs/multi-cluster.md)

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
    return set(_flavor_classes(objects).values())


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


def _move(move: ClassMove) -> str:
    return (f"class {move.gpu_class} moves from {move.old} to {move.new}: its jobs on {move.old} run to the end "
            f"there; new jobs go to {move.new} once both clusters have synced")


def format_cluster_text(result: ClusterPlans) -> str:
    counts = "; ".join(f"{name}: {_counts(plan)}" for name, plan in result.plans.items())
    lines = [f"Plan for {len(result.plans)} clusters: {counts}"]
    if result.moves:
        lines += ["", "MOVES"] + [f"  ! {_move(move)}" for move in result.moves]
    for name, plan in result.plans.items():
        lines += ["", f"=== cluster {name}", format_text(plan).rstrip("\n")]
    return "\n".join(lines) + "\n"


def format_cluster_markdown(result: ClusterPlans, limit: int = GITHUB_COMMENT_LIMIT - 512) -> str:
    """One comment: the moves, then each cluster's plan (format_markdown) in an equal share of the limit."""
    head = ["### gpugen plan, several clusters", ""]
    if result.moves:
        head += ["#### :warning: Classes that move between clusters", "",
                 *(f"- **{move.gpu_class}**: {_move(move)}" for move in result.moves), ""]
    share = (limit - len("\n".join(head)) - 64 * len(result.plans)) // max(1, len(result.plans))
    body = [format_markdown(plan, share).replace("### gpugen plan", f"#### cluster `{name}`", 1)
            for name, plan in result.plans.items()]
    return "\n".join(head) + "\n" + "\n".join(body)


def format_any(result: Plan | ClusterPlans, output_format: str) -> str:
    """`result` as text or markdown, whether of one cluster or of several."""
    if isinstance(result, ClusterPlans):
        return format_cluster_markdown(result) if output_format == "markdown" else format_cluster_text(result)
    return format_markdown(result) if output_format == "markdown" else format_text(result)
