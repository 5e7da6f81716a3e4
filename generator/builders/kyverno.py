"""Kyverno (policies.kyverno.io/v1): guardrails generated from the inventory.

The seed page promises things no runtime can enforce on its own; these policies do, at admission:

- job-pod-storage (MutatingPolicy): every Pod the Job controller creates in a research namespace gets the
  home PVC and the workspace PVC (cluster.storage) in every container and init container.
- job-claims: a TrainJob or Job is refused at submission when its namespace lacks either claim.
- trainjob-runtime: a TrainJob names one of the generated ClusterTrainingRuntimes, never a namespaced
  TrainingRuntime, torch-distributed or any other name.
- trainjob-placement: nodeSelector, affinity, tolerations, nodeName and schedulingGates in runtimePatches
  (or the older podTemplateOverrides/podSpecOverrides) are Kueue's alone.
- job-queue: a TrainJob's or Job's kueue.x-k8s.io/queue-name is the namespace's LocalQueue `default`,
  and stays on the job.
- job-ownership: only the Trainer and JobSet controllers give a TrainJob, JobSet or Job a controller owner
  (Kueue never suspends a job owned by a job it admitted).
- gpu-pods-from-jobs: only the Job controller creates Pods that request nvidia.com/gpu.
- gpu-visibility (ValidatingPolicy) and pod-gpu-visibility (MutatingPolicy): no container sees GPUs it did
  not request: device-selection variables and CDI annotations are the device plugin's, and every container
  without a GPU request gets NVIDIA_VISIBLE_DEVICES=void over its image's default.
- trainjob-image-arch: an image a TrainJob sets must offer the platform of its runtime's class.

Each policy's CEL is one template below, written as it is rendered: `$name` placeholders are filled with CEL
literals of the named parameters (runtime names, architectures, claims, controller identities), so nothing
but image metadata and the namespace's claims is looked up at admission. The tests parse every expression with
cel-go's parser.
All policies share ONE namespaceSelector (the research namespaces by their API-server-set name label) and
use no matchConditions, so Kyverno serves them all from one webhook per kind and failure policy: the
namespace list is stored once per policy and once per webhook, and never enters a CEL expression.
docs/policies.md explains each rule and that choice.
"""

from __future__ import annotations

import json
import re
import textwrap
from string import Template
from typing import Any

import yaml

from generator.builders.common import metadata
from generator.builders.kueue import DEFAULT_LOCAL_QUEUE
from generator.inventory.models import Inventory
from generator.kinds import BATCH, CORE, JOBSET, KYVERNO, TRAINER
from generator.inventory.naming import GPU_RESOURCE, controller_identities, research_namespaces, runtime_name

API_VERSION = KYVERNO.api_version
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The runtimePatches entry Kueue writes on admission. Only used to tell Kueue's entry from the user's:
# the string is user-settable, so the exemption itself is by request.userInfo.username alone.
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations", "nodeName", "schedulingGates")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server, cannot be forged
# What the NVIDIA container toolkit reads to pick devices: with the device plugin's default envvar strategy,
# NVIDIA_VISIBLE_DEVICES=all in a container's environment exposes every GPU of the node.
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
DEVICE_ENV = (VISIBLE_DEVICES, "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS")
NO_DEVICES = "void"  # the toolkit's value for "no GPU"
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"  # containerd and CRI-O inject the CDI devices these annotations name
# A Job's controller owner that Kueue does not manage: the CronJob controller's Jobs are queued themselves.
UNMANAGED_OWNERS = ({"apiVersion": "batch/v1", "kind": "CronJob"},)

MOUNT_STORAGE = "job-pod-storage"
CLAIMS = "job-claims"
RUNTIME = "trainjob-runtime"
PLACEMENT = "trainjob-placement"
QUEUE = "job-queue"
OWNERSHIP = "job-ownership"
GPU_PODS = "gpu-pods-from-jobs"
GPU_VISIBILITY = "gpu-visibility"
MUTATE_GPU_VISIBILITY = "pod-gpu-visibility"
IMAGE_ARCH = "trainjob-image-arch"

_TRAINER_GROUP, _TRAINER_VERSION = TRAINER.name, TRAINER.version


