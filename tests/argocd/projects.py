"""Every Application of bootstrap/ and every object its source makes Argo CD apply, judged against its AppProject by
Argo CD's own code: tests/oracles/projectcheck (Go) calls the AppProject methods of the pinned
github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1 the way Argo CD v3.6's controller does (see the
comment at the top of its main.go). This module only gathers the input:

- the AppProjects and Applications of bootstrap/root and bootstrap/platform;
- per Application, the objects its source makes Argo CD apply: a Helm chart through components.chart_objects (the
  real helm as Argo CD's repo server runs it), the synced tree through its kustomization.yaml (which lists exactly
  the files Argo CD reads), another directory of this repository file by file;
- per object, whether its kind is namespaced: from the pinned Kubernetes OpenAPI spec (k8s.io/kubernetes
  api/openapi-spec/v3: a path with /namespaces/{namespace}/ serves a namespaced kind), the pinned CRDs
  (tools/crds.sh) and the CRDs in chart output. A kind found in none of them is an error naming it.

The checker is built with the Go toolchain Argo CD's go.mod needs (ARGOCD_GO_TOOLCHAIN, served by the Go module
proxy) in a throw-away module that carries over argo-cd's non-local `replace` lines, as tools/build.sh's
make_wrapper does, and cached under $GPUGEN_CACHE/bin keyed by its source and the pins.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib
import shutil
import subprocess

import yaml

from simulation.go_tools import ModuleUnavailable, cache_dir, module_dir
from simulation.manifests import bootstrap_dir, load_one, rendered_dir, tree_objects
from simulation.pins import REPO, TOOLS, versions
from simulation.prerequisites import unavailable
from simulation.waiting import ceiling
from tests.support import ORACLES

HERE = pathlib.Path(__file__).resolve().parent
TESTS = HERE.parent

SOURCE = ORACLES / "projectcheck" / "main.go"
ARGOCD_MODULE = "github.com/argoproj/argo-cd/v3"
V1ALPHA1 = f"{ARGOCD_MODULE}/pkg/apis/application/v1alpha1"
COMPONENT_LABEL = "gpugen/component"
KUSTOMIZATION = "kustomization.yaml"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")  # what Argo CD's repo server reads from a directory source

# Hooks (the pinned Argo CD): gitops-engine pkg/sync/hook (Argo CD hook types; Helm's only when no Argo CD type is
# given, helm/type.go maps pre/post-install/upgrade to PreSync/PostSync; `crd-install` is no hook) and
# pkg/sync/sync_phase.go (a hook runs in the sync phases of its types; Skip alone is never applied). The
# controller also creates PreDelete/PostDelete hooks (Helm's pre-delete/post-delete) when the Application is
# deleted, after the same validateSyncPermissions (controller/hook.go). Every other Helm hook (test, rollback)
# is never applied.
ARGO_HOOK = "argocd.argoproj.io/hook"
HELM_HOOK = "helm.sh/hook"
ARGO_TYPES = {"PreSync", "Sync", "PostSync", "Skip", "SyncFail"}
SYNC_PHASES = {"PreSync", "Sync", "PostSync", "SyncFail"}
HELM_TO_ARGO = {"pre-install": "PreSync", "pre-upgrade": "PreSync", "post-install": "PostSync",
                "post-upgrade": "PostSync"}
DELETE_HOOKS = {ARGO_HOOK: {"PreDelete", "PostDelete"}, HELM_HOOK: {"pre-delete", "post-delete"}}


# ---------------------------------------------------------------- the checker (Go)

def _go(args, cwd, toolchain):
    env = {**os.environ, "GOTOOLCHAIN": toolchain, "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0"}
    return subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=ceiling(180))


def _go_ok(args, cwd, toolchain):
    done = _go(args, cwd, toolchain)
    assert done.returncode == 0, f"GOTOOLCHAIN={toolchain} go {' '.join(args)} in {cwd}:\n{done.stdout}{done.stderr}"
    return done.stdout


def checker_binary(tmp_path_factory) -> pathlib.Path:
    """projectcheck built against argo-cd at ARGOCD_VERSION with ARGOCD_GO_TOOLCHAIN, cached by source and pins.
    No Go, or a toolchain the proxy does not serve, skips locally and fails in CI; a failed build always fails."""
    pins = versions()
    version, toolchain = pins["ARGOCD_VERSION"], pins["ARGOCD_GO_TOOLCHAIN"]
    digest = hashlib.sha256(SOURCE.read_bytes() + f"{ARGOCD_MODULE}@{version} {toolchain}".encode()).hexdigest()[:12]
    binary = cache_dir() / "bin" / f"projectcheck-{digest}"
    if binary.is_file():
        return binary
    if shutil.which("go") is None:
        unavailable(f"building {SOURCE} needs the Go toolchain")
    work = tmp_path_factory.mktemp("projectcheck")
    done = _go(["version"], work, toolchain)  # outside any module: fetches the toolchain if it is not cached
    if done.returncode != 0 or f" {toolchain} " not in done.stdout:
        unavailable(f"the Go toolchain {toolchain} (ARGOCD_GO_TOOLCHAIN) is not available: "
                    f"{(done.stdout + done.stderr).strip()[-500:]}")
    shutil.copy(SOURCE, work / "main.go")
    _go_ok(["mod", "init", "gpugen.local/projectcheck"], work, toolchain)
    # argo-cd's own `replace` lines (k8s.io/* => v0.37.0, ...): without them its requirements do not resolve.
    # A local one (gitops-engine => ./gitops-engine) cannot be carried; the published module of the required
    # version is used instead (tools/build.sh make_wrapper does the same).
    upstream = json.loads(_go_ok(["mod", "download", "-json", f"{ARGOCD_MODULE}@{version}"], work, toolchain))
    gomod = json.loads(_go_ok(["mod", "edit", "-json", upstream["GoMod"]], work, toolchain))
    for rep in gomod.get("Replace") or []:
        if not rep["New"].get("Version"):
            continue
        old = rep["Old"]["Path"] + (f"@{rep['Old']['Version']}" if rep["Old"].get("Version") else "")
        _go_ok(["mod", "edit", f"-replace={old}={rep['New']['Path']}@{rep['New']['Version']}"], work, toolchain)
    _go_ok(["get", f"{V1ALPHA1}@{version}"], work, toolchain)
    _go_ok(["mod", "tidy"], work, toolchain)
    binary.parent.mkdir(parents=True, exist_ok=True)
    _go_ok(["build", "-trimpath", "-ldflags", "-s -w", "-o", f"{binary}.{os.getpid()}.tmp", "."], work, toolchain)
    os.replace(f"{binary}.{os.getpid()}.tmp", binary)
    return binary


def run_checker(binary, projects: list[dict], entries: list[dict]) -> list[str]:
    """The checker's violation lines ([] when every Application and object is inside its project)."""
    done = subprocess.run([str(binary)], input=json.dumps({"projects": projects, "applications": entries}),
                          capture_output=True, text=True, timeout=ceiling(12))
    assert done.returncode in (0, 1), f"projectcheck failed (exit {done.returncode}):\n{done.stderr}"
    lines = done.stdout.splitlines()
    assert (done.returncode == 1) == bool(lines), (done.returncode, lines)
    return lines


