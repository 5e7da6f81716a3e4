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

from generator.builders.kueue import DEFAULT_LOCAL_QUEUE
from generator.inventory.models import GpuClass, Inventory
from generator.inventory.naming import flavor_name, runtime_name

TEMPLATES = Path(__file__).with_name("templates")


@cache
def _template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text(encoding="utf-8"))


def _count(number: int, noun: str) -> str:
    """1 GPU, 2 GPUs."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _runtime_section(inventory: Inventory, name: str, gpu_class: GpuClass) -> str:
    storage = inventory.cluster.storage
    per_node = gpu_class.perNode
    two_nodes = ""
    if gpu_class.nodes >= 2:
        two_nodes = _template("two-nodes.md").substitute(gpus_per_node=_count(per_node.gpus, "GPU"), gpus=per_node.gpus)
    return _template("runtime-section.md").substitute(
        runtime=runtime_name(name),
        description=f"{gpu_class.description}.\n\n" if gpu_class.description else "",
        class_name=name,
        flavor=flavor_name(name, gpu_class),
        arch=gpu_class.arch,
        image=gpu_class.image,
        num_nodes=gpu_class.numNodes,
        nodes=_count(gpu_class.nodes, "node"),
        gpus_per_node=_count(per_node.gpus, "GPU"),
        cpu_per_node=per_node.cpu,
        memory_per_node=per_node.memory,
        total_gpus=_count(per_node.gpus * gpu_class.nodes, "GPU"),
        node_selector=", ".join(f"`{key}={value}`" for key, value in sorted(gpu_class.nodeSelector.items())),
        env_rows="\n".join(f"| `{var}` | `{value}` |" for var, value in inventory.cluster.cacheEnv.items()),
        home_path=storage.home.mountPath,
        home_claim=storage.home.claimName,
        workspace_path=storage.workspace.mountPath,
        workspace_claim=storage.workspace.claimName,
        two_nodes=two_nodes,
    )


def runtimes_page(inventory: Inventory, source: str) -> str:
    classes = sorted(inventory.classes.items())
    allocation_rows = [
        f"| `{group_name}` | {', '.join(f'`{ns}`' for ns in group.namespaces)} | "
        f"{f'`{group.cohort}`' if group.cohort else '—'} | `{class_name}` | {allocation.gpus} | "
        f"{allocation.cpu} | {allocation.memory} |"
        for group_name, group in sorted(inventory.groups.items())
        for class_name, allocation in sorted(group.allocations.items())
    ]
    return _template("runtimes.md").substitute(
        source=source,
        cluster=inventory.cluster.name.upper(),
        local_queue=DEFAULT_LOCAL_QUEUE,
        runtime_list=", ".join(f"`{runtime_name(name)}`" for name, _ in classes),
        runtime_rows="\n".join(f"| `{runtime_name(name)}` | `{name}` | `{c.arch}` | `{c.image}` | "
                               f"{c.nodes} × {c.perNode.gpus} |" for name, c in classes),
        runtime_sections="\n".join(_runtime_section(inventory, name, gpu_class) for name, gpu_class in classes),
        allocation_rows="\n".join(allocation_rows),
        platforms=", ".join(f"`linux/{c.arch}` for `{runtime_name(name)}`" for name, c in classes),
    )
