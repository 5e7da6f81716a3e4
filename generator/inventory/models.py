"""The inventory schema: what a platform engineer may write in gpu_classes.yaml.

Strict on purpose: unknown keys are errors (a typo must not silently drop a setting), and no type coercion
(a label value written `yes` is a YAML 1.1 boolean, not the string "yes").
Rules that span several objects live in rules.py.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, create_model

from generator.components import COMPONENTS
from generator.inventory import accelerators, duration, servers
from generator.fields import (Component, Description, DnsLabel, FreeText, GroupDescription, ImageRef, Strict,
                                      Unit)
from generator.inventory.quantity import INT64_MAX, parse_quantity
from generator.limits import DNS1123_SUBDOMAIN, label_key_problem, label_value_problem


def _label_key(key: str) -> str:
    problem = label_key_problem(key)
    if problem:
        raise ValueError(problem)
    return key


def _label_value(value: str) -> str:
    problem = label_value_problem(value)
    if problem:
        raise ValueError(f"label value {value!r}: {problem}")
    return value


def _quantity(value: str | int) -> str:
    text = str(value)
    if parse_quantity(text) < 0:
        raise ValueError(f"{text!r} is negative: quotas and capacities cannot be")
    return text


def _not_a_float(value: object) -> object:
    # YAML reads an unquoted 1.5 as a float, which cannot hold every quantity exactly: ask for the string.
    if isinstance(value, float):
        raise ValueError(f"{value!r} was read as a YAML float: quote it (\"{value!r}\"), quantities are strings")
    return value


def _duration(text: str) -> str:
    total = duration.seconds(text)
    if total == 0:
        raise ValueError(f"{text!r} is zero: a duration must be at least 1s")
    if total > duration.MAX_SECONDS:
        raise ValueError(f"{text!r} is {total} seconds, more than Kubernetes' int32 seconds fields hold "
                         f"({duration.show(duration.MAX_SECONDS)})")
    return text


def _weight(value: str | int) -> str:
    text = str(value)
    # Kueue: a weight of 0 means "always last"; otherwise it must exceed 10^-9.
    number = parse_quantity(text)
    if number != 0 and number <= parse_quantity("1n"):
        raise ValueError(f"{text!r}: a weight is 0 or more than 1n (Kueue's smallest)")
    return text


def _identity(name: str) -> str:
    # system: names belong to Kubernetes itself (system:authenticated would hand a namespace to every user).
    if name.startswith("system:"):
        raise ValueError(f"{name!r}: names starting with 'system:' are Kubernetes' own identities, not researchers")
    return name


def _api_server(url: str) -> str:
    servers.parse(url)  # the port in range, the host a DNS name or an address
    return url


def _absolute_path(path: str) -> str:
    if not path.startswith("/") or "//" in path or (path != "/" and path.endswith("/")):
        raise ValueError(f"{path!r} must be an absolute path without a trailing '/'")
    return path


DnsSubdomain = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
LabelKey = Annotated[str, AfterValidator(_label_key)]
LabelValue = Annotated[str, AfterValidator(_label_value)]
# int for `cpu: 72`; str for `memory: 480Gi` or `cpu: 500m`.
Quantity = Annotated[str | int, Field(union_mode="left_to_right"), BeforeValidator(_not_a_float),
                     AfterValidator(_quantity)]
AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
Identity = Annotated[str, StringConstraints(min_length=1), AfterValidator(_identity)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
Duration = Annotated[str, StringConstraints(pattern=duration.PATTERN), AfterValidator(_duration)]
Weight = Annotated[str | int, Field(union_mode="left_to_right"), BeforeValidator(_not_a_float),
                   AfterValidator(_quantity), AfterValidator(_weight)]
# Counts reach Kubernetes as int64 quantities (quotas, capacity), so none may exceed the largest int64; the
# fields Kubernetes or Trainer hold in an int32 (a priority's value, numNodes) use INT32_MAX.
INT32_MAX = 2**31 - 1
Count = Annotated[int, Field(ge=0, le=INT64_MAX)]
Positive = Annotated[int, Field(ge=1, le=INT64_MAX)]


class VolumeClaim(Strict):
    claimName: DnsSubdomain
    mountPath: AbsolutePath


class Storage(Strict):
    """PVCs mounted into every Job pod in a research namespace (home at /personal)."""

    home: VolumeClaim
    workspace: VolumeClaim


# Enough for the largest platform this project measures (docs/scale.md) many times over.
MAX_GROUP_APPLICATIONS = 512


class GitOps(Strict):
    """Where Argo CD finds the rendered tree."""

    repoURL: Annotated[str, StringConstraints(min_length=1)]
    targetRevision: Annotated[str, StringConstraints(min_length=1)]
    path: Annotated[str, StringConstraints(min_length=1)] = "rendered"
    applicationName: DnsSubdomain
    applicationNamespace: DnsLabel = "argocd"
    # Where the rendered bootstrap/ tree lives in the repository (the app-of-apps syncs <bootstrapPath>/platform).
    bootstrapPath: Annotated[str, StringConstraints(min_length=1)] = "bootstrap"
    # A platform too large for one Application (docs/scale.md): the groups' objects in this many Applications, a
    # group's by a hash of its name (<path>/groups-<k>), beside the platform's shared objects (<path>/platform).
    # Unset: one Application syncs the whole tree. Changing it moves groups between Applications: plan says which.
    groupApplications: Annotated[int, Field(ge=1, le=MAX_GROUP_APPLICATIONS)] | None = None


class ChartMirror(Strict):
    """An OCI registry that holds every component's chart (an air-gapped site's mirror): the component
    Applications pull `<url>/<chart>` from it instead of the charts' upstream repositories."""

    # Argo CD's form for OCI Helm repositories: host[:port]/path, no scheme.
    url: Annotated[str, StringConstraints(pattern=r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$")]
    # The registry speaks plain HTTP (Argo CD's insecureOCIForceHttp): only for a registry on a trusted network.
    plainHTTP: bool = False


# One field per component whose controller the policies recognise (its facts' service_account), and Kubernetes' Job
# controller.
Controllers = create_model(
    "Controllers", __base__=Strict, __module__=__name__,
    __doc__="""Identities (request.userInfo.username) of the controllers that policies must let through.

    Unset: the service account the installed component's chart runs its controller as, in the component's
    namespace. Set them when adopting an installation that runs under other service accounts.
    """,
    **{name: (str | None, None) for name, facts in COMPONENTS.items() if facts.service_account},
    job=(str, "system:serviceaccount:kube-system:job-controller"))


# The model of each component's settings.
_COMPONENT_SETTINGS: dict[str, type[Component]] = {name: facts.settings or Component
                                                   for name, facts in COMPONENTS.items()}


class _ComponentsBase(Strict):
    def by_name(self) -> dict[str, Component]:
        """Every component's settings, in the component table's (install) order."""
        return {name: getattr(self, name) for name in COMPONENTS}


def _component_field(name: str, default_namespace: str) -> tuple[type[Component], Component]:
    model = _COMPONENT_SETTINGS.get(name, Component)
    return model, model(namespace=default_namespace)


# One field per row of the component table, defaulting to the component's upstream namespace.
Components = create_model(
    "Components", __base__=_ComponentsBase, __module__=__name__,
    __doc__="""The controllers the rendered tree needs, each in the namespace of its upstream installation.

    JobSet goes beside Trainer in kubeflow-system, where Trainer's own chart would put it, so the controller
    identities in `controllers` stay those of the upstream installation.
    """,
    **{name: _component_field(name, facts.default_namespace) for name, facts in COMPONENTS.items()})


def _own_component(name: str, default_namespace: str) -> type[Component]:
    # The namespace needs no value here: a cluster's setting takes the platform's for every field it leaves out.
    return create_model(f"Own{_COMPONENT_SETTINGS.get(name, Component).__name__}",
                        __base__=_COMPONENT_SETTINGS.get(name, Component), __module__=__name__,
                        namespace=(DnsLabel, default_namespace))


# One optional field per row of the component table.
ClusterComponents = create_model(
    "ClusterComponents", __base__=Strict, __module__=__name__,
    __doc__="""One cluster's own component settings (several clusters): each field given here replaces that of
    cluster.components on this cluster alone; what is left out is the platform's.""",
    **{name: (_own_component(name, facts.default_namespace) | None, None) for name, facts in COMPONENTS.items()})


class Queueing(Strict):
    """How research groups share a cohort's GPUs."""

    # Kueue's fair sharing: a cohort's idle quota goes to the group with the lowest weighted share of what it
    # borrows, and a group reclaiming its own quota preempts the borrower with the highest share first.
    fairSharing: bool = True
    # A finished job (and its pods) is deleted this long after it ends: a plain Job by its ttlSecondsAfterFinished
    # (unless it sets its own), a TrainJob by the DeletingPolicy finished-trainjobs.
    finishedJobTTL: Duration = "7d"
    # The longest terminationGracePeriodSeconds a job's pods may ask for: a preempted or reclaimed job gives its
    # GPUs back at most this long after Kueue stops it.
    maxGracePeriod: Duration = "5m"


class Monitoring(Strict):
    """What gpugen renders for the site's Prometheus Operator and Grafana (README, "Monitoring and accounting").

    Unset: nothing. Set: PrometheusRules (recording rules and alerts per group and class, platform health) and,
    unless `scrape` is none, a ServiceMonitor per controller; the Prometheus Operator's CRDs must be installed.
    """

    # serviceMonitors: a ServiceMonitor for each installed controller's metrics Service. none: the site scrapes
    # the controllers its own way (the recording rules and alerts expect Kueue's metrics all the same).
    scrape: Literal["serviceMonitors", "none"] = "serviceMonitors"
    # Where the ServiceMonitors, PrometheusRules and dashboards go (they select the controllers' namespaces).
    namespace: DnsLabel = "monitoring"
    # The service account the site's Prometheus scrapes as, in `namespace`: granted GET on the controllers'
    # authorizing /metrics endpoints.
    prometheusServiceAccount: DnsSubdomain = "prometheus-k8s"
    # Labels the site's Prometheus selects monitors and rules by (kube-prometheus-stack: release: <its release>).
    selectorLabels: dict[LabelKey, LabelValue] = {}
    scrapeInterval: Duration = "30s"
    # Grafana dashboards as ConfigMaps labelled for Grafana's dashboard sidecar (label and value below).
    dashboards: bool = True
    dashboardLabel: LabelKey = "grafana_dashboard"
    dashboardLabelValue: LabelValue = "1"
    # The cluster runs NVIDIA's DCGM exporter: the dashboards add its GPU panels per class.
    dcgmExporter: bool = False
    # The runbooks page the alerts link to (each alert adds #its-name): unset, docs/monitoring.md in the GitOps
    # repository's web view (repoURL without .git, /blob/<targetRevision>/).
    runbookURL: Annotated[str, StringConstraints(pattern=r"^https?://[^\s#]+$")] | None = None


class Cluster(Strict):
    name: DnsLabel
    gpuClassLabel: LabelKey
    storage: Storage
    cacheEnv: dict[EnvName, FreeText]
    gitops: GitOps
    controllers: Controllers = Controllers()
    components: Components = Components()
    chartMirror: ChartMirror | None = None
    # Render each research namespace as a Namespace (Pod Security: baseline enforced, restricted warned) that
    # Argo CD never prunes or deletes. false: namespaces are made elsewhere and only referenced.
    createNamespaces: bool = True
    queueing: Queueing = Queueing()
    monitoring: Monitoring | None = None


class PlatformCluster(Strict):
    """One cluster of a platform that spans several (docs/multi-cluster.md): the manager admits and dispatches
    jobs (Kueue's MultiKueue), each worker runs the GPU classes that name it."""

    role: Literal["manager", "worker"]
    # Its API server, as Argo CD and MultiKueue reach it (a path for servers behind a proxy such as Rancher's).
    server: Annotated[str, StringConstraints(pattern=servers.PATTERN), AfterValidator(_api_server)]
    # What this cluster does differently from cluster.components: a component it already runs (install: false,
    # existing: true), one in another namespace.
    components: ClusterComponents | None = None


class Toleration(Strict):
    key: LabelKey | None = None
    operator: Literal["Equal", "Exists"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    tolerationSeconds: Annotated[int, Field(ge=-INT64_MAX - 1, le=INT64_MAX)] | None = None  # an int64


class NodeResources(Strict):
    """Allocatable resources of ONE node of a class (kubectl get node -o jsonpath='{.status.allocatable}');
    gpus counts the class's accelerator resource (whole GPUs, MIG slices, time-slices, ...)."""

    gpus: Positive
    cpu: Quantity
    memory: Quantity
    pods: Positive = 110


def _extended_resource(name: str) -> str:
    problem = accelerators.extended_resource_problem(name)
    if problem:
        raise ValueError(problem)
    profile = accelerators.mig_profile(name)
    if profile is not None and not accelerators.MIG_PROFILE.fullmatch(profile):
        raise ValueError(f"{name!r}: {profile!r} is not a MIG profile as the device plugin names it "
                         "(<slices>g.<memory>gb, then .me, .me.all, .gfx or -me, then .shared when time-sliced; e.g. "
                         "nvidia.com/mig-1g.10gb or nvidia.com/mig-3g.40gb)")
    return name


class TimeSlicing(Strict):
    """The device plugin shares each GPU of the class's nodes between `replicas` pods in turn (its
    sharing.timeSlicing): perNode.gpus counts the shares, GPUs x replicas."""

    replicas: Annotated[int, Field(ge=2, le=INT32_MAX)]
    # The device plugin's own setting of the same name: true, a container asking for more than one share is refused
    # at submission, not by the node after Kueue admitted it. Unset means true, NVIDIA's recommendation: more
    # shares are no more of a GPU. false only where the plugin's is false and jobs may hold several shares.
    failRequestsGreaterThanOne: bool = True


class Accelerator(Strict):
    """The extended resource a pod of the class requests, one unit of which perNode.gpus and the allocations'
    gpus count: a whole NVIDIA GPU (nvidia.com/gpu, the default), a MIG profile (nvidia.com/mig-1g.10gb), a
    time-sliced share (nvidia.com/gpu.shared, with timeSlicing), amd.com/gpu, habana.ai/gaudi, or any vendor's."""

    resource: Annotated[str, AfterValidator(_extended_resource)] = accelerators.NVIDIA_GPU
    # What one unit is, in the report and on the users' page ("1g.10gb slice of an A100"); unset: derived from
    # the resource (GPU, 1g.10gb MIG slice, GPU time-slice, Gaudi card).
    unit: Unit | None = None
    timeSlicing: TimeSlicing | None = None
    # true: a device plugin gpugen does not know advertises the resource (another vendor's, or one named otherwise
    # than its vendor's plugin names it). gpugen then checks its name's grammar alone, and `render` says what the
    # guardrails cannot refuse for it. Needed for any resource outside accelerators.VENDORS' advertised names.
    unknownVendor: bool = False


class Walltime(Strict):
    """How long a job may run once admitted (Kueue's maximum execution time): `default` for a job that names
    none, `maximum` for the most a job may ask for with kueue.x-k8s.io/max-exec-time-seconds."""

    default: Duration
    maximum: Duration


class GpuClass(Strict):
    description: Description = ""
    arch: Literal["arm64", "amd64"]
    nodeSelector: dict[LabelKey, LabelValue] = Field(min_length=1)
    flavor: DnsSubdomain | None = None
    image: ImageRef
    # What a pod requests to get the class's accelerator: unset, whole NVIDIA GPUs (nvidia.com/gpu).
    accelerator: Accelerator = Accelerator()
    nodes: Positive
    perNode: NodeResources
    tolerations: list[Toleration] = []
    numNodes: Annotated[int, Field(ge=1, le=INT32_MAX)] = 1  # Trainer's mlPolicy.numNodes
    walltime: Walltime = Walltime(default="24h", maximum="7d")
    # The worker that runs the class, when the inventory declares clusters.
    cluster: DnsLabel | None = None


class ResourceAmounts(Strict):
    """A partial set of resources, for borrowing and lending limits (unset = no limit)."""

    gpus: Count | None = None
    cpu: Quantity | None = None
    memory: Quantity | None = None
    pods: Count | None = None


class Allocation(Strict):
    """A group's nominal quota on one class, gpus in the class's accelerator unit. pods defaults to the class's
    pods per unit times gpus."""

    gpus: Count
    cpu: Quantity
    memory: Quantity
    pods: Count | None = None
    borrowingLimit: ResourceAmounts | None = None
    lendingLimit: ResourceAmounts | None = None


class Identities(Strict):
    """A research group's members as the API server authenticates them, each bound to the researcher role in
    the group's namespaces.

    groups: group names as the API server sees them (OIDC groups claim with --oidc-groups-prefix, e.g.
    "oidc:vision-lab"; or a client certificate's O); users: user names (OIDC username claim with its prefix).
    """

    groups: list[Identity] = []
    users: list[Identity] = []


class GroupWalltime(Strict):
    """A group's own walltime on one class; an unset field keeps the class's."""

    default: Duration | None = None
    maximum: Duration | None = None


class Group(Strict):
    description: GroupDescription = ""
    namespaces: list[DnsLabel] = Field(min_length=1)
    identities: Identities = Identities()
    cohort: DnsSubdomain | None = None
    # Whether the group takes back its lent quota by preempting borrowers in its cohort: Any (at once, whatever
    # their priority), LowerPriority (only lower-priority borrowers), Never (it waits until they end).
    reclaimWithinCohort: Literal["Never", "LowerPriority", "Any"] = "Any"
    # Whether a job of the group preempts the group's own running jobs of lower priority to fit in its quota.
    preemptWithinGroup: Literal["Never", "LowerPriority"] = "LowerPriority"
    # Fair-sharing weight (cluster.queueing.fairSharing): a higher weight gets more of the cohort's idle quota.
    weight: Weight = "1"
    # The priority classes the group's jobs may name; unset: every one in `priorities`.
    priorities: list[DnsSubdomain] | None = None
    # The priority of a job that names none; unset: the one marked default in `priorities`.
    defaultPriority: DnsSubdomain | None = None
    walltime: dict[str, GroupWalltime] = {}
    allocations: dict[str, Allocation] = Field(min_length=1)


class Priority(Strict):
    """A Kueue WorkloadPriorityClass: a job names it with the label kueue.x-k8s.io/priority-class."""

    value: Annotated[int, Field(ge=-INT32_MAX - 1, le=INT32_MAX)]
    description: Annotated[Description, StringConstraints(max_length=2048)] = ""
    # The priority of a job that names none (a group's defaultPriority overrides it).
    default: bool = False


class Inventory(Strict):
    cluster: Cluster
    # Several clusters, by name; none: the one cluster above (docs/multi-cluster.md).
    clusters: dict[DnsLabel, PlatformCluster] | None = None
    classes: dict[DnsLabel, GpuClass] = Field(min_length=1)
    # Kueue WorkloadPriorityClasses, by name; none: every job has priority 0.
    priorities: dict[DnsSubdomain, Priority] = {}
    groups: dict[DnsSubdomain, Group] = Field(min_length=1)


def json_schema() -> dict:
    """The inventory's JSON Schema, for editors (yaml-language-server) and other tools."""
    schema = Inventory.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "gpugen inventory (gpu_classes.yaml)", **{k: v for k, v in schema.items() if k != "title"}}
