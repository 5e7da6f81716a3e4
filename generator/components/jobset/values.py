"""JobSet's Helm values."""

from __future__ import annotations

from typing import Any

from generator.components.facts import ValuesContext


def values(cluster: ValuesContext) -> dict[str, Any]:
    # fullnameOverride as in Trainer's chart: the controller runs as <namespace>:jobset-controller, the identity
    # the policies let through (inventory.naming.controller_identities).
    return {"fullnameOverride": "jobset",
            "image": {"repository": "registry.k8s.io/jobset/jobset", "tag": cluster.app_version,
                      "pullPolicy": "IfNotPresent"}}
