"""Metadata every generated object carries."""

from __future__ import annotations

from typing import Any

from generator.inventory.models import Inventory

MANAGED_BY = "gpugen"


def metadata(inventory: Inventory, name: str, namespace: str | None = None,
             labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = dict(sorted({
        **(labels or {}),
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": inventory.cluster.name,
    }.items()))
    if annotations:
        meta["annotations"] = dict(sorted(annotations.items()))
    return meta
