"""Every kind of accelerator class on a simulated cluster: the mixed inventory of examples/mixed-accelerators (a
whole-GPU GH200 class, A100 MIG slices, time-sliced L40S shares, AMD MI300X, Intel Gaudi 3), started as one
cluster like a member of several clusters (simulation/accelerator_cluster.py): its KWOK nodes advertise each
class's resource as the device plugins would, and the real Kueue, JobSet, Trainer and Kyverno (admission and
cleanup controllers) run from their charts; the site's Prometheus scrapes Kueue.

A researcher of a group submits through the real kubeflow SDK, naming the class's runtime and its resource as the
users' page says. Every verdict is read from the component on the other side: Kueue's Workloads (ClusterQueue,
flavor, units), the Pods the Job controller made (bound by kube-scheduler, with Trainer's process count or the one
the trainjob-processes policy set), Kyverno's refusals, and `gpugen report` over Prometheus against the ledger of
Kueue's Workloads.

Every job is submitted at once (each fits its group's quota and its class's nodes, so all run together) and
watched while the refusals are tried; then each class's verdicts are tests of their own.
"""
from __future__ import annotations

import csv
import io
import re
import threading
import time

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main as gpugen
from generator.inventory import accelerators, duration
from generator.inventory.naming import flavor_name, runtime_name
from generator.userdocs import runtimes_page
from simulation import accelerator_cluster, pins
from simulation.kube import ApiError, Client, conditions, poll
from tests.support.simulated_clusters import cluster_for_module

pytestmark = pytest.mark.tools

INVENTORY = pins.REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml"
TRAINJOB = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
KUEUE = "kueue.x-k8s.io/v1beta2"
# Seconds a step (a Workload admitted, pods running, a job complete) usually takes here (simulation/waiting.py).
USUAL = 20.0
GROUP = "nlp-lab"  # holds an allocation on every class
# One class of each kind: what its TrainJob asks for through the SDK (the users' page), and how many units.
SDK_REQUESTS = {
    "gh200": ("gpu", 1),                        # the SDK maps "gpu" to nvidia.com/gpu
    "a100-1g": ("mig-1g.10gb", 2),              # ... and "mig-<profile>" to nvidia.com/mig-<profile>
    "l40s-shared": ("nvidia.com/gpu.shared", 1),  # other names pass through
    "mi300x": ("amd.com/gpu", 2),
    "gaudi3": ("habana.ai/gaudi", 4),  # half the node: the plain Gaudi Job runs beside it
}
# Where each class's plain Job runs: a group with its own quota of the class, beside the TrainJob where both fit.
PLAIN_JOB_GROUP = {"gh200": "vision-lab", "a100-1g": "nlp-lab", "l40s-shared": "vision-lab",
                   "mi300x": "vision-lab", "gaudi3": "nlp-lab"}
# Another vendor's device variable for each class's vendor.
FOREIGN_ENV = {"nvidia.com": ("ROCR_VISIBLE_DEVICES", "0,1"), "amd.com": ("HABANA_VISIBLE_DEVICES", "all"),
               "habana.ai": ("NVIDIA_VISIBLE_DEVICES", "all")}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    work = tmp_path_factory.mktemp("accelerators")
    yield from cluster_for_module(
        request, "accelerator classes",
        lambda log: accelerator_cluster.start_accelerator_cluster(work, INVENTORY, log=log),
        lambda started: started.procs.pids())


def train_fn():  # the SDK ships this function's source in the container command
    print("training")


def sdk_train(cluster, group: str, class_name: str, resources: dict):
    """What the users' page shows for the class: the SDK's train() on its runtime, as a member of `group`."""
    from kubeflow.common.types import KubernetesBackendConfig
    from kubeflow.trainer import CustomTrainer, TrainerClient
    researcher = cluster.researchers[group]
    client = TrainerClient(backend_config=KubernetesBackendConfig(namespace=researcher.namespaces[0],
                                                                  config_file=str(researcher.kubeconfig)))
    return client.train(runtime=runtime_name(class_name),
                        trainer=CustomTrainer(func=train_fn, resources_per_node=resources))


