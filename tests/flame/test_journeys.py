"""The seed page's journeys (Training runtimes, FLAME), run against the simulated FLAME with the real kubeflow
SDK as a researcher bound by the rendered RBAC. Every verdict comes from the component on the other side of the
seam: Trainer's TrainJob conditions, Kueue's Workloads and ClusterQueues, the Pods the Job controller made
(mutated by Kyverno, bound by kube-scheduler, run by KWOK), the API server's and webhooks' refusals.

Order matters (one cluster for the session): every journey waits until its jobs are finished or deletes them,
so the next one starts with both GPUs free; the class-removal journey runs last.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml

from tests.flame.flame_support import no_jobs_left  # noqa: F401 - an autouse fixture: on in this module
from tests.flame.flame_support import (CLASS, GPU, RUNTIME, USUAL, Timer, cluster_queue_usage,
                              groups, notebook_spawner, pods_of_jobset, poll, researcher, submit,
                              sync_as_modelled, trainer_client, wait_pods, wait_trainjob_complete, wait_workload,
                              workload_of)
from simulation.kube import ApiError, conditions
from simulation import flame as flame_mod, pins
from simulation.argocd_local import application_settled, describe_application
from simulation.waiting import ceiling

REPO = pins.REPO
INVENTORY = pathlib.Path(os.environ.get("GPUGEN_INVENTORY") or REPO / "gpu_classes.yaml")

# The label kube-apiserver's aggregator puts on the APIServices it registers itself (kube-aggregator's autoregister).
AGGREGATOR_LABEL = "kube-aggregator.kubernetes.io/automanaged"
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")


def class_nodes(flame):
    sel = flame.inventory.classes[CLASS].nodeSelector
    return {n["metadata"]["name"] for n in flame.admin.list("v1", "Node")
            if all(n["metadata"]["labels"].get(k) == v for k, v in sel.items())}


# ---------------------------------------------------------------- 0. the real Argo CD delivered the platform

def test_0_argo_cd_delivered_every_application_from_the_bootstrap(flame_cluster):
    """The fixture ran the README's bootstrap against an empty cluster (argocd-cm patch, then
    `kubectl apply` of bootstrap/root, its AppProject first): every Application the bootstrap renders is Synced and
    Healthy at the repository's commit, each component was installed from its chart by Argo CD and runs as its chart
    says."""
    flame = flame_cluster
    argo = flame.argocd
    apps = {a["metadata"]["name"]: a for a in argo.applications()}
    expected = flame_mod.expected_applications(argo.repo.checkout / "bootstrap")
    assert set(apps) == expected
    print("\n" + "\n".join(describe_application(a) for a in apps.values()))
    for name, app in apps.items():
        assert application_settled(app, argo.repo.revision if argo.from_repo(app) else None), \
            describe_application(app)
        assert not app["status"].get("conditions"), (name, app["status"]["conditions"])
    # The charts' webhooks as Argo CD applied them: through their Services, whose EndpointSlices name the pods the
    # pod runtime runs (no URL rewritten by the simulation).
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in flame.admin.list("admissionregistration.k8s.io/v1", kind):
            for hook in config.get("webhooks", []):
                assert "url" not in hook["clientConfig"], (config["metadata"]["name"], hook["name"])
    # Each controller runs in a pod of its chart's Deployment, and is Ready. (JobSet may restart once, as on any
    # cluster: its webhook server starts before its cert rotator has filled the chart's empty Secret.)
    ran = [p for p in flame.pods.pods.values() if p.container is not None and p.exit_code is None]
    assert {p.namespace for p in ran} >= {getattr(flame.inventory.cluster.components, c).namespace
                                         for c in ("kyverno", "jobset", "trainer", "kueue")}
    print(flame.pods.describe())
    for p in ran:
        assert p.ready and p.restarts <= 1, flame.pods.describe()
    # Kueue's visibility API answers through its APIService: the binding the app-of-apps put in kube-system works.
    for version in ("v1beta1", "v1beta2"):
        api = flame.admin.get("apiregistration.k8s.io/v1", "APIService", f"{version}.visibility.kueue.x-k8s.io")
        assert conditions(api)["Available"]["status"] == "True", conditions(api)
    binding = flame.admin.get("rbac.authorization.k8s.io/v1", "RoleBinding", "kueue-visibility-server-auth-reader",
                              "kube-system")
    assert binding["subjects"][0]["namespace"] == flame.inventory.cluster.components.kueue.namespace
    # Argo CD watched only the APIServices someone applied (docs/argocd-cm.yaml, resource.selectors): none of those
    # the aggregator registered for the charts' CRD groups set off its rediscovery, while the charts' CRDs arrived.
    automanaged = {a["metadata"]["name"] for a in flame.admin.list("apiregistration.k8s.io/v1", "APIService")
                   if AGGREGATOR_LABEL in a["metadata"].get("labels", {})}
    assert {"v1.policies.kyverno.io", "v1beta2.kueue.x-k8s.io"} <= automanaged
    rediscovered = set()
    for line in argo.controller.log.read_text(errors="replace").splitlines():
        if "due to APIService event" in line:
            try:
                rediscovered.add(json.loads(line)["name"])
            except ValueError:  # the line the controller is writing now
                continue
    assert not rediscovered & automanaged, sorted(rediscovered & automanaged)


# ---------------------------------------------------------------- 1. list the runtimes

def test_1_researcher_lists_exactly_the_class_runtimes(flame_cluster):
    a, _ = groups(flame_cluster)
    r = researcher(flame_cluster, a)
    with Timer("1 list runtimes"):
        out = subprocess.run(["kubectl", "--kubeconfig", str(r.kubeconfig), "get", "clustertrainingruntimes",
                              "-o", "name"], capture_output=True, text=True, timeout=ceiling(6))
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [f"clustertrainingruntime.trainer.kubeflow.org/{RUNTIME}"]
        names = [rt.name for rt in trainer_client(r).list_runtimes()]
        assert names == [RUNTIME]
        # "Inspecting runtimes": the full definition, as the researcher, carries the class's nodeSelector.
        out = subprocess.run(["kubectl", "--kubeconfig", str(r.kubeconfig), "get", "clustertrainingruntime",
                              RUNTIME, "-o", "yaml"], capture_output=True, text=True, timeout=ceiling(6))
        assert out.returncode == 0, out.stderr
        runtime = yaml.safe_load(out.stdout)
        selectors = [job["template"]["spec"]["template"]["spec"].get("nodeSelector")
                     for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]]
        assert selectors and all(sel == flame_cluster.inventory.classes[CLASS].nodeSelector for sel in selectors), \
            selectors


# ---------------------------------------------------------------- 2. one GPU

def test_2_one_gpu_trainjob_is_admitted_placed_mounted_and_completes(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    ns = r.namespaces[0]
    client = r.client
    storage = flame.inventory.cluster.storage
    with Timer("2 one GPU"):
        sdk, name = submit(r, resources_per_node={"gpu": 1})
        wl = wait_workload(client, ns, "TrainJob", name, "Admitted")
        adm = wl["status"]["admission"]
        assert adm["clusterQueue"] == a
        assert {fl for ps in adm["podSetAssignments"] for fl in ps["flavors"].values()} == {CLASS}

        (pod,) = wait_pods(client, ns, f"jobset.sigs.k8s.io/jobset-name={name}", 1)
        assert pod["spec"]["nodeName"] in class_nodes(flame)
        for k, v in flame.inventory.classes[CLASS].nodeSelector.items():
            assert pod["spec"]["nodeSelector"].get(k) == v
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        (node,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
        mounts = {m["mountPath"]: m["name"] for m in node.get("volumeMounts", [])}
        for claim in (storage.home, storage.workspace):
            assert claim.mountPath in mounts, f"no volume mounted at {claim.mountPath}: {mounts}"
            assert volumes[mounts[claim.mountPath]]["persistentVolumeClaim"]["claimName"] == claim.claimName
        assert volumes[mounts["/dev/shm"]]["emptyDir"].get("medium") == "Memory"
        env = {e["name"]: e.get("value") for e in node.get("env", [])}
        for k, v in flame.inventory.cluster.cacheEnv.items():
            assert env.get(k) == v, k
        assert node["resources"]["limits"][GPU] == "1"

        wait_trainjob_complete(r, ns, name)
        pods = pods_of_jobset(client, ns, name)
        assert pods and all(p["status"]["phase"] == "Succeeded" for p in pods)
        assert sdk.get_job(name).status == "Complete"


# ---------------------------------------------------------------- 3. two nodes

def test_3_two_node_job_gets_one_pod_on_each_gh200_node(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    ns = r.namespaces[0]
    with Timer("3 two nodes"):
        _, name = submit(r, num_nodes=2, resources_per_node={"gpu": 1})
        wait_workload(r.client, ns, "TrainJob", name, "Admitted")
        pods = wait_pods(r.client, ns, f"jobset.sigs.k8s.io/jobset-name={name}", 2)
        nodes = [p["spec"]["nodeName"] for p in pods]
        assert sorted(nodes) == sorted(class_nodes(flame)), nodes
        wait_trainjob_complete(r, ns, name)


# ---------------------------------------------------------------- 4. borrowing

def test_4_borrowing_while_the_other_group_is_idle(flame_cluster):
    flame = flame_cluster
    _, b = groups(flame)
    with Timer("4 borrowing"):
        borrow_then_other_group_submits(flame, flame.inventory.groups[b].reclaimWithinCohort)


def test_4b_reclaiming_follows_the_inventory(flame_cluster, tmp_path):
    """The same with B's `reclaimWithinCohort: Any` committed and synced by Argo CD: B takes its lent GPU back at
    once (Kueue preempts A's job) instead of waiting for it to end. The committed inventory is synced back
    afterwards."""
    flame = flame_cluster
    _, b = groups(flame)
    if flame.inventory.groups[b].reclaimWithinCohort != "Never":
        pytest.skip("the inventory already reclaims: test_4 covers it")
    text = INVENTORY.read_text()
    start = text.index(f"  {b}:\n")
    cohort = text.index("    cohort: ", start)
    end = text.index("\n", cohort) + 1
    inv = tmp_path / "gpu_classes.yaml"
    inv.write_text(text[:end] + "    reclaimWithinCohort: Any\n" + text[end:])
    with Timer("4b reclaiming"):
        flame.sync(inv, f"{b} reclaims its lent GPUs")
        cq = flame.admin.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", b)
        assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
        try:
            borrow_then_other_group_submits(flame, "Any")
        finally:
            flame.sync(flame.inventory_file, "back to the committed inventory")


def borrow_then_other_group_submits(flame, reclaim: str):
    """A's two-node job borrows B's idle GPU; then B submits a one-GPU job. `reclaim` (B's reclaimWithinCohort)
    decides: Never -> B waits with Kueue's reason until A's job ends; otherwise A's job is preempted."""
    a, b = groups(flame)
    ra, rb = researcher(flame, a), researcher(flame, b)
    ns_a, ns_b = ra.namespaces[0], rb.namespaces[0]
    _, job_a = submit(ra, num_nodes=2, resources_per_node={"gpu": 1})
    wait_workload(ra.client, ns_a, "TrainJob", job_a, "Admitted")
    wait_pods(ra.client, ns_a, f"jobset.sigs.k8s.io/jobset-name={job_a}", 2, phase=("Running",))
    # A uses both GPUs, one borrowed from idle B (ClusterQueue status follows admission within moments).
    poll(lambda: cluster_queue_usage(flame, a).get((CLASS, GPU)) == ("2", "1"), 10,
         f"ClusterQueue {a} reserving 2 GPUs, 1 borrowed")

    submitted_b = time.monotonic()
    _, job_b = submit(rb, resources_per_node={"gpu": 1})
    if reclaim == "Never":
        wl_b = wait_workload(rb.client, ns_b, "TrainJob", job_b, "QuotaReserved", status="False")
        reason = conditions(wl_b)["QuotaReserved"]["message"]
        assert "insufficient" in reason and GPU in reason, reason
        # B's own GPU stays lent until A's job ends: no preemption.
        wl_a = workload_of(ra.client, ns_a, "TrainJob", job_a)
        assert conditions(wl_a).get("Evicted", {}).get("status", "False") == "False"
        wait_trainjob_complete(ra, ns_a, job_a)
        wl_a = workload_of(ra.client, ns_a, "TrainJob", job_a)
        assert conditions(wl_a).get("Evicted", {}).get("status", "False") == "False", "A was never preempted"
    else:
        wl_a = wait_workload(ra.client, ns_a, "TrainJob", job_a, "Evicted")
        assert conditions(wl_a)["Evicted"]["reason"] == "Preempted", conditions(wl_a)["Evicted"]
    wl_b = wait_workload(rb.client, ns_b, "TrainJob", job_b, "Admitted")
    if reclaim != "Never":
        # The documented bound: seconds, plus the borrower's grace period (the runtime's pods keep the default
        # 30 s; KWOK ends them at once).
        waited = time.monotonic() - submitted_b
        print(f"B had its lent GPU back {waited:.1f} s after submitting")
        assert waited < 60, f"B waited {waited:.0f} s for the GPU it lent"
    assert wl_b["status"]["admission"]["clusterQueue"] == b
    wait_trainjob_complete(rb, ns_b, job_b)


# ---------------------------------------------------------------- 5. plain batch Job

def test_5_plain_job_gets_the_pvcs_and_counts_against_the_same_quota(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    r = researcher(flame, a)
    ns = r.namespaces[-1]
    storage = flame.inventory.cluster.storage
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "plain-gpu-job", "namespace": ns},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{
               "name": "main", "image": flame.inventory.classes[CLASS].image, "command": ["python", "-c", "1"],
               "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}}}}
    with Timer("5 plain Job"):
        r.client.create(job)
        wl = wait_workload(r.client, ns, "Job", "plain-gpu-job", "Admitted")
        assert wl["status"]["admission"]["clusterQueue"] == a
        (assignment,) = wl["status"]["admission"]["podSetAssignments"]
        assert assignment["flavors"][GPU] == CLASS and assignment["resourceUsage"][GPU] == "1"
        # The group's ClusterQueue counts it while it runs (the same quota TrainJobs use).
        poll(lambda: cluster_queue_usage(flame, a).get((CLASS, GPU), ("0",))[0] == "1", 10,
             f"ClusterQueue {a} reserving the Job's GPU")
        (pod,) = wait_pods(r.client, ns, "job-name=plain-gpu-job", 1)
        assert pod["spec"]["nodeName"] in class_nodes(flame)
        mounts = {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0].get("volumeMounts", [])}
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        for claim in (storage.home, storage.workspace):
            assert claim.mountPath in mounts, f"no volume mounted at {claim.mountPath}: {mounts}"
            assert volumes[mounts[claim.mountPath]]["persistentVolumeClaim"]["claimName"] == claim.claimName
        poll(lambda: conditions(r.client.get("batch/v1", "Job", "plain-gpu-job", ns)).get("Complete", {})
             .get("status") == "True", USUAL, "plain Job Complete")
        r.client.delete("batch/v1", "Job", "plain-gpu-job", ns)


# ---------------------------------------------------------------- 6. refusals

def test_6_live_webhooks_refuse_a_bare_gpu_pod_and_a_trainjob_outside_the_group(flame_cluster):
    flame = flame_cluster
    a, b = groups(flame)
    ra, rb = researcher(flame, a), researcher(flame, b)
    ns = ra.namespaces[0]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare-gpu", "namespace": ns},
           "spec": {"containers": [{"name": "c", "image": flame.inventory.classes[CLASS].image,
                                    "resources": {"limits": {GPU: "1"}}}]}}
    with Timer("6 refusals"):
        with pytest.raises(ApiError) as refused:
            notebook_spawner(flame, ns).create(pod)
        assert refused.value.status in (400, 403)
        assert "gpu-pods-from-jobs" in refused.value.message or "only through a Job or TrainJob" in \
            refused.value.message, refused.value.message

        # Another group's namespace: A's researcher cannot create there (rendered RoleBindings): the SDK fails on
        # its first read in that namespace, and a TrainJob created directly is Forbidden.
        with pytest.raises(RuntimeError) as sdk_refused:
            submit(ra, namespace=rb.namespaces[0], resources_per_node={"gpu": 1})
        assert getattr(sdk_refused.value.__cause__, "status", None) == 403, sdk_refused.value
        foreign = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                   "metadata": {"name": "not-mine", "namespace": rb.namespaces[0]},
                   "spec": {"runtimeRef": {"name": RUNTIME}}}
        with pytest.raises(ApiError) as forbidden:
            ra.client.create(foreign)
        assert forbidden.value.status == 403, forbidden.value
        # ... nor name another queue than its namespace's LocalQueue (the job-queue ValidatingPolicy).
        tj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
              "metadata": {"name": "other-queue", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": b}},
              "spec": {"runtimeRef": {"name": RUNTIME}}}
        with pytest.raises(ApiError) as queue:
            ra.client.create(tj)
        assert "is not this namespace's LocalQueue" in queue.value.message, queue.value.message


