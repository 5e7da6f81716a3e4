"""Every Argo CD Application in bootstrap/, and every object its source makes Argo CD apply (the charts' output
included), stays inside its AppProject, as Argo CD v3.6 itself decides: tests/oracles/projectcheck (Go) calls the
pinned argo-cd module's AppProject methods the way its controller does (IsSourcePermitted, IsDestinationPermitted,
IsGroupKindNamePermitted) and prints Argo CD's own messages. tests/argocd/projects.py gathers the input.

A violation here is what Argo CD would show as an InvalidSpecError condition on the Application, or a failed sync
("resource G:K is not permitted in project P", "namespace N is not permitted in project 'P'").
"""
from __future__ import annotations

import copy

import pytest

from generator.components import COMPONENTS

from tests.argocd import projects as P

IN_CLUSTER = "https://kubernetes.default.svc"


@pytest.fixture(scope="session")
def checker(tmp_path_factory):
    return P.checker_binary(tmp_path_factory)


@pytest.fixture(scope="session")
def bootstrap():
    """(AppProjects, Applications) of the rendered bootstrap/ tree."""
    return P.bootstrap_argo_objects()


@pytest.mark.tools  # helm renders the component charts (components.chart_objects, cached)
def test_every_application_and_every_object_it_applies_is_inside_its_project(checker, bootstrap):
    projects, apps = bootstrap
    assert projects and apps
    entries = P.checker_entries([(app, P.application_manifests(app)) for app in apps])
    counted = ", ".join(f"{e['application']['metadata']['name']} {len(e['objects'])}" for e in entries)
    print(f"\nchecked {len(apps)} Applications against {len(projects)} AppProjects; objects: {counted}")
    violations = P.run_checker(checker, projects, entries)
    print("\n".join(violations) or "no violations")
    assert not violations, "outside their AppProjects (Argo CD would refuse these):\n" + "\n".join(violations)


def test_a_tree_split_into_applications_stays_inside_the_gpugen_project(checker):
    """A platform whose groups are in Applications of their own (cluster.gitops.groupApplications): each of those
    Applications and the platform's, and every object each applies, are inside the gpugen AppProject; every object
    of the tree is applied by exactly one of them."""
    import yaml

    from generator.inventory.load import load_inventory_text
    from generator.layout import KUSTOMIZATION_FILE
    from generator.tree import render_trees
    from tests.support import synth
    from tests.support.inventories import to_text

    data = synth.build(2, 12, 2)
    data["cluster"]["gitops"]["groupApplications"] = 3
    rendered = render_trees(load_inventory_text(to_text(data), "split.yaml"), "split.yaml")
    bootstrap_objects = [yaml.safe_load(content) for content in rendered.bootstrap.values()]
    projects = [o for o in bootstrap_objects if o["kind"] == "AppProject"]
    synced = [o for o in bootstrap_objects if o["kind"] == "Application"
              and o["spec"]["source"].get("path", "").startswith("rendered/")]
    assert len(synced) == 4

    def tree(path: str) -> list:
        folder = path.removeprefix("rendered/") + "/"
        return [P.Manifest.of(yaml.safe_load(content)) for name, content in rendered.synced.items()
                if name.startswith(folder) and not name.endswith(KUSTOMIZATION_FILE)]
    entries = P.checker_entries([(app, tree(app["spec"]["source"]["path"])) for app in synced])
    assert sum(len(entry["objects"]) for entry in entries) == sum(
        not name.endswith(KUSTOMIZATION_FILE) for name in rendered.synced)
    violations = P.run_checker(checker, projects, entries)
    assert not violations, "outside their AppProjects (Argo CD would refuse these):\n" + "\n".join(violations)