def plain_job(cluster, namespace: str, name: str, class_name: str, units: int = 1, env: dict | None = None) -> dict:
    """A Job on the class's nodes (its nodeSelector, as the users' page writes it) asking for `units`."""
    gpu_class = cluster.inventory.classes[class_name]
    resource = accelerators.resource(gpu_class)
    container = {"name": "main", "image": gpu_class.image, "command": ["python", "-c", "1"],
                 "resources": {"limits": {resource: str(units)}}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "nodeSelector": dict(gpu_class.nodeSelector),
                                           "containers": [container]}}}}


def workload_of(admin: Client, namespace: str, kind: str, name: str) -> dict | None:
    for wl in admin.list(KUEUE, "Workload", namespace):
        if any(o["kind"] == kind and o["name"] == name for o in wl["metadata"].get("ownerReferences", [])):
            return wl
    return None


def class_nodes(cluster, class_name: str) -> set[str]:
    selector = cluster.inventory.classes[class_name].nodeSelector
    return {n["metadata"]["name"] for n in cluster.admin.list("v1", "Node")
            if all(n["metadata"]["labels"].get(k) == v for k, v in selector.items())}


@pytest.fixture(scope="module")
def submitted(cluster):
    """Every class's TrainJob (through the SDK, as GROUP's researcher) and plain Job (as a researcher of the group in
    PLAIN_JOB_GROUP), submitted together and watched from a thread while the refusal tests run beside them. Per
    class: the TrainJob's and the plain Job's namespace and name."""
    jobs = {}
    for class_name, (key, units) in SDK_REQUESTS.items():
        jobs[class_name] = {"trainjob": (cluster.researchers[GROUP].namespaces[0],
                                         sdk_train(cluster, GROUP, class_name, {key: units}))}
    for class_name, group in PLAIN_JOB_GROUP.items():
        researcher = cluster.researchers[group]
        name = f"plain-{class_name}"
        researcher.client.create(plain_job(cluster, researcher.namespaces[0], name, class_name))
        jobs[class_name]["job"] = (researcher.namespaces[0], name)
    watch = Watch(cluster.admin, jobs)
    watch.start()
    yield watch
    watch.stop()


class Watch:
    """Each job's Workload and pods as they were while it held its quota and its pods ran on their nodes
    (`seen`, by (class, "trainjob" or "job")), until every Workload has Finished (`done`)."""

    def __init__(self, admin: Client, jobs: dict):
        self.admin, self.jobs = admin, jobs
        self.seen: dict[tuple, dict] = {}
        self.done = False
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accelerator-jobs", daemon=True)

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.wait(1):
            try:
                self.done = self._observe()
            except Exception as e:  # noqa: BLE001 - handed to the test that waits on it
                self.error = e
            if self.done:
                return

    def _observe(self) -> bool:
        done = True
        for class_name, entry in self.jobs.items():
            for kind, owner in (("trainjob", "TrainJob"), ("job", "Job")):
                namespace, name = entry[kind]
                wl = workload_of(self.admin, namespace, owner, name)
                if wl is None:
                    done = False
                    continue
                selector = (f"jobset.sigs.k8s.io/jobset-name={name}" if kind == "trainjob"
                            else f"batch.kubernetes.io/job-name={name}")
                pods = [p for p in self.admin.list("v1", "Pod", namespace, selector=selector)
                        if p["spec"].get("nodeName") and p.get("status", {}).get("phase") in ("Running", "Succeeded")]
                if pods and conditions(wl).get("QuotaReserved", {}).get("status") == "True":
                    self.seen.setdefault((class_name, kind), {"workload": wl, "pods": pods})
                if conditions(wl).get("Finished", {}).get("status") != "True":
                    done = False
        return done


