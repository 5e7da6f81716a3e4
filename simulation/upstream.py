"""Helpers shared by the validation tests, control_plane.py and the e2e tier (tests/e2e): pinned
versions, cache paths, the manifest tree on disk, and a minimal Kubernetes HTTP client.

This directory is a package, so these names never clash with tests/conftest.py.
"""
import functools
import hashlib
import json
import os
import pathlib
import shutil
import subprocess

import requests
import requests.adapters
import urllib3
import yaml

from generator.versions import pins
from simulation.waiting import REQUEST, ceiling  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools"
FIELD_MANAGER = "gpugen-validation"
# Namespace for objects the tests make themselves (pod-template Jobs, broken corpus).
SCRATCH_NS = "gpugen-validation"


# ---------------------------------------------------------------- locations & pins

def versions():
    """Every pin of generator/versions.env (the one place versions are pinned), read by the generator's parser."""
    return pins()


def cache_dir():
    """Where tools/build.sh puts what it builds ($GPUGEN_CACHE, else ~/.cache/gpugen); test helpers cache there too."""
    return pathlib.Path(os.environ.get("GPUGEN_CACHE") or pathlib.Path.home() / ".cache" / "gpugen")


class ModuleUnavailable(RuntimeError):
    """tools/module-dir.sh could not provide MODULE@VERSION (not downloadable, or not a directory)."""


@functools.cache
def module_dir(module, version):
    """The unpacked, checksum-verified MODULE@VERSION from the Go module cache (tools/module-dir.sh), where
    upstream files (CRDs, charts, constants, go.mod) are read."""
    done = subprocess.run(["bash", str(TOOLS / "module-dir.sh"), module, version], capture_output=True, text=True,
                          timeout=ceiling(60))
    path = pathlib.Path(done.stdout.strip()) if done.returncode == 0 else None
    if path is None or not path.is_dir():
        raise ModuleUnavailable(f"tools/module-dir.sh {module} {version} failed:\n{done.stderr[-1000:]}")
    return path


@functools.lru_cache(maxsize=1)
def tool_pins() -> dict[str, str]:
    """Tool -> the versions.env key it is built at: tools/tools.list, the one list of the tools, and the components'
    tools (@components there: each at its component's pin)."""
    from generator.components import COMPONENTS
    pairs = (line.split() for line in (TOOLS / "tools.list").read_text().splitlines())
    listed = {fields[0]: fields[1] for fields in pairs if len(fields) > 1 and not fields[0].startswith("#")}
    return {**listed, **{tool.name: facts.chart.app_version_pin for facts in COMPONENTS.values() for tool in facts.tools}}


def tool_bin(tool):
    """The cached binary tools/build.sh builds for `tool` at its pin."""
    return cache_dir() / "bin" / f"{tool}-{versions()[tool_pins()[tool]]}"


def rendered_dir():
    return pathlib.Path(os.environ.get("GPUGEN_RENDERED_DIR") or REPO / "rendered")


def bootstrap_dir():
    return pathlib.Path(os.environ.get("GPUGEN_BOOTSTRAP_DIR") or REPO / "bootstrap")


class Unavailable(RuntimeError):
    """A prerequisite is missing (a tool not built, a module not downloaded, nothing rendered). The tests turn it
    into a failure when CI is set and a skip with the reason elsewhere (tests/conftest.py); make demo prints it."""


def unavailable(reason):
    raise Unavailable(reason)


# ---------------------------------------------------------------- small Go programs of the tests