@pytest.mark.tools  # helm renders the component charts (components.chart_objects, cached)
@pytest.mark.parametrize("own", [False, True], ids=["same-components", "a-cluster-with-its-own"])
def test_several_clusters_every_application_generated_or_not_stays_inside_its_project(checker, own):
    """Several clusters (tests/support/inventories.platform()): the ApplicationSet expanded by the ApplicationSet
    controller's own code gives one Application per cluster, syncing that cluster's tree to its server and keeping
    its objects when deleted; those Applications, every component Application (one per cluster that installs it)
    and every object each applies are inside their projects, by server, namespace and kind. Also with a cluster
    that has components of its own (tests/support/inventories.own_components: Kyverno adopted, Kueue elsewhere)."""
    import yaml

    from generator.layout import KUSTOMIZATION_FILE
    from generator.tree import render_trees
    from tests.support.inventories import edited, own_components, platform, platform_data

    rendered = render_trees(platform(edited(platform_data(), own_components) if own else None), "platform.yaml")
    bootstrap_objects = [yaml.safe_load(content) for content in rendered.bootstrap.values()]
    projects = [o for o in bootstrap_objects if o["kind"] == "AppProject"]
    (application_set,) = [o for o in bootstrap_objects if o["kind"] == "ApplicationSet"]
    # Only the ApplicationSet syncs the clusters' trees.
    assert not [o for o in bootstrap_objects if o["kind"] == "Application"
                and o["spec"]["source"].get("path", "").startswith("rendered")]
    generated = P.expand_application_set(checker, application_set)
    servers = {"hub": IN_CLUSTER, "flame": "https://flame.example.org:6443", "ember": "https://ember.example.org:6443"}
    assert {a["metadata"]["name"]: (a["spec"]["source"]["path"], a["spec"]["destination"]["server"])
            for a in generated} == {f"flame-training-platform-{c}": (f"rendered/{c}", s) for c, s in servers.items()}
    assert all(not a["metadata"].get("finalizers") for a in generated), [a["metadata"] for a in generated]
    assert all(a["metadata"]["namespace"] == application_set["metadata"]["namespace"] for a in generated)

    def tree(cluster):
        return [P.Manifest.of(yaml.safe_load(content)) for path, content in rendered.synced.items()
                if path.startswith(cluster + "/") and not path.endswith(KUSTOMIZATION_FILE)]
    apps = [o for o in bootstrap_objects if o["kind"] == "Application"]
    components = [a for a in apps if "gpugen/component" in a["metadata"].get("labels", {})]
    assert len(components) == len(COMPONENTS) * len(servers) - own
    entries = P.checker_entries([(app, P.application_manifests(app))
                                 for app in apps if app["spec"]["source"].get("chart")]
                                + [(app, tree(app["spec"]["source"]["path"].removeprefix("rendered/")))
                                   for app in generated])
    violations = P.run_checker(checker, projects, entries)
    assert not violations, "outside their AppProjects (Argo CD would refuse these):\n" + "\n".join(violations)
    # The check can fail: the same worker tree sent to the manager is outside the project there.
    astray = copy.deepcopy(next(a for a in generated if a["metadata"]["name"].endswith("-ember")))
    astray["spec"]["destination"]["server"] = IN_CLUSTER
    lines = P.run_checker(checker, projects, P.checker_entries([(astray, tree("ember"))]))
    namespace = "kueue" if own else "kueue-system"
    assert any(f"namespace {namespace} is not permitted in project 'flame-gpugen'" in line for line in lines), lines


# ---------------------------------------------------------------- the checker can fail

def named(apps, name):
    (app,) = [a for a in apps if a["metadata"]["name"] == name]
    return app


def project_of(projects, app):
    (proj,) = [p for p in projects if p["metadata"]["name"] == app["spec"]["project"]]
    return proj


def api_version(group):
    return f"{group}/v1" if group else "v1"


def allowed_manifests(project):
    """One object of every kind the project allows, namespaced ones without a namespace (Argo CD gives them the
    destination's): inside the project whenever the Application is."""
    spec = project["spec"]
    return ([P.Manifest(api_version(k["group"]), k["kind"], f"allowed-{k['kind'].lower()}", "")
             for k in spec.get("namespaceResourceWhitelist") or []]
            + [P.Manifest(api_version(k["group"]), k["kind"], f"allowed-{k['kind'].lower()}", "")
               for k in spec.get("clusterResourceWhitelist") or []])


def whitelisted(project, key, group, kind):
    return any((k["group"], k["kind"]) == (group, kind) for k in project["spec"].get(key) or [])


