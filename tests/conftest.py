"""Shared fixtures: the FLAME inventory, its objects, and the rule for real tools (fail in CI, skip locally)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))  # tests/kubeflow_sdk.py and friends
# tests/platform holds plain modules (charts, argo_sync, ...) imported by name. It has no __init__.py on purpose:
# a package named `platform` would shadow the standard library's.
sys.path.insert(0, str(Path(__file__).resolve().parent / "platform"))

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
    """bootstrap/ by folder: {"root": [...], "platform": [...]}."""
    return bootstrap_objects(flame)


@pytest.fixture(scope="session")
def gpugen_application(flame, flame_bootstrap):
    """The Application that syncs rendered/."""
    (app,) = [o for o in flame_bootstrap["platform"]
              if o["kind"] == "Application" and o["metadata"]["name"] == flame.cluster.gitops.applicationName]
    return app


def of_kind(objects, kind):
    return [obj for obj in objects if obj["kind"] == kind]


def snapshot(directory):
    """Every file under `directory` with its bytes and mtime: equal snapshots mean nothing was written."""
    return {p.relative_to(directory).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def read_files(directory):
    """Every regular file under `directory`, by relative POSIX path."""
    if not directory.is_dir():
        return {}
    return {path.relative_to(directory).as_posix(): path.read_bytes()
            for path in sorted(directory.rglob("*")) if path.is_file() and not path.is_symlink()}


def _journeys_support():
    sys.path.insert(0, str(Path(__file__).resolve().parent / "journeys"))
    import journeys_support  # noqa: PLC0415
    return journeys_support


@pytest.fixture(scope="session")
def flame_cluster(tmp_path_factory, request):
    """The simulated FLAME, delivered by the real Argo CD: one cluster for the whole session, shared by
    tests/journeys and tests/policies/test_live_admission.py (tests/journeys/journeys_support.py)."""
    yield from _journeys_support().flame_session(tmp_path_factory, request)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(session, config, items):
    """The tests on the simulated FLAME run last, and the cluster starts now, in the background: its start (mostly
    waiting for Argo CD's waves) overlaps the other tiers instead of adding to them."""
    on_flame = [item for item in items if "flame_cluster" in getattr(item, "fixturenames", ())]
    if not on_flame or config.getoption("collectonly"):
        return
    items[:] = [item for item in items if item not in on_flame] + on_flame
    _journeys_support().start_flame_early(config._tmp_path_factory)


def pytest_sessionfinish(session, exitstatus):
    if "journeys_support" in sys.modules:
        sys.modules["journeys_support"].stop_flame()

