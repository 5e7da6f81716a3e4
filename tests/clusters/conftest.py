"""The simulated platform of several clusters the tests of this folder share (simulation/several_clusters.py): the
manager `hub` and the workers `flame` (GH200) and `ember` (A100, where only vision-lab holds GPUs), delivered by the
real Argo CD on the manager. The inventory is tests/support/inventories.platform_data() with MultiKueue's
workerLostTimeout at WORKER_LOST_TIMEOUT. Modules run in file order; the journeys that cut a worker off run last."""
from __future__ import annotations

import pytest

from simulation import several_clusters
from tests.support.inventories import platform_data, to_text
from tests.support.simulated_clusters import cluster_for_module

WORKER_LOST_TIMEOUT = 15


@pytest.fixture(scope="package")
def platform(tmp_path_factory, request):
    work = tmp_path_factory.mktemp("clusters")
    data = platform_data()
    data["cluster"]["components"]["kueue"]["workerLostTimeout"] = f"{WORKER_LOST_TIMEOUT}s"
    inventory_file = work / "platform.yaml"
    inventory_file.write_text(to_text(data))
    yield from cluster_for_module(
        request, "several clusters",
        lambda log: several_clusters.start_clusters(work / "run", inventory_file, log=log),
        lambda started: [pid for member in started.members.values() for pid in member.procs.pids()]
        + started.site.pids())
