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
- gpu-pods-from-jobs: only the Job controller creates Pods that request a class's accelerator (nvidia.com/gpu).
- gpu-visibility (ValidatingPolicy) and pod-gpu-visibility (MutatingPolicy): no container sees GPUs it did
  not request: device-selection variables (of every vendor the classes have) and CDI annotations are the device
  plugin's, and every container without a GPU request gets NVIDIA_VISIBLE_DEVICES=void over its image's default.
- trainjob-image-arch: an image a TrainJob sets must offer the platform of its runtime's class.
- job-defaults (MutatingPolicy): a new TrainJob or Job without a priority class or walltime label gets its
  group's default ones, and a Job a finished-job TTL.
- trainjob-processes (MutatingPolicy; only for classes whose resource Trainer does not count as GPUs, such as MIG
  slices and Gaudi cards): a new TrainJob that sets no numProcPerNode gets one process per requested unit.
- job-limits: a new TrainJob or Job that could never run is refused at submission (more GPUs, CPU or memory per
  node than a node of its class has, more nodes than the class has, more GPUs than its group can ever hold; with
  several accelerator kinds, two kinds at once or another kind than its class's), and
  so is a priority class the group may not use, a walltime over its maximum, or a priorityClassName on any pod
  (the scheduler would preempt other groups' pods outside Kueue's accounting).

Each policy's CEL is a data file, kyverno_cel/<policy>.yaml, written as it is rendered: `$name` placeholders
are filled with CEL literals of the named parameters (runtime names, architectures, claims, controller
identities), so nothing but image metadata and the namespace's claims is looked up at admission. The tests parse
every expression with cel-go's parser.
All policies share ONE namespaceSelector (the research namespaces by their API-server-set name label) and
use no matchConditions, so Kyverno serves them all from one webhook per kind and failure policy: the
namespace list is stored once per policy and once per webhook, and never enters a CEL expression.
docs/policies.md explains each rule and that choice.
"""

from __future__ import annotations

import re
from functools import lru_cache, cache
from pathlib import Path
from typing import Any


from generator.builders import cel_templates
from generator.builders.cel_templates import fill
from generator.builders.common import metadata
from generator.builders.kueue import DEFAULT_LOCAL_QUEUE
from generator.components.kyverno.settings import DOCKER_HUB_NAMES
from generator.inventory.models import Inventory
from generator.kinds import BATCH, CORE, JOBSET, KYVERNO, NAMESPACE_NAME_LABEL, TRAINER
from generator.inventory import accelerators, duration
from generator.inventory.contract import JOB_LIMITS
from generator.inventory.naming import GPU_RESOURCE, controller_identities, research_namespaces, runtime_name

API_VERSION = KYVERNO.api_version
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The runtimePatches entry Kueue writes on admission. Only used to tell Kueue's entry from the user's:
# the string is user-settable, so the exemption itself is by request.userInfo.username alone.
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations", "nodeName", "schedulingGates")
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
DEFAULTS = "job-defaults"
LIMITS = "job-limits"
PROCESSES = "trainjob-processes"
FINISHED_TRAINJOBS = "finished-trainjobs"
# Kueue's labels for a job's WorkloadPriorityClass and maximum execution time (seconds).
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
WALLTIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"

_TRAINER_GROUP, _TRAINER_VERSION = TRAINER.name, TRAINER.version


_TEMPLATES = Path(__file__).with_name("kyverno_cel")


@lru_cache(maxsize=1)
def _fragments() -> cel_templates.Fragments:
    """The policies' shared CEL (kyverno_cel/fragments.yaml)."""
    return cel_templates.read_fragments(_TEMPLATES / "fragments.yaml")


# The fragments an inventory whose classes request other accelerators than whole NVIDIA GPUs uses in place of the
# ones written for nvidia.com/gpu alone, which an inventory of whole NVIDIA GPUs keeps (its policies unchanged).
GENERAL = {"requestsGpu": "requestsAccelerator", "gpuUnits": "acceleratorUnits", "gpuWord": "unitWord"}


def general(inventory: Inventory) -> bool:
    """Whether the policies need GENERAL's fragments: a class requests another resource than nvidia.com/gpu."""
    return accelerators.resources(inventory) != [accelerators.NVIDIA_GPU]


def _accelerator_params(inventory: Inventory) -> dict[str, Any]:
    """The placeholders of requestsGpu (or its general form): the one resource, or every class's."""
    return {"accelerators": accelerators.resources(inventory)} if general(inventory) else {"gpu": GPU_RESOURCE}


@cache
def _template(policy: str, general_form: bool = False) -> str:
    """The CEL template of `policy` (a YAML mapping of variables, validations or patch), with its shared
    fragments in place (GENERAL's in the general form)."""
    text = (_TEMPLATES / f"{policy}.yaml").read_text(encoding="utf-8")
    if general_form:
        text = cel_templates.CALL.sub(lambda m: f"@{GENERAL.get(m[1], m[1])}({m[2]})", text)
    return cel_templates.expand(text, _fragments())


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
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": metadata(inventory, name, annotations={"policies.kyverno.io/description": description}),
        "spec": spec,
    }


