"""Kyverno's Helm values, from the inventory's Kyverno settings (settings.py)."""

from __future__ import annotations

from typing import Any

from generator.components.facts import ValuesContext
from generator.kinds import TRAINER


def values(cluster: ValuesContext) -> dict[str, Any]:
    # The chart's images default to its appVersion, the pinned Kyverno; the platform's policies are the CEL kinds
    # (policies.kyverno.io/v1), whose CRDs the chart installs.
    admission: dict[str, Any] = {"replicas": 1}
    image = cluster.settings.admissionControllerImage
    if image:
        # registry-host/repository:tag (checked by the inventory model): the chart composes the image from these.
        name, _, tag = image.rpartition(":")
        registry, _, repository = name.partition("/")
        admission["container"] = {"image": {"registry": registry, "repository": repository, "tag": tag}}
    # finished-trainjobs (a DeletingPolicy) is run by the cleanup controller, which may delete only what its role
    # lists.
    cleanup = {"rbac": {"clusterRole": {"extraResources": [{
        "apiGroups": [TRAINER.name], "resources": ["trainjobs"], "verbs": ["delete", "get", "list", "watch"]}]}}}
    return {"crds": {"install": True}, "admissionController": admission, "cleanupController": cleanup}