# ---------------------------------------------------------------- scopes: namespaced or not

@functools.cache
def builtin_scopes() -> dict[tuple[str, str], bool]:
    """{(group, kind): namespaced} of every kind the pinned Kubernetes serves, from its OpenAPI v3 spec."""
    try:
        kubernetes = module_dir("k8s.io/kubernetes", versions()["KUBERNETES_VERSION"])
        spec_dir = kubernetes / "api" / "openapi-spec" / "v3"
    except ModuleUnavailable as e:
        unavailable(str(e))
    found: dict[tuple[str, str], bool] = {}
    for f in sorted(spec_dir.glob("*_openapi.json")):
        for path, operations in json.loads(f.read_text())["paths"].items():
            for op in operations.values():
                gvk = op.get("x-kubernetes-group-version-kind") if isinstance(op, dict) else None
                if gvk:
                    key = (gvk["group"], gvk["kind"])
                    found[key] = found.get(key, False) or "/namespaces/{namespace}/" in path
    assert found, f"no kinds found in {spec_dir}"
    return found


@functools.cache
def pinned_crds() -> tuple[dict, ...]:
    done = subprocess.run(["bash", str(TOOLS / "crds.sh")], capture_output=True, text=True, timeout=ceiling(60))
    if done.returncode != 0:
        unavailable(f"tools/crds.sh could not assemble the pinned CRDs: {done.stderr.strip()[-300:]}")
    crds = []
    for f in sorted(pathlib.Path(done.stdout.strip()).glob("*.yaml")):
        crds += [d for d in yaml.load_all(f.read_text(), Loader=yaml.CSafeLoader)
                 if d and d.get("kind") == "CustomResourceDefinition"]
    return tuple(crds)


