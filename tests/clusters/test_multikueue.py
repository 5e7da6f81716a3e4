"""Several clusters from one inventory, running (docs/multi-cluster.md): a manager `hub` and the workers `flame`
(GH200) and `ember` (A100, where only vision-lab holds GPUs), each its own etcd, kube-apiserver, scheduler, KWOK
nodes and the controllers its component Applications install, delivered by the real Argo CD on the manager
(tests/clusters/conftest.py, simulation/several_clusters.py).

A researcher uses the kubeflow SDK against the manager only, as on FLAME: `runtime="torch-<class>"` is the whole
choice. Every verdict is read from the component on the other side: the manager's Kueue (Workloads, their
MultiKueue check, MultiKueueClusters), the worker's Trainer, JobSet and Job controller, the API servers' answers,
Argo CD's Applications. The journey that cuts a worker off from the manager runs last.
"""
from __future__ import annotations

import time

import pytest
import yaml

from generator.inventory.naming import cluster_tree_application_name
from simulation.cluster import identity_kubeconfig
from simulation.kube import ApiError, Client, conditions, poll
from tests.support.inventories import to_text

pytestmark = pytest.mark.tools

TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
KUEUE = "kueue.x-k8s.io/v1beta2"
# Seconds a step of MultiKueue usually takes here (simulation/waiting.py bounds the waits on it).
USUAL = 20.0
# KWOK ends a Job's pod after this annotation's delay: a job still running when its worker goes away.
LONG_RUN = {"pod-complete.stage.kwok.x-k8s.io/delay": "10m"}


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


def worker_lost_timeout(platform) -> float:
    text = platform.inventory.cluster.components.kueue.workerLostTimeout
    assert text.endswith("s") and text[:-1].isdigit(), f"the tests' inventory gives seconds: {text}"
    return float(text[:-1])


def application(platform, cluster: str) -> dict:
    name = cluster_tree_application_name(platform.inventory, cluster)
    return platform.manager.admin.get("argoproj.io/v1alpha1", "Application", name,
                                      platform.inventory.cluster.gitops.applicationNamespace)


