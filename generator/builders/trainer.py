"""Kubeflow Trainer (trainer.kubeflow.org/v1alpha1): one ClusterTrainingRuntime torch-<class> per GPU class.

The shape is the one the SDK and Trainer's webhook rely on (see upstream's torch_distributed runtime):
label framework=torch, one replicated job `node` with the trainer ancestor label, container `node`.
Deliberately no `resources`: the runtime requests no GPU, and the SDK's accelerator detection raises for
every runtime when a limits map has no device in it.
"""

from __future__ import annotations

from typing import Any

from generator.builders.common import metadata
from generator.inventory.models import GpuClass, Inventory
from generator.kinds import TRAINER
from generator.inventory.naming import GPU_CLASS_ANNOTATION, runtime_name

API_VERSION = TRAINER.api_version
NODE = "node"  # replicated job and container name the SDK and webhook look for
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
SHM_VOLUME = "dshm"


def cluster_training_runtime(inventory: Inventory, class_name: str, gpu_class: GpuClass) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "nodeSelector": dict(sorted(gpu_class.nodeSelector.items())),
    }
    if gpu_class.tolerations:
        pod_spec["tolerations"] = [t.model_dump(exclude_none=True) for t in gpu_class.tolerations]
    pod_spec["containers"] = [{
        "name": NODE,
        "image": gpu_class.image,
        "env": [{"name": name, "value": value} for name, value in inventory.cluster.cacheEnv.items()],
        "volumeMounts": [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}],
    }]
    # Memory-backed /dev/shm for PyTorch's data loader workers; bounded by the pod's memory limit.
    pod_spec["volumes"] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
    annotations = {GPU_CLASS_ANNOTATION: class_name, "gpugen/arch": gpu_class.arch}
    if gpu_class.description:
        annotations["gpugen/description"] = gpu_class.description
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterTrainingRuntime",
        "metadata": metadata(inventory, runtime_name(class_name),
                             labels={"trainer.kubeflow.org/framework": "torch"}, annotations=annotations),
        "spec": {
            "mlPolicy": {"numNodes": gpu_class.numNodes, "torch": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": NODE,
                "replicas": 1,
                "template": {
                    "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                    "spec": {"template": {"spec": pod_spec}},
                },
            }]}},
        },
    }


def runtimes(inventory: Inventory) -> list[dict[str, Any]]:
    return [cluster_training_runtime(inventory, name, gpu_class)
            for name, gpu_class in sorted(inventory.classes.items())]
