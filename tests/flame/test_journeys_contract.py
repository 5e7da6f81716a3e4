"""The research-computing contract on the simulated FLAME (after the seed's journeys, same cluster), as
researchers and never as admin: impossible requests refused at submission, priorities inside a group and who may
use them, the walltime stopping a job and freeing its quota, the queue seen through Kueue's visibility API, and
finished TrainJobs deleted after the TTL (Kyverno's cleanup controller).
Borrowed GPUs coming back is test_journeys.py's journey 4 (reclaimWithinCohort: Any, the default)."""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from generator.inventory.duration import seconds

from tests.flame.flame_support import no_jobs_left  # noqa: F401 - an autouse fixture: on in this module
from tests.flame.flame_support import (CLASS, GPU, RUNTIME, USUAL, Timer, cluster_queue_usage,
                                             groups, long_job, poll, researcher, submit,
                                             trainer_client, wait_workload, workload_of)
from tests.support.inventories import edited, setting, write
from simulation.kube import ApiError, conditions
from simulation.waiting import ceiling

PRIORITY = "kueue.x-k8s.io/priority-class"
TRAINJOB = "trainer.kubeflow.org/v1alpha1"
JOBSET = "jobset.x-k8s.io/v1alpha2"
WALLTIME = "kueue.x-k8s.io/max-exec-time-seconds"
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{ns}/localqueues/default/pendingworkloads"


def chain(error: BaseException) -> str:
    """What a researcher sees of an SDK error: the SDK's RuntimeError and, chained below it, the API server's
    refusal (the kubernetes client's ApiException, whose body holds the webhook's message)."""
    parts = []
    while error is not None:
        parts += [str(error), str(getattr(error, "body", "") or "")]
        error = error.__cause__ or error.__context__
    return "\n".join(parts)


def refused(create) -> str:
    with pytest.raises(ApiError) as refusal:
        create()
    return str(refusal.value)