def scopes(extra_crds: list[dict]) -> dict[tuple[str, str], bool]:
    """Built-in kinds, the pinned CRDs and `extra_crds` (from chart output); a kind two sources scope differently
    is an error."""
    merged = dict(builtin_scopes())
    for source, crds in (("the pinned CRDs", pinned_crds()), ("the charts' CRDs", extra_crds)):
        for crd in crds:
            key, namespaced = (crd["spec"]["group"], crd["spec"]["names"]["kind"]), crd["spec"]["scope"] == "Namespaced"
            assert merged.get(key, namespaced) == namespaced, f"{key}: {source} scope it differently"
            merged[key] = namespaced
    return merged


# ---------------------------------------------------------------- what Argo CD applies

def applied_by_argo(obj: dict) -> bool:
    """Whether the pinned Argo CD applies (and so permission-checks) this manifest; see the hook notes above."""
    annotations = obj.get("metadata", {}).get("annotations") or {}

    def csv(key):
        return list(dict.fromkeys(v.strip() for v in str(annotations.get(key, "")).split(",") if v.strip()))
    if any(set(csv(key)) & types for key, types in DELETE_HOOKS.items()):
        return True
    if ARGO_HOOK in annotations:
        types = [t for t in csv(ARGO_HOOK) if t in ARGO_TYPES]
        if types == ["Skip"]:
            return False
    elif HELM_HOOK not in annotations or annotations[HELM_HOOK] == "crd-install":
        return True  # not a hook
    else:
        types = []
    if not types:
        types = [HELM_TO_ARGO[t] for t in csv(HELM_HOOK) if t in HELM_TO_ARGO]
    return bool(set(types) & SYNC_PHASES)


@dataclasses.dataclass
class Manifest:
    """What the check needs of one object Argo CD applies."""
    api_version: str
    kind: str
    name: str
    namespace: str
    crd: dict | None = None  # a CustomResourceDefinition's spec.group, names and scope

    @classmethod
    def of(cls, obj: dict) -> Manifest:
        meta = obj.get("metadata") or {}
        return cls(obj.get("apiVersion", ""), obj.get("kind", ""), meta.get("name", ""), meta.get("namespace") or "",
                   {"spec": {k: obj["spec"][k] for k in ("group", "names", "scope")}}
                   if obj.get("kind") == "CustomResourceDefinition" else None)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


def _chart_manifests(app: dict) -> list[Manifest]:
    """components.chart_objects (helm template, cached), reduced to what is checked and cached again: loading the
    cached helm output (megabytes of CRDs) takes seconds, this summary milliseconds. Keyed like chart_objects' own
    cache, plus the code that reads it."""
    sources = (TESTS.parent / "simulation" / "charts.py", TESTS.parent / "simulation" / "components.py",
               pathlib.Path(__file__))
    ident = json.dumps([app, versions(), *(p.read_text() for p in sources)], sort_keys=True)
    cached = cache_dir() / "argocd-project-objects" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"
    if cached.exists():
        return [Manifest(**m) for m in json.loads(cached.read_text())]
    from simulation import components  # simulation: the real helm template as Argo CD's repo server runs it
    try:
        objects = components.chart_objects(app)
    except FileNotFoundError as e:  # helm not built
        unavailable(str(e))
    manifests = [Manifest.of(o) for o in objects if applied_by_argo(o)]
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps([dataclasses.asdict(m) for m in manifests]))
    tmp.replace(cached)
    return manifests


def local_dir(path: str) -> pathlib.Path:
    """The local copy of a path of this repository as an Application's source names it (rendered/ and bootstrap/
    may be relocated with GPUGEN_RENDERED_DIR / GPUGEN_BOOTSTRAP_DIR)."""
    parts = pathlib.PurePosixPath(path).parts
    if parts == ("rendered",):
        return rendered_dir()
    if parts and parts[0] == "bootstrap":
        return bootstrap_dir().joinpath(*parts[1:])
    return REPO / path


