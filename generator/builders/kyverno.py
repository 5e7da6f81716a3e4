"""Kyverno (policies.kyverno.io/v1): guardrails generated from the inventory.

The seed page promises things no runtime can enforce on its own; these policies do, at admission:

- job-pod-storage (MutatingPolicy): every Pod the Job controller creates in a research namespace gets the
  home PVC and the workspace PVC (cluster.storage) in every container and init container.
- trainjob-runtime: a TrainJob names one of the generated ClusterTrainingRuntimes, never a namespaced
  TrainingRuntime, torch-distributed or any other name.
- trainjob-placement: nodeSelector, affinity, tolerations, nodeName and schedulingGates in runtimePatches
  (or the older podTemplateOverrides/podSpecOverrides) are Kueue's alone.
- job-queue: a TrainJob's or Job's kueue.x-k8s.io/queue-name is the namespace's LocalQueue `default`,
  and stays on the job.
- gpu-pods-from-jobs: only the Job controller creates Pods that request nvidia.com/gpu.
- trainjob-image-arch: an image a TrainJob sets must offer the platform of its runtime's class.

Every value is a literal rendered from the inventory (runtime names, architectures, claims, controller
identities, namespaces): nothing is looked up at admission except image metadata, which only the registry has.
All policies share ONE namespaceSelector (the research namespaces by their API-server-set name label) and
use no matchConditions, so Kyverno serves them all from one webhook per kind and failure policy: the
namespace list is stored once per policy and once per webhook, and never enters a CEL expression.
docs/policies.md explains each rule and that choice.
"""

from __future__ import annotations

import json
from typing import Any

from generator.builders.common import metadata
from generator.builders.kueue import DEFAULT_LOCAL_QUEUE
from generator.builders.trainer import API_VERSION as TRAINER_API_VERSION
from generator.inventory.models import Inventory
from generator.naming import GPU_RESOURCE, runtime_name

API_VERSION = "policies.kyverno.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# The runtimePatches entry Kueue writes on admission. Only used to tell Kueue's entry from the user's:
# the string is user-settable, so the exemption itself is by request.userInfo.username alone.
KUEUE_MANAGER = "kueue.x-k8s.io/manager"
PLACEMENT_FIELDS = ("nodeSelector", "affinity", "tolerations", "nodeName", "schedulingGates")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set by the API server, cannot be forged

MOUNT_STORAGE = "job-pod-storage"
RUNTIME = "trainjob-runtime"
PLACEMENT = "trainjob-placement"
QUEUE = "job-queue"
GPU_PODS = "gpu-pods-from-jobs"
IMAGE_ARCH = "trainjob-image-arch"

_TRAINER_GROUP, _TRAINER_VERSION = TRAINER_API_VERSION.split("/")


