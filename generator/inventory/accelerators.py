"""What a GPU class's accelerator is, as the node's device plugin advertises it: the extended resource a pod
requests, its kind, its vendor's device variables, and how one unit is named. The builders, the rules, the
report and the users' page read these facts from here.

The resource names are the device plugins' own (each vendor's `resources` below): NVIDIA's whole GPU
`nvidia.com/gpu`; a MIG profile under the mixed strategy `nvidia.com/mig-<profile>` (the plugin writes a profile's
`+` as `.`, so `1g.10gb+me` is `mig-1g.10gb.me`); a time-sliced GPU or MIG slice keeps its name or, renamed, gets
`.shared` (`nvidia.com/gpu.shared`, `nvidia.com/mig-1g.10gb.shared`); AMD's `amd.com/gpu` and partitions
(`amd.com/cpx_nps4`); Intel Gaudi's `habana.ai/gaudi` (Gaudi 1, 2 and 3: the plugin advertises `habana.ai/<family>`);
Intel's GPUs `gpu.intel.com/i915` and `gpu.intel.com/xe`. Another name under a known vendor's domain, or a domain
gpugen does not know, is a class's only with `unknownVendor: true`: gpugen then checks its name's grammar alone.

Each vendor also lists, with where its source says so, every environment variable, mount and annotation through
which its container runtime could give a container devices it did not request: the guardrail refuses them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from generator.limits import label_key_problem  # a qualified name's grammar, a label key's

# The models import this module to validate a class's resource, so the functions below take a GpuClass or an
# Inventory without importing their types.
GpuClass = Inventory = Any

NVIDIA_GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
# A MIG profile as the device plugin names its resource: <slices>g.<memory>gb, then attributes such as .me
# (media extensions, written +me by NVML).
_MIG_PROFILE = r"[1-9][0-9]*g\.[1-9][0-9]*gb(?:\.me\.all|\.me|\.gfx|-me)?"
MIG_PROFILE = re.compile(_MIG_PROFILE)
# The device plugin's suffix of a time-sliced (or MPS-shared) resource renamed by renameByDefault.
SHARED_SUFFIX = ".shared"

Kind = Literal["gpu", "mig", "time-sliced", "other"]


@dataclass(frozen=True)
class Channel:
    """One way a container's spec could reach devices it did not request: an environment variable (or every
    variable whose name starts with `name`, where `prefix`), a volume mounted at or under a path, or a pod
    annotation (a key, or every key under it). `mounts`: the container runtime mounts devices from it; otherwise
    it only narrows what a process of the container uses. `source`: where the vendor says so."""

    name: str
    source: str
    mounts: bool = True
    prefix: bool = False


@dataclass(frozen=True)
class Vendor:
    """What gpugen knows of one accelerator vendor's device plugin and container runtime, read at their sources.

    `resources`: the patterns (after the domain) of the resources its device plugin advertises; a class's resource
    under the vendor's domain must match one (or say `unknownVendor`). `variables`, `mounts`, `annotations`: the
    channels its stack reads devices from, which the guardrail (builders/kyverno.py gpu-visibility) refuses in
    every container kind. `no_devices`: the variable and value that show a container no device over its image's
    default, set on every container without a request (pod-gpu-visibility); `image_default`: what no policy can
    refuse because an image sets it."""

    name: str
    domain: str
    resources: tuple[str, ...]
    forms: str  # the advertised names, as a person reads them
    variables: tuple[Channel, ...]
    mounts: tuple[Channel, ...] = ()
    annotations: tuple[Channel, ...] = ()
    no_devices: tuple[str, str] | None = None
    image_default: str = ""


# Read at: NVIDIA/nvidia-container-toolkit v1.20.0, NVIDIA/k8s-device-plugin v0.20.0; ROCm/container-toolkit
# (after v1.3.0), ROCm/k8s-device-plugin; HabanaAI/gaudi-container-runtime 1.24.0, HabanaAI/habanalabs-k8s-device-
# plugin v1.16.0 with HabanaAI/gohlml; intel/intel-device-plugins-for-kubernetes. docs/policies.md lists them with
# what each does.
_TOOLKIT = "nvidia-container-toolkit "
NVIDIA = Vendor(
    name="NVIDIA", domain="nvidia.com",
    # internal/rm/rm.go AddDefaultResourcesToConfig (gpu); mixed MIG strategy "mig-" + profile with + as .
    # (go-nvlib MigProfileInfo.String: <g>g.<gb>gb, then +me, +me.all, +gfx or -me); sharing's renameByDefault
    # adds .shared (api/config/v1/replicas.go DefaultSharedRename). Custom names are ignored by the plugin
    # (spec.DisableResourceNamingInConfig).
    resources=(r"gpu", r"gpu\.shared", r"mig-" + _MIG_PROFILE + r"(\.shared)?"),
    forms="nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<profile>, nvidia.com/mig-<profile>.shared",
    variables=(
        Channel("NVIDIA_VISIBLE_DEVICES", _TOOLKIT + "internal/config/image/cuda_image.go (all, indices, UUIDs, "
                "any CDI device name in cdi and jit-cdi modes)"),
        Channel("NVIDIA_IMEX_CHANNELS", _TOOLKIT + "internal/config/image/cuda_image.go ImexChannelRequests"),
        Channel("NVIDIA_GDS", _TOOLKIT + "internal/modifier/cdi.go gatedDevices (/dev/nvidia-fs*)"),
        Channel("NVIDIA_MOFED", _TOOLKIT + "internal/modifier/cdi.go gatedDevices (/dev/infiniband)"),
        Channel("NVIDIA_NVSWITCH", _TOOLKIT + "internal/modifier/cdi.go gatedDevices (/dev/nvidia-nvswitch*)"),
        Channel("NVIDIA_GDRCOPY", _TOOLKIT + "internal/modifier/cdi.go gatedDevices (/dev/gdrdrv)"),
        Channel("NVIDIA_MIG_CONFIG_DEVICES", _TOOLKIT + "cmd/nvidia-container-runtime-hook getNvidiaConfig"),
        Channel("NVIDIA_MIG_MONITOR_DEVICES", _TOOLKIT + "cmd/nvidia-container-runtime-hook getNvidiaConfig"),
        # The toolkit's swarm-resource setting (a site's; DOCKER_RESOURCE_GPU in its docs) takes precedence.
        Channel("DOCKER_RESOURCE_", _TOOLKIT + "api/config/v1 swarm-resource, WithPreferredVisibleDevicesEnvVars",
                prefix=True),
    ),
    mounts=(Channel("/var/run/nvidia-container-devices", _TOOLKIT + "internal/config/image/cuda_image.go "
                    "DeviceListAsVolumeMountsRoot (accept-nvidia-visible-devices-as-volume-mounts)"),),
    annotations=(Channel("nvidia.cdi.k8s.io", _TOOLKIT + "cmd/nvidia-ctk-installer/container/runtime/nri/plugin.go "
                         "(container.<name>, pod, or the bare key: any CDI device)"),),
    # The toolkit's "no GPU" (cuda_image.go devicesFromEnvvars: void anywhere wins); CUDA images say all.
    no_devices=("NVIDIA_VISIBLE_DEVICES", "void"),
)
AMD = Vendor(
    name="AMD", domain="amd.com",
    # cmd/k8s-device-plugin getResourceList: gpu; resource_naming_strategy mixed on partitioned GPUs:
    # <compute>_<memory> partition (internal/pkg/amdgpu UniquePartitionConfigCount), e.g. cpx_nps4.
    resources=(r"gpu", r"[a-z]+px_nps[0-9]+"),
    forms="amd.com/gpu, amd.com/<compute>_<memory> partitions such as amd.com/cpx_nps4",
    variables=(
        Channel("AMD_VISIBLE_DEVICES", "ROCm/container-toolkit internal/oci/oci.go getAMDEnv (amd-container-runtime)"),
        Channel("DOCKER_RESOURCE_", "ROCm/container-toolkit internal/oci/oci.go getAMDEnv", prefix=True),
        Channel("ROCR_VISIBLE_DEVICES", "ROCm docs, environment variables (ROCr runtime)", mounts=False),
        Channel("HIP_VISIBLE_DEVICES", "ROCm docs, HIP environment variables", mounts=False),
        Channel("GPU_DEVICE_ORDINAL", "ROCm docs, environment variables (OpenCL and HIP)", mounts=False),
    ),
)
INTEL_GAUDI = Vendor(
    name="Intel Gaudi", domain="habana.ai",
    # main.go "habana.ai/" + hlml.GetDeviceTypeName(); gohlml getDeviceName: goya, gaudi (Gaudi 1, 2 and 3), greco.
    resources=(r"gaudi", r"goya", r"greco"),
    forms="habana.ai/gaudi (Gaudi 1, 2 and 3), habana.ai/goya, habana.ai/greco",
    # The runtime matches HasPrefix on NAME=value (specs.go getRequestedDevicesFromEnv): HABANA_VISIBLE_DEVICES_X
    # counts too.
    variables=(
        Channel("HABANA_VISIBLE_DEVICES", "HabanaAI/gaudi-container-runtime 1.24 specs.go filterDevicesByENV",
                prefix=True),
        Channel("HABANA_VISIBLE_MODULES", "HabanaAI/gaudi-container-runtime 1.24 specs.go filterDevicesByENV",
                prefix=True),
        Channel("HABANA_VISIBLE_PCI_BUS_IDS", "HabanaAI/gaudi-container-runtime 1.24 specs.go filterDevicesByENV",
                prefix=True),
        Channel("HL_VISIBLE_DEVICES", "HabanaAI/habanalabs-k8s-device-plugin server.go Allocate", mounts=False,
                prefix=True),
    ),
    # The hook reads unset, empty and void as every device (container_config.go getDevicesFromEnvvar), and Intel's
    # images set HABANA_VISIBLE_DEVICES=all: no value a policy can set hides the Gaudis.
    image_default=("an image that sets HABANA_VISIBLE_DEVICES (Intel's images say all) shows a container that "
                   "requests no Gaudi every Gaudi of its node, and the Habana runtime has no value meaning none: run "
                   "the habana container runtime in cdi mode (or with mount_accelerators and mount_uverbs off) on "
                   "the Gaudi nodes"),
)
INTEL_GPU = Vendor(
    name="Intel GPU", domain="gpu.intel.com",
    # cmd/gpu_plugin/gpu_plugin.go deviceTypeI915, deviceTypeXe, deviceTypeDxg (the monitoring resources reach
    # every GPU of a node and are no class's).
    resources=(r"i915", r"xe", r"dxg"),
    forms="gpu.intel.com/i915, gpu.intel.com/xe, gpu.intel.com/dxg",
    variables=(Channel("ZE_AFFINITY_MASK", "intel-device-plugins-for-kubernetes cmd/gpu_plugin "
                       "levelzeroAffinityMaskEnvVar", mounts=False),),
)
VENDORS = (NVIDIA, AMD, INTEL_GAUDI, INTEL_GPU)
VENDOR_BY_DOMAIN = {vendor.domain: vendor for vendor in VENDORS}
# Pod annotations a container runtime (containerd, CRI-O) or an NRI plugin injects devices from, whatever the
# vendor: the CDI standard's (tags.cncf.io/container-device-interface annotations.go), NRI's device injectors, and
# CRI-O's own.
RUNTIME_ANNOTATIONS = (
    Channel("cdi.k8s.io", "container-device-interface pkg/cdi/annotations.go AnnotationPrefix"),
    Channel("cdi-devices.nri.io", "containerd/nri plugins device-injector"),
    Channel("devices.nri.io", "containerd/nri plugins device-injector"),
    Channel("cdi.nri.io", "containerd/nri plugins device-injector"),
    Channel("devices.noderesource.dev", "containerd/nri plugins device-injector"),
    Channel("io.kubernetes.cri-o.Devices", "cri-o pkg/annotations DevicesAnnotation"),
)


def vendors(inventory: Inventory) -> tuple[Vendor, ...]:
    """The known vendors whose domain a class's resource is under, in VENDORS' order."""
    domains = {domain(name) for name in resources(inventory)}
    return tuple(v for v in VENDORS if v.domain in domains)


def advertised(name: str) -> bool | None:
    """Whether `name` is a resource its vendor's device plugin advertises; None when gpugen knows no vendor of
    its domain."""
    known = VENDOR_BY_DOMAIN.get(domain(name))
    if known is None:
        return None
    resource_name = name.partition("/")[2]
    return any(re.fullmatch(pattern, resource_name) for pattern in known.resources)


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
    """The MIG profile of a mixed-strategy resource, time-sliced or not (nvidia.com/mig-1g.10gb and
    nvidia.com/mig-1g.10gb.shared -> 1g.10gb), else None."""
    if not resource.startswith(MIG_PREFIX):
        return None
    return resource[len(MIG_PREFIX):].removesuffix(SHARED_SUFFIX)


def shared_name(resource: str) -> bool:
    """Whether the name is one the NVIDIA device plugin gives a time-sliced (or MPS-shared) resource."""
    return domain(resource) == NVIDIA.domain and resource.endswith(SHARED_SUFFIX)


def kind(gpu_class: GpuClass) -> Kind:
    """What one unit is: a MIG slice (time-sliced or not: its timeSlicing says), a time-slice of a GPU, a whole
    GPU, or another vendor's device."""
    accelerator = gpu_class.accelerator
    if mig_profile(accelerator.resource) is not None:
        return "mig"
    if accelerator.timeSlicing is not None:
        return "time-sliced"
    return "gpu" if accelerator.resource in (NVIDIA_GPU, "amd.com/gpu") else "other"


