"""Fixtures and helpers for the seed page's journeys on the simulated FLAME (simulation/flame.py).

The test modules import the fixture `flame_cluster` from here.

Journeys act as a researcher: a client certificate CN=<user>, O=<group> for a group listed in the inventory's
`identities`, bound by the rendered RoleBindings, never admin. The admin client is used only to read what a
researcher cannot see (ClusterQueue status, Nodes) and for the harness's own set-up.
"""
from __future__ import annotations

import pathlib
import sys
import threading
import time

import pytest
import yaml

from simulation import manifests, prerequisites
from simulation import flame as flame_mod
from simulation.kube import Client, conditions, poll
from simulation.processes import leftover_processes

from simulation import argo_sync
from generator.inventory import load_inventory
from generator.layout import KUSTOMIZATION_FILE
from generator.inventory.naming import research_namespaces
from generator.tree import render_trees

HERE = pathlib.Path(__file__).resolve().parent

GPU = "nvidia.com/gpu"
# Seconds a journey's step (a Workload admitted, pods running, a job complete) usually takes on a fast machine;
# each wait on one ends at ceiling(USUAL), or when nothing moved (simulation/waiting.py).
USUAL = 15.0
TIMINGS: dict[str, float] = {}
# The seed inventory's GPU class and its runtime, which the journeys submit to.
CLASS = "gh200"
RUNTIME = "torch-gh200"


class FlameStarter:
    """The simulated FLAME started in a thread of its own, so that it can come up while other tests run (the
    tests/conftest.py hook starts it as soon as the session's tests are collected). The same thread stops it
    again: the processes it starts die with the thread that started them (PR_SET_PDEATHSIG), so it lives until
    stop()."""

    def __init__(self, work: pathlib.Path):
        self.flame = None
        self.error: BaseException | None = None
        self.log: list[str] = []
        self._ready, self._stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, args=(work,), name="flame", daemon=True)
        self._thread.start()

    def _log(self, message: str):
        # Kept until a test takes the cluster (get() prints them there); the pod runtime's later messages
        # (restarts) go to stderr at once.
        if self._ready.is_set():
            print(message, file=sys.stderr)
        else:
            self.log.append(message)

    def _run(self, work: pathlib.Path):
        try:
            self.flame = flame_mod.start_flame(work, log=self._log)
        except BaseException as e:  # noqa: BLE001 - handed to the test that asks for the cluster
            self.error = e
        self._ready.set()
        if self.flame is not None:
            self._stop.wait()
            self.flame.stop()

    def get(self):
        self._ready.wait()
        if self.error is not None:
            raise self.error
        return self.flame

    def stop(self):
        self._stop.set()
        self._thread.join()


STARTED: list[FlameStarter] = []  # the session's one cluster, once something asked for it
# Its logs directory, kept after it stops: a failed test that uses it names it (tests/conftest.py).
LOGS: list[pathlib.Path] = []


def start_flame_early(tmp_path_factory) -> FlameStarter:
    if not STARTED:
        work = tmp_path_factory.mktemp("flame")
        LOGS[:] = [work / "logs"]
        STARTED.append(FlameStarter(work))
    return STARTED[0]


def stop_flame() -> None:
    """Stops the session's cluster, also when no test that uses it ran (pytest_sessionfinish)."""
    while STARTED:
        STARTED.pop().stop()


