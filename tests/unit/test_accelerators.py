"""Classes of every accelerator kind (examples/mixed-accelerators): the inventory's facts about each class's
resource, and what the builders make of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from generator.builders import kueue
from generator.inventory import accelerators, contract, load_inventory_text

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


def test_the_vendors_of_the_classes_and_no_other(mixed):
    assert accelerators.vendors(mixed) == (accelerators.NVIDIA, accelerators.AMD, accelerators.INTEL_GAUDI)
    flame = load_inventory_text((REPO / "gpu_classes.yaml").read_text(encoding="utf-8"), "gpu_classes.yaml")
    assert accelerators.vendors(flame) == (accelerators.NVIDIA,)


def test_every_channel_says_where_its_vendor_says_so():
    for vendor in accelerators.VENDORS:
        channels = vendor.variables + vendor.mounts + vendor.annotations
        assert channels, vendor.name
        for channel in channels:
            assert channel.source.strip(), (vendor.name, channel.name)
        assert vendor.forms and all(re.compile(p) for p in vendor.resources)
    # The container runtime's own annotation channels are every inventory's.
    assert {a.name for a in accelerators.RUNTIME_ANNOTATIONS} >= {"cdi.k8s.io"}


@pytest.mark.parametrize("name, advertised", [
    ("nvidia.com/gpu", True), ("nvidia.com/gpu.shared", True), ("nvidia.com/mig-1g.10gb", True),
    ("nvidia.com/mig-1g.10gb.shared", True), ("nvidia.com/mig-1g.10gb.me", True),
    ("nvidia.com/mig-1g.10gb.me.all", True),
    ("nvidia.com/mig-1g.10gb.gfx", True), ("nvidia.com/mig-1g.10gb-me", True), ("nvidia.com/mig-7g.80gb", True),
    ("nvidia.com/gpus", False), ("nvidia.com/h100", False), ("nvidia.com/gpu.shared.shared", False),
    ("nvidia.com/mig-1g.10gb.sharedx", False), ("nvidia.com/mig-1g", False),
    ("amd.com/gpu", True), ("amd.com/cpx_nps4", True), ("amd.com/spx_nps1", True), ("amd.com/gpux", False),
    ("amd.com/mi300x", False),
    ("habana.ai/gaudi", True), ("habana.ai/goya", True), ("habana.ai/gaudi2", False), ("habana.ai/gaudi3", False),
    ("gpu.intel.com/i915", True), ("gpu.intel.com/xe", True), ("gpu.intel.com/monitoring", False),
    ("example.com/npu", None), ("nvidia.co/gpu", None),
])
def test_what_each_vendors_device_plugin_advertises(name, advertised):
    assert accelerators.advertised(name) is advertised


def test_a_time_sliced_mig_slice_is_a_time_slice_of_a_mig_slice():
    inventory = load_inventory_text(EXAMPLE.read_text(encoding="utf-8").replace(
        "      resource: nvidia.com/mig-1g.10gb\n      unit: 1g.10gb slice of an A100\n",
        "      resource: nvidia.com/mig-1g.10gb.shared\n      timeSlicing: {replicas: 4}\n"), str(EXAMPLE))
    sliced = inventory.classes["a100-1g"]
    assert accelerators.mig_profile(accelerators.resource(sliced)) == "1g.10gb"
    assert accelerators.kind(sliced) == "mig" and sliced.accelerator.timeSlicing is not None
    assert accelerators.unit(sliced) == "time-slice of a 1g.10gb MIG slice"
    assert accelerators.counted(sliced, 2) == "2 time-slices of a 1g.10gb MIG slice"
    # The SDK maps "mig-<name>" to nvidia.com/mig-<name> as it is (kubeflow 0.5 get_resources_per_node).
    assert accelerators.sdk_name(sliced) == '"mig-1g.10gb.shared"'
    assert accelerators.one_share_per_container(sliced)


@pytest.mark.parametrize("name, problem", [
    ("nvidia.com/gpu", None), ("nvidia.com/mig-1g.10gb", None), ("habana.ai/gaudi", None),
    ("example.com/Custom-NPU", None), ("nvidia.com/mig-1g.10gb.shared", None),
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


def test_classes_on_one_node_share_its_pod_slots(mixed):
    """The A100 node's 110 pods are split between its two MIG classes: their groups' derived pod quotas together
    fit the node (they were 110 each before, twice the node)."""
    assert contract.node_pools(mixed)["a100-1g"] == ["a100-1g", "a100-3g"]
    assert contract.pods_per_node(mixed, "a100-1g") == contract.pods_per_node(mixed, "a100-3g") == 55
    assert contract.pods_per_node(mixed, "gh200") == 110
    for pool in {tuple(p) for p in contract.node_pools(mixed).values()}:
        node = mixed.classes[pool[0]]
        derived = sum(contract.allocated_pods(mixed, name, group.allocations[name])
                      for name in pool for group in mixed.groups.values() if name in group.allocations)
        assert derived <= node.perNode.pods * node.nodes, (pool, derived)
    queue = kueue.cluster_queue(mixed, "nlp-lab", mixed.groups["nlp-lab"])
    pods = {f["name"]: next(r["nominalQuota"] for r in f["resources"] if r["name"] == "pods")
            for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    assert pods["a100-1g"] == "55" and pods["a100-3g"] == "27"


def test_every_channel_is_in_the_guardrails_page():
    """docs/policies.md's table of channels names each one the guardrail refuses."""
    page = (REPO / "docs" / "policies.md").read_text(encoding="utf-8")
    channels = [c for v in accelerators.VENDORS for c in v.variables + v.mounts + v.annotations]
    missing = [c.name for c in channels + list(accelerators.RUNTIME_ANNOTATIONS)
               if f"`{c.name}{'*' if c.prefix else ''}`" not in page]
    assert not missing, f"docs/policies.md does not name {missing}"


