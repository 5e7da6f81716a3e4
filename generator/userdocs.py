"""The "Available runtimes" page a cluster's users read, rendered from the inventory.

Pure: inventory -> Markdown text. Part of every render, so `render --check` keeps it fresh. The page's text
lives in generator/templates/ (runtimes.md, one runtime-section.md per class, two-nodes.md for classes with
two or more nodes), stdlib string.Template with $names: no template engine to import on every render. This
module only computes the values and the table rows.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from string import Template

from generator.builders import grafana
from generator.freetext import markdown, markdown_code, markdown_sentence
from generator.builders.kueue import DEFAULT_LOCAL_QUEUE
from generator.inventory import accelerators, clusters, duration
from generator.inventory.models import GpuClass, Inventory
from generator.inventory.contract import allowed_priorities, default_priority, reachable, walltime_seconds
from generator.inventory.naming import flavor_name, runtime_name

TEMPLATES = Path(__file__).with_name("templates")


@cache
def _template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text(encoding="utf-8"))


def _count(number: int, noun: str) -> str:
    """1 GPU, 2 GPUs."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _counted(gpu_class: GpuClass, count: int) -> str:
    """`2 GPUs`, `7 x <unit>` as page text (the unit is the inventory's free text)."""
    return markdown(accelerators.counted(gpu_class, count))


def _runtime_section(inventory: Inventory, name: str, gpu_class: GpuClass) -> str:
    storage = inventory.cluster.storage
    per_node = gpu_class.perNode
    sdk_name = accelerators.sdk_name(gpu_class)
    two_nodes = ""
    if gpu_class.nodes >= 2:
        two_nodes = _template("two-nodes.md").substitute(gpus_per_node=_counted(gpu_class, per_node.gpus),
                                                         gpus=per_node.gpus, sdk_name=sdk_name)
    return _template("runtime-section.md").substitute(
        ask_intro=_ask_intro(gpu_class),
        sdk_name=sdk_name,
        resource=accelerators.resource(gpu_class),
        kind_note=_kind_note(gpu_class),
        runtime=runtime_name(name),
        description=f"{markdown_sentence(gpu_class.description)}\n\n" if gpu_class.description else "",
        class_name=name,
        flavor=flavor_name(name, gpu_class),
        arch=gpu_class.arch,
        image=gpu_class.image,
        num_nodes=gpu_class.numNodes,
        nodes=_count(gpu_class.nodes, "node"),
        gpus_per_node=_counted(gpu_class, per_node.gpus),
        cpu_per_node=per_node.cpu,
        memory_per_node=per_node.memory,
        total_gpus=_counted(gpu_class, per_node.gpus * gpu_class.nodes),
        node_selector=", ".join(f"`{key}={value}`" for key, value in sorted(gpu_class.nodeSelector.items())),
        env_rows="\n".join(f"| `{var}` | {markdown_code(value)} |"
                            for var, value in inventory.cluster.cacheEnv.items()),
        home_path=storage.home.mountPath,
        home_claim=storage.home.claimName,
        workspace_path=storage.workspace.mountPath,
        workspace_claim=storage.workspace.claimName,
        two_nodes=two_nodes,
    )


def _ask_intro(gpu_class: GpuClass) -> str:
    """How the section asks for the class's accelerator (whole NVIDIA GPUs: the page as it always was)."""
    resource = accelerators.resource(gpu_class)
    if resource == accelerators.NVIDIA_GPU and not gpu_class.accelerator.unit:
        return "The runtime requests no GPU: ask for GPUs per node. One GPU:"
    return (f"The runtime requests no accelerator: ask for `{resource}` per node, counted in units of one "
            f"{markdown(accelerators.unit(gpu_class))} (`{accelerators.sdk_name(gpu_class)}` in the SDK). One unit:")