def domain(resource: str) -> str:
    """The domain of a resource: nvidia.com, amd.com, habana.ai, ..."""
    return resource.partition("/")[0]


def resource(gpu_class: GpuClass) -> str:
    return gpu_class.accelerator.resource


def resources(inventory: Inventory) -> list[str]:
    """Every class's resource, once each, in the inventory's order of classes sorted by name (the order the
    ClusterQueues cover them in)."""
    return list(dict.fromkeys(gpu_class.accelerator.resource for _, gpu_class in sorted(inventory.classes.items())))


def unguarded(inventory: Inventory) -> list[str]:
    """What the guardrails cannot refuse for the inventory's accelerators, one sentence each (`render` says them):
    a class whose device plugin gpugen does not know, and what a known vendor's images can do unseen."""
    notes = [f"class {name} requests {c.accelerator.resource}, whose device plugin gpugen does not know "
             "(accelerator.unknownVendor): it cannot check that the plugin advertises that name, nor refuse the "
             "variables, mounts and annotations through which its container runtime could give a container devices "
             "it did not request" for name, c in sorted(inventory.classes.items()) if c.accelerator.unknownVendor]
    return notes + [f"{vendor.name} classes: {vendor.image_default}" for vendor in vendors(inventory)
                    if vendor.image_default]


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
        return f"time-slice of a {profile} MIG slice" if accelerator.timeSlicing is not None else f"{profile} MIG slice"
    if accelerator.timeSlicing is not None:
        return "GPU time-slice"
    if accelerator.resource == "habana.ai/gaudi":
        return "Gaudi card"
    return "GPU"