@pytest.fixture(scope="module")
def finished(cluster, submitted):
    """`submitted` once every job of every class has run to its end: (jobs, seen)."""
    def done():
        cluster.check_running()
        if submitted.error is not None:
            raise submitted.error
        return submitted.done
    # Each job runs the cluster's Job pod time, all of them at once.
    poll(done, 2 * USUAL + 2 * accelerator_cluster.JOB_SECONDS, "every TrainJob and Job of every class finished",
         interval=1)
    return submitted.jobs, submitted.seen


CLASSES = list(SDK_REQUESTS)


def test_nodes_advertise_each_class_resource_as_its_device_plugin(cluster):
    """The MIG node advertises both profiles of its classes; no node but the GH200s advertises nvidia.com/gpu."""
    nodes = {n["metadata"]["name"]: n["status"]["allocatable"] for n in cluster.admin.list("v1", "Node")}
    for class_name, gpu_class in cluster.inventory.classes.items():
        for node in class_nodes(cluster, class_name):
            assert nodes[node].get(accelerators.resource(gpu_class)) == str(gpu_class.perNode.gpus), \
                (class_name, node, nodes[node])
    assert {n for n, allocatable in nodes.items() if accelerators.NVIDIA_GPU in allocatable} == \
        class_nodes(cluster, "gh200")
    (mig,) = class_nodes(cluster, "a100-1g")
    assert {"nvidia.com/mig-1g.10gb": "28", "nvidia.com/mig-3g.40gb": "8"}.items() <= nodes[mig].items()


@pytest.mark.parametrize("class_name", CLASSES)
def test_a_request_over_a_node_of_the_class_is_refused_at_submission_in_its_unit(cluster, submitted, class_name):
    """One unit more than a node of the class has (more than one share, for a time-sliced class), through the
    SDK: Kyverno's job-limits refuses the TrainJob, naming the class's unit."""
    gpu_class = cluster.inventory.classes[class_name]
    key, _ = SDK_REQUESTS[class_name]
    with pytest.raises(RuntimeError) as refused:
        sdk_train(cluster, GROUP, class_name, {key: gpu_class.perNode.gpus + 1})
    message = str(getattr(refused.value.__cause__, "body", refused.value))
    assert "job-limits" in message and accelerators.unit(gpu_class) in message, message


@pytest.mark.parametrize("class_name", CLASSES)
def test_a_job_setting_another_vendors_device_variable_is_refused(cluster, submitted, class_name):
    """A Job on the class's nodes that asks for none of the other vendor's devices but sets that vendor's
    device-selection variable: Kyverno's gpu-visibility refuses it (the variable is the device plugin's)."""
    gpu_class = cluster.inventory.classes[class_name]
    variable, value = FOREIGN_ENV[accelerators.domain(accelerators.resource(gpu_class))]
    group = PLAIN_JOB_GROUP[class_name]
    researcher = cluster.researchers[group]
    job = plain_job(cluster, researcher.namespaces[0], f"foreign-{class_name}", class_name, env={variable: value})
    with pytest.raises(ApiError) as refused:
        researcher.client.create(job)
    assert "gpu-visibility" in refused.value.message and variable in refused.value.message, refused.value.message


@pytest.mark.parametrize("class_name", CLASSES)
def test_a_request_of_one_unit_never_widens_through_the_vendors_own_variable(cluster, submitted, class_name):
    """A Job asking for one unit of the class that also sets the variable its vendor's container runtime mounts
    devices from (accelerators.VENDORS: NVIDIA_VISIBLE_DEVICES, AMD_VISIBLE_DEVICES, HABANA_VISIBLE_DEVICES) to
    all: gpu-visibility refuses it, or the container's own value would win over the device plugin's."""
    gpu_class = cluster.inventory.classes[class_name]
    vendor = accelerators.VENDOR_BY_DOMAIN[accelerators.domain(accelerators.resource(gpu_class))]
    variable = vendor.variables[0].name
    group = PLAIN_JOB_GROUP[class_name]
    researcher = cluster.researchers[group]
    job = plain_job(cluster, researcher.namespaces[0], f"widened-{class_name}", class_name, env={variable: "all"})
    with pytest.raises(ApiError) as refused:
        researcher.client.create(job)
    assert "gpu-visibility" in refused.value.message and variable in refused.value.message, refused.value.message


