"""Kueue's Helm values, from the inventory (its Configuration is builders/kueue.py's)."""

from __future__ import annotations

from typing import Any

from generator import emit
from generator.builders import kueue
from generator.components.facts import Role
from generator.components.kueue import FACTS
from generator.inventory.models import Inventory


def values(inventory: Inventory, role: Role | None = None) -> dict[str, Any]:
    return {
        # The chart's default image is a staging build of the release branch, pulled Always: pin the release.
        "controllerManager": {"manager": {"image": {
            "repository": "registry.k8s.io/kueue/kueue", "tag": FACTS.app_version(), "pullPolicy": "IfNotPresent"}}},
        "managerConfig": {"controllerManagerConfigYaml": emit.to_yaml(
            kueue.manager_configuration(inventory, multikueue_manager=role == "manager"))},
        # On one cluster the chart's binding in kube-system, outside the Kueue Application's project, is rendered in
        # the app-of-apps instead (rbac.kueue_visibility_auth_reader). With several clusters each cluster's Kueue
        # Application brings the chart's own, and the Kueue project allows kube-system on every cluster: the
        # app-of-apps syncs to the manager alone.
        "enableVisibilityAuthReaderRoleBinding": role is not None,
    }