def cel(value: Any) -> str:
    """A CEL literal: JSON's string escapes (\\" \\\\ \\n \\uXXXX) are CEL's too."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cel(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel(k)}: {cel(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no CEL literal for {value!r}")


_PLACEHOLDER = re.compile(r"\$([A-Za-z][A-Za-z0-9]*)")


def fill(template: str, **params: Any) -> dict[str, Any]:
    """A policy's CEL from its template: a YAML mapping whose values are CEL (every one a `|-` block, so YAML
    never reads CEL syntax), with each `$name` replaced by the CEL literal of params[name]. Every placeholder
    needs a parameter and every parameter must be used: a typo fails at render time, not at admission."""
    text = textwrap.dedent(template).strip("\n")
    used = set(_PLACEHOLDER.findall(text))
    if used != set(params):
        raise ValueError(f"template placeholders {sorted(used)} != parameters {sorted(params)}")
    return yaml.safe_load(Template(text).substitute({name: cel(value) for name, value in params.items()}))


def runtimes(inventory: Inventory) -> list[str]:
    return sorted(runtime_name(name) for name in inventory.classes)


def use_runtimes(inventory: Inventory) -> str:
    """What a message tells the user to do: "use runtime torch-gh200" or "use one of the runtimes ..."."""
    names = runtimes(inventory)
    if len(names) == 1:
        return f"use runtime {names[0]}"
    return "use one of the runtimes " + ", ".join(names)


def _rule(group: str, version: str, resource: str, operations: list[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": [version], "operations": operations, "resources": [resource]}


def _trainjobs(operations: list[str]) -> dict[str, Any]:
    return _rule(_TRAINER_GROUP, _TRAINER_VERSION, "trainjobs", operations)


def _jobs(operations: list[str]) -> dict[str, Any]:
    return _rule(BATCH.name, BATCH.version, "jobs", operations)


def _jobsets(operations: list[str]) -> dict[str, Any]:
    return _rule(JOBSET.name, JOBSET.version, "jobsets", operations)


def _pods(operations: list[str]) -> dict[str, Any]:
    return _rule(CORE.name, CORE.version, "pods", operations)


def _match(inventory: Inventory, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceRules": list(rules),
        "namespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": research_namespaces(inventory)},
        ]},
    }


def _variables(expressions: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": name, "expression": expression} for name, expression in expressions.items()]


def _policy(inventory: Inventory, kind: str, name: str, description: str, spec: dict[str, Any]) -> dict[str, Any]:
    evaluation: dict[str, Any] = {
        "admission": {"enabled": True},
        # Admission guardrails: they read request.userInfo and oldObject, which a background scan has not.
        "background": {"enabled": False},
    }
    if kind == "MutatingPolicy":
        evaluation["mutateExisting"] = {"enabled": False}
        evaluation["skipBackgroundRequests"] = True  # the server's default, explicit so Argo CD sees no drift
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata(inventory, name, annotations={"policies.kyverno.io/description": description}),
        "spec": {**spec, "evaluation": evaluation},
    }


def _validating(inventory: Inventory, name: str, description: str, match: dict[str, Any],
                cel_: dict[str, Any], pods: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "validationActions": ["Deny"],
        "failurePolicy": "Fail",
        "matchConstraints": match,
    }
    if pods:
        # A Pod policy is by default also generated for Deployments, Jobs, CronJobs...; these rules are about
        # the Pod as created (and by whom), so they must see Pods only.
        spec["autogen"] = {"podControllers": {"controllers": []}}
    spec["variables"] = _variables(cel_.get("variables", {}))
    spec["validations"] = cel_["validations"]
    return _policy(inventory, "ValidatingPolicy", name, description, spec)


def _mutating(inventory: Inventory, name: str, description: str, match: dict[str, Any],
              cel_: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": match,
        "autogen": {"podControllers": {"controllers": []}},
        "variables": _variables(cel_["variables"]),
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": cel_["patch"]}}],
    }
    return _policy(inventory, "MutatingPolicy", name, description, spec)


# --- 1. Storage ----------------------------------------------------------------------------------------

STORAGE_CEL = """
variables:
  fromJob: |-
    request.userInfo.username == $jobController
  containers: |-
    object.spec.containers
  initContainers: |-
    object.spec.?initContainers.orValue([])
  # An entry is skipped when the Pod already has a volume of its name or any container mounts its path.
  entries: |-
    variables.fromJob ? $entries.filter(e,
      !object.spec.?volumes.orValue([]).exists(v, v.name == e.volume) &&
      !(variables.containers + variables.initContainers).exists(c,
        c.?volumeMounts.orValue([]).exists(m, m.mountPath == e.path))) : []
  volumes: |-
    variables.entries.map(e, {"name": dyn(e.volume), "persistentVolumeClaim": dyn({"claimName": e.claim})})
  mounts: |-
    variables.entries.map(e, {"name": e.volume, "mountPath": e.path})
