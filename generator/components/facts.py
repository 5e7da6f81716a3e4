"""The shape every component folder fills (generator/components/<name>/__init__.py: FACTS): what gpugen needs
to know about an upstream controller it installs from its Helm chart or adopts, its optional parts (CRDs, webhooks,
metrics, tools, a simulated run, inventory settings, Helm values) simply left out when it has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from generator import versions
from generator.kinds import ApiGroup

ApiKind = dict[str, str]  # {"group": ..., "kind": ...}, as an AppProject's resource whitelists write it
# A cluster's role in a platform of several clusters (inventory clusters:).
Role = Literal["manager", "worker"]

CRD = {"group": "apiextensions.k8s.io", "kind": "CustomResourceDefinition"}
RBAC_CLUSTER_KINDS = ({"group": "rbac.authorization.k8s.io", "kind": "ClusterRole"},
                      {"group": "rbac.authorization.k8s.io", "kind": "ClusterRoleBinding"})
WEBHOOKS = ({"group": "admissionregistration.k8s.io", "kind": "MutatingWebhookConfiguration"},
            {"group": "admissionregistration.k8s.io", "kind": "ValidatingWebhookConfiguration"})
NAMESPACED_BASICS = (*({"group": "", "kind": kind} for kind in ("ConfigMap", "Service", "ServiceAccount")),
                     {"group": "apps", "kind": "Deployment"},
                     {"group": "rbac.authorization.k8s.io", "kind": "Role"},
                     {"group": "rbac.authorization.k8s.io", "kind": "RoleBinding"})
SECRET = {"group": "", "kind": "Secret"}
# What stops while an admission controller is down (ComponentFacts.when_down).
WEBHOOKS_DOWN = "Its admission webhooks refuse or time out, so jobs are refused."


@dataclass(frozen=True)
class MetricsEndpoint:
    """Where the chart's controllers serve Prometheus metrics: the labels of the metrics Services (all of them
    when there are several), the Service port's name, and its scheme. controller-runtime's https endpoints
    authorize the scraper with a SubjectAccessReview of GET /metrics; Kyverno's http ones do not."""

    service_labels: tuple[tuple[str, str], ...]
    port: str
    scheme: str


@dataclass(frozen=True)
class ChartDependency:
    """A chart the component's chart depends on, laid out as `helm dependency build` would from the Go module that
    ships it (simulation/charts.py): at `pin`, or with no pin at the version the component's own module requires."""

    name: str
    module: str
    path: str  # the chart's folder in that module
    pin: str | None = None


@dataclass(frozen=True)
class Chart:
    """An upstream Helm chart: where Argo CD pulls it from, where a pinned Go module ships it (when one does), and
    the kinds it renders (checked against `helm template` of the pinned charts; Helm hooks other than pre/post-
    install/upgrade, such as Kyverno's test Pods and pre-delete Jobs, are ignored by Argo CD)."""

    repo_url: str  # Argo CD's source.repoURL (an OCI registry path for OCI charts: no scheme)
    oci: bool
    name: str
    version_pin: str  # key in versions.env
    cluster_kinds: tuple[ApiKind, ...]
    namespaced_kinds: tuple[ApiKind, ...]
    # The Go module that ships the chart unpackaged, at the app version: the one source of charts this project's
    # machines reach. None: the chart comes only from repo_url (a Helm repository or an OCI registry), and the
    # chart tier and the simulations cannot render it (`render` warns, CONTRIBUTING.md "Adding a component").
    module: str | None = None
    # The pin of the version the module is read at (its controller's, the images'); None: the chart's version.
    app_version_pin: str | None = None
    # The chart's folder in the module; None: charts/<name>.
    path: str | None = None
    # Secrets the chart renders and the controller then fills with its webhook certificate (the name its
    # Configuration gives the cert manager): Argo CD must neither report nor undo that.
    cert_secrets: tuple[str, ...] = ()
    # Read from the chart's Services as rendered with the release name below (checked by the chart tier).
    metrics: MetricsEndpoint | None = None
    # Enabled dependencies no packaged chart carries here: the chart comes unpackaged from its module.
    dependencies: tuple[ChartDependency, ...] = ()

    def folder(self) -> str:
        """The chart's folder in its module."""
        return self.path or f"charts/{self.name}"


@dataclass(frozen=True)
class Tool:
    """A program of the component that tools/build.sh builds from its Go module at the component's app version
    (chart.app_version_pin), into ~/.cache/gpugen/bin/<name>-<version>."""

    name: str
    # The module and the main package's import path; None: tools/build.sh's build_tool has a recipe of its own.
    module: str | None = None
    package: str = ""
    ldflags: str = "-s -w"  # {KEY}: the value of KEY in versions.env
    optional: bool = False  # built only when named (tools/build.sh TOOL): CI and `make tools` leave it out


