"""Drive the real Kubeflow SDK (kubeflow.trainer) offline against rendered runtimes.

Like the SDK's own backend tests, only the Kubernetes client is stubbed: CustomObjectsApi serves the
rendered ClusterTrainingRuntimes and records what the SDK creates; CoreV1Api answers 404. Everything the
SDK does with those objects (runtime parsing, accelerator detection, TrainJob building) is its own code.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any
from collections.abc import Iterator
from unittest.mock import patch

from kubernetes import client as k8s_client
from kubernetes.client.exceptions import ApiException


class _Reply:
    """What the client returns for async_req=True: an object with .get(timeout)."""

    def __init__(self, value: Any = None, error: Exception | None = None):
        self._value, self._error = value, error

    def get(self, timeout: float | None = None) -> Any:
        if self._error:
            raise self._error
        return copy.deepcopy(self._value)


class FakeCustomObjectsApi:
    def __init__(self, cluster_runtimes: list[dict[str, Any]]):
        self.cluster_runtimes = {obj["metadata"]["name"]: obj for obj in cluster_runtimes}
        self.created: list[dict[str, Any]] = []

    def list_cluster_custom_object(self, group, version, plural, **_):
        assert plural == "clustertrainingruntimes", plural
        return _Reply({"apiVersion": f"{group}/{version}", "kind": "ClusterTrainingRuntimeList",
                       "metadata": {}, "items": list(self.cluster_runtimes.values())})

    def list_namespaced_custom_object(self, group, version, namespace, plural, **_):
        return _Reply({"apiVersion": f"{group}/{version}", "kind": "TrainingRuntimeList", "metadata": {}, "items": []})

    def get_namespaced_custom_object(self, group, version, namespace, plural, name, **_):
        return _Reply(error=ApiException(status=404, reason="Not Found"))

    def get_cluster_custom_object(self, group, version, plural, name, **_):
        if name not in self.cluster_runtimes:
            return _Reply(error=ApiException(status=404, reason="Not Found"))
        return _Reply(self.cluster_runtimes[name])

    def create_namespaced_custom_object(self, group, version, namespace, plural, body, **_):
        created = {**copy.deepcopy(body)}
        created.setdefault("metadata", {})["namespace"] = namespace
        self.created.append(created)
        return created


class FakeCoreV1Api:
    def __getattr__(self, name):
        def not_found(*args, **kwargs):
            raise ApiException(status=404, reason="Not Found")
        return not_found


@contextmanager
def trainer_client(cluster_runtimes: list[dict[str, Any]],
                   namespace: str) -> Iterator[tuple[Any, FakeCustomObjectsApi]]:
    """A real TrainerClient whose Kubernetes API serves `cluster_runtimes`."""
    from kubeflow.trainer import TrainerClient
    from kubeflow.common.types import KubernetesBackendConfig

    custom_api = FakeCustomObjectsApi(cluster_runtimes)
    with patch.object(k8s_client, "CustomObjectsApi", lambda *_: custom_api), \
            patch.object(k8s_client, "CoreV1Api", lambda *_: FakeCoreV1Api()):
        config = KubernetesBackendConfig(namespace=namespace, client_configuration=k8s_client.Configuration())
        yield TrainerClient(backend_config=config), custom_api


def train_job_from_sdk(cluster_runtimes: list[dict[str, Any]], namespace: str, runtime: str,
                       **custom_trainer: Any) -> dict[str, Any]:
    """The TrainJob body the SDK sends for train(runtime=..., trainer=CustomTrainer(**custom_trainer))."""
    from kubeflow.trainer import CustomTrainer

    def train_fn():  # the SDK serializes the function's source into the container command
        print("training")

    with trainer_client(cluster_runtimes, namespace) as (trainer, api):
        trainer.train(runtime=runtime, trainer=CustomTrainer(func=train_fn, **custom_trainer))
    (body,) = api.created
    return body