patch: |-
  variables.entries.size() == 0 ? [] :
  (has(object.spec.volumes)
    ? variables.volumes.map(v, JSONPatch{op: "add", path: "/spec/volumes/-", value: v})
    : [JSONPatch{op: "add", path: "/spec/volumes", value: variables.volumes}])
  + lists.range(size(variables.containers)).map(i,
    has(variables.containers[i].volumeMounts)
      ? variables.mounts.map(m, JSONPatch{op: "add", path: "/spec/containers/" + string(i) + "/volumeMounts/-", value: m})
      : [JSONPatch{op: "add", path: "/spec/containers/" + string(i) + "/volumeMounts", value: variables.mounts}]
  ).flatten()
  + lists.range(size(variables.initContainers)).map(i,
    has(variables.initContainers[i].volumeMounts)
      ? variables.mounts.map(m, JSONPatch{op: "add", path: "/spec/initContainers/" + string(i) + "/volumeMounts/-", value: m})
      : [JSONPatch{op: "add", path: "/spec/initContainers/" + string(i) + "/volumeMounts", value: variables.mounts}]
  ).flatten()
"""


def job_pod_storage(inventory: Inventory) -> dict[str, Any]:
    storage = inventory.cluster.storage
    entries = [
        {"volume": "home", "claim": storage.home.claimName, "path": storage.home.mountPath},
        {"volume": "workspace", "claim": storage.workspace.claimName, "path": storage.workspace.mountPath},
    ]
    cel_ = fill(STORAGE_CEL, jobController=controller_identities(inventory).job, entries=entries)
    description = (f"Mounts PVC {storage.home.claimName} at {storage.home.mountPath} and PVC "
                   f"{storage.workspace.claimName} at {storage.workspace.mountPath} into every container of every "
                   "Pod the Job controller creates in a research namespace (TrainJobs included).")
    return _mutating(inventory, MOUNT_STORAGE, description, _match(inventory, _pods(["CREATE"])), cel_)


# --- 2. Claims exist before a job is queued ---------------------------------------------------------------

CLAIMS_CEL = """
variables:
  fromController: |-
    request.userInfo.username in $controllers
  # Listed only for a user's CREATE: the controllers' child Jobs belong to a job that was checked.
  missing: |-
    request.operation != "CREATE" || variables.fromController ? [] :
      cel.bind(names, resource.List("v1", "persistentvolumeclaims", request.namespace).?items.orValue([])
          .map(p, p.metadata.name),
        $claims.filter(c, !(c in names)))
validations:
- expression: |-
    variables.missing.size() == 0
  messageExpression: |-
    "namespace " + request.namespace + " has no PersistentVolumeClaim " + variables.missing.join(", ")
      + $tail
"""


def job_claims(inventory: Inventory) -> dict[str, Any]:
    storage = inventory.cluster.storage
    controllers = controller_identities(inventory)
    mounts = (f"{storage.home.claimName} at {storage.home.mountPath} and {storage.workspace.claimName} at "
              f"{storage.workspace.mountPath}")
    cel_ = fill(
        CLAIMS_CEL,
        controllers=sorted({controllers.trainer, controllers.jobset, controllers.job, controllers.kueue}),
        claims=[storage.home.claimName, storage.workspace.claimName],
        tail=(f": every job's pods mount the claims {mounts}, and without one they would wait forever while "
              "holding the group's quota; ask the platform team to create it, then submit again"),
    )
    description = (f"A TrainJob or Job is refused when its namespace lacks PVC {storage.home.claimName} or "
                   f"{storage.workspace.claimName} (which every job's pods mount).")
    # UPDATEs match too (and pass without a lookup): every policy on a kind then shares the same rules.
    match = _match(inventory, _trainjobs(["CREATE", "UPDATE"]), _jobs(["CREATE", "UPDATE"]))
    return _validating(inventory, CLAIMS, description, match, cel_)


# --- 3. Runtime ----------------------------------------------------------------------------------------

RUNTIME_CEL = """
variables:
  ref: |-
    object.spec.runtimeRef
  # The CRD defaults both; the API server applies defaults before admission, the CLI does not.
  apiGroup: |-
    variables.ref.?apiGroup.orValue($trainerGroup)
  kind: |-
    variables.ref.?kind.orValue("ClusterTrainingRuntime")
