"""Several clusters from one inventory, running (docs/multi-cluster.md): a manager `hub` and the workers `flame`
(GH200) and `ember` (A100, where only vision-lab holds GPUs), each its own etcd, kube-apiserver, scheduler, KWOK
nodes and the controllers its component Applications install (simulation/several_clusters.py). The inventory is
tests/support/inventories.platform_data() with MultiKueue's workerLostTimeout at 15 s.

A researcher uses the kubeflow SDK against the manager only, as on FLAME: `runtime="torch-<class>"` is the whole
choice. Every verdict is read from the component on the other side: the manager's Kueue (Workloads, their
MultiKueue check, MultiKueueClusters), the worker's Trainer, JobSet and Job controller, the API servers' answers.
The worker-lost test stops a worker for good, so it runs last.
"""
from __future__ import annotations

import time

import pytest

from simulation import several_clusters
from simulation.cluster import identity_kubeconfig
from simulation.kube import ApiError, Client, conditions, poll
from tests.support.inventories import platform_data, to_text
from tests.support.simulated_clusters import cluster_for_module

pytestmark = pytest.mark.tools

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
KUEUE = "kueue.x-k8s.io/v1beta2"
WORKER_LOST_TIMEOUT = 15
# Seconds a step of MultiKueue usually takes here (simulation/waiting.py bounds the waits on it).
USUAL = 20.0
# KWOK ends a Job's pod after this annotation's delay: a job still running when its worker goes away.
LONG_RUN = {"pod-complete.stage.kwok.x-k8s.io/delay": "10m"}


@pytest.fixture(scope="module")
def platform(tmp_path_factory, request):
    work = tmp_path_factory.mktemp("clusters")
    data = platform_data()
    data["cluster"]["components"]["kueue"]["workerLostTimeout"] = f"{WORKER_LOST_TIMEOUT}s"
    inventory_file = work / "platform.yaml"
    inventory_file.write_text(to_text(data))
    yield from cluster_for_module(
        request, "several clusters",
        lambda log: several_clusters.start_clusters(work / "run", inventory_file, log=log),
        lambda started: [pid for member in started.members.values() for pid in member.procs.pids()])


