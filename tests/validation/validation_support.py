"""Helpers shared by the validation tests, control_plane.py and the e2e tier (tests/e2e): pinned
versions, cache paths, the manifest tree on disk, and a minimal Kubernetes HTTP client.

This directory is a package, so these names never clash with tests/conftest.py.
"""
import json
import os
import pathlib

import pytest
import requests
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
TOOLS = REPO / "tools"
FIELD_MANAGER = "gpugen-validation"
# Namespace for objects the tests make themselves (pod-template Jobs, broken corpus).
SCRATCH_NS = "gpugen-validation"


# ---------------------------------------------------------------- locations & pins

def versions():
    out = {}
    for line in (REPO / "generator" / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def cache_dir():
    return pathlib.Path(os.environ.get("GPUGEN_CACHE") or pathlib.Path.home() / ".cache" / "gpugen")


def tool_bin(tool, version_key):
    return cache_dir() / "bin" / f"{tool}-{versions()[version_key]}"


def rendered_dir():
    return pathlib.Path(os.environ.get("GPUGEN_RENDERED_DIR") or REPO / "rendered")


def bootstrap_dir():
    return pathlib.Path(os.environ.get("GPUGEN_BOOTSTRAP_DIR") or REPO / "bootstrap")


def unavailable(reason):
    """Missing prerequisite: a failure in CI, a skip with the reason locally."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so this is a failure: run `make tools` / render first)",
                    pytrace=False)
    pytest.skip(reason)


# ---------------------------------------------------------------- manifests on disk

def manifest_files():
    """Every object file of the tree: rendered/**/*.yaml (no kustomization.yaml) + bootstrap/ (the Argo CD Application, outside the synced tree)."""
    files = []
    for root in (rendered_dir(), bootstrap_dir()):
        if root.is_dir():
            files += sorted(p for p in root.rglob("*.yaml") if p.name != "kustomization.yaml")
    return files


def load_one(path):
    docs = [d for d in yaml.safe_load_all(pathlib.Path(path).read_text()) if d is not None]
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
    return sorted((HERE / "broken").glob("*.yaml"))


# ---------------------------------------------------------------- API client

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
        self._discovery = {}

    def resources(self, api_version, refresh=False):
        """{kind: (plural, namespaced)} served in api_version ({} when it is not served), from discovery.

        Cached per group version once served; refresh=True reads discovery again (a CRD may have appeared)."""
        if refresh:
            self._discovery.pop(api_version, None)
        if api_version not in self._discovery:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            r = self.http.get(self.server + path, timeout=30)
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
                               headers={"Content-Type": "application/apply-patch+yaml"}, timeout=60)

    def create(self, obj, dry_run=True):
        params = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
        if dry_run:
            params["dryRun"] = "All"
        return self.http.post(self.url(obj, named=False), params=params, json=obj, timeout=60)

    def get(self, obj):
        return self.http.get(self.url(obj), timeout=30)


def message(resp):
    try:
        return resp.json().get("message", resp.text)
    except ValueError:
        return resp.text