def named_namespaces_only(project):
    return all(d.get("namespace") and not set(d["namespace"]) & set("*?[!{") for d in project["spec"]["destinations"])


@pytest.fixture(scope="session")
def variants(checker, bootstrap):
    """check(changes): the checker's lines that `changes` adds to a clean baseline. The baseline: every
    Application of bootstrap/ with one object of each kind its project allows; `changes(apps, objects)` edits
    copies (objects: {application name: [Manifest]}). The baseline's own lines (today: destinations the render
    gets wrong, test above) are subtracted, so each variant shows exactly what it adds."""
    projects, apps = bootstrap

    def run(apps, objects):
        entries = P.checker_entries([(a, objects[a["metadata"]["name"]]) for a in apps])
        return P.run_checker(checker, projects, entries)

    base_objects = {a["metadata"]["name"]: allowed_manifests(project_of(projects, a)) for a in apps}
    baseline = set(run(apps, base_objects))

    def check(changes):
        apps_copy, objects_copy = copy.deepcopy(apps), copy.deepcopy(base_objects)
        changes(apps_copy, objects_copy)
        lines = run(apps_copy, objects_copy)
        return sorted(set(lines) - baseline)

    return projects, apps, check


def component_apps(apps):
    return [a for a in apps if P.COMPONENT_LABEL in a["metadata"].get("labels", {})]


def test_a_missing_destination_namespace_is_refused(variants):
    projects, apps, check = variants
    app = next(a for a in component_apps(apps) if named_namespaces_only(project_of(projects, a)))
    name, project = app["metadata"]["name"], app["spec"]["project"]

    def drop(apps, objects):
        del named(apps, name)["spec"]["destination"]["namespace"]
    added = check(drop)
    print("\n".join(added))
    assert f"{name}: application destination server '{IN_CLUSTER}' and namespace '' do not match any of the " \
           f"allowed destinations in project '{project}'" in added
    # Argo CD gives a namespaced object without a namespace the destination's: now none.
    kind = project_of(projects, app)["spec"]["namespaceResourceWhitelist"][0]["kind"]
    assert f"{name}: {kind} /allowed-{kind.lower()}: namespace  is not permitted in project '{project}'" in added


def test_an_object_in_kube_system_is_refused(variants):
    projects, apps, check = variants
    app = next(a for a in component_apps(apps)
               if not any(d["namespace"] == "kube-system" for d in project_of(projects, a)["spec"]["destinations"]))
    name, project = app["metadata"]["name"], app["spec"]["project"]
    kind = project_of(projects, app)["spec"]["namespaceResourceWhitelist"][0]

    def add(apps, objects):
        objects[name].append(P.Manifest(api_version(kind["group"]), kind["kind"], "intruder", "kube-system"))
    added = check(add)
    print("\n".join(added))
    assert added == [f"{name}: {kind['kind']} kube-system/intruder: namespace kube-system is not permitted in "
                     f"project '{project}'"]


def test_kinds_the_project_does_not_allow_are_refused(variants):
    projects, apps, check = variants
    app = next(a for a in component_apps(apps)
               if not whitelisted(project_of(projects, a), "namespaceResourceWhitelist", "", "PersistentVolumeClaim"))
    name, project, namespace = app["metadata"]["name"], app["spec"]["project"], app["spec"]["destination"]["namespace"]
    assert not whitelisted(project_of(projects, app), "clusterResourceWhitelist", "", "PersistentVolume")

    def add(apps, objects):
        objects[name] += [P.Manifest("v1", "PersistentVolumeClaim", "claim", ""),
                          P.Manifest("v1", "PersistentVolume", "volume", "")]
    added = check(add)
    print("\n".join(added))
    assert added == [
        f"{name}: PersistentVolume volume: resource :PersistentVolume is not permitted in project {project}",
        f"{name}: PersistentVolumeClaim {namespace}/claim: resource :PersistentVolumeClaim is not permitted in "
        f"project {project}"]