def test_a_resource_no_quota_of_the_group_covers_is_refused_at_submission(cluster, submitted):
    """A MIG profile the site never configured: Kueue would never admit the Job, so job-limits refuses it, naming
    what the group can use instead."""
    researcher = cluster.researchers["vision-lab"]
    job = plain_job(cluster, researcher.namespaces[0], "unconfigured-mig", "a100-3g")
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/mig-2g.20gb": "1"}}
    with pytest.raises(ApiError) as refused:
        researcher.client.create(job)
    message = refused.value.message
    assert "job-limits" in message and "no quota of group vision-lab covers nvidia.com/mig-2g.20gb" in message, message
    assert "nvidia.com/mig-3g.40gb (torch-a100-3g)" in message, message


@pytest.mark.parametrize("class_name", CLASSES)
def test_the_trainjob_is_admitted_on_its_class_quota_and_lands_with_one_process_per_unit(cluster, finished,
                                                                                         class_name):
    """The SDK's TrainJob through torch-<class>: Kueue admitted it against the class's flavor in the group's
    ClusterQueue for exactly the units asked; its pod ran on the class's node with the units in its limits; and
    the process count is one per unit: numProcPerNode set by the trainjob-processes policy where Trainer would
    count CPUs (MIG, Gaudi), Trainer's `auto` (torchrun: one per visible device) where the resource's name says
    gpu (whole, AMD and time-sliced GPUs)."""
    jobs, seen = finished
    gpu_class = cluster.inventory.classes[class_name]
    resource = accelerators.resource(gpu_class)
    _, units = SDK_REQUESTS[class_name]
    namespace, name = jobs[class_name]["trainjob"]
    assert (class_name, "trainjob") in seen, f"TrainJob {namespace}/{name} was never seen admitted and running"
    wl, pods = seen[(class_name, "trainjob")]["workload"], seen[(class_name, "trainjob")]["pods"]
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == GROUP, admission
    (assignment,) = admission["podSetAssignments"]
    assert assignment["flavors"][resource] == flavor_name(class_name, gpu_class), assignment
    assert str(assignment["resourceUsage"][resource]) == str(units), assignment
    assert {p["spec"]["nodeName"] for p in pods} <= class_nodes(cluster, class_name), [p["spec"]["nodeName"]
                                                                                      for p in pods]
    (node,) = [c for c in pods[0]["spec"]["containers"] if c["name"] == "node"]
    assert node["resources"]["limits"][resource] == str(units), node["resources"]
    env = {e["name"]: e.get("value") for e in node.get("env", [])}
    trainjob = cluster.admin.get(*TRAINJOB, name, namespace)
    if accelerators.trainer_counts_as_gpus(resource):
        assert env["PET_NPROC_PER_NODE"] == "auto", env
        assert "numProcPerNode" not in trainjob["spec"]["trainer"], trainjob["spec"]["trainer"]
    else:
        assert env["PET_NPROC_PER_NODE"] == str(units), env
        assert trainjob["spec"]["trainer"]["numProcPerNode"] == units, trainjob["spec"]["trainer"]
    assert conditions(trainjob).get("Complete", {}).get("status") == "True", conditions(trainjob)


@pytest.mark.parametrize("class_name", CLASSES)
def test_a_plain_job_is_admitted_on_its_class_quota_and_runs_on_its_nodes(cluster, finished, class_name):
    jobs, seen = finished
    gpu_class = cluster.inventory.classes[class_name]
    resource = accelerators.resource(gpu_class)
    namespace, name = jobs[class_name]["job"]
    assert (class_name, "job") in seen, f"Job {namespace}/{name} was never seen admitted and running"
    wl, pods = seen[(class_name, "job")]["workload"], seen[(class_name, "job")]["pods"]
    admission = wl["status"]["admission"]
    assert admission["clusterQueue"] == PLAIN_JOB_GROUP[class_name], admission
    (assignment,) = admission["podSetAssignments"]
    assert assignment["flavors"][resource] == flavor_name(class_name, gpu_class), assignment
    assert {p["spec"]["nodeName"] for p in pods} <= class_nodes(cluster, class_name)


