"""The guardrails of issue 14 as Kyverno's admission controller applies them in the simulated FLAME
(simulation: the pinned kube-apiserver, the released kyverno-controller with the rendered policies, Kueue,
JobSet, Trainer), with images from the test registry (tests/oracles/registry). The same decisions as the CLI
cases in tests/unit/test_policies.py, now from the API server's answer to a researcher's request."""

from __future__ import annotations

import pytest
import yaml

from tests.flame.flame_support import notebook_spawner, poll, researcher
from simulation.kube import ApiError
from tests.support.inventories import edited, setting, write
from tests.support.registry import HUB_REGISTRY, LOCALHOST_REGISTRY, REGISTRY, with_test_registry

pytestmark = pytest.mark.tools

GROUP = "vision-lab"
TRAINJOB = "trainer.kubeflow.org/v1alpha1"


def trainjob(namespace: str, name: str, image: str) -> dict:
    return {"apiVersion": TRAINJOB, "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"name": "torch-gh200"}, "trainer": {"image": image}}}


def job(namespace: str, name: str, container: dict, **metadata) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace, **metadata},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}


def refused(client, obj) -> str:
    with pytest.raises(ApiError) as error:
        client.create(obj)
    assert error.value.status in (400, 403), error.value
    return error.value.message


def test_live_image_architecture_against_the_registry(flame_cluster, registry, tmp_path):
    r = researcher(flame_cluster, GROUP)
    ns, address, hub, unlisted = (r.namespaces[0], registry[REGISTRY], registry[HUB_REGISTRY],
                                  registry[LOCALHOST_REGISTRY])
    # The registry runs beside the tests; Kyverno runs in the simulation's network namespace.
    for port in {int(a.rsplit(":", 1)[1]) for a in (address, hub)}:
        flame_cluster.network.expose(port)
    # A commit listing the test registry among the public registries (as a site lists its own), synced by Argo CD.
    public = with_test_registry(flame_cluster.inventory.cluster.components.kyverno, hub)
    listed = write(edited(yaml.safe_load(flame_cluster.inventory_file.read_text()),
                          setting("cluster.components.kyverno.publicRegistries", public)),
                   tmp_path / "gpu_classes.yaml")
    flame_cluster.sync(listed, "list the site's image registry as public")
    try:
        # Accepted by the released admission controller: buildx's arm64-only index (with its attestation) on public
        # registries, read over their HTTP API (with and without a token service), and a multi-arch index.
        accepted = (f"{address}/vision/train:arm64-attested", f"{hub}/hub/train:arm64-attested",
                    f"{address}/vision/train:multi", f"{unlisted}/vision/train:multi")
        for n, image in enumerate(accepted):
            poll(lambda: created(r.client, trainjob(ns, f"live-accepted-{n}", image)), 60,
                 f"{image} accepted once Kyverno has the synced policy")
            r.client.delete(TRAINJOB, "TrainJob", f"live-accepted-{n}", ns)
        for name, image in (("live-amd64", f"{address}/vision/train:amd64-index"),
                            ("live-hub-amd64", f"{hub}/hub/train:amd64-attested")):
            message = refused(r.client, trainjob(ns, name, image))
            assert (f"image {image} does not offer linux/arm64, the platform of runtime torch-gh200: build and push "
                    "the image for linux/arm64") in message, message
        # A registry not listed: an arm64-only index is refused (released Kyverno's image library); a single-platform
        # image and the platform's image pinned by digest are the supported paths.
        message = refused(r.client, trainjob(ns, "live-unlisted", f"{unlisted}/vision/train:arm64-attested"))
        assert "trainjob-image-arch" in message and "no child with platform linux/amd64" in message, message
        for n, image in enumerate((f"{unlisted}/vision/train:arm64-single",
                                   f"{unlisted}/vision/train@{registry['DIGEST_VISION_TRAIN_ARM64_ATTESTED_ARM64']}")):
            r.client.create(trainjob(ns, f"live-supported-{n}", image))
            r.client.delete(TRAINJOB, "TrainJob", f"live-supported-{n}", ns)
        # Lookup failures are denied with the registry's answer.
        message = refused(r.client, trainjob(ns, "live-missing", f"{address}/vision/train:missing"))
        assert "trainjob-image-arch" in message and "MANIFEST_UNKNOWN" in message, message
        message = refused(r.client, trainjob(ns, "live-private", f"{address}/private/train:arm64-attested"))
        assert "trainjob-image-arch" in message and "UNAUTHORIZED" in message, message
        message = refused(r.client, trainjob(ns, "live-down", "127.0.0.1:9/vision/train:arm64-attested"))
        assert "trainjob-image-arch" in message and "connection refused" in message, message
    finally:
        flame_cluster.sync(flame_cluster.inventory_file, "the committed inventory again")


def created(client, obj) -> bool:
    """Whether the API server created `obj` (False while admission still refuses it)."""
    try:
        client.create(obj)
        return True
    except ApiError as error:
        assert error.status in (400, 403), error
        return False


def test_live_gpu_visibility_and_ownership(flame_cluster):
    flame = flame_cluster
    r = researcher(flame, GROUP)
    ns = r.namespaces[0]
    image = flame.inventory.classes["gh200"].image
    all_gpus = {"name": "main", "image": image, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    message = refused(r.client, job(ns, "live-all-gpus", all_gpus, labels={"kueue.x-k8s.io/queue-name": "default"}))
    assert "remove NVIDIA_VISIBLE_DEVICES from the environment of container main" in message, message
    # A real JobSet in the namespace (Kueue's webhook looks the owner up), then a Job claiming to be its child.
    jobset = flame.admin.create({
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "live-parent", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {
            "spec": {"restartPolicy": "Never", "containers": [{"name": "w", "image": "busybox:1.37"}]}}}}}]}})
    owner = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "live-parent",
             "uid": jobset["metadata"]["uid"], "controller": True}
    gpu = {"name": "main", "image": image, "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    message = refused(r.client, job(ns, "live-forged-child", gpu, ownerReferences=[owner]))
    assert "remove the controller ownerReference to JobSet live-parent" in message, message
    flame.admin.delete("jobset.x-k8s.io/v1alpha2", "JobSet", "live-parent", ns)

    # A notebook spawner's CPU-only pod is admitted with NVIDIA_VISIBLE_DEVICES=void in every container.
    spawner = notebook_spawner(flame, ns)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "live-notebook", "namespace": ns},
           "spec": {"containers": [{"name": "notebook", "image": image}]}}
    created = spawner.create(pod)
    assert created["spec"]["containers"][0].get("env") == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}], \
        created["spec"]["containers"][0]
    flame.admin.delete("v1", "Pod", "live-notebook", ns)
    cdi = {**pod, "metadata": {**pod["metadata"], "name": "live-cdi",
                               "annotations": {"cdi.k8s.io/gpus": "nvidia.com/gpu=all"}}}
    message = refused(spawner, cdi)
    assert "remove the annotation cdi.k8s.io/gpus" in message, message
