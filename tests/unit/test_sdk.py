"""The real Kubeflow SDK (kubeflow 0.5.x), offline, against the rendered runtimes: only the Kubernetes
client is stubbed (tests/support/kubeflow_sdk.py).

NOT the evidence that researchers can use the SDK: the stub answers every call, so it never meets RBAC (it
passed while kubeflow 0.5's list_runtimes() raised on the 403 every researcher got). That evidence is
tests/apiserver/test_researcher_access.py: the same SDK against the real kube-apiserver with the tree applied,
authenticated as a researcher bound only by the rendered RBAC. This file checks what the SDK makes of the
runtimes' shape (device detection, TrainJob body) quickly and without tools.
"""

from __future__ import annotations

import yaml
from tests.support import REPO
from tests.support.kubeflow_sdk import train_job_from_sdk, trainer_client

from generator.versions import pin


def rendered_runtimes():
    folder = REPO / "rendered" / "trainer" / "clustertrainingruntime"
    return [yaml.safe_load(path.read_text()) for path in sorted(folder.glob("*.yaml"))]


def test_sdk_version_is_the_pinned_one():
    from importlib.metadata import version

    assert version("kubeflow") == pin("KUBEFLOW_SDK")


def test_list_runtimes_shows_each_class_with_its_image_and_one_node(flame):
    with trainer_client(rendered_runtimes(), namespace="vision-lab") as (client, _):
        runtimes = client.list_runtimes()
    assert [rt.name for rt in runtimes] == [f"torch-{name}" for name in sorted(flame.classes)]
    gh200 = runtimes[0]
    assert gh200.name == "torch-gh200"
    assert gh200.trainer.framework == "torch"
    assert gh200.trainer.image == flame.classes["gh200"].image
    assert gh200.trainer.num_nodes == 1
    # No resources in the runtime: the SDK reports an unknown device instead of raising.
    assert gh200.trainer.device == "Unknown"


def test_get_runtime_by_name():
    with trainer_client(rendered_runtimes(), namespace="vision-lab") as (client, _):
        assert client.get_runtime("torch-gh200").trainer.image.startswith("ghcr.io/")


def test_train_two_nodes_one_gpu_each_references_the_class_runtime():
    body = train_job_from_sdk(rendered_runtimes(), "vision-lab", "torch-gh200",
                              num_nodes=2, resources_per_node={"cpu": 8, "memory": "64Gi", "gpu": 1})
    assert body["kind"] == "TrainJob"
    assert body["spec"]["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "torch-gh200"}
    trainer = body["spec"]["trainer"]
    assert trainer["numNodes"] == 2
    for section in ("requests", "limits"):
        assert float(trainer["resourcesPerNode"][section]["nvidia.com/gpu"]) == 1
    assert trainer["resourcesPerNode"]["requests"]["memory"] == "64Gi"
    # The user never sets placement or a queue: the runtime and Kueue's default LocalQueue do.
    assert "runtimePatches" not in body["spec"]
    assert "labels" not in body["metadata"] or "kueue.x-k8s.io/queue-name" not in body["metadata"]["labels"]


def test_harness_can_fail_a_runtime_the_sdk_rejects():
    """Why runtimes carry no resources: a limits map without a device makes list_runtimes raise for EVERY
    runtime. Proves the stub harness surfaces SDK failures rather than hiding them."""
    import copy

    import pytest

    broken = copy.deepcopy(rendered_runtimes()[0])
    pod = broken["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["resources"] = {"limits": {"memory": "64Gi"}}
    # kubeflow's get_container_devices raises a bare Exception, so its message is what identifies the failure.
    with (trainer_client([broken], namespace="vision-lab") as (client, _),
          pytest.raises(Exception, match="Unknown device type in the container resources")):
        client.list_runtimes()


def test_every_kind_of_class_is_asked_for_as_the_users_page_shows():
    """examples/mixed-accelerators: for each class (whole GPU, MIG, time-sliced, AMD, Gaudi) the users' page's SDK
    snippet, run through the real SDK, requests exactly the class's resource, and its YAML names the same."""
    import json

    from generator import userdocs
    from generator.builders import trainer
    from generator.inventory import accelerators, load_inventory
    from generator.inventory.naming import runtime_name

    mixed = load_inventory(REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml")
    page = userdocs.runtimes_page(mixed, "gpu_classes.yaml")
    runtimes = trainer.runtimes(mixed)
    for name, gpu_class in sorted(mixed.classes.items()):
        section = page.split(f"### {runtime_name(name)}\n", 1)[1].split("\n### ", 1)[0]
        key, resource = accelerators.sdk_name(gpu_class), accelerators.resource(gpu_class)
        assert f'resources_per_node={{"cpu": 8, "memory": "64Gi", {key}: 1}}' in section, name
        assert f'        {resource}: "1"' in section, name
        body = train_job_from_sdk(runtimes, "vision-lab", runtime_name(name),
                                  resources_per_node={"cpu": 8, "memory": "64Gi", json.loads(key): 1})
        per_node = body["spec"]["trainer"]["resourcesPerNode"]
        for part in ("requests", "limits"):
            assert float(per_node[part][resource]) == 1, (name, per_node)
            assert set(per_node[part]) == {"cpu", "memory", resource}, (name, per_node)
