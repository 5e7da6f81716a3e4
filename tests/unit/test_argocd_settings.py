"""bootstrap/argocd-settings/ (a split tree's Argo CD settings, docs/scale.md) is a kustomize Component that applies
to Argo CD's own install manifest at the pinned version: `kubectl kustomize` over the manifest and the Component
changes exactly the settings it names, and nothing else of the installation."""

from __future__ import annotations

import functools
import shutil
import subprocess

import pytest
import yaml

from generator.builders.argocd import (CMD_PARAMS, CONTROLLER, DEFAULT_OPERATION_PROCESSORS,
                                       DEFAULT_STATUS_PROCESSORS, TREE_SHARD_SIZE)
from generator.inventory.load import load_inventory_text
from generator.layout import KUSTOMIZATION_FILE, SITE_SETTINGS_FOLDER
from generator.tree import render_trees
from simulation.argocd_local import argocd_module
from simulation.prerequisites import unavailable
from simulation.waiting import ceiling
from tests.support.inventories import edited, flame_data, setting, to_text

SETTINGS = f"{SITE_SETTINGS_FOLDER}/{KUSTOMIZATION_FILE}"


def bootstrap(applications: int | None) -> dict[str, bytes]:
    data = flame_data() if applications is None else edited(flame_data(),
                                                              setting("cluster.gitops.groupApplications", applications))
    return render_trees(load_inventory_text(to_text(data), "gpu_classes.yaml"), "gpu_classes.yaml").bootstrap


def test_one_application_renders_no_settings():
    assert not [path for path in bootstrap(None) if path.startswith(SITE_SETTINGS_FOLDER + "/")]


@functools.cache
def install_manifest() -> str:
    """Argo CD's install manifest at the pinned version, its CRDs aside (no patch can name them, and kustomize takes
    a minute over their schemas)."""
    path = argocd_module() / "manifests" / "install.yaml"
    return yaml.safe_dump_all([doc for doc in yaml.load_all(path.read_text(), Loader=yaml.CSafeLoader)
                               if doc and doc["kind"] != "CustomResourceDefinition"])


def kustomized(component: bytes | None, tmp_path) -> list[dict]:
    """`kubectl kustomize` of Argo CD's install manifest with the Component (None: without)."""
    if not shutil.which("kubectl"):
        unavailable("kubectl is not installed (it builds kustomizations)")
    site = tmp_path / "site"
    (site / "gpugen").mkdir(parents=True)
    if component is not None:
        (site / "gpugen" / KUSTOMIZATION_FILE).write_bytes(component)
    (site / "install.yaml").write_text(install_manifest())
    (site / KUSTOMIZATION_FILE).write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": "argocd",
        "resources": ["install.yaml"], **({"components": ["gpugen"]} if component is not None else {})}))
    done = subprocess.run(["kubectl", "kustomize", str(site)], capture_output=True, text=True, timeout=ceiling(60))
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def _key(obj: dict) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


@pytest.fixture(scope="module")
def bare_install(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """Argo CD's install manifest as kustomize renders it without the Component (once for every case)."""
    return {_key(obj): obj for obj in kustomized(None, tmp_path_factory.mktemp("bare"))}


@pytest.mark.parametrize(("applications", "processors"), [
    pytest.param(2, None, id="a few Applications: processors left at Argo CD's defaults"),
    pytest.param(40, 45, id="more gpugen Applications than processors"),
])
def test_the_settings_apply_to_argo_cds_own_installation_and_change_nothing_else(applications, processors, tmp_path,
                                                                                 bare_install):
    files = bootstrap(applications)
    component = files[SETTINGS]
    # Every Application this Argo CD syncs of gpugen's: the root, the components', the tree's folders.
    synced = sum(1 for path in files if "/argocd/application/" in path)
    assert (processors is None) == (synced <= DEFAULT_OPERATION_PROCESSORS)
    before = bare_install
    after = {_key(obj): obj for obj in kustomized(component, tmp_path / "patched")}
    assert before.keys() == after.keys()
    changed = {key for key in before if before[key] != after[key]}
    controller = after[("StatefulSet", CONTROLLER)]
    (container,) = [c for c in controller["spec"]["template"]["spec"]["containers"] if c["name"] == CONTROLLER]
    env = {e["name"]: e for e in container["env"]}
    assert env["ARGOCD_APPLICATION_TREE_SHARD_SIZE"] == {"name": "ARGOCD_APPLICATION_TREE_SHARD_SIZE",
                                                        "value": TREE_SHARD_SIZE}
    # The install's own environment stays: the patch merged into the container, it did not replace it.
    before_container = next(c for c in before[("StatefulSet", CONTROLLER)]["spec"]["template"]["spec"]["containers"]
                            if c["name"] == CONTROLLER)
    assert len(container["env"]) == len(before_container["env"]) + 1
    params = after[("ConfigMap", CMD_PARAMS)].get("data") or {}
    if processors is None:
        assert changed == {("StatefulSet", CONTROLLER)}
        assert "controller.status.processors" not in params
    else:
        assert changed == {("StatefulSet", CONTROLLER), ("ConfigMap", CMD_PARAMS)}
        assert params["controller.status.processors"] == str(max(DEFAULT_STATUS_PROCESSORS, synced))
        assert params["controller.operation.processors"] == str(synced)
        # The install reads them into the controller's flags' environment (configMapKeyRef), as it does its own.
        refs = {e["valueFrom"]["configMapKeyRef"]["key"] for e in container["env"]
                if e.get("valueFrom", {}).get("configMapKeyRef", {}).get("name") == CMD_PARAMS}
        assert {"controller.status.processors", "controller.operation.processors"} <= refs