def test_c1_impossible_requests_are_refused_at_submission_and_nothing_is_created(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    ns = r.namespaces[0]
    with Timer("c1 impossible requests"):
        # The SDK's train(): two GPUs on one GH200 node.
        with pytest.raises(Exception) as sdk_refusal:
            submit(r, resources_per_node={"gpu": 2})
        assert f"{RUNTIME} nodes have 1 GPU each: ask for at most 1 per node, or num_nodes=2 for 2 GPUs" \
            in chain(sdk_refusal.value), chain(sdk_refusal.value)
        # More nodes than the class has.
        with pytest.raises(Exception) as nodes_refusal:
            submit(r, num_nodes=3, resources_per_node={"gpu": 1})
        assert f"{RUNTIME} has 2 nodes: ask for num_nodes of at most 2" in chain(nodes_refusal.value)
        # kubectl create of a Job with more memory per pod than a node has.
        job = long_job(flame, ns, "too-big")
        job["spec"]["template"]["spec"]["nodeSelector"] = dict(flame.inventory.classes[CLASS].nodeSelector)
        job["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "900G"}}
        path = r.kubeconfig.parent / "too-big.json"
        path.write_text(json.dumps(job))
        out = subprocess.run(["kubectl", "--kubeconfig", str(r.kubeconfig), "create", "-f", str(path)],
                             capture_output=True, text=True, timeout=ceiling(6))
        assert out.returncode != 0 and f"{CLASS} nodes have {flame.inventory.classes[CLASS].perNode.memory} of memory" \
            in out.stderr, out.stderr
        # More GPUs at once than the group can ever hold (its quota plus all the cohort can lend).
        message = refused(lambda: r.client.create(long_job(flame, ns, "three-at-once", parallelism=3)))
        assert f"group {a} can never hold 3 GPUs" in message, message
        assert not r.client.list("trainer.kubeflow.org/v1alpha1", "TrainJob", ns)
        assert not r.client.list("batch/v1", "Job", ns)
        assert not r.client.list("kueue.x-k8s.io/v1beta2", "Workload", ns)


def test_c2_priorities_deadline_goes_ahead_and_a_group_without_it_is_refused(flame_cluster):
    flame = flame_cluster
    a, b = groups(flame)
    ra, rb = researcher(flame, a), researcher(flame, b)
    ns = ra.namespaces[0]
    allowed_b = flame.inventory.groups[b].priorities
    if allowed_b is None or "deadline" in allowed_b or "deadline" not in (flame.inventory.groups[a].priorities
                                                                          or flame.inventory.priorities):
        pytest.skip("the inventory does not reserve deadline for group A")
    with Timer("c2 priorities"):
        # B may not name deadline: refused through the SDK, with the priorities it may use.
        from kubeflow.trainer import CustomTrainer
        from kubeflow.trainer.options import Labels
        from tests.flame.flame_support import train_fn
        with pytest.raises(Exception) as refusal:
            trainer_client(rb).train(runtime=RUNTIME, trainer=CustomTrainer(func=train_fn),
                                     options=[Labels({PRIORITY: "deadline"})])
        assert f"priority deadline is not available to group {b}" in chain(refusal.value), chain(refusal.value)
        # A fills the cohort with two preemptible jobs (its own GPU and B's idle one)...
        for name in ("sweep-1", "sweep-2"):
            ra.client.create(long_job(flame, ns, name, labels={PRIORITY: "preemptible"}))
            wait_workload(ra.client, ns, "Job", name, "Admitted")
        # ...then a deadline job: Kueue preempts one of A's own preemptible jobs to admit it.
        created = ra.client.create(long_job(flame, ns, "paper", labels={PRIORITY: "deadline"}))
        # job-defaults added the class's default walltime (the group sets none of its own).
        assert not flame.inventory.groups[a].walltime
        assert created["metadata"]["labels"][WALLTIME] == str(seconds(flame.inventory.classes[CLASS].walltime.default))
        assert created["spec"]["ttlSecondsAfterFinished"] == seconds(flame.inventory.cluster.queueing.finishedJobTTL)
        wait_workload(ra.client, ns, "Job", "paper", "Admitted")
        evicted = [n for n in ("sweep-1", "sweep-2")
                   if conditions(workload_of(ra.client, ns, "Job", n)).get("Evicted", {}).get("status") == "True"]
        assert len(evicted) == 1, [conditions(workload_of(ra.client, ns, "Job", n)) for n in ("sweep-1", "sweep-2")]
        wl = workload_of(ra.client, ns, "Job", evicted[0])
        assert conditions(wl)["Evicted"]["reason"] == "Preempted", conditions(wl)["Evicted"]
        assert wl["spec"]["priority"] < workload_of(ra.client, ns, "Job", "paper")["spec"]["priority"]
        # A job naming no priority gets the group's default.
        plain = ra.client.create(long_job(flame, ns, "no-priority"))
        assert plain["metadata"]["labels"][PRIORITY] == "normal", plain["metadata"]["labels"]


def test_c3_a_pod_cannot_name_a_scheduling_priority_class(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    job = long_job(flame, r.namespaces[0], "critical")
    job["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    message = refused(lambda: r.client.create(job))
    assert "remove priorityClassName system-node-critical" in message, message
    assert r.client.get("batch/v1", "Job", "critical", r.namespaces[0]) is None


def test_c4_a_job_past_its_walltime_is_stopped_and_its_quota_freed(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    ns = r.namespaces[0]
    with Timer("c4 walltime"):
        r.client.create(long_job(flame, ns, "short-walltime", labels={WALLTIME: "15"}))
        wait_workload(r.client, ns, "Job", "short-walltime", "Admitted")
        poll(lambda: cluster_queue_usage(flame, a).get((CLASS, GPU), ("0",))[0] == "1", 20, "the GPU in use")
        wl = wait_workload(r.client, ns, "Job", "short-walltime", "Evicted", usual=USUAL)
        evicted = conditions(wl)["Evicted"]
        assert ("maximum execution time" in evicted["message"].lower()
                or "MaximumExecutionTime" in evicted["reason"]), evicted
        assert wl["spec"].get("active") is False, wl["spec"]
        poll(lambda: cluster_queue_usage(flame, a).get((CLASS, GPU), ("0",))[0] == "0", 60, "the GPU given back")
        assert r.client.get("batch/v1", "Job", "short-walltime", ns)["spec"]["suspend"] is True


def test_c5_a_researcher_sees_the_queue_of_their_own_group_only(flame_cluster):
    flame = flame_cluster
    a, b = groups(flame)
    ra, rb = researcher(flame, a), researcher(flame, b)
    ns = ra.namespaces[0]
    with Timer("c5 visible queue"):
        for name in ("first", "second", "third"):
            ra.client.create(long_job(flame, ns, name))
            if name != "third":
                wait_workload(ra.client, ns, "Job", name, "Admitted")
        third = wait_workload(ra.client, ns, "Job", "third", "QuotaReserved", status="False")

        def pending():
            response = ra.client.raw(VISIBILITY.format(ns=ns))
            assert response.status_code == 200, response.text
            return response.json().get("items") or None
        items = poll(pending, 30, "the pending workload in the visibility API")
        (item,) = items
        assert item["metadata"]["name"] == third["metadata"]["name"]
        assert item["positionInLocalQueue"] == 0 and item["localQueueName"] == "default", item
        # Another group's LocalQueue: forbidden.
        assert rb.client.raw(VISIBILITY.format(ns=ns)).status_code == 403


def test_c6_a_finished_trainjob_is_deleted_after_the_ttl(flame_cluster, tmp_path):
    """finished-trainjobs, run by Kyverno's cleanup controller with the chart's role and the rights gpugen adds to
    it, deletes a TrainJob that Trainer marked Complete once the TTL has passed, and its JobSet with it. The TTL is
    a commit's (a site keeping finished jobs five seconds, so the test sees the job Complete before it goes), synced
    by Argo CD, then the committed one again."""
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    ns = r.namespaces[0]
    short = write(edited(yaml.safe_load(flame.inventory_file.read_text()),
                         setting("cluster.queueing.finishedJobTTL", "5s")), tmp_path / "gpu_classes.yaml")
    with Timer("c6 finished TrainJob deleted"):
        flame.sync(short, "keep finished jobs for five seconds")
        try:
            _, job = submit(r)
            seen = []  # the TrainJob's Complete condition at each look, until it is gone

            def deleted() -> bool:
                live = r.client.get(TRAINJOB, "TrainJob", job, ns)
                if live is not None:
                    seen.append(conditions(live).get("Complete", {}).get("status") == "True")
                return live is None
            # The job runs for seconds; the schedule for a TTL this short is every minute.
            poll(deleted, USUAL + 60, f"TrainJob {ns}/{job} deleted by finished-trainjobs")
            assert seen and seen[-1], f"TrainJob {ns}/{job} was deleted before it was seen Complete"
            assert flame.admin.get(JOBSET, "JobSet", job, ns) is None  # researchers cannot read JobSets
        finally:
            flame.sync(flame.inventory_file, "keep finished jobs for the committed TTL again")