def train(platform, group: str, runtime: str, options=()):
    """What the seed page shows, as a member of `group` against the manager: the SDK's train() on the runtime."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient

    def train_fn():  # the SDK ships this function's source in the container command
        print("training")
    researcher = platform.researchers[group]
    client = TrainerClient(backend_config=KubernetesBackendConfig(namespace=researcher.namespaces[0],
                                                                  config_file=str(researcher.kubeconfig)))
    return researcher.namespaces[0], client.train(runtime=runtime, trainer=CustomTrainer(func=train_fn),
                                                  options=list(options))


def long_running():
    """The SDK's RuntimePatch giving the training pods KWOK's long-run annotation."""
    from kubeflow.trainer.options.kubernetes import (JobSetSpecPatch, JobSetTemplatePatch, JobSpecPatch,
                                                     JobTemplatePatch, PodTemplatePatch, ReplicatedJobPatch,
                                                     RuntimePatch, TrainingRuntimeSpecPatch)
    pod = PodTemplatePatch(metadata={"annotations": LONG_RUN})
    node = ReplicatedJobPatch(name="node", template=JobTemplatePatch(spec=JobSpecPatch(template=pod)))
    return RuntimePatch(training_runtime_spec=TrainingRuntimeSpecPatch(template=JobSetTemplatePatch(
        spec=JobSetSpecPatch(replicated_jobs=[node]))))


def workload(admin: Client, namespace: str, job: str) -> dict | None:
    for wl in admin.list(KUEUE, "Workload", namespace):
        if any(ref["kind"] == "TrainJob" and ref["name"] == job for ref in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def check_state(wl: dict | None) -> dict:
    (check,) = (wl or {}).get("status", {}).get("admissionChecks", [{}])
    return check


def watch_trainjobs(platform, namespaced_names: list[tuple[str, str]], until, what: str,
                    usual: float = USUAL) -> dict[str, set[str]]:
    """Poll until `until(manager's TrainJob)` holds for each; returns per job the workers where a copy of it was
    seen meanwhile (stopped workers are not asked)."""
    seen: dict[str, set[str]] = {name: set() for _, name in namespaced_names}

    def done():
        platform.check_running()
        for member_name, member in platform.members.items():
            if member.role == "worker" and not member.stopped:
                for namespace, name in namespaced_names:
                    if member.admin.get(*TRAINJOB, name, namespace):
                        seen[name].add(member_name)
        return all(until(platform.manager.admin.get(*TRAINJOB, name, namespace))
                   for namespace, name in namespaced_names)
    poll(done, usual, what, interval=0.5)
    return seen


def complete(trainjob) -> bool:
    return conditions(trainjob).get("Complete", {}).get("status") == "True"


def test_every_worker_is_connected_and_the_manager_queues_are_active(platform):
    admin = platform.manager.admin
    for kind in ("MultiKueueCluster", "AdmissionCheck", "ClusterQueue"):
        for obj in admin.list(KUEUE, kind):
            assert conditions(obj)["Active"]["status"] == "True", (kind, obj["metadata"]["name"], conditions(obj))
    assert {m["metadata"]["name"] for m in admin.list(KUEUE, "MultiKueueCluster")} == {"flame", "ember"}


# (group, runtime, the worker that must run it)
PLACEMENTS = [
    ("vision-lab", "torch-a100", "ember"),   # a class only worker 2 has, for a group with GPUs on both workers
    ("vision-lab", "torch-gh200", "flame"),  # the same group's other class goes to worker 1
    ("nlp-lab", "torch-gh200", "flame"),     # a group with GPUs on worker 1 only
]


def test_a_trainjob_on_the_manager_runs_on_the_worker_of_its_class_and_completes_there(platform):
    """The three jobs are submitted together (each fits its group's quota) and each is followed to the end."""
    manager = platform.manager.admin
    submitted = [(train(platform, group, runtime), worker) for group, runtime, worker in PLACEMENTS]
    for (namespace, name), _worker in submitted:
        stored = manager.get(*TRAINJOB, name, namespace)
        # Kueue's webhook on the manager hands the job to MultiKueue: the manager's Trainer leaves it alone.
        assert stored["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue", stored["spec"]
    seen = watch_trainjobs(platform, [job for job, _ in submitted], complete, "every TrainJob Complete on the manager")
    for (namespace, name), worker in submitted:
        wl = workload(manager, namespace, name)
        assert conditions(wl)["Finished"]["status"] == "True", conditions(wl)
        assert check_state(wl)["state"] == "Ready" and f'admitted on "{worker}"' in check_state(wl)["message"], \
            wl["status"]
        assert wl["status"]["clusterName"] == worker
        assert seen[name] <= {worker}, (
            f"{name}: a copy of the TrainJob was seen on {seen[name]}, expected only {worker}")
        # The manager ran nothing: no JobSet, no pod of the job.
        assert not [js for js in manager.list(*JOBSET, namespace) if js["metadata"]["name"] == name]
        assert not manager.list("v1", "Pod", namespace)


def test_a_researcher_who_goes_to_a_worker_directly_is_refused(platform, tmp_path):
    """Researchers only read on a worker: submitting there is refused by its API server (RBAC), whatever the
    runtime."""
    worker = platform.members["flame"]
    group = platform.inventory.groups["nlp-lab"]
    kubeconfig = identity_kubeconfig(worker.plane, tmp_path, "nlp-lab-on-flame", "nlp-lab-researcher",
                                     [group.identities.groups[0]], namespace=group.namespaces[0])
    client = Client.from_kubeconfig(kubeconfig)
    assert client.list(*TRAINJOB, group.namespaces[0]) == []  # reading is allowed
    with pytest.raises(ApiError) as refused:
        client.create({"apiVersion": TRAINJOB[0], "kind": "TrainJob",
                       "metadata": {"name": "direct", "namespace": group.namespaces[0]},
                       "spec": {"runtimeRef": {"name": "torch-gh200"}}})
    assert refused.value.status == 403, refused.value


def test_when_worker_2_stops_its_jobs_keep_their_quota_until_the_timeout_then_are_requeued(platform):
    """The behaviour Kueue documents for multiKueue.workerLostTimeout, observed: the worker's MultiKueueCluster
    turns inactive at once; its running job keeps its admission on the manager until the timeout; then the manager
    evicts it ("Admitting remote lost"), suspends the TrainJob and offers it again to the workers still connected,
    where it waits: no other worker has its class. The group's AdmissionCheck stays Active while a worker is
    connected."""
    namespace, name = train(platform, "vision-lab", "torch-a100", [long_running()])
    manager = platform.manager.admin
    watch_trainjobs(platform, [(namespace, name)], lambda tj: check_state(workload(manager, namespace, name)).get(
        "state") == "Ready" and conditions(workload(manager, namespace, name)).get("PodsReady", {}).get("status")
        == "True", f"TrainJob {namespace}/{name} running on ember")
    assert workload(manager, namespace, name)["status"]["clusterName"] == "ember"

    stopped = time.monotonic()
    platform.stop_cluster("ember")
    poll(lambda: conditions(manager.get(KUEUE, "MultiKueueCluster", "ember"))["Active"]["status"] == "False",
         USUAL, "MultiKueueCluster ember inactive")
    inactive_after = time.monotonic() - stopped
    assert conditions(manager.get(KUEUE, "MultiKueueCluster", "ember"))["Active"]["reason"] == "ClientConnectionFailed"
    # Within the timeout the job keeps its admission and quota on the manager.
    time.sleep(max(0.0, WORKER_LOST_TIMEOUT / 2 - inactive_after))
    wl = workload(manager, namespace, name)
    assert check_state(wl)["state"] == "Ready" and "Evicted" not in conditions(wl), wl["status"]

    def evicted():
        wl = workload(manager, namespace, name)
        return conditions(wl).get("Evicted", {}).get("status") == "True" and wl
    wl = poll(evicted, WORKER_LOST_TIMEOUT + USUAL, "the workload evicted after workerLostTimeout")
    evicted_after = time.monotonic() - stopped
    assert evicted_after >= WORKER_LOST_TIMEOUT - 1, evicted_after
    assert conditions(wl)["Evicted"]["reason"] == "AdmissionCheck", conditions(wl)["Evicted"]
    assert "Admitting remote lost" in conditions(wl)["Evicted"]["message"], conditions(wl)["Evicted"]
    # Kueue's job reconciler suspends the TrainJob once the Workload is evicted.
    poll(lambda: manager.get(*TRAINJOB, name, namespace)["spec"].get("suspend") is True, USUAL,
         "the manager's TrainJob suspended")
    # Offered again to the connected workers: flame holds a pending copy of the Workload it cannot admit.
    flame = platform.members["flame"].admin
    copy = poll(lambda: workload_copy(flame, namespace, wl["metadata"]["name"]), USUAL, "a copy on flame")
    assert conditions(copy).get("QuotaReserved", {}).get("status") != "True", copy.get("status")
    check = manager.get(KUEUE, "AdmissionCheck", "vision-lab")
    assert conditions(check)["Active"]["status"] == "True", conditions(check)
    platform.timings["ember stopped: its MultiKueueCluster inactive"] = inactive_after
    platform.timings[f"its job evicted (workerLostTimeout {WORKER_LOST_TIMEOUT}s)"] = evicted_after


def workload_copy(admin: Client, namespace: str, name: str) -> dict | None:
    return admin.get(KUEUE, "Workload", name, namespace)


