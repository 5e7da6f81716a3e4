"""Inventory changes as they reach FLAME: each one a commit to the cluster's repository that the real Argo CD
(application controller and repo-server, told by a webhook-like refresh) syncs, on the platform it bootstrapped.
They run after the researchers' journeys, on the same cluster, and each ends with the committed inventory synced
back.

- renaming a class's flavor: the new ResourceFlavor replaces the old one, and jobs are admitted on it;
- removing a group while its job runs: `plan` predicts that the removal waits on the running workload, and Argo CD
  waits on exactly that (the pruned ClusterQueue, held by Kueue until the job ends), then completes;
- a change Kueue refuses (a hand edit of rendered/): Argo CD reports the refusal and applies nothing; reverting the
  commit repairs it.
- splitting the tree into the groups' Applications (cluster.gitops.groupApplications) and back: each group's
  objects move to its own Application and back, `plan` predicting every move.
(Removing a class is journey 8.) Each sync also checks the model of Argo CD's sync that the tiers without Argo CD
use (simulation/argo_sync.py): it must plan the tasks the real controller planned, in the same order.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys

import yaml

from tests.flame.flame_support import no_jobs_left  # noqa: F401 - an autouse fixture: on in this module
from tests.flame.flame_support import (GPU, USUAL, Timer, assert_model_agrees, long_job, modelled_tasks,
                              poll, researcher, submit, sync_as_modelled, wait_pods,
                              wait_trainjob_complete, wait_workload, workload_of)
from tests.support.inventories import edited, write
from simulation.kube import conditions

from generator.plan.risks import WAITS_ON_WORKLOADS
from simulation.waiting import ceiling

CLASS = "gh200"
KUEUE = "kueue.x-k8s.io/v1beta2"
# Seconds Argo CD usually takes to sync a change of the tree here (simulation/waiting.py bounds the waits on it).
SYNC_USUAL = 30.0


def inventory_variant(flame, tmp_path: pathlib.Path, change) -> pathlib.Path:
    """The cluster's inventory with `change`, written where a commit can pick it up."""
    return write(edited(yaml.safe_load(flame.inventory_file.read_text()), change), tmp_path / "gpu_classes.yaml")


def gpugen_application(flame) -> dict:
    name = flame.inventory.cluster.gitops.applicationName
    return flame.admin.get("argoproj.io/v1alpha1", "Application", name, "argocd")


def flavors_of(flame, queue: str) -> list[str]:
    cq = flame.admin.get(KUEUE, "ClusterQueue", queue)
    return [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]


def plan(flame, inventory: pathlib.Path) -> str:
    """`gpugen plan` of `inventory` against what the cluster's repository has committed (what Argo CD synced)."""
    checkout = flame.argocd.repo.checkout
    site = checkout / ".plan-inventory.yaml"
    from simulation.argocd_local import site_inventory
    site.write_text(site_inventory(inventory, flame.argocd.repo.url, flame.argocd.repo.chart_mirror))
    try:
        done = subprocess.run([sys.executable, "-m", "generator", "plan", "--inventory", str(site), "--out", "rendered",
                               "--base", "HEAD"], cwd=checkout, capture_output=True, text=True, timeout=ceiling(12))
    finally:
        site.unlink()
    assert done.returncode == 0, done.stderr
    return done.stdout


# ---------------------------------------------------------------- renaming a flavor

def test_s1_renaming_a_flavor_moves_every_queue_to_the_new_flavor(flame_cluster, tmp_path):
    flame = flame_cluster
    a = next(iter(flame.inventory.groups))
    renamed = inventory_variant(flame, tmp_path, lambda d: d["classes"][CLASS].__setitem__("flavor", "gh200-hopper"))
    with Timer("s1 flavor rename"):
        try:
            sync_as_modelled(flame, renamed, "rename flavor gh200 -> gh200-hopper", SYNC_USUAL)
            poll(lambda: flame.admin.get(KUEUE, "ResourceFlavor", CLASS) is None, USUAL, "flavor gh200 pruned")
            assert flame.admin.get(KUEUE, "ResourceFlavor", "gh200-hopper")
            for group in flame.inventory.groups:
                assert flavors_of(flame, group) == ["gh200-hopper"], group
            r = researcher(flame, a)
            ns = r.namespaces[0]
            _, job = submit(r, resources_per_node={"gpu": 1})
            wl = wait_workload(r.client, ns, "TrainJob", job, "Admitted")
            assignment = wl["status"]["admission"]["podSetAssignments"][0]
            assert assignment["flavors"][GPU] == "gh200-hopper"
            wait_trainjob_complete(r, ns, job)
        finally:
            flame.sync(flame.inventory_file, "flavor gh200 back", SYNC_USUAL)
        poll(lambda: flame.admin.get(KUEUE, "ResourceFlavor", "gh200-hopper") is None, USUAL,
             "flavor gh200-hopper pruned")
        assert flavors_of(flame, a) == [CLASS]


