"""Classes of every accelerator kind (examples/mixed-accelerators): the inventory's facts about each class's
resource, and what the builders make of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.builders import kueue
from generator.inventory import accelerators, load_inventory_text

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml"


@pytest.fixture(scope="module")
def mixed():
    return load_inventory_text(EXAMPLE.read_text(encoding="utf-8"), str(EXAMPLE))


def test_each_class_says_what_it_requests(mixed):
    resources = {name: accelerators.resource(c) for name, c in mixed.classes.items()}
    assert resources == {"gh200": "nvidia.com/gpu", "a100-1g": "nvidia.com/mig-1g.10gb",
                         "a100-3g": "nvidia.com/mig-3g.40gb", "l40s-shared": "nvidia.com/gpu.shared",
                         "mi300x": "amd.com/gpu", "gaudi3": "habana.ai/gaudi"}
    kinds = {name: accelerators.kind(c) for name, c in mixed.classes.items()}
    assert kinds == {"gh200": "gpu", "a100-1g": "mig", "a100-3g": "mig", "l40s-shared": "time-sliced",
                     "mi300x": "gpu", "gaudi3": "other"}
    assert accelerators.counted(mixed.classes["gh200"], 1) == "1 GPU"
    assert accelerators.counted(mixed.classes["gh200"], 2) == "2 GPUs"
    assert accelerators.counted(mixed.classes["a100-1g"], 7) == "7 x 1g.10gb slice of an A100"


def test_device_variables_of_every_vendor_present(mixed):
    assert accelerators.device_env(mixed) == (
        *accelerators.DEVICE_ENV["nvidia.com"], *accelerators.DEVICE_ENV["amd.com"],
        *accelerators.DEVICE_ENV["habana.ai"])


@pytest.mark.parametrize("name, problem", [
    ("nvidia.com/gpu", None), ("nvidia.com/mig-1g.10gb", None), ("habana.ai/gaudi", None),
    ("example.com/Custom-NPU", None),
    ("gpu", "no domain"), ("kubernetes.io/gpu", "Kubernetes' own"), ("node.kubernetes.io/gpu", "Kubernetes' own"),
    ("requests.nvidia.com/gpu", "Kubernetes' own"), ("nvidia.com/gpu!", "not an extended resource name"),
    ("nvidia.com/" + "g" * 64, "not an extended resource name"),
])
def test_extended_resource_names_as_apimachinery_reads_them(name, problem):
    found = accelerators.extended_resource_problem(name)
    assert (found is None) if problem is None else (problem in found), found


def test_each_queue_covers_its_classes_resources_and_each_flavor_only_its_own(mixed):
    queue = kueue.cluster_queue(mixed, "vision-lab", mixed.groups["vision-lab"])
    [group] = queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu",
                                         "nvidia.com/gpu.shared", "amd.com/gpu", "pods"]
    for flavor in group["flavors"]:
        # Kueue's webhook: every flavor lists the covered resources in their order.
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
        own = accelerators.resource(mixed.classes[flavor["name"]])
        allocation = mixed.groups["vision-lab"].allocations[flavor["name"]]
        for entry in flavor["resources"]:
            if entry["name"] == own:
                assert entry["nominalQuota"] == str(allocation.gpus)
            elif entry["name"] not in ("cpu", "memory", "pods"):
                assert entry["nominalQuota"] == "0"


def test_mig_classes_share_their_nodes(mixed):
    flavors = {f["metadata"]["name"]: f for f in kueue.resource_flavors(mixed)}
    assert flavors["a100-1g"]["spec"]["nodeLabels"] == flavors["a100-3g"]["spec"]["nodeLabels"]