validations:
- expression: |-
    variables.apiGroup == $trainerGroup && variables.kind == "ClusterTrainingRuntime"
  messageExpression: |-
    "spec.runtimeRef names " + variables.kind + "." + variables.apiGroup + " " + variables.ref.name + $kindTail
- expression: |-
    variables.ref.name in $runtimes
  messageExpression: |-
    "runtime " + variables.ref.name + $nameTail
"""


def trainjob_runtime(inventory: Inventory) -> dict[str, Any]:
    names = runtimes(inventory)
    todo = use_runtimes(inventory)
    cluster = inventory.cluster.name
    cel_ = fill(
        RUNTIME_CEL,
        trainerGroup=_TRAINER_GROUP,
        runtimes=names,
        kindTail=(f": only the ClusterTrainingRuntimes ({_TRAINER_GROUP}) of {cluster} are allowed, never a "
                  f"namespaced TrainingRuntime; set runtimeRef.kind: ClusterTrainingRuntime and {todo}"),
        nameTail=(f" is not available on {cluster}: every TrainJob names the runtime of one GPU class; {todo} "
                  "(kubectl get clustertrainingruntimes)"),
    )
    description = f"A TrainJob references one of the ClusterTrainingRuntimes {', '.join(names)}."
    return _validating(inventory, RUNTIME, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])), cel_)


# --- 4. Placement --------------------------------------------------------------------------------------

PLACEMENT_CEL = """
variables:
  fromKueue: |-
    request.userInfo.username == $kueue
  patches: |-
    object.spec.?runtimePatches.orValue([])
  userPatchFields: |-
    $fields.filter(f, variables.patches.filter(p, p.?manager.orValue("") != $manager)
      .map(p, p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])
        .map(rj, rj.?template.?spec.?template.?spec.orValue({}))).flatten()
      .exists(s, f in s))
  legacyFields: |-
    $fields.filter(f, (object.spec.?podTemplateOverrides.orValue([]).map(o, o.?spec.orValue({}))
      + object.spec.?podSpecOverrides.orValue([])).exists(s, f in s))
  kueueEntries: |-
    variables.patches.filter(p, p.?manager.orValue("") == $manager)
  oldKueueEntries: |-
    request.operation != "UPDATE" ? [] :
      oldObject.spec.?runtimePatches.orValue([]).filter(p, p.?manager.orValue("") == $manager)
  # Kueue's own mutating webhook adds an EMPTY entry under its manager inside the researcher's CREATE
  # (placement is written later, on admission, by the controller). Empty means: no more than the manager
  # and an empty trainingRuntimeSpec.template.spec, so nothing can ride along in it.
  kueueEntriesAsWebhookAdds: |-
    request.operation == "CREATE" && variables.kueueEntries.all(p, p.size() <= 2
      && p.?trainingRuntimeSpec.orValue({}).size() <= 1
      && p.?trainingRuntimeSpec.?template.orValue({}).size() <= 1
      && p.?trainingRuntimeSpec.?template.?spec.orValue({}).size() == 0)
validations:
- expression: |-
    variables.fromKueue || variables.userPatchFields.size() == 0
  messageExpression: |-
    "remove " + variables.userPatchFields.join(", ") + $patchTail
- expression: |-
    variables.fromKueue || variables.legacyFields.size() == 0
  messageExpression: |-
    "remove " + variables.legacyFields.join(", ") + $legacyTail
- expression: |-
    variables.fromKueue || variables.kueueEntries == variables.oldKueueEntries
      || variables.kueueEntriesAsWebhookAdds
  messageExpression: |-
    $forgedMessage