# ---------------------------------------------------------------- removing a group while its job runs

def test_s2_removing_a_group_while_its_job_runs_waits_on_that_job_as_plan_says(flame_cluster, tmp_path):
    flame = flame_cluster
    _, b = list(flame.inventory.groups)[:2]
    rb = researcher(flame, b)
    ns = rb.namespaces[0]
    job = long_job(flame, ns, "long-gpu-job")  # its pod "runs" until B cancels the Job
    without_b = inventory_variant(flame, tmp_path, lambda d: d["groups"].pop(b))
    predicted = plan(flame, without_b)
    assert f"ClusterQueue {b}: {WAITS_ON_WORKLOADS}" in predicted, predicted
    with Timer("s2 group removal"):
        rb.client.create(job)
        wait_workload(rb.client, ns, "Job", "long-gpu-job", "Admitted")
        wait_pods(rb.client, ns, "job-name=long-gpu-job", 1, phase=("Running",))
        try:
            modelled, mark = modelled_tasks(flame, without_b), flame.argocd.log_mark()
            revision = flame.push(without_b, f"remove group {b}")

            def pruned_and_held():
                cq = flame.admin.get(KUEUE, "ClusterQueue", b)
                return cq if cq and cq["metadata"].get("deletionTimestamp") else None
            cq = poll(pruned_and_held, SYNC_USUAL, f"Argo CD's sync of {revision[:8]} pruning ClusterQueue {b}")
            # What the controller waits on, while Kueue holds the pruned ClusterQueue for B's running job.
            op = gpugen_application(flame)["status"].get("operationState", {})
            print(f"\nClusterQueue {b} Terminating, finalizers {cq['metadata'].get('finalizers')}; Argo CD's "
                  f"operation at {op.get('operation', {}).get('sync', {}).get('revision', '')[:8]}: "
                  f"{op.get('phase')}: {op.get('message')}")
            assert "kueue.x-k8s.io/resource-in-use" in cq["metadata"].get("finalizers", [])
            wl = workload_of(flame.admin, ns, "Job", "long-gpu-job")
            assert conditions(wl)["Admitted"]["status"] == "True"
            # The job ends (here B cancels it); Kueue lets the ClusterQueue go; every Application settles.
            rb.client.delete("batch/v1", "Job", "long-gpu-job", ns, propagation="Foreground")
            flame.argocd.wait_applications(None, SYNC_USUAL, revision, check=flame.check_running)
            assert_model_agrees(flame, modelled, mark)
            assert flame.admin.get(KUEUE, "ClusterQueue", b) is None
            # The group's namespace and its PVCs stay (never pruned): deleting them is a human decision.
            assert flame.admin.get("v1", "Namespace", ns)["status"]["phase"] == "Active"
            assert flame.admin.get("v1", "PersistentVolumeClaim", flame.inventory.cluster.storage.home.claimName, ns)
        finally:
            flame.sync(flame.inventory_file, f"group {b} back", SYNC_USUAL)
        assert flame.admin.get(KUEUE, "ClusterQueue", b)
        assert flame.admin.get(KUEUE, "LocalQueue", "default", ns)


# ---------------------------------------------------------------- the tree split into Applications

def tracked_by(obj: dict) -> str:
    """The Application whose tracking id an object carries (Argo CD's annotation tracking)."""
    return obj["metadata"].get("annotations", {}).get("argocd.argoproj.io/tracking-id", "").partition(":")[0]


def test_s4_splitting_the_tree_into_group_applications_and_back(flame_cluster, tmp_path):
    """docs/scale.md on the running FLAME: with groupApplications the real Argo CD replaces the whole tree's
    Application with the platform's and the groups', which adopt their objects in place (plan says so of each, and
    none is deleted: the ClusterQueues keep their uid), every Application settles Synced and Healthy, and a job is
    admitted on the split platform; removing the setting joins them back the same way."""
    from generator.inventory.load import load_inventory
    from generator.inventory.naming import group_application, group_application_folder, synced_application_name
    flame = flame_cluster
    split = inventory_variant(flame, tmp_path, lambda d: d["cluster"]["gitops"].__setitem__("groupApplications", 2))
    inventory = load_inventory(split)
    predicted = plan(flame, split)
    assert "moves between Applications" in predicted, predicted
    name = flame.inventory.cluster.gitops.applicationName
    uids = {group: flame.admin.get(KUEUE, "ClusterQueue", group)["metadata"]["uid"] for group in inventory.groups}
    with Timer("s4 split into Applications"):
        try:
            flame.sync(split, "the groups in Applications of their own", SYNC_USUAL)
            apps = {a["metadata"]["name"] for a in flame.admin.list("argoproj.io/v1alpha1", "Application", "argocd")}
            assert name not in apps and f"{name}-platform" in apps, apps
            for group, spec in inventory.groups.items():
                own = synced_application_name(
                    inventory, group_application_folder(inventory, group_application(inventory, group)))
                assert tracked_by(flame.admin.get(KUEUE, "ClusterQueue", group)) == own, group
                for ns in spec.namespaces:
                    assert tracked_by(flame.admin.get(KUEUE, "LocalQueue", "default", ns)) == own, ns
            assert tracked_by(flame.admin.get(KUEUE, "ResourceFlavor", CLASS)) == f"{name}-platform"
            assert {group: flame.admin.get(KUEUE, "ClusterQueue", group)["metadata"]["uid"]
                    for group in inventory.groups} == uids
            r = researcher(flame, next(iter(inventory.groups)))
            ns = r.namespaces[0]
            _, job = submit(r, resources_per_node={"gpu": 1})
            wait_workload(r.client, ns, "TrainJob", job, "Admitted")
            wait_trainjob_complete(r, ns, job)
        finally:
            flame.sync(flame.inventory_file, "one Application again", SYNC_USUAL)
        apps = {a["metadata"]["name"] for a in flame.admin.list("argoproj.io/v1alpha1", "Application", "argocd")}
        assert not [app for app in apps if app.startswith(f"{name}-")], apps
        for group in flame.inventory.groups:
            assert tracked_by(flame.admin.get(KUEUE, "ClusterQueue", group)) == name, group
            assert flame.admin.get(KUEUE, "ClusterQueue", group)["metadata"]["uid"] == uids[group], group