def _admission_policy(inventory: Inventory, kind: str, name: str, description: str,
                      spec: dict[str, Any]) -> dict[str, Any]:
    evaluation: dict[str, Any] = {
        "admission": {"enabled": True},
        # Admission guardrails: they read request.userInfo and oldObject, which a background scan has not.
        "background": {"enabled": False},
    }
    if kind == "MutatingPolicy":
        evaluation["mutateExisting"] = {"enabled": False}
        evaluation["skipBackgroundRequests"] = True  # the server's default, explicit so Argo CD sees no drift
    return _policy(inventory, kind, name, description, {**spec, "evaluation": evaluation})


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
    return _admission_policy(inventory, "ValidatingPolicy", name, description, spec)


def _mutating(inventory: Inventory, name: str, description: str, match: dict[str, Any],
              cel_: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": match,
        "autogen": {"podControllers": {"controllers": []}},
        "variables": _variables(cel_["variables"]),
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": cel_["patch"]}}],
    }
    return _admission_policy(inventory, "MutatingPolicy", name, description, spec)


# --- 1. Storage ----------------------------------------------------------------------------------------


def job_pod_storage(inventory: Inventory) -> dict[str, Any]:
    storage = inventory.cluster.storage
    entries = [
        {"volume": "home", "claim": storage.home.claimName, "path": storage.home.mountPath},
        {"volume": "workspace", "claim": storage.workspace.claimName, "path": storage.workspace.mountPath},
    ]
    cel_ = fill(_template(MOUNT_STORAGE), jobController=controller_identities(inventory).job, entries=entries)
    description = (f"Mounts PVC {storage.home.claimName} at {storage.home.mountPath} and PVC "
                   f"{storage.workspace.claimName} at {storage.workspace.mountPath} into every container of every "
                   "Pod the Job controller creates in a research namespace (TrainJobs included).")
    return _mutating(inventory, MOUNT_STORAGE, description, _match(inventory, _pods(["CREATE"])), cel_)


# --- 2. Claims exist before a job is queued ---------------------------------------------------------------