def flame_session(tmp_path_factory, request):
    """The body of the session fixture `flame_cluster` (tests/conftest.py, so that every test module shares ONE
    cluster): the simulated FLAME with the committed tree, every process stopped at the end (and checked to be
    gone). The measured times are printed in pytest's summary."""
    starter = start_flame_early(tmp_path_factory)
    try:
        flame = starter.get()
    except flame_mod.ToolMissing as e:
        stop_flame()
        prerequisites.unavailable(str(e))
    except BaseException:
        stop_flame()
        raise
    finally:
        print("\n".join(starter.log), file=sys.stderr)
    TIMINGS["start"] = flame.timings["ready"]
    pids = flame.procs.pids()
    try:
        yield flame
    finally:
        stop_flame()
        reporter = request.config.pluginmanager.getplugin("terminalreporter")
        capture = request.config.pluginmanager.getplugin("capturemanager")
        if reporter and capture:
            with capture.global_and_fixture_disabled():
                reporter.write_line(
                    "\nsimulated FLAME timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items()))
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
    poll(lambda: not any(flame.admin.list("kueue.x-k8s.io/v1beta2", "Workload", ns) for ns in namespaces), USUAL,
         "every Workload gone after the journey")


def researcher(flame, group: str):
    """The group's researcher, or xfail when the inventory binds nobody to the group."""
    r = flame.researchers.get(group)
    if r is None:
        pytest.xfail(f"the inventory lists no identities for group {group}: the rendered RBAC binds no researcher "
                     "to its namespaces (per-group RoleBindings from `identities`), and journeys never run as admin")
    return r


def groups(flame):
    """(A, B): the two research groups of the seed inventory, in inventory order."""
    a, b = list(flame.inventory.groups)[:2]
    return a, b


def cluster_queue_usage(flame, group):
    cq = flame.admin.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", group)
    out = {}
    for fl in cq.get("status", {}).get("flavorsReservation", []) or []:
        for res in fl["resources"]:
            out[(fl["name"], res["name"])] = (res.get("total", "0"), res.get("borrowed", "0"))
    return out


def notebook_spawner(flame, ns) -> Client:
    """A notebook spawner's identity (e.g. JupyterHub's service account) allowed to create Pods and Deployments
    in `ns`: set up by the harness, not part of the rendered platform."""
    sa = "notebook-spawner"
    flame.admin.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa, "namespace": ns}})
    flame.admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                       "metadata": {"name": sa, "namespace": ns},
                       "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list"]},
                                 {"apiGroups": ["apps"], "resources": ["deployments"],
                                  "verbs": ["create", "get", "list", "delete"]}]})
    flame.admin.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                       "metadata": {"name": sa, "namespace": ns},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa},
                       "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})
    from simulation.cluster import service_account_kubeconfig
    return Client.from_kubeconfig(service_account_kubeconfig(flame.plane, flame.work / "spawner" / f"{ns}.kubeconfig",
                                                             ns, sa))


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


