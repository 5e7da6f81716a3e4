"""The Kubernetes REST client of the simulation and the tests, for any identity (admin, service account, researcher).

`Kube` is the connection: a session with the identity's certificate, discovery, URLs, and requests returning the
raw response (the API-server and e2e tiers read them); requests the API server answered as busy are repeated when
that is safe. `Client` is built on it for the simulation: server-side apply for real, create, get, list, delete and
status reads, raising ApiError with the server's message.
"""
from __future__ import annotations

import json
import pathlib
import time

import requests
import requests.adapters
import urllib3
import yaml

from simulation.waiting import REQUEST, ceiling, wait_for

# The field managers the API server records: Client's (the simulation), Kube's own (the API-server and e2e tiers).
FIELD_MANAGER = "gpugen-flame"
KUBE_FIELD_MANAGER = "gpugen-validation"


# ---------------------------------------------------------------- the connection

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
        params = {"fieldManager": KUBE_FIELD_MANAGER, "fieldValidation": "Strict", "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.http.patch(self.url(obj), params=params, data=json.dumps(obj),
                               headers={"Content-Type": "application/apply-patch+yaml"}, timeout=REQUEST)

    def create(self, obj, dry_run=True):
        params = {"fieldManager": KUBE_FIELD_MANAGER, "fieldValidation": "Strict"}
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


# ---------------------------------------------------------------- the simulation's client

class ApiError(RuntimeError):
    def __init__(self, what: str, response: requests.Response):
        self.status = response.status_code
        self.message = message(response)
        super().__init__(f"{what}: {self.status} {self.message}")


