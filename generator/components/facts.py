"""The shape every component folder fills (generator/components/<name>/__init__.py: FACTS): what gpugen needs
to know about an upstream controller it installs from its Helm chart or adopts.

Only the standard library and the other facts modules here: the tool scripts read these facts with the system's
python3 (`python3 -m generator.components`), before any virtualenv exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    """An upstream Helm chart: where Argo CD pulls it from, where the pinned Go module ships it, and the kinds
    it renders (checked against `helm template` of the pinned charts; Helm hooks other than pre/post-install/
    upgrade, such as Kyverno's test Pods and pre-delete Jobs, are ignored by Argo CD)."""

    repo_url: str  # Argo CD's source.repoURL (an OCI registry path for OCI charts: no scheme)
    oci: bool
    name: str
    version_pin: str  # key in versions.env
    module: str  # Go module shipping charts/<name> at the app version
    app_version_pin: str
    cluster_kinds: tuple[ApiKind, ...]
    namespaced_kinds: tuple[ApiKind, ...]
    # Secrets the chart renders and the controller then fills with its webhook certificate (the name its
    # Configuration gives the cert manager): Argo CD must neither report nor undo that.
    cert_secrets: tuple[str, ...] = ()
    # Read from the chart's Services as rendered with the release name below (checked by the chart tier).
    metrics: MetricsEndpoint | None = None
    # Enabled dependencies no packaged chart carries here: the chart comes unpackaged from its module.
    dependencies: tuple[ChartDependency, ...] = ()


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
    # Several clusters: the roles whose clusters run it; elsewhere only its CRDs are applied.
    roles: tuple[Role, ...] = ()
    # Where it does not run, only the CRDs of the kinds the cluster's tree holds (each large CRD costs every API
    # server CPU for its OpenAPI schema).
    tree_crds_only: bool = False


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
    simulation: Simulation = Simulation(())  # none: the completeness test fails
    # What stops for researchers while its controller is down (the platform alert's description says it).
    when_down: str = "Its admission webhooks refuse or time out, so jobs are refused."
    # Namespaces beyond its own that its chart writes into, on each cluster it is installed on (its AppProject's
    # destinations).
    other_namespaces: tuple[str, ...] = ()

    def chart_version(self) -> str:
        return versions.pins()[self.chart.version_pin]

    def app_version(self) -> str:
        return versions.pins()[self.chart.app_version_pin]

    def tool_lines(self) -> list[str]:
        """Its tools as tools/tools.list writes a tool (name, pin, `optional`), then for a tool built from data its
        module, package and ldflags (tools/common.sh)."""
        lines = []
        for tool in self.tools:
            line = f"{tool.name} {self.chart.app_version_pin} {'optional' if tool.optional else 'required'}"
            if tool.module:
                line += f" {tool.module} {tool.package} {tool.ldflags.format(**versions.pins())}"
            lines.append(line)
        return lines

    def crd_line(self) -> str:
        """Its CRDs as tools/crds.sh copies them: module, version, globs."""
        return " ".join((self.chart.module, self.app_version(), *self.crds))