"""


def trainjob_placement(inventory: Inventory) -> dict[str, Any]:
    tail = (f": the runtime you name chooses the nodes ({use_runtimes(inventory)}), and only Kueue's controller "
            "writes placement")
    cel_ = fill(
        PLACEMENT_CEL,
        kueue=controller_identities(inventory).kueue,
        manager=KUEUE_MANAGER,
        fields=PLACEMENT_FIELDS,
        patchTail=" from spec.runtimePatches" + tail,
        legacyTail=" from spec.podTemplateOverrides/podSpecOverrides" + tail,
        forgedMessage=(f"remove the spec.runtimePatches entry with manager {KUEUE_MANAGER}: only Kueue's controller "
                       "may add or change it, and naming its manager does not make a request Kueue's"),
    )
    description = ("Only Kueue's controller (by request.userInfo) sets " + ", ".join(PLACEMENT_FIELDS)
                   + " through a TrainJob's runtimePatches (or podTemplateOverrides/podSpecOverrides).")
    return _validating(inventory, PLACEMENT, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])), cel_)


# --- 5. Queue ------------------------------------------------------------------------------------------

QUEUE_CEL = """
variables:
  queue: |-
    object.metadata.?labels[?$label]
  oldQueue: |-
    request.operation != "UPDATE" ? optional.none() : oldObject.metadata.?labels[?$label]
  fromController: |-
    request.userInfo.username in $controllers
validations:
- expression: |-
    !variables.queue.hasValue() || variables.queue.value() == $default
  messageExpression: |-
    $labelSpace + variables.queue.value() + $foreignTail
- expression: |-
    request.operation != "UPDATE" || !variables.oldQueue.hasValue() || variables.queue.orValue("") == variables.oldQueue.value()
  messageExpression: |-
    $changedMessage
# Kueue labels every job at creation (LocalQueue `default`), so a job without the label on UPDATE had it
# removed. Controllers are trusted (child Jobs of a JobSet carry no label), and so is a job that is being
# deleted (the garbage collector removes finalizers).
- expression: |-
    request.operation != "UPDATE" || variables.fromController || has(object.metadata.deletionTimestamp) || variables.queue.hasValue()
  messageExpression: |-
    $removedMessage
"""


def job_queue(inventory: Inventory) -> dict[str, Any]:
    controllers = controller_identities(inventory)
    keep = f"{QUEUE_LABEL}: {DEFAULT_LOCAL_QUEUE}"
    cel_ = fill(
        QUEUE_CEL,
        label=QUEUE_LABEL,
        default=DEFAULT_LOCAL_QUEUE,
        labelSpace=QUEUE_LABEL + " ",
        controllers=sorted({controllers.kueue, controllers.trainer, controllers.jobset, controllers.job}),
        foreignTail=f" is not this namespace's LocalQueue: set {keep} or leave the label out (Kueue sets it)",
        changedMessage=f"{QUEUE_LABEL} cannot be changed or removed once set: keep {keep}",
        removedMessage=f"{QUEUE_LABEL} may not be removed: a job leaves Kueue's quota without it; put back {keep}",
    )
    description = (f"A TrainJob's or Job's {QUEUE_LABEL} is the namespace's LocalQueue {DEFAULT_LOCAL_QUEUE} and "
                   "is never changed or removed.")
    match = _match(inventory, _trainjobs(["CREATE", "UPDATE"]), _jobs(["CREATE", "UPDATE"]))
    return _validating(inventory, QUEUE, description, match, cel_)


# --- 6. Ownership --------------------------------------------------------------------------------------

OWNERSHIP_CEL = """
variables:
  fromController: |-
    request.userInfo.username in $controllers
  owners: |-
    object.metadata.?ownerReferences.orValue([]).filter(r, r.?controller.orValue(false))
  oldOwners: |-
    request.operation != "UPDATE" ? [] :
      oldObject.metadata.?ownerReferences.orValue([]).filter(r, r.?controller.orValue(false))
  # A controller owner the request adds (on UPDATE: one the object did not have), other than a CronJob.
  forged: |-
    variables.fromController ? [] : variables.owners.filter(r, !(r in variables.oldOwners)
      && !$unmanaged.exists(u, u.apiVersion == r.apiVersion && u.kind == r.kind))
validations:
- expression: |-
    variables.forged.size() == 0
  messageExpression: |-
    "remove the controller ownerReference to " + variables.forged.map(r, r.kind + " " + r.name).join(", ")
      + $tail