class Client:
    def __init__(self, kube: Kube, headers: dict | None = None):
        self.kube = kube
        self.http = kube.http
        self.headers = headers or {}

    @classmethod
    def from_kube(cls, kube: Kube) -> Client:
        return cls(kube)

    @classmethod
    def from_kubeconfig(cls, path: pathlib.Path) -> Client:
        cfg = yaml.safe_load(pathlib.Path(path).read_text())
        cluster = cfg["clusters"][0]["cluster"]
        user = cfg["users"][0]["user"]
        if "token" in user:  # a service account's token
            kube = Kube(cluster["server"], cluster["certificate-authority"], "", "")
            kube.http.cert = None
            kube.http.headers["Authorization"] = f"Bearer {user['token']}"
            return cls(kube)
        return cls(Kube(cluster["server"], cluster["certificate-authority"], user["client-certificate"],
                           user["client-key"]))

    def impersonating(self, user: str) -> Client:
        """The same connection acting as `user` (admin only): readiness probes of the harness."""
        return Client(self.kube, {"Impersonate-User": user})

    def _h(self, extra=None):
        h = dict(self.headers)
        h.update(extra or {})
        return h

    def _req(self, method, url, what, ok=(200, 201, 202), **kw):
        headers = self._h(kw.pop("headers", None))
        r = self.http.request(method, url, headers=headers, timeout=REQUEST, **kw)
        if r.status_code not in ok:
            raise ApiError(what, r)
        return r

    def url(self, api_version, kind, namespace=None, name=None):
        return self.kube.resource_url(api_version, kind, namespace, name)

    def apply(self, obj: dict, dry_run=False, manager=FIELD_MANAGER, force=True) -> dict:
        meta = obj["metadata"]
        params = {"fieldManager": manager, "fieldValidation": "Strict"}
        if force:
            params["force"] = "true"
        if dry_run:
            params["dryRun"] = "All"
        r = self._req("PATCH", self.url(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"]),
                      f"apply {obj['kind']} {meta.get('namespace', '')}/{meta['name']}", params=params,
                      data=json.dumps(obj), headers={"Content-Type": "application/apply-patch+yaml"})
        return r.json()

    def create(self, obj: dict, dry_run=False) -> dict:
        meta = obj["metadata"]
        params = {"fieldManager": FIELD_MANAGER}
        if dry_run:
            params["dryRun"] = "All"
        what = f"create {obj['kind']} {meta.get('namespace', '')}/{meta.get('name') or meta.get('generateName')}"
        r = self._req("POST", self.url(obj["apiVersion"], obj["kind"], meta.get("namespace")), what,
                      params=params, json=obj)
        return r.json()

    def get(self, api_version, kind, name, namespace=None) -> dict | None:
        r = self._req("GET", self.url(api_version, kind, namespace, name), f"get {kind} {namespace}/{name}",
                      ok=(200, 404))
        return None if r.status_code == 404 else r.json()

    def list(self, api_version, kind, namespace=None, selector=None) -> list[dict]:
        params = {"labelSelector": selector} if selector else {}
        r = self._req("GET", self.url(api_version, kind, namespace), f"list {kind} in {namespace}", params=params)
        return r.json()["items"]

    def patch_merge(self, api_version, kind, name, patch, namespace=None, subresource=None) -> dict:
        url = self.url(api_version, kind, namespace, name) + (f"/{subresource}" if subresource else "")
        r = self._req("PATCH", url, f"patch {kind} {namespace}/{name}", data=json.dumps(patch),
                      headers={"Content-Type": "application/merge-patch+json"})
        return r.json()

    def delete(self, api_version, kind, name, namespace=None, propagation="Background"):
        self._req("DELETE", self.url(api_version, kind, namespace, name), f"delete {kind} {namespace}/{name}",
                  ok=(200, 202, 404), json={"propagationPolicy": propagation})

    def raw(self, path) -> requests.Response:
        return self.http.get(self.kube.server + path, headers=self._h(), timeout=REQUEST)


def conditions(obj) -> dict:
    return {c["type"]: c for c in (obj or {}).get("status", {}).get("conditions", []) or []}


def poll(check, usual=6.0, what="condition", interval=0.3):
    """check()'s first truthy value; AssertionError naming `what` and the last value at the ceiling of something
    that takes `usual` seconds on a fast machine (simulation/waiting.py)."""
    return wait_for(check, what, usual, interval=interval)


def _namespaced(admin: Client, obj) -> bool:
    res = admin.kube.resources(obj["apiVersion"])
    if obj["kind"] not in res:
        res = admin.kube.resources(obj["apiVersion"], refresh=True)
    return res[obj["kind"]][1]


def apply_all(admin: Client, objects, default_namespace=None):
    """Server-side apply, CRDs first (waited for Established), namespaced objects without a namespace in the
    destination namespace (as Argo CD does)."""
    crds = [o for o in objects if o["kind"] == "CustomResourceDefinition"]
    for crd in crds:
        admin.apply(crd)
    for crd in crds:
        poll(lambda: conditions(admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                                          crd["metadata"]["name"])).get("Established", {}).get("status") == "True",
             60, f"CRD {crd['metadata']['name']} Established")
    for obj in objects:
        if obj["kind"] == "CustomResourceDefinition":
            continue
        if default_namespace and not obj["metadata"].get("namespace") and _namespaced(admin, obj):
            obj = {**obj, "metadata": {**obj["metadata"], "namespace": default_namespace}}
        admin.apply(obj)


def get_retrying(http: requests.Session, url: str) -> requests.Response:
    """GET, retried while the API server answers 429 (a new CRD's storage is still initialising)."""
    deadline = time.monotonic() + ceiling(6)
    while True:
        r = http.get(url, timeout=REQUEST)
        if r.status_code != 429 or time.monotonic() > deadline:
            return r
        time.sleep(float(r.headers.get("Retry-After", "1")))


class SyncApi:
    """The calls argo_sync.ArgoSync makes, as the admin of `kube` (Argo CD's controller is cluster-admin)."""

    def __init__(self, kube: Kube):
        self.kube = kube

    def get(self, api_version, kind, name, namespace=None):
        r = get_retrying(self.kube.http, self.kube.resource_url(api_version, kind, namespace, name))
        return None if r.status_code == 404 else r.json()

    def list(self, api_version, kind, namespace=None):
        r = get_retrying(self.kube.http, self.kube.resource_url(api_version, kind, namespace))
        assert r.ok, message(r)
        return r.json()["items"]  # without apiVersion and kind, as the API server lists them: ArgoSync adds them

    def apply(self, obj):
        return self.kube.apply(obj, dry_run=False)

    def delete(self, api_version, kind, name, namespace=None, propagation="Background"):
        r = self.kube.http.delete(self.kube.resource_url(api_version, kind, namespace, name),
                                  json={"propagationPolicy": propagation}, timeout=REQUEST)
        assert r.status_code in (200, 202, 404), message(r)
