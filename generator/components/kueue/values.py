"""Kueue's Helm values: its Configuration (configuration.py) and the pinned image."""

from __future__ import annotations

from typing import Any

from generator import emit
from generator.components.facts import ValuesContext
from generator.components.kueue.configuration import manager_configuration


def values(cluster: ValuesContext) -> dict[str, Any]:
    return {
        # The chart's default image is a staging build of the release branch, pulled Always: pin the release.
        "controllerManager": {"manager": {"image": {
            "repository": "registry.k8s.io/kueue/kueue", "tag": cluster.app_version, "pullPolicy": "IfNotPresent"}}},
        "managerConfig": {"controllerManagerConfigYaml": emit.to_yaml(manager_configuration(cluster))},
        # On one cluster the chart's binding in kube-system, outside the Kueue Application's project, is rendered in
        # the app-of-apps instead (rbac.kueue_visibility_auth_reader). With several clusters each cluster's Kueue
        # Application brings the chart's own, and the Kueue project allows kube-system on every cluster: the
        # app-of-apps syncs to the manager alone.
        "enableVisibilityAuthReaderRoleBinding": cluster.role is not None,
    }