def unit_plural(gpu_class: GpuClass) -> str:
    """`GPUs`, `1g.10gb MIG slices`, `time-slices of a 1g.10gb MIG slice`; a unit in the inventory's own words:
    `units of <unit>`."""
    if gpu_class.accelerator.unit:
        return f"units of {gpu_class.accelerator.unit}"
    name = unit(gpu_class)
    head, of, rest = name.partition(" of ")
    return f"{head}s{of}{rest}" if of else name + "s"


def counted(gpu_class: GpuClass, count: int | str) -> str:
    """`1 GPU`, `7 1g.10gb MIG slices`; a unit in the inventory's own words is counted as `7 x <unit>`."""
    if str(count) == "1":
        return f"1 {unit(gpu_class)}"
    if gpu_class.accelerator.unit:
        return f"{count} x {gpu_class.accelerator.unit}"
    return f"{count} {unit_plural(gpu_class)}"


def sdk_name(gpu_class: GpuClass) -> str:
    """The key (quoted, as Python) a researcher writes in the Kubeflow SDK's resources_per_node for the class's
    resource: the SDK 0.5 maps "gpu" to nvidia.com/gpu and "mig-<profile>" to nvidia.com/mig-<profile>, and
    passes other names through (kubeflow/trainer/backends/kubernetes/utils.py, get_resources_per_node)."""
    name = gpu_class.accelerator.resource
    if name == NVIDIA_GPU:
        return '"gpu"'
    if name.startswith(MIG_PREFIX):
        return f'"{name.removeprefix(NVIDIA.domain + "/")}"'
    return f'"{name}"'


def trainer_counts_as_gpus(resource_name: str) -> bool:
    """Whether Trainer's torch plugin counts the resource as GPUs and lets torchrun pick one process per visible
    device (pkg/runtime/runtime.go numGPU: the lower-cased name contains "gpu"); otherwise it starts one process
    per requested CPU, and the platform sets the count (builders/kyverno.py trainjob-processes)."""
    return "gpu" in resource_name.lower()
