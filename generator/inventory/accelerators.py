"""What a GPU class's accelerator is, as the node's device plugin advertises it: the extended resource a pod
requests, its kind, its vendor's device variables, and how one unit is named. The builders, the rules, the
report and the users' page read these facts from here.

The resource names are the device plugins' own: NVIDIA's whole GPU `nvidia.com/gpu`; a MIG profile under the
mixed strategy `nvidia.com/mig-<profile>` (the plugin writes a profile's `+` as `.`, so `1g.10gb+me` is
`mig-1g.10gb.me`); a time-sliced GPU keeps `nvidia.com/gpu` or, renamed, `nvidia.com/gpu.shared`; AMD's
`amd.com/gpu`; Intel Gaudi's `habana.ai/gaudi` (Gaudi 1, 2 and 3: the plugin advertises `habana.ai/<family>`). Any
other valid extended resource name is a vendor gpugen knows nothing more about.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from generator.limits import label_key_problem  # a qualified name's grammar, a label key's

# The models import this module to validate a class's resource, so the functions below take a GpuClass or an
# Inventory without importing their types.
GpuClass = Inventory = Any

NVIDIA_GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
# A MIG profile as the device plugin names its resource: <slices>g.<memory>gb, then attributes such as .me
# (media extensions, written +me by NVML).
MIG_PROFILE = re.compile(r"[1-9][0-9]*g\.[1-9][0-9]*gb(\.[a-z][a-z0-9-]*)*")

Kind = Literal["gpu", "mig", "time-sliced", "other"]

# The environment variables through which each vendor's container runtime or user-space stack picks devices.
# A variable a container runtime reads exposes devices without a request; the others only narrow what the device
# plugin gave, but a container without a request has no business setting them either.
# NVIDIA: the container toolkit reads NVIDIA_VISIBLE_DEVICES (and the MIG and IMEX ones) to mount devices.
# AMD ROCm: ROCR_VISIBLE_DEVICES (the ROCr runtime), HIP_VISIBLE_DEVICES (HIP), GPU_DEVICE_ORDINAL (OpenCL and
# HIP).
# Intel Gaudi: the habana container runtime reads HABANA_VISIBLE_DEVICES to mount devices; HABANA_VISIBLE_MODULES
# picks modules inside the container.
DEVICE_ENV = {
    "nvidia.com": ("NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES",
                   "NVIDIA_IMEX_CHANNELS"),
    "amd.com": ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"),
    "habana.ai": ("HABANA_VISIBLE_DEVICES", "HABANA_VISIBLE_MODULES"),
}


def extended_resource_problem(name: str) -> str | None:
    """What keeps `name` from being a Kubernetes extended resource name (apimachinery's
    IsExtendedResourceName: a qualified name with a domain, outside kubernetes.io, not starting with requests.,
    and requests.<name> a qualified name too), or None."""
    prefix, slash, _ = name.partition("/")
    if not slash:
        return f"{name!r} has no domain: an extended resource is <domain>/<name>, e.g. nvidia.com/gpu"
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io") or name.startswith("requests."):
        return f"{name!r}: names under kubernetes.io and starting with requests. are Kubernetes' own"
    problem = label_key_problem(name) or label_key_problem("requests." + name)
    if problem:
        return f"{name!r} is not an extended resource name: " + problem.split(": ", 1)[-1]
    return None


def mig_profile(resource: str) -> str | None:
    """The MIG profile of a mixed-strategy resource (nvidia.com/mig-1g.10gb -> 1g.10gb), else None."""
    return resource[len(MIG_PREFIX):] if resource.startswith(MIG_PREFIX) else None


def kind(gpu_class: GpuClass) -> Kind:
    accelerator = gpu_class.accelerator
    if mig_profile(accelerator.resource) is not None:
        return "mig"
    if accelerator.timeSlicing is not None:
        return "time-sliced"
    return "gpu" if accelerator.resource in (NVIDIA_GPU, "amd.com/gpu") else "other"


def vendor(resource: str) -> str:
    """The domain of a resource: nvidia.com, amd.com, habana.ai, ..."""
    return resource.partition("/")[0]


def resource(gpu_class: GpuClass) -> str:
    return gpu_class.accelerator.resource


def resources(inventory: Inventory) -> list[str]:
    """Every class's resource, once each, in the inventory's order of classes sorted by name (the order the
    ClusterQueues cover them in)."""
    return list(dict.fromkeys(gpu_class.accelerator.resource for _, gpu_class in sorted(inventory.classes.items())))


def device_env(inventory: Inventory) -> tuple[str, ...]:
    """The device variables of every vendor whose resources the inventory's classes request, NVIDIA's first."""
    vendors = {vendor(name) for name in resources(inventory)}
    return tuple(variable for domain, variables in DEVICE_ENV.items() if domain in vendors for variable in variables)


def one_share_per_container(gpu_class: GpuClass) -> bool:
    """Whether a container may ask for one unit of the class's resource at most: a time-sliced class whose device
    plugin refuses more (sharing.timeSlicing.failRequestsGreaterThanOne; internal/rm/rm.go ValidateRequest fails
    the allocation with "maximum request size for shared resources is 1")."""
    sharing = gpu_class.accelerator.timeSlicing
    return sharing is not None and sharing.failRequestsGreaterThanOne


def unit(gpu_class: GpuClass) -> str:
    """What one unit of the class's resource is, for messages, the report and the users' page: the inventory's
    words, else a noun derived from the resource."""
    accelerator = gpu_class.accelerator
    if accelerator.unit:
        return accelerator.unit
    profile = mig_profile(accelerator.resource)
    if profile is not None:
        return f"{profile} MIG slice"
    if accelerator.timeSlicing is not None:
        return "GPU time-slice"
    if accelerator.resource == "habana.ai/gaudi":
        return "Gaudi card"
    return "GPU"


def unit_plural(gpu_class: GpuClass) -> str:
    """`GPUs`, `1g.10gb MIG slices`; a unit in the inventory's own words: `units of <unit>`."""
    return f"units of {gpu_class.accelerator.unit}" if gpu_class.accelerator.unit else unit(gpu_class) + "s"


def counted(gpu_class: GpuClass, count: int | str) -> str:
    """`1 GPU`, `7 1g.10gb MIG slices`; a unit in the inventory's own words is counted as `7 x <unit>`."""
    name = unit(gpu_class)
    if str(count) == "1":
        return f"1 {name}"
    return f"{count} x {name}" if gpu_class.accelerator.unit else f"{count} {name}s"


def sdk_name(gpu_class: GpuClass) -> str:
    """The key (quoted, as Python) a researcher writes in the Kubeflow SDK's resources_per_node for the class's
    resource: the SDK 0.5 maps "gpu" to nvidia.com/gpu and "mig-<profile>" to nvidia.com/mig-<profile>, and
    passes other names through (kubeflow/trainer/backends/kubernetes/utils.py, get_resources_per_node)."""
    name = gpu_class.accelerator.resource
    if name == NVIDIA_GPU:
        return '"gpu"'
    if mig_profile(name) is not None:
        return f'"mig-{mig_profile(name)}"'
    return f'"{name}"'


def trainer_counts_as_gpus(resource_name: str) -> bool:
    """Whether Trainer's torch plugin counts the resource as GPUs and lets torchrun pick one process per visible
    device (pkg/runtime/runtime.go numGPU: the lower-cased name contains "gpu"); otherwise it starts one process
    per requested CPU, and the platform sets the count (builders/kyverno.py trainjob-processes)."""
    return "gpu" in resource_name.lower()