def job_claims(inventory: Inventory) -> dict[str, Any]:
    storage = inventory.cluster.storage
    controllers = controller_identities(inventory)
    mounts = (f"{storage.home.claimName} at {storage.home.mountPath} and {storage.workspace.claimName} at "
              f"{storage.workspace.mountPath}")
    cel_ = fill(
        _template(CLAIMS),
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


def trainjob_runtime(inventory: Inventory) -> dict[str, Any]:
    names = runtimes(inventory)
    todo = use_runtimes(inventory)
    cluster = inventory.cluster.name
    cel_ = fill(
        _template(RUNTIME),
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


def trainjob_placement(inventory: Inventory) -> dict[str, Any]:
    tail = (f": the runtime you name chooses the nodes ({use_runtimes(inventory)}), and only Kueue's controller "
            "writes placement")
    cel_ = fill(
        _template(PLACEMENT),
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


def job_queue(inventory: Inventory) -> dict[str, Any]:
    controllers = controller_identities(inventory)
    keep = f"{QUEUE_LABEL}: {DEFAULT_LOCAL_QUEUE}"
    cel_ = fill(
        _template(QUEUE),
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


def job_ownership(inventory: Inventory) -> dict[str, Any]:
    controllers = controller_identities(inventory)
    cel_ = fill(
        _template(OWNERSHIP),
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


def _requested_resources(inventory: Inventory) -> str:
    return " or ".join(accelerators.resources(inventory))


def gpu_pods_from_jobs(inventory: Inventory) -> dict[str, Any]:
    resources = _requested_resources(inventory)
    cel_ = fill(
        _template(GPU_PODS, general(inventory)),
        jobController=controller_identities(inventory).job,
        message=(f"Pods may request {resources} only through a Job or TrainJob that Kueue admits: "
                 f"submit a TrainJob ({use_runtimes(inventory)}) or a batch Job instead of a bare Pod, "
                 "Deployment or StatefulSet"),
        **_accelerator_params(inventory),
    )
    description = f"Only the Job controller creates Pods that request {resources} in a research namespace."
    return _validating(inventory, GPU_PODS, description, _match(inventory, _pods(["CREATE"])), cel_, pods=True)


# --- 8. GPU visibility ---------------------------------------------------------------------------------


def _optional(cel_: dict[str, Any], section: str, keep: bool) -> dict[str, Any]:
    """A template's CEL with its optional `section` (variables and validations) appended when `keep`, else left
    out."""
    cel_ = dict(cel_)
    optional = cel_.pop(section)
    if keep:
        cel_["variables"] = {**cel_["variables"], **optional["variables"]}
        cel_["validations"] = cel_["validations"] + optional["validations"]
    return cel_


def gpu_visibility(inventory: Inventory) -> dict[str, Any]:
    gpus = f"resources.limits {_requested_resources(inventory)}"
    vendors = accelerators.vendors(inventory)
    variables = [v for vendor in vendors for v in vendor.variables]
    exact = list(dict.fromkeys(v.name for v in variables if not v.prefix))
    prefixes = list(dict.fromkeys(v.name for v in variables if v.prefix))
    mounts = [m.name for vendor in vendors for m in vendor.mounts]
    annotations = [a.name for a in accelerators.RUNTIME_ANNOTATIONS] + [
        a.name for vendor in vendors for a in vendor.annotations]
    no_devices = _no_devices(inventory)
    named = ", ".join(exact + [p + "*" for p in prefixes])
    cel_ = fill(
        _template(GPU_VISIBILITY, general(inventory)),
        deviceEnv=exact,
        deviceEnvPrefixes=prefixes,
        noDevices=no_devices,
        annotationDomains=annotations,
        deviceMountNames=[path.rsplit("/", 1)[-1] for path in mounts],
        envTail=(f": a device variable is the device plugin's to set, for the devices a container requests; ask for "
                 f"them with {gpus} ({use_runtimes(inventory)}, resourcesPerNode in a TrainJob)"),
        prefixTail=": a ConfigMap's or Secret's key would then name a device variable, the device plugin's to set",
        annotationTail=(f": the container runtime would inject the devices it names, which is the device plugin's to "
                        f"do; ask for them with {gpus}"),
        mountTail="".join(f": the {vendor.name} container runtime reads a volume mounted under "
                          + " or ".join(m.name for m in vendor.mounts) + " as a request for the devices it names"
                          for vendor in vendors if vendor.mounts),
        ephemeralTail="".join(f" must set {name}={value}, or it sees every GPU of the node: kubectl debug --env "
                              f"{name}={value} ..." for name, value in no_devices.items()),
        **_accelerator_params(inventory),
    )
    cel_ = _optional(_optional(cel_, "mounts", bool(mounts)), "noDevices", bool(no_devices))
    exempt = "".join(f" (except {name}={value} without a request)" for name, value in no_devices.items())
    description = (f"No container sets {named}{exempt}, an envFrom prefix that begins one, "
                   + (f"a volume under {', '.join(mounts)}, " if mounts else "")
                   + "or a pod annotation under " + ", ".join(annotations)
                   + ": a container sees only the devices it requests.")
    operations = ["CREATE", "UPDATE"]
    match = _match(inventory, _pods(["CREATE"]), _rule("", "v1", "pods/ephemeralcontainers", ["UPDATE"]),
                   _jobs(operations), _jobsets(operations), _trainjobs(operations))
    return _validating(inventory, GPU_VISIBILITY, description, match, cel_, pods=True)


def _no_devices(inventory: Inventory) -> dict[str, str]:
    """variable -> value that shows a container no device, of each vendor of the classes whose runtime reads an
    image's default (NVIDIA's NVIDIA_VISIBLE_DEVICES=void)."""
    return dict(vendor.no_devices for vendor in accelerators.vendors(inventory) if vendor.no_devices)


def sets_no_devices(inventory: Inventory) -> bool:
    """Whether pod-gpu-visibility is rendered: a vendor of the classes has a "no devices" value."""
    return bool(_no_devices(inventory))


def pod_gpu_visibility(inventory: Inventory) -> dict[str, Any]:
    # The mutation's CEL sets one variable: one vendor (NVIDIA) has such a value.
    [(variable, value)] = _no_devices(inventory).items()
    cel_ = fill(
        _template(MUTATE_GPU_VISIBILITY, general(inventory)),
        void={"name": variable, "value": value},
        fields=["containers", "initContainers"],
        visibleDevices=variable,
        noDevices=value,
        **_accelerator_params(inventory),
    )
    description = (f"Sets {variable}={value} in every container and init container of a Pod in a "
                   f"research namespace that requests no {_requested_resources(inventory)}, over the image's "
                   "default (CUDA images say all, which the NVIDIA runtime would honour).")
    return _mutating(inventory, MUTATE_GPU_VISIBILITY, description, _match(inventory, _pods(["CREATE"])), cel_)


# --- 9. Image architecture -----------------------------------------------------------------------------


# What the image check asks a registry for: an index (OCI, Docker) or, failing that, a single image's manifest.
MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"])
# Kyverno's parseImageReference (go-containerregistry) reports Docker Hub as the host it talks to.
_REGISTRY_ALIASES = dict.fromkeys(DOCKER_HUB_NAMES, "index.docker.io")


def public_registries(inventory: Inventory) -> dict[str, dict[str, str]]:
    """The $registries of publishedIndex: host -> the scheme and the token URL up to the repository name."""
    registries = {}
    for host, registry in sorted(inventory.cluster.components.kyverno.publicRegistries.items()):
        token = registry.tokenService or ""
        if token:
            token += ("&" if "?" in token else "?") + "scope=repository:"
        registries[_REGISTRY_ALIASES.get(host, host)] = {"scheme": "http" if registry.plainHTTP else "https",
                                                          "token": token}
    return dict(sorted(registries.items()))


def trainjob_image_arch(inventory: Inventory) -> dict[str, Any]:
    arches = {runtime_name(name): gpu_class.arch for name, gpu_class in sorted(inventory.classes.items())}
    cel_ = fill(_template(IMAGE_ARCH), arches=arches, registries=public_registries(inventory),
                manifestTypes=MANIFEST_TYPES)
    platforms = ", ".join(f"{rt} linux/{arch}" for rt, arch in arches.items())
    description = ("An image a TrainJob sets (spec.trainer.image, containers in runtimePatches) offers the "
                   f"platform of its runtime's GPU class: {platforms}")
    return _validating(inventory, IMAGE_ARCH, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])),
                       cel_)


# --- 10. The research-computing contract: defaults and limits at submission ----------------------------------


def _pointer(label: str) -> str:
    """A label's JSON-pointer path segment (RFC 6901: ~ is ~0, / is ~1)."""
    return label.replace("~", "~0").replace("/", "~1")


def _class_facts(inventory: Inventory) -> dict[str, Any]:
    """The classes' facts the contract's CEL needs; the group's own limits come from its job-limits ConfigMap."""
    classes = sorted(inventory.classes.items())
    return {
        "runtimeClasses": {runtime_name(name): name for name, _ in classes},
        "classSelectors": {name: dict(sorted(c.nodeSelector.items())) for name, c in classes},
    }


def job_defaults(inventory: Inventory) -> dict[str, Any]:
    controllers = controller_identities(inventory)
    ttl = inventory.cluster.queueing.finishedJobTTL
    cel_ = fill(
        _template(DEFAULTS),
        controllers=sorted({controllers.trainer, controllers.jobset, controllers.kueue}),
        limitsName=JOB_LIMITS,
        priorityLabel=PRIORITY_LABEL,
        priorityPointer=_pointer(PRIORITY_LABEL),
        walltimeLabel=WALLTIME_LABEL,
        walltimePointer=_pointer(WALLTIME_LABEL),
        ttlSeconds=duration.seconds(ttl),
        **_class_facts(inventory),
    )
    description = (f"A new TrainJob or Job without {PRIORITY_LABEL} or {WALLTIME_LABEL} gets its group's default "
                   f"(ConfigMap {JOB_LIMITS} of its namespace); a Job without ttlSecondsAfterFinished is deleted "
                   f"{ttl} after it finishes.")
    # UPDATEs match too (and change nothing): every policy on a kind then shares the same rules.
    match = _match(inventory, _trainjobs(["CREATE", "UPDATE"]), _jobs(["CREATE", "UPDATE"]))
    return _mutating(inventory, DEFAULTS, description, match, cel_)


def _unit_words(gpu_class: Any) -> list[str]:
    """The words after a count of the class's units in job-limits' messages: one, several, "fewer ..."."""
    return [" " + accelerators.unit(gpu_class), accelerators.counted(gpu_class, 2)[1:],
            " " + accelerators.unit_plural(gpu_class)]


def job_limits(inventory: Inventory) -> dict[str, Any]:
    controllers = controller_identities(inventory)
    classes = sorted(inventory.classes.items())
    general_form = general(inventory)
    # An inventory of whole NVIDIA GPUs keeps its policy: the general form's variables, validations and messages
    # are filled here and dropped below.
    class_units = {name: _unit_words(c) for name, c in classes}
    resource_units = {}
    for resource in accelerators.resources(inventory):
        words = {tuple(class_units[name]) for name, c in classes if accelerators.resource(c) == resource}
        # Classes of one resource in different units: the resource's own name counts it.
        resource_units[resource] = list(words.pop()) if len(words) == 1 else [f" {resource}"] * 3
    one_share = {name: accelerators.resource(c) for name, c in classes if accelerators.one_share_per_container(c)}
    cel_ = fill(
        _template(LIMITS, general_form),
        controllers=sorted({controllers.trainer, controllers.jobset, controllers.kueue, controllers.job}),
        limitsName=JOB_LIMITS,
        priorityLabel=PRIORITY_LABEL,
        walltimeLabel=WALLTIME_LABEL,
        accelerators=accelerators.resources(inventory),
        classResources={name: accelerators.resource(c) for name, c in classes},
        classRequests={name: f"{accelerators.sdk_name(c)}: 1" for name, c in classes},
        kindsTail=(": a node of one class has one; name the runtime of the class whose accelerator you want "
                   f"({use_runtimes(inventory)})"),
        classUnits=class_units,
        resourceUnits=resource_units,
        oneShareClasses=one_share,
        # A resource whose every class refuses more than one share: a Job that names no class is judged by it.
        oneShareResources=sorted({resource for resource in one_share.values()
                                  if all(name in one_share for name, c in classes
                                         if accelerators.resource(c) == resource)}),
        **({} if general_form else {"gpu": GPU_RESOURCE}),
        nodeGpus={name: c.perNode.gpus for name, c in classes},
        nodeCpu={name: str(c.perNode.cpu) for name, c in classes},
        nodeMemory={name: str(c.perNode.memory) for name, c in classes},
        classNodes={name: c.nodes for name, c in classes},
        classNumNodes={name: c.numNodes for name, c in classes},
        uncoveredTail=": ask for one of them with the runtime named beside it",
        missingTail=(": it holds the group's limits (rendered by gpugen); ask the platform team to sync the "
                     "platform, then submit again"),
        maxGraceSeconds=duration.seconds(inventory.cluster.queueing.maxGracePeriod),
        graceTail=(f" is longer than {duration.seconds(inventory.cluster.queueing.maxGracePeriod)} seconds: a "
                   "stopped or preempted job must give its GPUs back within that (checkpoint more often instead)"),
        priorityClassTail=(f": a pod's scheduling priority would preempt other groups' pods outside Kueue; a job's "
                           f"priority is the label {PRIORITY_LABEL}"),
        **_class_facts(inventory),
    )
    description = ("A new TrainJob or Job is refused when it could never run (per node more GPUs, CPU or memory "
                   "than a node of its class has, more nodes than the class has, more GPUs than its group can ever "
                   f"hold) or names a priority class its group may not use or a {WALLTIME_LABEL} over the "
                   "group's maximum or a longer terminationGracePeriodSeconds than "
                   f"{inventory.cluster.queueing.maxGracePeriod}; no pod names a priorityClassName.")
    general_variables, general_validations = cel_.pop("generalVariables"), cel_.pop("generalValidations")
    last_validations = cel_.pop("lastValidations")
    for validation in cel_["validations"]:
        general_message = validation.pop("generalMessageExpression", None)
        if general_form and general_message is not None:
            validation["messageExpression"] = general_message
    if general_form:
        # A general variable replacing one of the same name moves to the end: it may read those before it.
        base = {name: cel for name, cel in cel_["variables"].items() if name not in general_variables}
        cel_ = {"variables": {**base, **general_variables},
                "validations": cel_["validations"] + general_validations}
    cel_["validations"] = cel_["validations"] + last_validations
    operations = ["CREATE", "UPDATE"]
    match = _match(inventory, _pods(["CREATE"]), _trainjobs(operations), _jobs(operations))
    return _validating(inventory, LIMITS, description, match, cel_, pods=True)


# --- 11. Processes per node ------------------------------------------------------------------------------


def processes_needed(inventory: Inventory) -> dict[str, str]:
    """runtime -> the class's resource, for the classes whose resource Trainer does not count as GPUs."""
    return {runtime_name(name): accelerators.resource(c) for name, c in sorted(inventory.classes.items())
            if not accelerators.trainer_counts_as_gpus(accelerators.resource(c))}


def trainjob_processes(inventory: Inventory) -> dict[str, Any]:
    """Trainer 2.3's torch plugin starts one process per requested GPU only for a resource whose name contains
    "gpu"; for any other it starts one per requested CPU, and a runtime cannot set the count (its torch policy
    has no numProcPerNode, only the TrainJob has). The SDK sets none, so the platform does."""
    controllers = controller_identities(inventory)
    runtimes_ = processes_needed(inventory)
    cel_ = fill(_template(PROCESSES), controllers=sorted({controllers.trainer, controllers.jobset, controllers.kueue}),
                runtimeResources=runtimes_)
    description = ("A new TrainJob of " + ", ".join(runtimes_) + " that sets no spec.trainer.numProcPerNode gets "
                   "one process per unit of its class's accelerator it asks for per node (Trainer would start one "
                   "per CPU).")
    match = _match(inventory, _trainjobs(["CREATE", "UPDATE"]))
    return _mutating(inventory, PROCESSES, description, match, cel_)


# --- 12. Finished TrainJobs ------------------------------------------------------------------------------

# How often the clean-up runs: a tenth of the TTL, between a minute and an hour, a divisor of an hour for cron.
_CLEANUP_PERIODS_MINUTES = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)


def cleanup_schedule(ttl_seconds: int) -> str:
    """Cron for the clean-up: a finished job goes within its TTL plus a tenth of it (at least a minute, at most
    an hour)."""
    minutes = max(p for p in _CLEANUP_PERIODS_MINUTES if p == 1 or p * 600 <= ttl_seconds)
    if minutes == 60:
        return "0 * * * *"
    return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *"


def finished_trainjobs(inventory: Inventory) -> dict[str, Any]:
    ttl = inventory.cluster.queueing.finishedJobTTL
    ttl_seconds = duration.seconds(ttl)
    cel_ = fill(_template(FINISHED_TRAINJOBS), ttl=f"{ttl_seconds}s")
    description = (f"Deletes a TrainJob of a research namespace {ttl} after it completed or failed (Trainer keeps "
                   "finished TrainJobs; plain Jobs get ttlSecondsAfterFinished from job-defaults)")
    spec = {
        "matchConstraints": _match(inventory, _trainjobs(["*"])),
        "conditions": cel_["conditions"],
        "schedule": cleanup_schedule(ttl_seconds),
        # The TrainJob's JobSet, Jobs and pods go with it, before it is gone.
        "deletionPropagationPolicy": "Foreground",
    }
    return _policy(inventory, "DeletingPolicy", FINISHED_TRAINJOBS, description, spec)


_TTL_IN_CONDITION = re.compile(r'duration\("([0-9]+)s"\)')


def finished_ttl_seconds(policy: dict[str, Any]) -> int | None:
    """The TTL a rendered finished-trainjobs policy deletes after (what `plan` compares), None for another policy."""
    if policy.get("kind") != "DeletingPolicy" or policy["metadata"]["name"] != FINISHED_TRAINJOBS:
        return None
    found = [_TTL_IN_CONDITION.search(c["expression"]) for c in policy["spec"].get("conditions", [])]
    return next((int(m.group(1)) for m in found if m), None)


def policies(inventory: Inventory) -> list[dict[str, Any]]:
    return [
        job_pod_storage(inventory),
        *([pod_gpu_visibility(inventory)] if sets_no_devices(inventory) else []),
        job_claims(inventory),
        trainjob_runtime(inventory),
        trainjob_placement(inventory),
        job_queue(inventory),
        job_ownership(inventory),
        gpu_pods_from_jobs(inventory),
        gpu_visibility(inventory),
        trainjob_image_arch(inventory),
        job_defaults(inventory),
        *([trainjob_processes(inventory)] if processes_needed(inventory) else []),
        job_limits(inventory),
        finished_trainjobs(inventory),
    ]
