"""Kueue's manager Configuration (config.kueue.x-k8s.io/v1beta2): the controller's own configuration file, which
the chart takes in its Helm values (values.py)."""

from __future__ import annotations

from typing import Any

from generator.components.facts import ValuesContext
from generator.kinds import KUEUE_CONFIG, NAMESPACE_NAME_LABEL

# The chart's stock configuration enables the pod, deployment, statefulset and LeaderWorkerSet
# integrations: with a `default` LocalQueue in a research namespace, every notebook pod or Deployment there would
# be queued and pinned to a GPU flavor. Only the job kinds the platform runs are enabled:
# - batch/job: plain Jobs share the group's quota;
# - trainer.kubeflow.org/trainjob: the TrainJob is the workload;
# - jobset.x-k8s.io/jobset: a TrainJob's JobSet and that JobSet's Jobs must be recognised as owned by a
#   Kueue-managed parent. Kueue skips queue-name defaulting only for a job whose controller owner is of an
#   ENABLED integration (jobframework.IsOwnerManagedByKueueForObject); without this one, the Jobs of an admitted
#   TrainJob's JobSet would get the `default` queue label and be queued a second time.
KUEUE_INTEGRATIONS = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
CONFIG_API_VERSION = KUEUE_CONFIG.api_version
# Kueue's documented default: preempt a borrower only while the reclaiming group's share, with its job, stays at
# or under the borrower's share without the preempted job; failing that, while it stays under the borrower's.
FAIR_SHARING_STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


# MultiKueue's dispatcher on a manager: every worker of the group's MultiKueueConfig gets a copy at once, and the
# first to admit it keeps it. Only the worker with the job's class can admit it (its runtime's nodeSelector matches
# no other worker's flavor), so the order of the workers does not matter.
MULTIKUEUE_DISPATCHER = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"


def manager_configuration(cluster: ValuesContext) -> dict[str, Any]:
    """Kueue's Configuration: the chart's defaults for serving and leader election, the platform's job policy;
    on the manager of several clusters, MultiKueue's settings written out (Kueue's defaults but the timeout)."""
    kueue = cluster.settings
    multikueue = {"multiKueue": {"gcInterval": "1m", "origin": "multikueue",
                                 "workerLostTimeout": kueue.workerLostTimeout,
                                 "dispatcherName": MULTIKUEUE_DISPATCHER}} if cluster.role == "manager" else {}
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": "Configuration",
        # Kueue defaults this to kueue-system; its webhook certificate Secret and leader-election Lease live here.
        "namespace": kueue.namespace,
        "health": {"healthProbeBindAddress": ":8081"},
        # The usage per ClusterQueue, flavor and resource that the accounting integrates is reported only when
        # asked for.
        "metrics": {"bindAddress": ":8443",
                    **({"enableClusterQueueResources": True} if cluster.monitoring else {})},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "clientConnection": {"qps": 300, "burst": 500},
        # Queue names come from the `default` LocalQueue of each research namespace; a job anywhere else, or one
        # without a queue where no `default` LocalQueue exists, is not Kueue's business.
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(cluster.research_namespaces)}]},
        # A job whose pods cannot start (image pull, missing claim) gives its quota back after the timeout and is
        # requeued with backoff, instead of holding GPUs it does not use.
        "waitForPodsReady": {
            "timeout": kueue.podsReadyTimeout,
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
        **({"fairSharing": {"preemptionStrategies": list(FAIR_SHARING_STRATEGIES)}}
           if cluster.fair_sharing else {}),
        **multikueue,
    }