def go(args, cwd):
    """`go ARGS` in `cwd` with the local toolchain (never a silent toolchain download); its stdout."""
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0"}
    done = subprocess.run(["go", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=ceiling(180))
    assert done.returncode == 0, f"go {' '.join(args)} in {cwd}:\n{done.stdout}{done.stderr}"
    return done.stdout


def tidy_build_install(work, binary):
    """go mod tidy, then build the module in `work` into `binary` (renamed into place once complete)."""
    go(["mod", "tidy"], work)
    binary.parent.mkdir(parents=True, exist_ok=True)
    go(["build", "-trimpath", "-ldflags", "-s -w", "-o", f"{binary}.tmp", "."], work)
    os.replace(f"{binary}.tmp", binary)
    return binary


def go_program(source, module, requires, tmp_path_factory):
    """The one-file Go program `source` built against the pinned `requires` (MODULE@VERSION), cached under
    $GPUGEN_CACHE/bin by source and requirements. A missing Go toolchain skips locally and fails in CI; a failed
    build always fails."""
    digest = hashlib.sha256(source.read_bytes() + " ".join(requires).encode()).hexdigest()[:12]
    binary = cache_dir() / "bin" / f"{source.parent.name}-{digest}"
    if binary.is_file():
        return binary
    if shutil.which("go") is None:
        unavailable(f"building {source} needs the Go toolchain")
    work = tmp_path_factory.mktemp(source.parent.name)
    shutil.copy(source, work / "main.go")
    go(["mod", "init", module], work)
    for require in requires:
        go(["mod", "edit", f"-require={require}"], work)
    return tidy_build_install(work, binary)


# ---------------------------------------------------------------- manifests on disk

def manifest_files():
    """Every object file of the tree: rendered/**/*.yaml (no kustomization.yaml) + bootstrap/ (the Argo CD Application, outside the synced tree)."""
    files = []
    for root in (rendered_dir(), bootstrap_dir()):
        if root.is_dir():
            files += sorted(p for p in root.rglob("*.yaml") if p.name != "kustomization.yaml")
    return files


def tree_objects(tree):
    """The objects Argo CD syncs from a rendered tree: the files its kustomization.yaml lists (exactly those)."""
    kustomization = yaml.safe_load((pathlib.Path(tree) / "kustomization.yaml").read_text())
    return [load_one(pathlib.Path(tree) / f) for f in kustomization["resources"]]


# libyaml's loader and dumper where PyYAML has them (same YAML 1.1 rules as the pure-Python ones): the charts'
# and Argo CD's manifests are megabytes of CRDs, read many times, about ten times faster this way.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_all(text: str) -> list:
    """The documents of a YAML stream, empty ones left out."""
    return [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]


def dump_all(documents: list) -> str:
    return yaml.dump_all(documents, Dumper=_DUMPER)


def load_one(path):
    docs = load_all(pathlib.Path(path).read_text())
    assert len(docs) == 1, f"{path}: expected exactly one object, found {len(docs)}"
    return docs[0]


def rel(path):
    try:
        return str(pathlib.Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def header(path, key):
    """Values of leading `# key: value` comment lines (used by the broken corpus)."""
    vals = []
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.startswith("#"):
            break
        k, _, v = line[1:].strip().partition(":")
        if k.strip() == key:
            vals.append(v.strip())
    return vals


def broken_files():
    return sorted((REPO / "tests" / "apiserver" / "broken").glob("*.yaml"))


# ---------------------------------------------------------------- API client

# An API server that is busy answers 429 (too many requests, or a new CRD's storage still initialising), 503 or
# 504 (a request that did not complete within its --request-timeout): not a verdict. Requests that can be repeated
# safely (reads, server-side apply, deletes; not a create, which may have happened) are repeated, as client-go
# does on 429, with backoff (0.5 s doubling, capped), so a slow machine only takes longer.
OVERLOAD_RETRY = urllib3.util.Retry(
    total=12, connect=0, read=0, redirect=0, other=0, status_forcelist=(429, 503, 504),
    allowed_methods=frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS"}), backoff_factor=0.5,
    backoff_max=30, respect_retry_after_header=True, raise_on_status=False)


class Kube:
    """Just enough of a Kubernetes client: discovery, URLs, server-side apply, create, get (raw responses)."""

    def __init__(self, server, ca, cert, key):
        self.server = server
        self.http = requests.Session()
        # Ignore REQUESTS_CA_BUNDLE/proxy variables: they would override our CA (a requests
        # quirk) or send loopback traffic to a proxy.
        self.http.trust_env = False
        self.http.verify = str(ca)
        self.http.cert = (str(cert), str(key))
        self.http.mount("https://", requests.adapters.HTTPAdapter(max_retries=OVERLOAD_RETRY))
        self._discovery = {}

    def resources(self, api_version, refresh=False):
        """{kind: (plural, namespaced)} served in api_version ({} when it is not served), from discovery.

        Cached per group version once served; refresh=True reads discovery again (a CRD may have appeared)."""
        if refresh:
            self._discovery.pop(api_version, None)
        if api_version not in self._discovery:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            r = self.http.get(self.server + path, timeout=REQUEST)
            if r.status_code == 404:
                return {}
            r.raise_for_status()
            self._discovery[api_version] = {
                res["kind"]: (res["name"], res["namespaced"])
                for res in r.json()["resources"] if "/" not in res["name"]}
        return self._discovery[api_version]

    def resource_url(self, api_version, kind, namespace=None, name=None):
        """URL of one object (name given) or of a collection; a namespaced kind without a namespace means
        all namespaces. Discovery is read again once if the cached answer lacks `kind`."""
        res = self.resources(api_version)
        if kind not in res:
            res = self.resources(api_version, refresh=True)
        assert kind in res, f"the API server does not serve {kind} in {api_version}"
        plural, namespaced = res[kind]
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        ns = f"/namespaces/{namespace}" if namespaced and namespace else ""
        return f"{self.server}{prefix}{ns}/{plural}" + (f"/{name}" if name else "")

    def url(self, obj, named=True):
        """URL of `obj` (named) or of its collection; a namespaced object without a namespace is in `default`."""
        meta = obj.get("metadata", {})
        return self.resource_url(obj["apiVersion"], obj["kind"], meta.get("namespace", "default"),
                                 meta["name"] if named else None)

    def apply(self, obj, dry_run=True):
        params = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict", "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.http.patch(self.url(obj), params=params, data=json.dumps(obj),
                               headers={"Content-Type": "application/apply-patch+yaml"}, timeout=REQUEST)

    def create(self, obj, dry_run=True):
        params = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
        if dry_run:
            params["dryRun"] = "All"
        return self.http.post(self.url(obj, named=False), params=params, json=obj, timeout=REQUEST)

    def get(self, obj):
        return self.http.get(self.url(obj), timeout=REQUEST)


def message(resp):
    try:
        return resp.json().get("message", resp.text)
    except ValueError:
        return resp.text