"""


def job_ownership(inventory: Inventory) -> dict[str, Any]:
    controllers = controller_identities(inventory)
    cel_ = fill(
        OWNERSHIP_CEL,
        controllers=sorted({controllers.trainer, controllers.jobset}),
        unmanaged=list(UNMANAGED_OWNERS),
        tail=(": only the Trainer and JobSet controllers set controller references on TrainJobs, JobSets and "
              "Jobs, and Kueue never queues a job that another job owns; submit it without ownerReferences"),
    )
    description = ("Only the Trainer and JobSet controllers (by request.userInfo) give a TrainJob, JobSet or Job a "
                   "controller ownerReference (a CronJob's is allowed: Kueue queues those Jobs themselves).")
    operations = ["CREATE", "UPDATE"]
    match = _match(inventory, _trainjobs(operations), _jobsets(operations), _jobs(operations))
    return _validating(inventory, OWNERSHIP, description, match, cel_)


# --- 7. GPU Pods only from Jobs ------------------------------------------------------------------------

GPU_PODS_CEL = """
variables:
  resources: |-
    (object.spec.containers + object.spec.?initContainers.orValue([])).map(c, c.?resources.orValue({}))
      + [object.spec.?resources.orValue({})]
  # A quantity is a string from the API server and a number in a manifest given to the CLI (`nvidia.com/gpu: 1`
  # unquoted); string() has no overload for a double, so it is compared, not converted.
  gpus: |-
    variables.resources.map(r, [r.?requests[?$gpu], r.?limits[?$gpu]])
      .flatten().filter(q, q.hasValue()).map(q, q.value())
  requestsGpu: |-
    variables.gpus.exists(q, dyn(q) != 0 && dyn(q) != "0")
  fromJob: |-
    request.userInfo.username == $jobController
validations:
- expression: |-
    variables.fromJob || !variables.requestsGpu
  messageExpression: |-
    $message
"""


def gpu_pods_from_jobs(inventory: Inventory) -> dict[str, Any]:
    cel_ = fill(
        GPU_PODS_CEL,
        gpu=GPU_RESOURCE,
        jobController=controller_identities(inventory).job,
        message=(f"Pods may request {GPU_RESOURCE} only through a Job or TrainJob that Kueue admits: "
                 f"submit a TrainJob ({use_runtimes(inventory)}) or a batch Job instead of a bare Pod, "
                 "Deployment or StatefulSet"),
    )
    description = f"Only the Job controller creates Pods that request {GPU_RESOURCE} in a research namespace."
    return _validating(inventory, GPU_PODS, description, _match(inventory, _pods(["CREATE"])), cel_, pods=True)


# --- 8. GPU visibility ---------------------------------------------------------------------------------

GPU_VISIBILITY_CEL = """
variables:
  # The pod specs of the object: a Pod's own, a Job's template, a JobSet's jobs' templates, and a TrainJob's
  # runtime patches (its trainer's env counts as the node container's).
  podSpecs: |-
    object.kind == "Pod" ? [object.spec] :
    object.kind == "Job" ? [object.spec.?template.?spec.orValue({})] :
    object.kind == "JobSet" ? object.spec.?replicatedJobs.orValue([]).map(rj, rj.?template.?spec.?template.?spec.orValue({})) :
    object.spec.?runtimePatches.orValue([]).map(p, p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])
      .map(rj, rj.?template.?spec.?template.?spec.orValue({}))).flatten()
  containers: |-
    variables.podSpecs.map(s, s.?containers.orValue([]) + s.?initContainers.orValue([])
      + s.?ephemeralContainers.orValue([])).flatten()
      + (object.kind == "TrainJob" && object.spec.?trainer.?env.hasValue()
        ? [{"name": dyn("trainer"), "env": dyn(object.spec.trainer.env)}] : [])
  # A container may say NVIDIA_VISIBLE_DEVICES=void (what pod-gpu-visibility sets) when it requests no GPU;
  # any other device-selection variable, or value, is the device plugin's to set.
  offending: |-
    variables.containers.filter(c, c.?env.orValue([]).exists(e, e.name in $deviceEnv
      && !(e.name == $visibleDevices && e.?value.orValue("") == $noDevices && !e.?valueFrom.hasValue()
        && ![c.?resources.?requests[?$gpu], c.?resources.?limits[?$gpu]]
          .exists(q, q.hasValue() && dyn(q.value()) != 0 && dyn(q.value()) != "0"))))
      .map(c, c.name)
  cdiAnnotations: |-
    (object.kind == "Pod" ? [object.metadata] :
     object.kind == "Job" ? [object.spec.?template.?metadata.orValue({})] :
     object.kind == "JobSet" ? object.spec.?replicatedJobs.orValue([]).map(rj, rj.?template.?spec.?template.?metadata.orValue({})) :
     object.spec.?runtimePatches.orValue([]).map(p, p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])
       .map(rj, rj.?template.?spec.?template.?metadata.orValue({}))).flatten())
    .map(m, m.?annotations.orValue({}).map(k, k)).flatten().filter(k, k.startsWith($cdiPrefix))
  # `kubectl debug` adds an ephemeral container to a running Pod; the image's default would see every GPU.
  ephemeralWithoutVoid: |-
    object.kind != "Pod" ? [] : object.spec.?ephemeralContainers.orValue([])
      .filter(c, !c.?env.orValue([]).exists(e, e.name == $visibleDevices && e.?value.orValue("") == $noDevices))
      .map(c, c.name)