def test_a_worker_cut_off_loses_its_jobs_after_the_timeout_and_takes_them_back_when_it_returns(platform):
    """The behaviour Kueue documents for multiKueue.workerLostTimeout, observed: the worker's MultiKueueCluster
    turns inactive at once; its running job keeps its admission on the manager until the timeout; then the manager
    evicts it ("Admitting remote lost"), suspends the TrainJob and offers it again to the workers still connected,
    where it waits: no other worker has its class, so it runs on no other class's nodes. The group's AdmissionCheck
    stays Active while a worker is connected. Argo CD cannot reach the worker meanwhile; a change to its tree pushed
    during the cut reaches it once the link is back, and the job is admitted on it again."""
    lost_timeout = worker_lost_timeout(platform)
    namespace, name = train(platform, "vision-lab", "torch-a100", [long_running()])
    manager = platform.manager.admin
    watch_trainjobs(platform, [(namespace, name)], lambda tj: check_state(workload(manager, namespace, name)).get(
        "state") == "Ready" and conditions(workload(manager, namespace, name)).get("PodsReady", {}).get("status")
        == "True", f"TrainJob {namespace}/{name} running on ember")
    assert workload(manager, namespace, name)["status"]["clusterName"] == "ember"

    cut = time.monotonic()
    platform.cut_off("ember")
    poll(lambda: conditions(manager.get(KUEUE, "MultiKueueCluster", "ember"))["Active"]["status"] == "False",
         USUAL, "MultiKueueCluster ember inactive")
    inactive_after = time.monotonic() - cut
    assert conditions(manager.get(KUEUE, "MultiKueueCluster", "ember"))["Active"]["reason"] == "ClientConnectionFailed"
    # Within the timeout the job keeps its admission and quota on the manager.
    time.sleep(max(0.0, lost_timeout / 2 - inactive_after))
    wl = workload(manager, namespace, name)
    assert check_state(wl)["state"] == "Ready" and "Evicted" not in conditions(wl), wl["status"]

    def evicted():
        wl = workload(manager, namespace, name)
        return conditions(wl).get("Evicted", {}).get("status") == "True" and wl
    wl = poll(evicted, lost_timeout + USUAL, "the workload evicted after workerLostTimeout")
    evicted_after = time.monotonic() - cut
    assert evicted_after >= lost_timeout - 1, evicted_after
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

    # A change to ember's tree pushed meanwhile: Argo CD syncs it to the manager, and cannot reach ember.
    argo = platform.argocd
    data = yaml.safe_load(platform.inventory_file.read_text())
    data["groups"]["vision-lab"]["allocations"]["a100"] = {"gpus": 8, "cpu": 64, "memory": "512G"}
    changed = platform.work / "all-of-ember.yaml"
    changed.write_text(to_text(data))
    revision = argo.repo.commit(changed, "vision-lab: every A100 of ember")
    argo.refresh()
    argo.wait_applications({application(platform, "hub")["metadata"]["name"]}, USUAL * 4, revision,
                           check=platform.check_running)
    assert gpu_quota(manager, "vision-lab", "a100") == "8"
    ember = platform.members["ember"].admin  # the test reaches ember directly, not through the manager's link
    assert gpu_quota(ember, "vision-lab", "a100") == "4"
    # Argo CD knows ember's tree changed and cannot compare it with ember: neither Synced at the new commit.
    sync = application(platform, "ember")["status"]["sync"]
    assert not (sync.get("status") == "Synced" and sync.get("revision") == revision), sync
    while_cut = f"{sync.get('status')}: " + "; ".join(
        c.get("message", "")[:200] for c in application(platform, "ember")["status"].get("conditions") or [])

    platform.reconnect("ember")
    back = time.monotonic()
    poll(lambda: conditions(manager.get(KUEUE, "MultiKueueCluster", "ember"))["Active"]["status"] == "True",
         USUAL, "MultiKueueCluster ember Active again")
    active_after = time.monotonic() - back
    argo.refresh()
    argo.wait_applications({application(platform, "ember")["metadata"]["name"]}, USUAL * 4, revision,
                           check=platform.check_running)
    resynced_after = time.monotonic() - back
    assert gpu_quota(ember, "vision-lab", "a100") == "8"
    # The job goes back to ember, the only worker with its class, and runs there; flame never admitted it.
    watch_trainjobs(platform, [(namespace, name)], lambda tj: check_state(workload(manager, namespace, name))
                           .get("state") == "Ready" and conditions(workload(manager, namespace, name)).get(
                               "PodsReady", {}).get("status") == "True", f"TrainJob {namespace}/{name} on ember again")
    assert workload(manager, namespace, name)["status"]["clusterName"] == "ember"
    assert not [p for p in flame.list("v1", "Pod", namespace) if name in p["metadata"]["name"]], \
        "a pod of the job on flame, which has no A100"
    platform.timings["ember cut off: its MultiKueueCluster inactive"] = inactive_after
    platform.timings[f"its job evicted (workerLostTimeout {lost_timeout:.0f}s)"] = evicted_after
    platform.timings["ember back: MultiKueueCluster Active"] = active_after
    platform.timings["ember back: its Application Synced at the new revision"] = resynced_after
    print(f"\nArgo CD on ember's Application while ember was cut off: {while_cut}")


def gpu_quota(admin: Client, queue: str, flavor: str) -> str | None:
    """The ClusterQueue's nominal quota of GPUs in the flavor."""
    for group in admin.get(KUEUE, "ClusterQueue", queue)["spec"]["resourceGroups"]:
        for f in group["flavors"]:
            if f["name"] == flavor:
                return next((str(r["nominalQuota"]) for r in f["resources"] if r["name"].endswith("/gpu")), None)
    return None


def workload_copy(admin: Client, namespace: str, name: str) -> dict | None:
    return admin.get(KUEUE, "Workload", name, namespace)