# ---------------------------------------------------------------- 7. notebooks untouched by Kueue

def test_7_notebook_deployment_runs_untouched_by_kueue(flame_cluster):
    flame = flame_cluster
    a, _ = groups(flame)
    ns = researcher(flame, a).namespaces[0]
    spawner = notebook_spawner(flame, ns)
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "notebook", "namespace": ns},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "notebook"}},
                    "template": {"metadata": {"labels": {"app": "notebook"}}, "spec": {"containers": [{
                        "name": "notebook", "image": "quay.io/jupyter/base-notebook:2025-01-01",
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}]}}}}
    with Timer("7 notebook"):
        created = spawner.create(dep)
        assert "kueue.x-k8s.io/queue-name" not in created["metadata"].get("labels", {})
        (pod,) = wait_pods(flame.admin, ns, "app=notebook", 1, phase=("Running",))
        assert not pod["spec"].get("schedulingGates")
        assert "kueue.x-k8s.io/queue-name" not in pod["metadata"].get("labels", {})
        assert not [w for w in flame.admin.list("kueue.x-k8s.io/v1beta2", "Workload", ns)
                    if any(o["kind"] in ("Deployment", "ReplicaSet", "Pod")
                           for o in w["metadata"].get("ownerReferences", []))]
        spawner.delete("apps/v1", "Deployment", "notebook", ns)