def _kind_note(gpu_class: GpuClass) -> str:
    """What a researcher must know of the class's kind of accelerator, after the per-node limit."""
    kind = accelerators.kind(gpu_class)
    if kind == "time-sliced":
        return (f" Each GPU is shared {gpu_class.accelerator.timeSlicing.replicas} ways in turn, without memory "
                "isolation: ask for 1 unless you know your job spreads over several GPUs.")
    if accelerators.trainer_counts_as_gpus(accelerators.resource(gpu_class)):
        return ""
    device = " (a CUDA process uses one MIG device)" if kind == "mig" else ""
    return (f" Your job starts one process per unit it asks for{device}: the platform sets `numProcPerNode` "
            "when you set none.")


def _hardware(gpu_class: GpuClass) -> str:
    """`nodes × units` of the runtime table, with the unit where it is not a whole NVIDIA GPU."""  # noqa: RUF002
    shown = f"{gpu_class.nodes} × {gpu_class.perNode.gpus}"
    if accelerators.resource(gpu_class) == accelerators.NVIDIA_GPU and not gpu_class.accelerator.unit:
        return shown
    return f"{shown} ({markdown(accelerators.unit(gpu_class))}, `{accelerators.resource(gpu_class)}`)"


def runtimes_page(inventory: Inventory, source: str) -> str:
    classes = sorted(inventory.classes.items())
    allocation_rows = [
        f"| `{group_name}` | {', '.join(f'`{ns}`' for ns in group.namespaces)} | "
        f"{f'`{group.cohort}`' if group.cohort else '—'} | `{class_name}` | {allocation.gpus} | "
        f"{allocation.cpu} | {allocation.memory} |"
        for group_name, group in sorted(inventory.groups.items())
        for class_name, allocation in sorted(group.allocations.items())
    ]
    queueing = inventory.cluster.queueing
    several = clusters.several(inventory)
    group_rows = []
    limit_rows = []
    gpu_reach = reachable(inventory, "gpus")
    for group_name, group in sorted(inventory.groups.items()):
        allowed = allowed_priorities(inventory, group)
        default = default_priority(inventory, group)
        shown = ", ".join(f"`{p}`" + (" (default)" if p == default else "") for p in allowed) or "—"
        group_rows.append(f"| `{group_name}` | {group.weight if queueing.fairSharing else '—'} | "
                          f"{group.reclaimWithinCohort if group.cohort else '— (no cohort)'} | "
                          f"{'yes' if group.preemptWithinGroup != 'Never' else 'no'} | {shown} |")
        for class_name in sorted(group.allocations):
            default_s, maximum_s = walltime_seconds(inventory, group, class_name)
            limit_rows.append(f"| `{group_name}` | `{class_name}` | {duration.show(default_s)} | "
                              f"{duration.show(maximum_s)} | {int(gpu_reach[(group_name, class_name)])} |")
    if inventory.priorities:
        listed = "; ".join(f"`{name}` ({p.value}{': ' + markdown(p.description) if p.description else ''})"
                           for name, p in sorted(inventory.priorities.items(), key=lambda item: -item[1].value))
        priorities = (f"Name one with the label `kueue.x-k8s.io/priority-class` (Python: "
                      f"`options=[Labels({{\"kueue.x-k8s.io/priority-class\": \"<name>\"}})]`): {listed}. Inside a "
                      "group, a higher priority is admitted first and, where the group preempts, stops the group's "
                      "running jobs of lower priority. A priority your group may not use is refused.")
    else:
        priorities = "This cluster defines no priorities: jobs are admitted in the order they were submitted."
    fair_sharing = ("**Fair sharing.** Idle quota in a cohort goes to the group with the lowest weighted share of "
                    "what it borrows (a higher weight gets more), and a group taking back its own quota preempts the "
                    "borrower with the highest share first." if queueing.fairSharing else
                    "Idle quota in a cohort is lent first come, first served.")
    return _template("runtimes.md").substitute(
        fair_sharing=fair_sharing,
        group_rows="\n".join(group_rows),
        priorities=priorities,
        limit_rows="\n".join(limit_rows),
        finished_ttl=queueing.finishedJobTTL,
        max_grace=queueing.maxGracePeriod,
        workspace_path=inventory.cluster.storage.workspace.mountPath,
        source=source,
        cluster=inventory.cluster.name.upper(),
        local_queue=DEFAULT_LOCAL_QUEUE,
        runtime_list=", ".join(f"`{runtime_name(name)}`" for name, _ in classes),
        where_jobs_run=_where_jobs_run(inventory),
        runtime_table_head=("| runtime | GPU class | runs on cluster | CPU architecture | default image | "
                            "nodes × GPUs |"
                            "\n|---|---|---|---|---|---|") if several else
                           ("| runtime | GPU class | CPU architecture | default image | nodes × GPUs |"
                            "\n|---|---|---|---|---|"),
        runtime_rows="\n".join(f"| `{runtime_name(name)}` | `{name}` |{f' `{c.cluster}` |' if several else ''} "
                               f"`{c.arch}` | `{c.image}` | {_hardware(c)} |" for name, c in classes),
        runtime_sections="\n".join(_runtime_section(inventory, name, gpu_class) for name, gpu_class in classes),
        allocation_rows="\n".join(allocation_rows),
        platforms=", ".join(f"`linux/{c.arch}` for `{runtime_name(name)}`" for name, c in classes),
        image_reading=_image_reading(inventory, classes),
        dashboards=_dashboards(inventory),
    )