def cel(value: Any) -> str:
    """A CEL literal: JSON's string escapes (\\" \\\\ \\n \\uXXXX) are CEL's too."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cel(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel(k)}: {cel(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no CEL literal for {value!r}")


def research_namespaces(inventory: Inventory) -> list[str]:
    return sorted({ns for group in inventory.groups.values() for ns in group.namespaces})


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


def _match(inventory: Inventory, *rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "resourceRules": list(rules),
        "namespaceSelector": {"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": research_namespaces(inventory)},
        ]},
    }


def _variables(**expressions: str) -> list[dict[str, str]]:
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
                variables: list[dict[str, str]], validations: list[dict[str, str]],
                pods: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "validationActions": ["Deny"],
        "failurePolicy": "Fail",
        "matchConstraints": match,
    }
    if pods:
        # A Pod policy is by default also generated for Deployments, Jobs, CronJobs...; these rules are about
        # the Pod as created (and by whom), so they must see Pods only.
        spec["autogen"] = {"podControllers": {"controllers": []}}
    spec["variables"] = variables
    spec["validations"] = validations
    return _policy(inventory, "ValidatingPolicy", name, description, spec)


# --- 1. Storage ----------------------------------------------------------------------------------------

def job_pod_storage(inventory: Inventory) -> dict[str, Any]:
    storage = inventory.cluster.storage
    entries = [
        {"volume": "home", "claim": storage.home.claimName, "path": storage.home.mountPath},
        {"volume": "workspace", "claim": storage.workspace.claimName, "path": storage.workspace.mountPath},
    ]
    job_controller = cel(inventory.cluster.controllers.job)
    variables = _variables(
        fromJob=f"request.userInfo.username == {job_controller}",
        containers="object.spec.containers",
        initContainers="object.spec.?initContainers.orValue([])",
        # An entry is skipped when the Pod already has a volume of its name or any container mounts its path.
        entries=(
            f"variables.fromJob ? {cel(entries)}.filter(e,\n"
            "  !object.spec.?volumes.orValue([]).exists(v, v.name == e.volume) &&\n"
            "  !(variables.containers + variables.initContainers).exists(c,\n"
            "    c.?volumeMounts.orValue([]).exists(m, m.mountPath == e.path))) : []"
        ),
        volumes=(
            'variables.entries.map(e, {"name": dyn(e.volume), '
            '"persistentVolumeClaim": dyn({"claimName": e.claim})})'
        ),
        mounts='variables.entries.map(e, {"name": e.volume, "mountPath": e.path})',
    )

    def per_container(field: str) -> str:
        return (
            f"lists.range(size(variables.{field})).map(i,\n"
            f"  has(variables.{field}[i].volumeMounts)\n"
            f"    ? variables.mounts.map(m, JSONPatch{{op: \"add\", "
            f"path: \"/spec/{field}/\" + string(i) + \"/volumeMounts/-\", value: m}})\n"
            f"    : [JSONPatch{{op: \"add\", path: \"/spec/{field}/\" + string(i) + \"/volumeMounts\", "
            f"value: variables.mounts}}]\n"
            ").flatten()"
        )

    patch = (
        "variables.entries.size() == 0 ? [] :\n"
        "(has(object.spec.volumes)\n"
        '  ? variables.volumes.map(v, JSONPatch{op: "add", path: "/spec/volumes/-", value: v})\n'
        '  : [JSONPatch{op: "add", path: "/spec/volumes", value: variables.volumes}])\n'
        f"+ {per_container('containers')}\n"
        f"+ {per_container('initContainers')}"
    )
    spec = {
        "failurePolicy": "Fail",
        "matchConstraints": _match(inventory, _rule("", "v1", "pods", ["CREATE"])),
        "autogen": {"podControllers": {"controllers": []}},
        "variables": variables,
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}],
    }
    description = (f"Mounts PVC {storage.home.claimName} at {storage.home.mountPath} and PVC "
                   f"{storage.workspace.claimName} at {storage.workspace.mountPath} into every container of every "
                   "Pod the Job controller creates in a research namespace (TrainJobs included).")
    return _policy(inventory, "MutatingPolicy", MOUNT_STORAGE, description, spec)


# --- 2. Runtime ----------------------------------------------------------------------------------------

def trainjob_runtime(inventory: Inventory) -> dict[str, Any]:
    names = runtimes(inventory)
    todo = use_runtimes(inventory)
    cluster = inventory.cluster.name
    variables = _variables(
        ref="object.spec.runtimeRef",
        # The CRD defaults both; the API server applies defaults before admission, the CLI does not.
        apiGroup=f"variables.ref.?apiGroup.orValue({cel(_TRAINER_GROUP)})",
        kind='variables.ref.?kind.orValue("ClusterTrainingRuntime")',
    )
    validations = [
        {
            "expression": f'variables.apiGroup == {cel(_TRAINER_GROUP)} && variables.kind == "ClusterTrainingRuntime"',
            "messageExpression": (
                '"spec.runtimeRef names " + variables.kind + "." + variables.apiGroup + " " + variables.ref.name + '
                + cel(f": only the ClusterTrainingRuntimes ({_TRAINER_GROUP}) of {cluster} are allowed, never a "
                      f"namespaced TrainingRuntime; set runtimeRef.kind: ClusterTrainingRuntime and {todo}")
            ),
        },
        {
            "expression": f"variables.ref.name in {cel(names)}",
            "messageExpression": (
                '"runtime " + variables.ref.name + '
                + cel(f" is not available on {cluster}: every TrainJob names the runtime of one GPU class; {todo} "
                      "(kubectl get clustertrainingruntimes)")
            ),
        },
    ]
    description = f"A TrainJob references one of the ClusterTrainingRuntimes {', '.join(names)}."
    return _validating(inventory, RUNTIME, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])),
                       variables, validations)


# --- 3. Placement --------------------------------------------------------------------------------------

def _patch_pod_specs(patches: str) -> str:
    """The pod specs inside a list of runtimePatches entries."""
    return (f"{patches}.map(p, p.?trainingRuntimeSpec.?template.?spec.?replicatedJobs.orValue([])\n"
            "  .map(rj, rj.?template.?spec.?template.?spec.orValue({}))).flatten()")


def trainjob_placement(inventory: Inventory) -> dict[str, Any]:
    kueue = cel(inventory.cluster.controllers.kueue)
    manager = cel(KUEUE_MANAGER)
    fields = cel(PLACEMENT_FIELDS)
    todo = use_runtimes(inventory)
    variables = _variables(
        fromKueue=f"request.userInfo.username == {kueue}",
        patches="object.spec.?runtimePatches.orValue([])",
        userPatchFields=(
            f"{fields}.filter(f, "
            + _patch_pod_specs(f"variables.patches.filter(p, p.?manager.orValue(\"\") != {manager})")
            + ".exists(s, f in s))"
        ),
        legacyFields=(
            f"{fields}.filter(f, (object.spec.?podTemplateOverrides.orValue([]).map(o, o.?spec.orValue({{}}))\n"
            "  + object.spec.?podSpecOverrides.orValue([])).exists(s, f in s))"
        ),
        kueueEntries=f"variables.patches.filter(p, p.?manager.orValue(\"\") == {manager})",
        oldKueueEntries=(
            'request.operation != "UPDATE" ? [] : '
            f"oldObject.spec.?runtimePatches.orValue([]).filter(p, p.?manager.orValue(\"\") == {manager})"
        ),
        # Kueue's own mutating webhook adds an EMPTY entry under its manager inside the researcher's CREATE
        # (placement is written later, on admission, by the controller). Empty means: no more than the manager
        # and an empty trainingRuntimeSpec.template.spec, so nothing can ride along in it.
        kueueEntriesAsWebhookAdds=(
            'request.operation == "CREATE" && variables.kueueEntries.all(p, p.size() <= 2\n'
            "  && p.?trainingRuntimeSpec.orValue({}).size() <= 1\n"
            "  && p.?trainingRuntimeSpec.?template.orValue({}).size() <= 1\n"
            "  && p.?trainingRuntimeSpec.?template.?spec.orValue({}).size() == 0)"
        ),
    )
    tail = f": the runtime you name chooses the nodes ({todo}), and only Kueue's controller writes placement"
    validations = [
        {
            "expression": "variables.fromKueue || variables.userPatchFields.size() == 0",
            "messageExpression": ('"remove " + variables.userPatchFields.join(", ") + '
                                  + cel(" from spec.runtimePatches" + tail)),
        },
        {
            "expression": "variables.fromKueue || variables.legacyFields.size() == 0",
            "messageExpression": ('"remove " + variables.legacyFields.join(", ") + '
                                  + cel(" from spec.podTemplateOverrides/podSpecOverrides" + tail)),
        },
        {
            "expression": ("variables.fromKueue || variables.kueueEntries == variables.oldKueueEntries\n"
                           "  || variables.kueueEntriesAsWebhookAdds"),
            "message": (f"remove the spec.runtimePatches entry with manager {KUEUE_MANAGER}: only Kueue's controller "
                        "may add or change it, and naming its manager does not make a request Kueue's"),
        },
    ]
    description = ("Only Kueue's controller (by request.userInfo) sets " + ", ".join(PLACEMENT_FIELDS)
                   + " through a TrainJob's runtimePatches (or podTemplateOverrides/podSpecOverrides).")
    return _validating(inventory, PLACEMENT, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])),
                       variables, validations)


# --- 4. Queue ------------------------------------------------------------------------------------------

def job_queue(inventory: Inventory) -> dict[str, Any]:
    controllers = inventory.cluster.controllers
    trusted = sorted({controllers.kueue, controllers.trainer, controllers.jobset, controllers.job})
    label = cel(QUEUE_LABEL)
    default = cel(DEFAULT_LOCAL_QUEUE)
    variables = _variables(
        queue=f"object.metadata.?labels[?{label}]",
        oldQueue=f'request.operation != "UPDATE" ? optional.none() : oldObject.metadata.?labels[?{label}]',
        fromController=f"request.userInfo.username in {cel(trusted)}",
    )
    keep = f"{QUEUE_LABEL}: {DEFAULT_LOCAL_QUEUE}"
    validations = [
        {
            "expression": f"!variables.queue.hasValue() || variables.queue.value() == {default}",
            "messageExpression": (
                f'{cel(QUEUE_LABEL + " ")} + variables.queue.value() + '
                + cel(f" is not this namespace's LocalQueue: set {keep} or leave the label out (Kueue sets it)")
            ),
        },
        {
            "expression": ('request.operation != "UPDATE" || !variables.oldQueue.hasValue() || '
                           "variables.queue.orValue(\"\") == variables.oldQueue.value()"),
            "message": f"{QUEUE_LABEL} cannot be changed or removed once set: keep {keep}",
        },
        {
            # Kueue labels every job at creation (LocalQueue `default`), so a job without the label on UPDATE had
            # it removed. Controllers are trusted (child Jobs of a JobSet carry no label), and so is a job that
            # is being deleted (the garbage collector removes finalizers).
            "expression": ('request.operation != "UPDATE" || variables.fromController || '
                           "has(object.metadata.deletionTimestamp) || variables.queue.hasValue()"),
            "message": (f"{QUEUE_LABEL} may not be removed: a job leaves Kueue's quota without it; "
                        f"put back {keep}"),
        },
    ]
    description = (f"A TrainJob's or Job's {QUEUE_LABEL} is the namespace's LocalQueue {DEFAULT_LOCAL_QUEUE} and "
                   "is never changed or removed.")
    match = _match(inventory, _trainjobs(["CREATE", "UPDATE"]), _rule("batch", "v1", "jobs", ["CREATE", "UPDATE"]))
    return _validating(inventory, QUEUE, description, match, variables, validations)


# --- 5. GPU Pods only from Jobs ------------------------------------------------------------------------

def gpu_pods_from_jobs(inventory: Inventory) -> dict[str, Any]:
    gpu = cel(GPU_RESOURCE)
    variables = _variables(
        resources=(
            "(object.spec.containers + object.spec.?initContainers.orValue([])).map(c, c.?resources.orValue({}))\n"
            "+ [object.spec.?resources.orValue({})]"
        ),
        gpus=(
            'variables.resources.map(r, [r.?requests[?' + gpu + '], r.?limits[?' + gpu + ']])'
            ".flatten().filter(q, q.hasValue()).map(q, string(q.value()))"
        ),
        requestsGpu='variables.gpus.exists(q, q != "0")',
        fromJob=f"request.userInfo.username == {cel(inventory.cluster.controllers.job)}",
    )
    validations = [{
        "expression": "variables.fromJob || !variables.requestsGpu",
        "message": (f"Pods may request {GPU_RESOURCE} only through a Job or TrainJob that Kueue admits: "
                    f"submit a TrainJob ({use_runtimes(inventory)}) or a batch Job instead of a bare Pod, "
                    "Deployment or StatefulSet"),
    }]
    description = f"Only the Job controller creates Pods that request {GPU_RESOURCE} in a research namespace."
    return _validating(inventory, GPU_PODS, description, _match(inventory, _rule("", "v1", "pods", ["CREATE"])),
                       variables, validations, pods=True)


# --- 6. Image architecture -----------------------------------------------------------------------------

def _images(obj: str) -> str:
    """Every image a TrainJob (`object` or `oldObject`) sets itself, in a stable order."""
    pod_specs = (_patch_pod_specs(f"{obj}.spec.?runtimePatches.orValue([])")
                 + f"\n  + {obj}.spec.?podTemplateOverrides.orValue([]).map(o, o.?spec.orValue({{}}))"
                 + f"\n  + {obj}.spec.?podSpecOverrides.orValue([])")
    return (f"({obj}.spec.?trainer.?image.hasValue() ? [{obj}.spec.trainer.image] : [])\n"
            f"+ ({pod_specs})\n"
            "  .map(s, s.?containers.orValue([]) + s.?initContainers.orValue([])).flatten()\n"
            "  .filter(c, has(c.image)).map(c, c.image)")


def trainjob_image_arch(inventory: Inventory) -> dict[str, Any]:
    arches = {runtime_name(name): gpu_class.arch for name, gpu_class in sorted(inventory.classes.items())}
    variables = _variables(
        arch=f"{cel(arches)}[?object.spec.runtimeRef.name]",
        images=_images("object"),
        oldImages='request.operation != "UPDATE" ? [] : ' + _images("oldObject"),
        # Only images the request adds or changes are looked up (Kueue's updates carry the same images).
        checked=('variables.arch.hasValue() && (request.operation == "CREATE" || '
                 "variables.images != variables.oldImages) ? variables.images : []"),
        # An image index lists its platforms; a single-platform image reports its own in config. The index is read
        # first: for a multi-arch image config.architecture is the default platform's (amd64), whatever it offers.
        wrongArch=(
            "variables.checked.filter(i, cel.bind(md, image.GetMetadata(i),\n"
            "  md.?imageIndex.?manifests.orValue([]).size() > 0\n"
            "    ? !md.imageIndex.manifests.exists(m, m.?platform.?os.orValue(\"\") == \"linux\" &&\n"
            "        m.?platform.?architecture.orValue(\"\") == variables.arch.value())\n"
            "    : !(md.?config.?os.orValue(\"\") == \"linux\" &&\n"
            "        md.?config.?architecture.orValue(\"\") == variables.arch.value())))"
        ),
    )
    validations = [{
        "expression": "variables.wrongArch.size() == 0",
        "messageExpression": (
            '"image " + variables.wrongArch.join(", ") + " does not offer linux/" + variables.arch.value() + '
            '", the platform of runtime " + object.spec.runtimeRef.name + ": build and push the image for linux/" + '
            'variables.arch.value() + " (a multi-arch image must list it in its index) and use that tag"'
        ),
    }]
    platforms = ", ".join(f"{rt} linux/{arch}" for rt, arch in arches.items())
    description = ("An image a TrainJob sets (spec.trainer.image, containers in runtimePatches) offers the "
                   f"platform of its runtime's GPU class: {platforms}")
    return _validating(inventory, IMAGE_ARCH, description, _match(inventory, _trainjobs(["CREATE", "UPDATE"])),
                       variables, validations)


def policies(inventory: Inventory) -> list[dict[str, Any]]:
    return [
        job_pod_storage(inventory),
        trainjob_runtime(inventory),
        trainjob_placement(inventory),
        job_queue(inventory),
        gpu_pods_from_jobs(inventory),
        trainjob_image_arch(inventory),
    ]