validations:
- expression: |-
    variables.offending.size() == 0
  messageExpression: |-
    "remove " + $deviceEnvList + " from the environment of container " + variables.offending.join(", ")
      + $envTail
- expression: |-
    variables.cdiAnnotations.size() == 0
  messageExpression: |-
    "remove the annotation " + variables.cdiAnnotations.join(", ") + $cdiTail
- expression: |-
    variables.ephemeralWithoutVoid.size() == 0
  messageExpression: |-
    "ephemeral container " + variables.ephemeralWithoutVoid.join(", ") + $ephemeralTail
"""


def gpu_visibility(inventory: Inventory) -> dict[str, Any]:
    gpus = f"resources.limits {GPU_RESOURCE}"
    cel_ = fill(
        GPU_VISIBILITY_CEL,
        deviceEnv=DEVICE_ENV,
        visibleDevices=VISIBLE_DEVICES,
        noDevices=NO_DEVICES,
        gpu=GPU_RESOURCE,
        cdiPrefix=CDI_ANNOTATION_PREFIX,
        deviceEnvList="/".join(DEVICE_ENV),
        envTail=(f": the device plugin sets them for the GPUs a container requests, so ask for GPUs with {gpus} "
                 f"({use_runtimes(inventory)}, resourcesPerNode in a TrainJob)"),
        cdiTail=f": CDI devices are the device plugin's to inject; ask for GPUs with {gpus}",
        ephemeralTail=(f" must set {VISIBLE_DEVICES}={NO_DEVICES}, or it sees every GPU of the node: "
                       f"kubectl debug --env {VISIBLE_DEVICES}={NO_DEVICES} ..."),
    )
    description = (f"No container sets {', '.join(DEVICE_ENV)} (except {VISIBLE_DEVICES}={NO_DEVICES} without a "
                   f"GPU request) and no pod template carries {CDI_ANNOTATION_PREFIX}* annotations: a container "
                   "sees only the GPUs it requests.")
    operations = ["CREATE", "UPDATE"]
    match = _match(inventory, _pods(["CREATE"]), _rule("", "v1", "pods/ephemeralcontainers", ["UPDATE"]),
                   _jobs(operations), _jobsets(operations), _trainjobs(operations))
    return _validating(inventory, GPU_VISIBILITY, description, match, cel_, pods=True)


MUTATE_GPU_VISIBILITY_CEL = """
variables:
  noGpu: |-
    $void
  # Containers that request no GPU and do not already say NVIDIA_VISIBLE_DEVICES=void (a re-sent Pod).
  needsVoid: |-
    $fields.map(f, cel.bind(cs, f == "containers" ? object.spec.containers : object.spec.?initContainers.orValue([]),
      lists.range(size(cs)).filter(i,
        ![cs[i].?resources.?requests[?$gpu], cs[i].?resources.?limits[?$gpu]]
          .exists(q, q.hasValue() && dyn(q.value()) != 0 && dyn(q.value()) != "0")
        && !cs[i].?env.orValue([]).exists(e, e.name == $visibleDevices && e.?value.orValue("") == $noDevices))
      .map(i, {"field": dyn(f), "index": dyn(i), "hasEnv": dyn(has(cs[i].env))}))).flatten()
patch: |-
  variables.needsVoid.map(c, c.hasEnv
    ? JSONPatch{op: "add", path: "/spec/" + c.field + "/" + string(c.index) + "/env/-", value: variables.noGpu}
    : JSONPatch{op: "add", path: "/spec/" + c.field + "/" + string(c.index) + "/env", value: [variables.noGpu]})