# ---------------------------------------------------------------- 8. removing a class

def test_8_removing_a_class_from_the_inventory_syncs_to_completion(flame_cluster, tmp_path):
    """A second class is added and synced, then removed again, each a commit the real Argo CD syncs: every
    Application must end Synced and Healthy and leave no trace of the class (Kueue's finalizer on the flavor
    released once no ClusterQueue uses it)."""
    flame = flame_cluster
    inv = tmp_path / "gpu_classes.yaml"
    inv.write_text(INVENTORY.read_text())
    a, _ = groups(flame)
    edits = [["add-class", "a100", "--arch", "amd64", "--label-value", "NVIDIA-A100-SXM4-80GB",
              "--image", flame.inventory.classes[CLASS].image, "--nodes", "1", "--gpus-per-node", "1",
              "--cpu-per-node", "64", "--memory-per-node", "512Gi"],
             ["set-allocation", a, "a100", "--gpus", "1", "--cpu", "32", "--memory", "256Gi"]]
    for e in edits:
        out = subprocess.run([sys.executable, "-m", "generator", "inventory", *e, "--inventory", str(inv)],
                             cwd=REPO, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
    with Timer("8 class removal"):
        # Each sync also checks the model of Argo CD's sync (used where no Argo CD runs) against the real one.
        sync_as_modelled(flame, inv, "add class a100")
        assert flame.admin.get("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "a100")
        modelled = sync_as_modelled(flame, flame.inventory_file, "remove class a100")
        last_wave = max(t[1] for t in modelled)
        assert ("Sync", last_wave, "prune", "kueue.x-k8s.io", "ResourceFlavor", "", "a100") in modelled
        # Argo CD reports Succeeded once the last wave ran, while pruned objects may still be terminating
        # (foreground deletion; Kueue's in-use finalizer on the flavor): they must then go.
        for api, kind, name in (("kueue.x-k8s.io/v1beta2", "ResourceFlavor", "a100"),
                                ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", "torch-a100")):
            poll(lambda: flame.admin.get(api, kind, name) is None, USUAL, f"{kind} {name} gone")
        cq = flame.admin.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", a)
        assert [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]] == [CLASS]