@pytest.mark.parametrize("inventory_path", ["gpu_classes.yaml", "tests/policies/amd-gaudi.yaml",
                                            "examples/mixed-accelerators/gpu_classes.yaml"])
def test_each_vendors_rules_appear_only_where_its_classes_are(inventory_path):
    from generator.builders import kyverno
    from generator.inventory import load_inventory

    inventory = load_inventory(REPO / inventory_path)
    rendered = repr(kyverno.policies(inventory))
    present = accelerators.vendors(inventory)
    for vendor in accelerators.VENDORS:
        own = {c.name for c in vendor.variables + vendor.mounts + vendor.annotations} - {
            c.name for other in present if other is not vendor for c in other.variables}
        shown = {name for name in own if name in rendered}
        assert shown == (own if vendor in present else set()), (vendor.name, shown)
    nvidia = accelerators.NVIDIA in present
    assert ("kubectl debug" in rendered) == nvidia and ("void" in rendered) == nvidia
    assert ("pod-gpu-visibility" in rendered) == nvidia


def test_render_says_what_it_cannot_check_for_a_vendor_it_does_not_know(tmp_path):
    from click.testing import CliRunner

    from generator.cli import main

    inventory = tmp_path / "gpu_classes.yaml"
    inventory.write_text(EXAMPLE.read_text(encoding="utf-8").replace(
        "      resource: habana.ai/gaudi\n", "      resource: example.com/npu\n      unknownVendor: true\n"))
    args = ["render", "--inventory", str(inventory), "--out", str(tmp_path / "rendered"),
            "--bootstrap-out", str(tmp_path / "bootstrap"), "--docs-out", str(tmp_path / "runtimes.md")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert ("warning: class gaudi3 requests example.com/npu, whose device plugin gpugen does not know "
            "(accelerator.unknownVendor): it cannot check") in result.stderr, result.stderr
    # No Gaudi class left: nothing to say of Habana's images.
    assert "HABANA" not in result.stderr
    with_gaudi = CliRunner().invoke(main, [*args[:2], str(EXAMPLE), *args[3:]])
    assert with_gaudi.exit_code == 0 and "warning: Intel Gaudi classes: an image that sets HABANA_VISIBLE_DEVICES" \
        in with_gaudi.stderr, with_gaudi.stderr