"""


def pod_gpu_visibility(inventory: Inventory) -> dict[str, Any]:
    cel_ = fill(
        MUTATE_GPU_VISIBILITY_CEL,
        void={"name": VISIBLE_DEVICES, "value": NO_DEVICES},
        fields=["containers", "initContainers"],
        gpu=GPU_RESOURCE,
        visibleDevices=VISIBLE_DEVICES,
        noDevices=NO_DEVICES,
    )
    description = (f"Sets {VISIBLE_DEVICES}={NO_DEVICES} in every container and init container of a Pod in a "
                   f"research namespace that requests no {GPU_RESOURCE}, over the image's default (CUDA images say "
                   "all, which the NVIDIA runtime would honour).")
    return _mutating(inventory, MUTATE_GPU_VISIBILITY, description, _match(inventory, _pods(["CREATE"])), cel_)


# --- 9. Image architecture -----------------------------------------------------------------------------

IMAGE_ARCH_CEL = """
variables:
  arch: |-
    $arches[?object.spec.runtimeRef.name]
  # Every image a TrainJob sets itself, in a stable order: the trainer's, then the runtime patches' (and the
  # older override fields') containers.
  images: |-
    (object.spec.?trainer.?image.hasValue() ? [object.spec.trainer.image] : [])
      + (object.spec.?runtimePatches.orValue([]).map(p, p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])
          .map(rj, rj.?template.?spec.?template.?spec.orValue({}))).flatten()
        + object.spec.?podTemplateOverrides.orValue([]).map(o, o.?spec.orValue({}))
        + object.spec.?podSpecOverrides.orValue([]))
      .map(s, s.?containers.orValue([]) + s.?initContainers.orValue([])).flatten()
      .filter(c, has(c.image)).map(c, c.image)
  oldImages: |-
    request.operation != "UPDATE" ? [] :
      (oldObject.spec.?trainer.?image.hasValue() ? [oldObject.spec.trainer.image] : [])
      + (oldObject.spec.?runtimePatches.orValue([]).map(p, p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])
          .map(rj, rj.?template.?spec.?template.?spec.orValue({}))).flatten()
        + oldObject.spec.?podTemplateOverrides.orValue([]).map(o, o.?spec.orValue({}))
        + oldObject.spec.?podSpecOverrides.orValue([]))
      .map(s, s.?containers.orValue([]) + s.?initContainers.orValue([])).flatten()
      .filter(c, has(c.image)).map(c, c.image)
  # Only images the request adds or changes are looked up (Kueue's updates carry the same images).
  checked: |-
    variables.arch.hasValue() && (request.operation == "CREATE" || variables.images != variables.oldImages)
      ? variables.images : []
  # An image index lists its platforms; a single-platform image reports its own in config. The index is read
  # first: for a multi-arch image config.architecture is the default platform's (amd64), whatever it offers.
  wrongArch: |-
    variables.checked.filter(i, cel.bind(md, image.GetMetadata(i),
      md.?imageIndex.?manifests.orValue([]).size() > 0
        ? !md.imageIndex.manifests.exists(m, m.?platform.?os.orValue("") == "linux" &&
            m.?platform.?architecture.orValue("") == variables.arch.value())
        : !(md.?config.?os.orValue("") == "linux" &&
            md.?config.?architecture.orValue("") == variables.arch.value())))
validations:
- expression: |-
    variables.wrongArch.size() == 0
  messageExpression: |-
    "image " + variables.wrongArch.join(", ") + " does not offer linux/" + variables.arch.value()
      + ", the platform of runtime " + object.spec.runtimeRef.name + ": build and push the image for linux/"
      + variables.arch.value() + " (a multi-arch image must list it in its index) and use that tag"
"""


def trainjob_image_arch(inventory: Inventory) -> dict[str, Any]:
    arches = {runtime_name(name): gpu_class.arch for name, gpu_class in sorted(inventory.classes.items())}
    cel_ = fill(IMAGE_ARCH_CEL, arches=arches)
    platforms = ", ".join(f"{rt} linux/{arch}" for rt, arch in arches.items())
    description = ("An image a TrainJob sets (spec.trainer.image, containers in runtimePatches) offers the "
                   f"platform of its runtime's GPU class: {platforms}")
    return _validating(inventory, IMAGE_ARCH, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])),
                       cel_)


def policies(inventory: Inventory) -> list[dict[str, Any]]:
    return [
        job_pod_storage(inventory),
        pod_gpu_visibility(inventory),
        job_claims(inventory),
        trainjob_runtime(inventory),
        trainjob_placement(inventory),
        job_queue(inventory),
        job_ownership(inventory),
        gpu_pods_from_jobs(inventory),
        gpu_visibility(inventory),
        trainjob_image_arch(inventory),
    ]