def long_job(flame, ns, name, gpus=1, labels=None, parallelism=None):
    """A plain Job of one GPU-class image whose pod runs until the Job is deleted (KWOK's pod-complete Stage ends
    it after 10 minutes)."""
    image = next(iter(flame.inventory.classes.values())).image
    spec = {"template": {"metadata": {"annotations": {"pod-complete.stage.kwok.x-k8s.io/delay": "10m"}},
                         "spec": {"restartPolicy": "Never", "containers": [{
                             "name": "main", "image": image, "command": ["python", "-c", "1"],
                             "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}}}
    if parallelism:
        spec["parallelism"] = parallelism
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": spec}


def workload_of(client: Client, namespace: str, owner_kind: str, owner_name: str):
    for wl in client.list("kueue.x-k8s.io/v1beta2", "Workload", namespace):
        if any(o["kind"] == owner_kind and o["name"] == owner_name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def wait_workload(client, namespace, owner_kind, owner_name, cond, status="True", usual=USUAL):
    def check():
        wl = workload_of(client, namespace, owner_kind, owner_name)
        c = conditions(wl).get(cond)
        return wl if c and c["status"] == status else None
    return poll(check, usual, f"Workload of {owner_kind} {namespace}/{owner_name} {cond}={status}")


def pods_of_jobset(client: Client, namespace, name):
    return client.list("v1", "Pod", namespace, selector=f"jobset.sigs.k8s.io/jobset-name={name}")


def wait_pods(client, namespace, selector, count, phase=("Running", "Succeeded"), usual=USUAL):
    def check():
        pods = client.list("v1", "Pod", namespace, selector=selector)
        ok = [p for p in pods if p.get("status", {}).get("phase") in phase and p["spec"].get("nodeName")]
        return pods if len(ok) >= count else None
    return poll(check, usual, f"{count} pod(s) {selector} in {namespace} {phase}")


def wait_trainjob_complete(r, namespace, name, usual=USUAL):
    client = r.client
    poll(lambda: conditions(client.get("trainer.kubeflow.org/v1alpha1", "TrainJob", name, namespace))
         .get("Complete", {}).get("status") == "True", usual, f"TrainJob {namespace}/{name} Complete")


class Timer:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t = time.monotonic()

    def __exit__(self, *exc):
        TIMINGS[self.name] = time.monotonic() - self.t


# ---------------------------------------------------------------- the model against the real controller

def modelled_tasks(flame, inventory_file: pathlib.Path) -> list[tuple]:
    """The tasks the model (simulation/argo_sync.py, used by the tiers without Argo CD) plans for syncing the
    gpugen Application from the cluster's live state to `inventory_file`'s render. Call it before the push."""
    trees = render_trees(load_inventory(inventory_file), inventory_file.name)
    desired = [yaml.safe_load(content) for path, content in trees.synced.items() if path != KUSTOMIZATION_FILE]
    name = flame.inventory.cluster.gitops.applicationName
    (application,) = [o for o in map(yaml.safe_load, trees.bootstrap.values())
                      if o.get("kind") == "Application" and o["metadata"]["name"] == name]
    model = argo_sync.ArgoSync(flame.admin, name,
                               prune_last="PruneLast=true" in application["spec"]["syncPolicy"]["syncOptions"],
                               destination_namespace=application["spec"]["destination"].get("namespace", ""))
    # Kinds the Application manages now (what it may have to prune), as the controller's cluster cache knows them.
    rendered = flame.argocd.repo.checkout / "rendered"
    model.kinds |= {(o["apiVersion"], o["kind"]) for o in manifests.tree_objects(rendered)}
    return model.task_list(desired)


def assert_model_agrees(flame, modelled: list[tuple], mark: int) -> None:
    """The real controller's first sync of the gpugen Application after log `mark` planned exactly the modelled
    tasks, in the same order of phase, wave, kind and name (objects that tie on all four are compared as a set: the
    controller's sort is not stable). Cluster-scoped objects are compared without namespace (the controller logs
    them with the destination namespace)."""
    real = flame.argocd.sync_tasks(flame.inventory.cluster.gitops.applicationName, mark)
    assert real, "the controller logged no sync of the gpugen Application after the push"
    cluster_scoped = {(group, kind) for _, _, _, group, kind, namespace, _ in modelled if not namespace}

    def comparable(tasks):
        return [(phase, wave, action, group, kind, "" if (group, kind) in cluster_scoped else namespace, name)
                for phase, wave, action, group, kind, namespace, name in tasks]
    real, modelled = comparable(real), comparable(modelled)

    def order(tasks):  # without the namespace
        return [t[:5] + t[6:] for t in tasks]

    def listing(tasks):
        return "\n".join(f"  {t}" for t in tasks)

    assert order(real) == order(modelled) and sorted(real) == sorted(modelled), (
        f"the model's sync differs from the real controller's.\nreal:\n{listing(real)}\nmodel:\n{listing(modelled)}")


def sync_as_modelled(flame, inventory_file: pathlib.Path, message: str, usual: float = 30) -> list[tuple]:
    """flame.sync(), checking that the real controller planned the gpugen Application's sync as the model does
    from the same live state. Returns the modelled tasks."""
    modelled, mark = modelled_tasks(flame, inventory_file), flame.argocd.log_mark()
    flame.sync(inventory_file, message, usual)
    assert_model_agrees(flame, modelled, mark)
    return modelled