# ---------------------------------------------------------------- a change the cluster refuses

def refusal_reported(app: dict, revision: str) -> str:
    """What Argo CD shows for a commit whose objects the API server refuses: a ComparisonError (the server-side
    diff's dry-run went through the webhooks) or a failed sync of that revision. Empty while it shows neither."""
    st = app.get("status", {})
    errors = [c.get("message", "") for c in st.get("conditions", []) or [] if c["type"] == "ComparisonError"]
    if errors and st.get("sync", {}).get("status") == "Unknown":
        return "ComparisonError: " + "; ".join(errors)
    op = st.get("operationState", {})
    if op.get("phase") in ("Failed", "Error") and op.get("syncResult", {}).get("revision") == revision:
        return f"sync {op['phase']}: {op.get('message', '')}"
    return ""


def test_s3_a_change_kueue_refuses_leaves_the_cluster_as_it_was_until_the_next_commit(flame_cluster, tmp_path):
    """A hand edit of rendered/ that bypassed gpugen and the drift check (gpugen itself refuses a lending limit over
    the nominal quota before writing): Kueue's webhook refuses it, Argo CD says so on the Application and applies
    nothing, the ClusterQueue keeps serving with its last good spec, and reverting the commit repairs it."""
    flame = flame_cluster
    group = list(flame.inventory.groups)[-1]
    path = f"rendered/kueue/clusterqueue/{group}.yaml"
    before = flame.admin.get(KUEUE, "ClusterQueue", group)
    nominal = next(r["nominalQuota"] for f in before["spec"]["resourceGroups"][0]["flavors"]
                   for r in f["resources"] if r["name"] == GPU)

    def over_lend(checkout: pathlib.Path):
        # As a person would: one line added under the GPU's nominal quota, the rest of the file untouched.
        lines = (checkout / path).read_text().splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.strip() == f"- name: {GPU}")
        quota = lines[at + 1]
        assert quota.strip().startswith("nominalQuota:"), quota
        indent = quota[:len(quota) - len(quota.lstrip())]
        lines.insert(at + 2, f"{indent}lendingLimit: '{int(nominal) + 1}'\n")
        (checkout / path).write_text("".join(lines))

    with Timer("s3 refused change"):
        revision = None
        try:
            revision = flame.push(flame.inventory_file, f"hand edit: {group} lends more GPUs than it has",
                                  edit=over_lend)
            shown = poll(lambda: refusal_reported(gpugen_application(flame), revision), SYNC_USUAL,
                         f"Argo CD reporting Kueue's refusal of {revision[:8]}")
            print(f"\nArgo CD on {revision[:8]}: {shown[:400]}")
            assert "lendingLimit" in shown and f"ClusterQueue/{group}" in shown, shown
            after = flame.admin.get(KUEUE, "ClusterQueue", group)
            assert after["spec"] == before["spec"], "nothing of the refused commit may reach the cluster"
            assert conditions(after)["Active"]["status"] == "True"
        finally:
            if revision:
                repaired = flame.argocd.repo.revert()  # the usual repair: the bad commit reverted
                flame.argocd.refresh()
                flame.argocd.wait_applications(None, SYNC_USUAL, repaired, check=flame.check_running)
        app = gpugen_application(flame)
        assert app["status"]["sync"]["revision"] == repaired
        assert not [c for c in app["status"].get("conditions", []) or [] if c["type"] == "ComparisonError"]
        assert flame.admin.get(KUEUE, "ClusterQueue", group)["spec"] == before["spec"]
