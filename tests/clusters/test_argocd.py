"""The platform of several clusters as the real Argo CD on the manager delivers it (docs/multi-cluster.md,
"Delivery"): its ApplicationSet controller expands the rendered ApplicationSet into one Application per cluster,
and its application controller syncs each cluster's tree to that cluster's API server through the cluster Secret
made as `argocd cluster add` makes it. The projectcheck oracle's expansion (tests/oracles/projectcheck, which the
unit tests use in the controller's place) is held to what the controller made."""
from __future__ import annotations

import pytest

from generator.inventory.naming import cluster_tree_application_name
from simulation import manifests
from tests.argocd import projects

pytestmark = pytest.mark.tools

ARGO = "argoproj.io/v1alpha1"
TRACKING_ID = "argocd.argoproj.io/tracking-id"


def site_application_set(platform) -> dict:
    """The ApplicationSet as the site's repository renders it (its servers those of the simulated clusters)."""
    (found,) = [o for f in sorted((platform.argocd.repo.checkout / "bootstrap").rglob("*.yaml"))
                if (o := manifests.load_one(f)).get("kind") == "ApplicationSet"]
    return found


def test_the_application_set_controller_makes_one_application_per_cluster_as_the_oracle_expands_it(
        platform, tmp_path_factory):
    application_set = site_application_set(platform)
    live = {a["metadata"]["name"]: a for a in platform.argocd.applications()
            if any(ref["kind"] == "ApplicationSet" and ref["name"] == application_set["metadata"]["name"]
                   for ref in a["metadata"].get("ownerReferences", []))}
    assert set(live) == {cluster_tree_application_name(platform.inventory, name) for name in platform.members}, \
        sorted(live)
    expanded = projects.expand_application_set(projects.checker_binary(tmp_path_factory), application_set)
    assert {a["metadata"]["name"] for a in expanded} == set(live)
    for app in expanded:
        real = live[app["metadata"]["name"]]
        assert real["spec"] == app["spec"], f"{app['metadata']['name']}: the controller made {real['spec']}, " \
                                            f"the oracle expands {app['spec']}"
        assert real["metadata"].get("labels") == app["metadata"].get("labels")


def test_each_cluster_holds_its_own_tree_synced_by_its_own_application(platform):
    """Every object of rendered/<cluster> is on that cluster's API server, tracked by that cluster's Application;
    nothing there is tracked by another cluster's."""
    gitops = platform.inventory.cluster.gitops
    for name, member in platform.members.items():
        app = cluster_tree_application_name(platform.inventory, name)
        tree = manifests.tree_objects(platform.argocd.repo.checkout / gitops.path / name)
        assert tree, name
        for obj in tree:
            meta = obj["metadata"]
            live = member.admin.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
            assert live is not None, f"{name}: {obj['kind']} {meta.get('namespace', '')}/{meta['name']} missing"
            tracking = live["metadata"].get("annotations", {}).get(TRACKING_ID, "")
            assert tracking.startswith(f"{app}:"), \
                f"{name}: {obj['kind']} {meta.get('namespace', '')}/{meta['name']} tracked as {tracking!r}"

