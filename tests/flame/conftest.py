"""The order of the simulated FLAME's modules on the session's one cluster (the cluster itself: tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

# The journeys first, on a fresh cluster; the contract and the syncs after them (each sync ends with the committed
# inventory synced back); Kyverno's live admission; the monitoring checks last, as they add up what every journey ran.
ORDER = ["test_journeys", "test_journeys_contract", "test_syncs", "test_live_admission", "test_monitoring_live"]


def pytest_collection_modifyitems(items):
    """This folder's tests in ORDER (a stable sort), together where the first of them was collected (pytest collects
    a folder by name). tests/conftest.py then moves every test on the FLAME to the end, keeping this order."""
    here = [item for item in items if Path(item.path).parent == HERE]
    if not here:
        return
    rest = [item for item in items if Path(item.path).parent != HERE]
    at = items.index(here[0])
    here.sort(key=lambda item: ORDER.index(item.path.stem) if item.path.stem in ORDER else len(ORDER))
    items[:] = rest[:at] + here + rest[at:]