def test_a_cluster_scoped_object_is_judged_as_one_even_with_a_namespace(variants):
    """The scope comes from the API (OpenAPI spec, CRDs), not from metadata.namespace: Argo CD drops the namespace
    of a cluster-scoped object and checks it against the cluster-wide lists (a ClusterRole said to be in
    kube-system is still a ClusterRole)."""
    projects, apps, check = variants
    app = next(a for a in component_apps(apps)
               if whitelisted(project_of(projects, a), "clusterResourceWhitelist", "rbac.authorization.k8s.io",
                              "ClusterRole"))
    name = app["metadata"]["name"]

    def add(apps, objects):
        objects[name].append(P.Manifest("rbac.authorization.k8s.io/v1", "ClusterRole", "reader", "kube-system"))
    assert check(add) == []


def test_a_source_outside_the_project_is_refused(variants):
    _, apps, check = variants
    directory_app = next(a for a in apps if a["spec"]["source"].get("path") == "rendered")
    chart_app = component_apps(apps)[0]
    fork, registry = "https://github.com/someone-else/flame-gitops.git", "registry.example.com/charts"

    def change(apps, objects):
        named(apps, directory_app["metadata"]["name"])["spec"]["source"]["repoURL"] = fork
        named(apps, chart_app["metadata"]["name"])["spec"]["source"]["repoURL"] = registry
    added = check(change)
    print("\n".join(added))
    assert added == sorted([
        f"{directory_app['metadata']['name']}: application repo {fork} is not permitted in project "
        f"'{directory_app['spec']['project']}'",
        f"{chart_app['metadata']['name']}: application repo {registry} is not permitted in project "
        f"'{chart_app['spec']['project']}'"])


def test_a_missing_project_and_a_destination_by_name_are_reported(variants):
    _, apps, check = variants
    first, second = component_apps(apps)[:2]

    def change(apps, objects):
        named(apps, first["metadata"]["name"])["spec"]["project"] = "no-such-project"
        named(apps, second["metadata"]["name"])["spec"]["destination"] = {"name": "in-cluster", "namespace": "x"}
    added = check(change)
    print("\n".join(added))
    assert f"{first['metadata']['name']}: Application referencing project no-such-project which does not exist" in added
    assert f"{second['metadata']['name']}: destination server '' name 'in-cluster': only a destination by server is " \
           "checked here (a cluster name is resolved from Argo CD's cluster secrets); its objects are not checked" \
           in added


def test_a_kind_of_unknown_scope_fails_naming_it(bootstrap):
    _, apps = bootstrap
    with pytest.raises(AssertionError, match=r"example\.com/v1 Frobnicator team-a/frob"):
        P.checker_entries([(apps[0], [P.Manifest("example.com/v1", "Frobnicator", "frob", "team-a")])])


def test_scopes_come_from_the_pinned_api():
    """A few facts the checker's verdicts rest on, read from the pinned OpenAPI spec and CRDs."""
    known = P.scopes([])
    assert known[("", "Namespace")] is False and known[("", "Secret")] is True
    assert known[("rbac.authorization.k8s.io", "ClusterRole")] is False
    assert known[("rbac.authorization.k8s.io", "RoleBinding")] is True
    assert known[("kueue.x-k8s.io", "ClusterQueue")] is False and known[("kueue.x-k8s.io", "LocalQueue")] is True
    assert known[("argoproj.io", "Application")] is True


@pytest.mark.parametrize("annotations, applied", [
    ({}, True),
    ({"helm.sh/hook": "crd-install"}, True),
    ({"helm.sh/hook": "post-upgrade"}, True),
    ({"helm.sh/hook": "pre-install,pre-upgrade"}, True),
    ({"helm.sh/hook": "pre-delete"}, True),  # created when the Application is deleted, after the same check
    ({"helm.sh/hook": "test"}, False),
    ({"helm.sh/hook": "pre-rollback"}, False),
    ({"argocd.argoproj.io/hook": "Skip"}, False),
    ({"argocd.argoproj.io/hook": "PostSync", "helm.sh/hook": "test"}, True),
    ({"argocd.argoproj.io/hook": "PostDelete"}, True),
])
def test_which_hooks_argo_cd_applies(annotations, applied):
    assert P.applied_by_argo({"metadata": {"annotations": annotations}}) is applied