@dataclass(frozen=True)
class Process:
    """A Deployment of the chart that the simulation runs as a process of one of the component's tools, with the
    arguments and environment of the Deployment's container (simulation/pods.py)."""

    deployment: str  # the end of the Deployment's name as the chart renders it under `release`
    tool: str
    # Flags naming the host to listen on: the tool binds every interface unless given the pod's address.
    host_flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # what the simulation adds to the container's environment


@dataclass(frozen=True)
class Simulation:
    """How the simulated clusters run the component (simulation/): the rest of its chart is applied as Argo CD
    would, its Deployments' pods run by the pod runtime."""

    processes: tuple[Process, ...]
    # The chart's other Deployments, and why they are not run: their pods are marked Ready.
    not_run: tuple[tuple[str, str], ...] = ()
    # Images of the chart's hook Jobs that the pod runtime runs: the image's last path segment, and the tool.
    hook_images: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class NotSimulated:
    """A component the simulated clusters do not run, and why (a device plugin with no device to find, a chart no
    pinned module ships): the simulations leave its Application out, and say so."""

    why: str


@dataclass(frozen=True)
class ValuesContext:
    """What a chart's Helm values may read of the cluster they are rendered for (built by builders/bootstrap.py)."""

    settings: Any  # the component's own settings, cluster.components.<name> (its folder's Settings, or Component)
    app_version: str  # its pinned app version (chart.app_version_pin): the images' tag
    role: Role | None  # its cluster's role in a platform of several clusters; None: a platform of one cluster
    research_namespaces: tuple[str, ...]
    monitoring: bool  # the platform's controllers are scraped (cluster.monitoring)
    fair_sharing: bool  # groups borrow and reclaim under fair sharing (cluster.queueing.fairSharing)


@dataclass(frozen=True)
class ComponentFacts:
    name: str  # key under cluster.components; suffix of its Application and AppProject; its folder's name
    default_namespace: str  # where its upstream installation puts it
    needs: str  # what the rendered tree needs from it
    chart: Chart
    # Helm release name: it names the chart's objects, service accounts included.
    release: str
    # Argo CD sync wave of its Application in the app-of-apps: CRDs and webhooks before what uses them.
    wave: str
    # The service account the chart runs the controller as (serviceAccountName of its Deployment, under
    # `release`), when the policies must recognise that controller's requests; None when they need not.
    service_account: str | None = None
    # The API groups of its CRDs that the platform uses, at the version it uses (generator/kinds.py's, or the
    # folder's own): discovery must serve them before a tree is applied.
    api_groups: tuple[ApiGroup, ...] = ()
    # Its CRDs in its Go module at the app version (chart.module, chart.app_version_pin): globs relative to the
    # module's root, for the validation tiers' schemas and API servers (tools/crds.sh).
    crds: tuple[str, ...] = ()
    tools: tuple[Tool, ...] = ()
    # How the simulated clusters run it, or why they do not (none given: the completeness test fails).
    simulation: Simulation | NotSimulated | None = None
    # What stops for researchers while its controller is down: the description of the alert on its metrics
    # targets (required with chart.metrics).
    when_down: str | None = None
    # Namespaces beyond its own that its chart writes into, on each cluster it is installed on (its AppProject's
    # destinations).
    other_namespaces: tuple[str, ...] = ()
    # Its own fields under cluster.components.<name>: a subclass of generator.fields.Component (its folder's
    # settings.py); None: the fields every component has.
    settings: type | None = None
    # The chart's Helm values for a cluster (its folder's values.py); None: the chart's defaults.
    values: Callable[[ValuesContext], Mapping[str, Any]] | None = None

    def chart_version(self) -> str:
        return versions.pins()[self.chart.version_pin]

    def app_version_pin(self) -> str:
        return self.chart.app_version_pin or self.chart.version_pin

    def app_version(self) -> str:
        return versions.pins()[self.app_version_pin()]

    def simulated(self) -> Simulation | None:
        """How the simulations run it; None when they do not."""
        return self.simulation if isinstance(self.simulation, Simulation) else None

    def tool_lines(self) -> list[str]:
        """Its tools as tools/tools.list writes a tool (name, pin, `optional`), then for a tool built from data its
        module, package and ldflags (tools/common.sh)."""
        lines = []
        for tool in self.tools:
            line = f"{tool.name} {self.app_version_pin()} {'optional' if tool.optional else 'required'}"
            if tool.module:
                line += f" {tool.module} {tool.package} {tool.ldflags.format(**versions.pins())}"
            lines.append(line)
        return lines

    def crd_line(self) -> str:
        """Its CRDs as tools/crds.sh copies them: module, version, globs."""
        assert self.chart.module, f"{self.name}: CRDs are read from the chart's module, and it names none"
        return " ".join((self.chart.module, self.app_version(), *self.crds))
