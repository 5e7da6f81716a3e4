"""Shared fixtures: the FLAME inventory, its objects, and the rule for real tools (fail in CI, skip locally)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/kubeflow_sdk.py and friends

from generator.builders import bootstrap_objects, synced_objects  # noqa: E402
from generator.inventory import load_inventory  # noqa: E402

INVENTORY = REPO / "gpu_classes.yaml"


def require_tool(path: str | Path | None, name: str, how: str = "run `make tools`") -> str:
    """The tool's path; a missing tool fails the test in CI (CI=true) and skips it elsewhere."""
    found = shutil.which(str(path)) if path else None
    if found is None:
        message = f"{name} not found ({path}); {how}"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {message}")
        pytest.skip(message)
    return found


@pytest.fixture(scope="session")
def flame():
    return load_inventory(INVENTORY)


@pytest.fixture(scope="session")
def flame_objects(flame):
    return synced_objects(flame)


@pytest.fixture(scope="session")
def flame_bootstrap(flame):
    return bootstrap_objects(flame)


def of_kind(objects, kind):
    return [obj for obj in objects if obj["kind"] == kind]