def _where_jobs_run(inventory: Inventory) -> str:
    """With several clusters: where to submit, and where a job runs (the cluster with its runtime's class)."""
    if not clusters.several(inventory):
        return ""
    workers = clusters.workers(inventory)
    return (f"\n**One platform, {len(workers) + 1} clusters.** Submit, list and delete your jobs on the "
            f"`{clusters.manager(inventory)}` cluster, as everywhere on this page. Each GPU class lives in one of the "
            f"clusters {', '.join(f'`{w}`' for w in workers)} (the table below): the job runs there, and its status "
            "shows where you submitted it. On those clusters you may read your jobs, not create them.\n")


def _dashboards(inventory: Inventory) -> str:
    """Where a group finds its dashboard in the site's Grafana; nothing when none is rendered."""
    monitoring = inventory.cluster.monitoring
    if monitoring is None or not monitoring.dashboards:
        return ""
    rows = "\n".join(f"| `{name}` | {grafana.group_title(inventory, name)} | "
                     f"`/d/{grafana.group_uid(inventory, name)}` |"
                     for name in sorted(inventory.groups))
    return ("\n**Your group's dashboard.** The cluster's Grafana has one dashboard per research group: its GPUs, CPU "
            "and memory admitted on each class against its allocation and borrowing limit, its pending jobs and "
            "how long jobs wait. Search Grafana for its title, or open the path after Grafana's address.\n\n"
            "| group | dashboard | path |\n|---|---|---|\n" + rows + "\n")


def _image_reading(inventory: Inventory, classes) -> str:
    """How the image check reads an image, in the users' words: which registries it reads anonymously."""
    public = sorted(inventory.cluster.components.kyverno.publicRegistries)
    platform = f"linux/{classes[0][1].arch}" if classes else "linux/arm64"
    build = f"docker buildx build --platform {platform}"
    if public:
        where = ("From " + ", ".join(f"`{host}`" for host in public) + " (public images) an image index of any "
                 f"platforms is read, so what `{build} --push` pushes is accepted. From other registries and from "
                 "private repositories an image index without `linux/amd64` cannot be read")
    else:
        where = "An image index without `linux/amd64` cannot be read"
    return (f"{where}: push a single-platform image (`{build} --provenance=false --push`) or name your platform's "
            f"image by its digest (`image@sha256:...`, from `crane digest --platform {platform} IMAGE`).")