def _directory_manifests(app: dict) -> list[Manifest]:
    source = app["spec"]["source"]
    directory = source.get("directory") or {}
    root = local_dir(source["path"])
    assert root.is_dir(), \
        f"Application {app['metadata']['name']}: source.path {source['path']} -> {root} is no directory"
    exclude = directory.get("exclude")
    if exclude == KUSTOMIZATION and directory.get("recurse") and (root / KUSTOMIZATION).is_file():
        # The synced tree: its kustomization.yaml lists exactly the files Argo CD reads (README, "What is rendered").
        return [Manifest.of(o) for o in tree_objects(root) if applied_by_argo(o)]
    assert not exclude and not directory.get("include"), \
        f"Application {app['metadata']['name']}: directory include/exclude {directory} is not handled here"
    files = root.rglob("*") if directory.get("recurse") else root.glob("*")
    objects = []
    for f in sorted(p for p in files if p.is_file() and p.suffix in MANIFEST_SUFFIXES):
        objects += [d for d in yaml.load_all(f.read_text(), Loader=yaml.CSafeLoader) if d]
    return [Manifest.of(o) for o in objects if applied_by_argo(o)]


def application_manifests(app: dict) -> list[Manifest]:
    """What Argo CD applies for this Application."""
    source = app["spec"].get("source") or {}
    name = app["metadata"]["name"]
    assert not app["spec"].get("sources") and not app["spec"].get("sourceHydrator"), \
        f"Application {name}: only a single spec.source is handled here"
    # CreateNamespace=true: the controller creates the destination namespace in the sync, and checks it against
    # the project like any object (controller/sync.go).
    created = [Manifest("v1", "Namespace", app["spec"]["destination"]["namespace"], "", None)] \
        if "CreateNamespace=true" in (app["spec"].get("syncPolicy") or {}).get("syncOptions", []) else []
    if source.get("chart"):
        assert COMPONENT_LABEL in app["metadata"].get("labels", {}), \
            f"Application {name}: a chart source without the {COMPONENT_LABEL} label"
        return created + _chart_manifests(app)
    assert source.get("path") is not None, f"Application {name}: neither chart nor path: {source}"
    return created + _directory_manifests(app)


def bootstrap_argo_objects() -> tuple[list[dict], list[dict]]:
    """(AppProjects, Applications) of bootstrap/root and bootstrap/platform."""
    objects = []
    for part in ("root", "platform"):
        folder = bootstrap_dir() / part
        if not folder.is_dir():
            unavailable(f"no rendered {folder} (run `make render`)")
        objects += [load_one(f) for f in sorted(folder.rglob("*.yaml"))]
    return ([o for o in objects if o["kind"] == "AppProject"], [o for o in objects if o["kind"] == "Application"])


def checker_entries(apps_and_manifests: list[tuple[dict, list[Manifest]]]) -> list[dict]:
    """The checker's input per Application; each kind's scope from scopes(). Fails naming every unknown kind."""
    extra_crds = [m.crd for _, manifests in apps_and_manifests for m in manifests if m.crd]
    known = scopes(extra_crds)
    entries, unknown = [], []
    for app, manifests in apps_and_manifests:
        objects = []
        for m in manifests:
            if (m.group, m.kind) not in known:
                unknown.append(f"{app['metadata']['name']}: {m.api_version} {m.kind} {m.namespace}/{m.name}")
                continue
            objects.append({"group": m.group, "kind": m.kind, "name": m.name, "namespace": m.namespace,
                            "namespaced": known[(m.group, m.kind)]})
        entries.append({"application": app, "objects": objects})
    assert not unknown, ("kinds whose scope is in neither the pinned Kubernetes OpenAPI spec, the pinned CRDs nor "
                         "the charts' CRDs:\n" + "\n".join(unknown))
    return entries


def expand_application_set(binary, application_set: dict) -> list[dict]:
    """The Applications the ApplicationSet controller generates from `application_set` (projectcheck expand: its
    own GenerateApplications with the list generator)."""
    done = subprocess.run([str(binary), "expand"], input=json.dumps(application_set), capture_output=True, text=True,
                          timeout=ceiling(12))
    assert done.returncode == 0, f"projectcheck expand failed (exit {done.returncode}):\n{done.stderr}"
    return json.loads(done.stdout)
