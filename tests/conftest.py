"""Shared fixtures: the FLAME inventory, its objects, and the simulated FLAME started early (helpers: tests.support)."""

from __future__ import annotations

import os
import sys

import pytest

from generator.builders import bootstrap_objects, synced_objects
from generator.inventory import load_inventory
from simulation.prerequisites import Unavailable
from tests.support import INVENTORY

# Session fixtures that several tiers share.
pytest_plugins = ["tests.support.registry"]


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


def _flame_support():
    from tests.flame import flame_support  # noqa: PLC0415 (imported only when FLAME tests run)
    return flame_support


@pytest.fixture(scope="session")
def flame_cluster(tmp_path_factory, request):
    """The simulated FLAME, delivered by the real Argo CD: one cluster for the whole session, shared by every
    module of tests/flame (tests/flame/flame_support.py)."""
    yield from _flame_support().flame_session(tmp_path_factory, request)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected
def pytest_collection_modifyitems(session, config, items):
    """The tests on the simulated FLAME run last, and the cluster starts now, in the background: its start (mostly
    waiting for Argo CD's waves) overlaps the other tiers instead of adding to them."""
    on_flame = [item for item in items if "flame_cluster" in getattr(item, "fixturenames", ())]
    if not on_flame or config.getoption("collectonly"):
        return
    items[:] = [item for item in items if item not in on_flame] + on_flame
    _flame_support().start_flame_early(config._tmp_path_factory)


def pytest_sessionfinish(session, exitstatus):
    if "tests.flame.flame_support" in sys.modules:
        sys.modules["tests.flame.flame_support"].stop_flame()



@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A missing prerequisite (simulation.prerequisites.Unavailable, in a test or a fixture) skips the test with its
    reason; with CI set it stays a failure, so CI never passes without running a real-tool check."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(Unavailable) and not os.environ.get("CI"):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")
