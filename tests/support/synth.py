"""Synthetic gpugen inventories at national-platform scale: N GPU classes x M research groups x K namespaces.

    python -m tests.support.synth --classes 64 --groups 2000 --namespaces 3 -o /tmp/inventory.yaml
    python -m tests.support.synth ... --clusters 8 -o /tmp/inventory.yaml   # the classes spread over 8 workers

Deterministic for a given (classes, groups, namespaces, seed). What makes it realistic rather than just big:

- classes cycle through a catalogue of real GPU node types, arm64 (GH200, GB200) and amd64 (H100, H200, B200,
  A100, L40S, RTX 6000 Ada), each pool with its own value of the ONE shared label key
  (nvidia.com/gpu.product), its own per-node allocatable, some with taints to tolerate, some with numNodes 2;
- every group holds quota on one to three classes, sized in whole GPUs with the node's CPU and memory per GPU,
  some with explicit pods, some with borrowing and lending limits; groups form cohorts of four within a field
  of research, and every eighth group stands alone (no cohort, hence no limits);
- each class gets just enough nodes for the quotas held on it plus headroom (default 25 %), so the quotas FIT
  capacity. The generator checks that itself and refuses to write an oversubscribed inventory
  (a low --headroom such as 0.5 shows the refusal); gpugen's own rules check it again when rendering;
- with --clusters N (docs/multi-cluster.md): a manager `hub` and N workers `site-1`..`site-N`, the classes
  spread over the workers in consecutive blocks (class i on worker i*N // classes + 1).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml

LABEL = "nvidia.com/gpu.product"
PODS_PER_NODE = 110


@dataclass(frozen=True)
class NodeType:
    slug: str  # class name prefix
    product: str  # label value prefix
    arch: str
    gpus: int
    cpu: int
    memory_gi: int
    description: str


CATALOGUE = (
    NodeType("h100", "NVIDIA-H100-80GB-HBM3", "amd64", 8, 192, 2048, "NVIDIA HGX H100 (8x H100 SXM 80GB)"),
    NodeType("gh200", "NVIDIA-GH200-480GB", "arm64", 1, 72, 480, "NVIDIA GH200 Grace Hopper Superchip"),
    NodeType("a100", "NVIDIA-A100-SXM4-80GB", "amd64", 8, 128, 1024, "NVIDIA HGX A100 (8x A100 SXM4 80GB)"),
    NodeType("l40s", "NVIDIA-L40S", "amd64", 4, 64, 512, "4x NVIDIA L40S PCIe"),
    NodeType("h200", "NVIDIA-H200", "amd64", 8, 224, 2048, "NVIDIA HGX H200 (8x H200 SXM 141GB)"),
    NodeType("gb200", "NVIDIA-GB200", "arm64", 4, 144, 1728, "NVIDIA GB200 NVL72 compute tray (4x B200, 2x Grace)"),
    NodeType("b200", "NVIDIA-B200", "amd64", 8, 224, 2048, "NVIDIA HGX B200 (8x B200)"),
    NodeType("rtx6000", "NVIDIA-RTX-6000-Ada-Generation", "amd64", 4, 64, 384, "4x NVIDIA RTX 6000 Ada"),
)
FIELDS = ("astro", "bio", "chem", "climate", "vision", "nlp", "physics", "robotics", "genomics", "materials",
          "neuro", "econ", "math", "geo", "med", "hpc")
NAMESPACE_SUFFIXES = ("", "-teaching", "-dev", "-prod", "-students", "-staging")
COHORT_SIZE = 4
RECLAIM = ("Never", "Never", "LowerPriority", "Any")


def cluster_section() -> dict:
    """The FLAME cluster section (gpu_classes.yaml), renamed: storage, cache variables and GitOps as in the seed."""
    return {
        "name": "national",
        "gpuClassLabel": LABEL,
        "storage": {
            "home": {"claimName": "home", "mountPath": "/personal"},
            "workspace": {"claimName": "workspace", "mountPath": "/workspace"},
        },
        "cacheEnv": {
            "HF_HOME": "/personal/.cache/huggingface",
            "TORCH_HOME": "/personal/.cache/torch",
            "PIP_CACHE_DIR": "/personal/.cache/pip",
            "XDG_CACHE_HOME": "/personal/.cache",
            "TRITON_CACHE_DIR": "/personal/.cache/triton",
        },
        "gitops": {
            "repoURL": "https://github.com/urcf/national-gitops.git",
            "targetRevision": "main",
            "path": "rendered",
            "applicationName": "national-training-platform",
            "applicationNamespace": "argocd",
        },
    }


class Oversubscribed(Exception):
    pass


def build(classes: int, groups: int, namespaces: int, seed: int = 7, headroom: float = 1.25) -> dict:
    """The inventory as a plain dict. Raises Oversubscribed if the quotas would not fit the nodes."""
    if classes < 1 or groups < 1 or namespaces < 1:
        raise ValueError("classes, groups and namespaces must be at least 1")
    rng = random.Random(f"{seed}:{classes}:{groups}:{namespaces}")
    class_types: dict[str, NodeType] = {}
    for index in range(classes):
        node_type = CATALOGUE[index % len(CATALOGUE)]
        class_types[f"{node_type.slug}-p{index // len(CATALOGUE) + 1:02d}"] = node_type
    class_names = list(class_types)

    group_entries: dict[str, dict] = {}
    demand: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    width = len(str(groups))
    for index in range(groups):
        field = FIELDS[index % len(FIELDS)]
        name = f"{field}-{index:0{width}d}"
        # Cohorts of four groups of the same field (index // len(FIELDS) numbers the groups within a field).
        within_field = index // len(FIELDS)
        cohort = None if index % 8 == 7 else f"{field}-cohort-{within_field // COHORT_SIZE:03d}"
        allocations: dict[str, dict] = {}
        for class_name in rng.sample(class_names, k=min(len(class_names), rng.choice((1, 2, 2, 3)))):
            node_type = class_types[class_name]
            gpus = rng.choice((1, 1, 2, 2, 4, 8)) if node_type.gpus > 1 else rng.choice((1, 1, 2))
            allocation: dict = {
                "gpus": gpus,
                "cpu": gpus * (node_type.cpu // node_type.gpus),
                "memory": f"{gpus * (node_type.memory_gi // node_type.gpus)}Gi",
            }
            pods = gpus * PODS_PER_NODE // node_type.gpus
            if rng.random() < 0.1:
                allocation["pods"] = pods  # explicit, the same share the default gives
            if cohort and rng.random() < 0.3:
                allocation["borrowingLimit"] = {"gpus": rng.choice((1, 2, 4, 8))}
                allocation["lendingLimit"] = {"gpus": rng.randint(0, gpus)}
            allocations[class_name] = allocation
            for resource, amount in (("gpus", gpus), ("cpu", allocation["cpu"]),
                                     ("memory_gi", gpus * (node_type.memory_gi // node_type.gpus)), ("pods", pods)):
                demand[class_name][resource] += amount
        entry: dict = {
            "description": f"{field} research group {index}",
            "namespaces": [f"{name}{NAMESPACE_SUFFIXES[k]}" if k < len(NAMESPACE_SUFFIXES) else f"{name}-ns{k}"
                           for k in range(namespaces)],
        }
        if cohort:
            entry["cohort"] = cohort
            entry["reclaimWithinCohort"] = rng.choice(RECLAIM)
        entry["allocations"] = dict(sorted(allocations.items()))
        group_entries[name] = entry

    class_entries: dict[str, dict] = {}
    for index, (class_name, node_type) in enumerate(class_types.items()):
        needed_gpus = demand[class_name]["gpus"]
        nodes = max(1, math.ceil(needed_gpus * headroom / node_type.gpus))
        entry = {
            "description": node_type.description,
            "arch": node_type.arch,
            "nodeSelector": {LABEL: f"{node_type.product}.{class_name.rsplit('-', 1)[1]}"},
            "image": f"ghcr.io/urcf/pytorch:2.9.1-cuda12.9-{node_type.arch}",
            "nodes": nodes,
            "perNode": {"gpus": node_type.gpus, "cpu": node_type.cpu, "memory": f"{node_type.memory_gi}Gi"},
        }
        if index % 4 == 3:
            entry["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        entry["numNodes"] = 2 if nodes >= 2 and node_type.gpus == 1 else 1
        class_entries[class_name] = entry
        # The generator's own refusal: every resource of every class must fit nodes x per-node allocatable.
        capacity = {"gpus": nodes * node_type.gpus, "cpu": nodes * node_type.cpu,
                    "memory_gi": nodes * node_type.memory_gi, "pods": nodes * PODS_PER_NODE}
        for resource, total in capacity.items():
            if demand[class_name][resource] > total:
                raise Oversubscribed(f"class {class_name}: groups hold {demand[class_name][resource]} {resource} "
                                     f"but {nodes} nodes offer {total} (headroom {headroom})")
    return {"cluster": cluster_section(), "classes": class_entries, "groups": group_entries}


def spread(inventory: dict, clusters: int) -> dict:
    """The inventory over a manager and `clusters` workers, each worker running a consecutive block of classes."""
    names = list(inventory["classes"])
    if not 1 <= clusters <= len(names):
        raise ValueError(f"--clusters must be between 1 and the number of classes ({len(names)})")
    workers = [f"site-{i + 1}" for i in range(clusters)]
    members = {"hub": {"role": "manager", "server": "https://hub.example.org:6443"}}
    members.update({w: {"role": "worker", "server": f"https://{w}.example.org:6443"} for w in workers})
    classes = {name: {**entry, "cluster": workers[i * clusters // len(names)]}
               for i, (name, entry) in enumerate(inventory["classes"].items())}
    return {"cluster": inventory["cluster"], "clusters": members, "classes": classes, "groups": inventory["groups"]}


def to_yaml(inventory: dict) -> str:
    # PyYAML emits YAML 1.1 and quotes whatever a 1.1 reader would not read back as a string.
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    head = "# Synthetic inventory generated by tests/support/synth.py; not a real cluster.\n"
    return head + yaml.dump(inventory, Dumper=dumper, sort_keys=False, default_flow_style=False, width=1 << 16)


def write(path: Path, classes: int, groups: int, namespaces: int, seed: int = 7, headroom: float = 1.25,
          clusters: int = 0) -> Path:
    inventory = build(classes, groups, namespaces, seed, headroom)
    if clusters:
        inventory = spread(inventory, clusters)
    path.write_text(to_yaml(inventory), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--groups", type=int, default=2000)
    parser.add_argument("--namespaces", type=int, default=3, help="namespaces per group")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--headroom", type=float, default=1.25,
                        help="nodes per class = ceil(GPUs held x headroom / GPUs per node); "
                             "quotas that do not fit are refused")
    parser.add_argument("--clusters", type=int, default=0, help="spread the classes over this many workers")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        write(args.output, args.classes, args.groups, args.namespaces, args.seed, args.headroom, args.clusters)
    except (Oversubscribed, ValueError) as refused:
        print(f"refused: {refused}", file=sys.stderr)
        return 2
    print(f"{args.output}: {args.classes} classes x {args.groups} groups x {args.namespaces} namespaces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
