"""Shared fixtures: the FLAME inventory, its objects, and the simulated FLAME started early (helpers: tests.support)."""

from __future__ import annotations

import os
import sys

import pytest

from generator.builders import bootstrap_objects, synced_objects
from generator.inventory import load_inventory
from simulation import processes
from simulation.prerequisites import Unavailable
from tests.support import INVENTORY

# Session fixtures that several tiers share.
pytest_plugins = ["tests.support.registry"]

# The tool scripts the tests run read the components' facts with the tests' own Python (tools/common.sh), also in
# the copies of the tree a recipe test makes, which have no virtualenv of their own.
os.environ.setdefault("GPUGEN_PYTHON", sys.executable)


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
    from tests.flame import flame_support  # imported only when FLAME tests run
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


# When the test's set-up began (simulation.processes.moment()): its failure names the logs of what ran since.
_SINCE = pytest.StashKey[int]()
# Log directory -> the failed tests that used it, for the summary at the end.
_FAILED_LOGS = pytest.StashKey[dict]()
LOGS_TITLE = "logs of the simulated cluster"


@pytest.hookimpl(tryfirst=True)  # before the fixtures are set up: a cluster a fixture starts counts
def pytest_runtest_setup(item):
    item.stash[_SINCE] = processes.moment()


def _log_dirs(item) -> list:
    """The log directories of the processes that ran during `item` (those of its fixtures too), and the simulated
    FLAME's, which starts in the background before any test asks for it."""
    dirs = processes.log_dirs_since(item.stash.get(_SINCE, 0))
    if "flame_cluster" in getattr(item, "fixturenames", ()):
        dirs = [*_flame_support().LOGS, *dirs]
    return list(dict.fromkeys(dirs))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A missing prerequisite (simulation.prerequisites.Unavailable, in a test or a fixture) skips the test with its
    reason; with CI set it stays a failure, so CI never passes without running a real-tool check.
    A test that fails while processes of a simulated cluster or control plane run says where their logs are,
    under its failure and in the summary at the end."""
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(Unavailable) and not os.environ.get("CI"):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")
    if report.outcome == "failed":
        dirs = _log_dirs(item)
        if dirs:
            report.sections.append((LOGS_TITLE, "".join(f"{LOGS_TITLE}: {d}\n" for d in dirs)))
            failed = item.config.stash.setdefault(_FAILED_LOGS, {})
            for d in dirs:
                failed.setdefault(d, []).append(item.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    failed = config.stash.get(_FAILED_LOGS, {})
    if failed:
        terminalreporter.section("where the failed tests' processes logged (tests/README.md)")
        for d, nodeids in failed.items():
            names = list(dict.fromkeys(nodeids))
            terminalreporter.write_line(f"{LOGS_TITLE}: {d}  ({len(names)} failed: "
                                        f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''})")
