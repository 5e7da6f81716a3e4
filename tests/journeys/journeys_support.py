"""Fixtures and helpers for the seed page's journeys on the simulated FLAME (tests/platform/flame.py).

Not a conftest.py: tests/*.py do `from conftest import ...`, which a conftest.py here could shadow. The test
modules import the fixture `flame_cluster` from here.

Journeys act as a researcher: a client certificate CN=<user>, O=<group> for a group listed in the inventory's
`identities`, bound by the rendered RoleBindings, never admin. The admin client is used only to read what a
researcher cannot see (ClusterQueue status, Nodes) and for the harness's own set-up.
"""
from __future__ import annotations

import os
import pathlib
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
PLATFORM = HERE.parent / "platform"
for p in (PLATFORM, HERE.parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from validation import validation_support as vs  # noqa: E402
import flame as flame_mod  # noqa: E402
from kube import Client, conditions, poll  # noqa: E402
from processes import leftover_processes  # noqa: E402

from generator.naming import research_namespaces  # noqa: E402

GPU = "nvidia.com/gpu"
TIMEOUT = float(os.environ.get("GPUGEN_JOURNEY_TIMEOUT", "90"))
TIMINGS: dict[str, float] = {}


def flame_session(tmp_path_factory, request):
    """The body of the session fixture `flame_cluster` (tests/conftest.py, so that every test module shares ONE
    cluster): the simulated FLAME with the committed tree, every process stopped at the end (and checked to be
    gone). The measured times are printed in pytest's summary."""
    try:
        flame = flame_mod.start_flame(tmp_path_factory.mktemp("flame"), log=lambda m: print(m, file=sys.stderr))
    except flame_mod.ToolMissing as e:
        vs.unavailable(str(e))
    TIMINGS["warm start"] = flame.timings["ready"]
    pids = flame.procs.pids()
    try:
        yield flame
    finally:
        flame.stop()
        reporter = request.config.pluginmanager.getplugin("terminalreporter")
        capture = request.config.pluginmanager.getplugin("capturemanager")
        if reporter and capture:
            with capture.global_and_fixture_disabled():
                reporter.write_line("\nsimulated FLAME timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items()))
        left = leftover_processes(pids)
        assert not left, f"processes still running after stop: {left}"


@pytest.fixture(autouse=True)
def no_jobs_left(request):
    """After each journey, its TrainJobs and Jobs are deleted (and their Workloads gone), passed or failed, so a
    failing journey does not hold GPUs the next one needs. Harness clean-up, as admin."""
    yield
    if "flame_cluster" not in request.fixturenames:
        return
    flame = request.getfixturevalue("flame_cluster")
    namespaces = research_namespaces(flame.inventory)
    for ns in namespaces:
        for api, kind in (("trainer.kubeflow.org/v1alpha1", "TrainJob"), ("batch/v1", "Job")):
            for obj in flame.admin.list(api, kind, ns):
                flame.admin.delete(api, kind, obj["metadata"]["name"], ns)
    poll(lambda: not any(flame.admin.list("kueue.x-k8s.io/v1beta2", "Workload", ns) for ns in namespaces), TIMEOUT,
         "every Workload gone after the journey")


def researcher(flame, group: str):
    """The group's researcher, or xfail when the inventory binds nobody to the group."""
    r = flame.researchers.get(group)
    if r is None:
        pytest.xfail(f"the inventory lists no identities for group {group}: the rendered RBAC binds no researcher "
                     "to its namespaces (per-group RoleBindings from `identities`), and journeys never run as admin")
    return r


def trainer_client(r, namespace: str | None = None):
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import TrainerClient
    return TrainerClient(backend_config=KubernetesBackendConfig(namespace=namespace or r.namespaces[0],
                                                                config_file=str(r.kubeconfig)))


def train_fn():  # the SDK ships this function's source in the container command
    print("training on FLAME")


def submit(r, namespace=None, **custom):
    from kubeflow.trainer import CustomTrainer
    client = trainer_client(r, namespace)
    name = client.train(runtime="torch-gh200", trainer=CustomTrainer(func=train_fn, **custom))
    return client, name


def workload_of(client: Client, namespace: str, owner_kind: str, owner_name: str):
    for wl in client.list("kueue.x-k8s.io/v1beta2", "Workload", namespace):
        if any(o["kind"] == owner_kind and o["name"] == owner_name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def wait_workload(client, namespace, owner_kind, owner_name, cond, status="True", timeout=TIMEOUT):
    def check():
        wl = workload_of(client, namespace, owner_kind, owner_name)
        c = conditions(wl).get(cond)
        return wl if c and c["status"] == status else None
    return poll(check, timeout, f"Workload of {owner_kind} {namespace}/{owner_name} {cond}={status}")


def pods_of_jobset(client: Client, namespace, name):
    return client.list("v1", "Pod", namespace, selector=f"jobset.sigs.k8s.io/jobset-name={name}")


def wait_pods(client, namespace, selector, count, phase=("Running", "Succeeded"), timeout=TIMEOUT):
    def check():
        pods = client.list("v1", "Pod", namespace, selector=selector)
        ok = [p for p in pods if p.get("status", {}).get("phase") in phase and p["spec"].get("nodeName")]
        return pods if len(ok) >= count else None
    return poll(check, timeout, f"{count} pod(s) {selector} in {namespace} {phase}")


def wait_trainjob_complete(r, namespace, name, timeout=TIMEOUT):
    client = r.client
    poll(lambda: conditions(client.get("trainer.kubeflow.org/v1alpha1", "TrainJob", name, namespace))
         .get("Complete", {}).get("status") == "True", timeout, f"TrainJob {namespace}/{name} Complete")


class Timer:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t = time.monotonic()

    def __exit__(self, *exc):
        TIMINGS[self.name] = time.monotonic() - self.t
