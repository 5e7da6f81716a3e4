"""The research groups' RBAC and Namespaces as built from the inventory (issue 11, parts 2 and 3).

Shape only: what the API server makes of them (403s, the real SDK, Pod Security) is proven in
tests/apiserver/test_researcher_access.py.
"""

from __future__ import annotations

from tests.support import INVENTORY, of_kind

from generator.builders import synced_objects
from generator.builders.argocd import SYNC_WAVE
from generator.inventory import load_inventory_text

FLAME = INVENTORY.read_text(encoding="utf-8")
RUNTIME_KINDS = {"trainingruntimes", "clustertrainingruntimes"}


def objects(text: str):
    return synced_objects(load_inventory_text(text, "gpu_classes.yaml"))


def test_one_researcher_rolebinding_per_research_namespace_naming_the_groups_identities(flame, flame_objects):
    bindings = {b["metadata"]["namespace"]: b for b in of_kind(flame_objects, "RoleBinding")}
    expected = {ns: name for name, group in flame.groups.items() for ns in group.namespaces}
    assert set(bindings) == set(expected)
    for namespace, group_name in expected.items():
        binding = bindings[namespace]
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                      "name": "researcher"}
        assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}
                                       for g in flame.groups[group_name].identities.groups]


def test_users_become_user_subjects_and_a_group_without_identities_gets_no_binding():
    text = (FLAME.replace("        - oidc:vision-lab\n",
                          "        - oidc:vision-lab\n      users: [alice@example.org]\n")
            .replace("    identities:\n      groups:\n        - oidc:nlp-lab\n", ""))
    bindings = of_kind(objects(text), "RoleBinding")
    assert [b["metadata"]["namespace"] for b in bindings] == ["vision-lab"]
    assert bindings[0]["subjects"][-1] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                           "name": "alice@example.org"}


def test_no_rendered_role_lets_anyone_write_runtimes(flame_objects):
    for role in of_kind(flame_objects, "ClusterRole"):
        for rule in role["rules"]:
            if RUNTIME_KINDS & set(rule.get("resources", ())):  # nonResourceURLs rules have none
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, role["metadata"]["name"]


def test_research_namespaces_carry_pod_security_and_are_never_pruned_or_deleted(flame, flame_objects):
    namespaces = {ns["metadata"]["name"]: ns for ns in of_kind(flame_objects, "Namespace")}
    assert set(namespaces) == {ns for group in flame.groups.values() for ns in group.namespaces}
    for ns in namespaces.values():
        labels, annotations = ns["metadata"]["labels"], ns["metadata"]["annotations"]
        assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
        assert labels["pod-security.kubernetes.io/warn"] == "restricted"
        assert annotations["argocd.argoproj.io/sync-options"] == "Prune=false,Delete=false"


def test_namespaces_sync_before_anything_that_lives_in_them(flame_objects):
    namespace_wave = max(int(ns["metadata"]["annotations"][SYNC_WAVE]) for ns in of_kind(flame_objects, "Namespace"))
    namespaced = [o for o in flame_objects if "namespace" in o["metadata"]]
    assert namespaced
    assert all(int(o["metadata"]["annotations"][SYNC_WAVE]) > namespace_wave for o in namespaced)


def test_namespaces_switched_off_renders_none_but_keeps_the_bindings():
    text = FLAME.replace("  gitops:\n", "  createNamespaces: false\n  gitops:\n", 1)
    rendered = objects(text)
    assert of_kind(rendered, "Namespace") == []
    assert len(of_kind(rendered, "RoleBinding")) == 3


def test_pvcs_are_never_rendered(flame_objects):
    # Home and workspace hold users' data: a pruning sync must never be able to delete them.
    assert of_kind(flame_objects, "PersistentVolumeClaim") == []