def page_yaml(inventory, class_name: str) -> dict:
    """The TrainJob the users' page shows in YAML for the class's runtime (its section's one YAML block)."""
    page = runtimes_page(inventory, str(INVENTORY))
    section = page.split(f"\n### {runtime_name(class_name)}\n", 1)[1].split("\n### ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.DOTALL)
    return yaml.safe_load(block)


@pytest.mark.parametrize("class_name", CLASSES)
def test_the_users_page_yaml_of_each_class_is_accepted_at_submission(cluster, submitted, class_name):
    """The YAML the users' page gives for the class, as the group's researcher writes it, through the API server's
    and Kyverno's admission (a dry run: the SDK's TrainJob of the same request runs for real above)."""
    trainjob = page_yaml(cluster.inventory, class_name)
    resource = accelerators.resource(cluster.inventory.classes[class_name])
    assert trainjob["spec"]["runtimeRef"]["name"] == runtime_name(class_name)
    assert resource in trainjob["spec"]["trainer"]["resourcesPerNode"]["limits"], trainjob
    researcher = cluster.researchers[GROUP]
    trainjob["metadata"]["namespace"] = researcher.namespaces[0]
    accepted = researcher.client.create(trainjob, dry_run=True)
    assert accepted["spec"]["trainer"]["resourcesPerNode"]["limits"][resource] == \
        trainjob["spec"]["trainer"]["resourcesPerNode"]["limits"][resource]


def test_the_unit_hours_of_gpugen_report_match_the_ledger_per_class(cluster, finished, tmp_path, request):
    """`gpugen report --format csv` over the site's Prometheus, per group and class, against what Kueue's
    Workloads held (the ledger), in the class's unit (the CSV's gpu_unit column): within one scrape interval per
    spell of reserved quota, as on the FLAME."""
    ledger = cluster.ledger
    interval = duration.seconds(cluster.inventory.cluster.monitoring.scrapeInterval)
    poll(lambda: all(s.end is not None for s in ledger.spells), USUAL, "every Workload's quota released")
    # Every spell's end scraped at least once since.
    time.sleep(interval + 2)
    end = time.time()
    truth = ledger.gpu_seconds(until=end)
    start = min(s.start for s in ledger.spells) - interval
    out = tmp_path / "report.csv"
    result = CliRunner().invoke(gpugen, [
        "report", "--inventory", str(cluster.inventory_file), "--prometheus", cluster.prometheus.url,
        "--from", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
        "--to", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(end)),
        "--step", "1s", "--format", "csv", "--output", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = {(row["group"], row["class"]): row for row in csv.DictReader(io.StringIO(out.read_text()))}
    lines = []
    for (group, flavor), expected in sorted(truth.items()):
        (class_name,) = [c for c, k in cluster.inventory.classes.items() if flavor_name(c, k) == flavor]
        gpu_class = cluster.inventory.classes[class_name]
        row = rows[(group, class_name)]
        assert row["gpu_unit"] == accelerators.unit(gpu_class), row
        reported = float(row["gpu_hours"]) * 3600
        spells = [s for s in ledger.spells if s.cluster_queue == group and flavor in s.gpus]
        # A spell starts and ends up to one scrape late; both ends move alike, so its length is off by at most
        # one interval of its units.
        tolerance = interval * sum(s.gpus[flavor] for s in spells)
        lines.append(f"{group}/{class_name}: Kueue {expected:.0f} unit-s, report {reported:.0f} "
                     f"({row['gpu_unit']}), tolerance {tolerance:.0f} ({len(spells)} spells)")
        assert expected > 0 and abs(reported - expected) <= tolerance, lines[-1]
    assert {class_name for _, class_name in (k for k in rows if float(rows[k]["gpu_hours"] or 0) > 0)} >= set(CLASSES)
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter and capture:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\nunit-seconds per group and class: " + "; ".join(lines))
