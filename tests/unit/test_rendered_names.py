"""Names that meet only after rendering: every object name the render derives from the inventory
(generator/inventory/rendered_names.py) is checked for collisions in one place at load (inventory/rules.py,
`_check_rendered_names`), each refusal naming both places in the file. The property: random inventories never
render two objects of one kind, namespace and name on one cluster (read back from the rendered files), and the
check refuses exactly those whose objects would collide (the builders' objects, the check left out)."""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from generator.builders import bootstrap, bootstrap_objects, synced_objects
from generator.components import COMPONENTS
from generator.errors import InventoryInvalid
from generator.inventory import clusters, load_inventory_text
from generator.inventory.models import Inventory
from generator.inventory.naming import KUBE_SYSTEM, group_uid
from generator.inventory.rendered_names import rendered_names
from generator.inventory.rules import _check_rendered_names, check_inventory
from generator.layout import KUSTOMIZATION_FILE
from generator.tree import render_trees
from tests.support.inventories import edited, flame_data, own_components, platform_data, to_text

Identity = tuple[str | None, str, str | None, str]  # cluster (None: the one cluster), kind, namespace, name
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Objects whose names the code alone chooses, never the inventory (rendered_names.py leaves them out).
NAMED_BY_THE_CODE = {"ValidatingPolicy", "MutatingPolicy", "DeletingPolicy", "ClusterRole", "ClusterRoleBinding",
                     "Secret"}


def named_by_the_code(identity: Identity) -> bool:
    _, kind, namespace, _ = identity
    return kind in NAMED_BY_THE_CODE or (kind == "RoleBinding" and namespace == KUBE_SYSTEM)


def _manager(inventory: Inventory) -> str | None:
    return clusters.manager(inventory) if clusters.several(inventory) else None


def _identities(objects: list[dict], cluster: str | None) -> list[Identity]:
    """The objects' identities, and those of the Applications an ApplicationSet among them makes (its list
    generator's elements put into its template's name)."""
    out = []
    for obj in objects:
        meta = obj["metadata"]
        out.append((cluster, obj["kind"], meta.get("namespace"), meta["name"]))
        if obj["kind"] == "ApplicationSet":
            template = obj["spec"]["template"]["metadata"]
            out += [(cluster, "Application", template["namespace"],
                     template["name"].replace("{{.cluster}}", element["cluster"]))
                    for element in obj["spec"]["generators"][0]["list"]["elements"]]
    return out


def rendered(inventory: Inventory) -> list[Identity]:
    """Every object of a render, read back from its files, on the cluster it is applied to: each cluster's synced
    tree; the app-of-apps (root and platform) and the ApplicationSet's Applications on the manager."""
    trees = render_trees(inventory, "random.yaml")
    several = clusters.several(inventory)
    out: list[Identity] = []
    for path, content in trees.synced.items():
        if not path.endswith(KUSTOMIZATION_FILE):
            out += _identities([yaml.load(content, Loader=LOADER)], path.partition("/")[0] if several else None)
    out += _identities([yaml.load(content, Loader=LOADER) for content in trees.bootstrap.values()], _manager(inventory))
    return out


def built(inventory: Inventory) -> list[Identity]:
    """The same from the builders, for an inventory the check refuses (its files could not all be written)."""
    if clusters.several(inventory):
        out = [identity for name, _, role, view in bootstrap.cluster_members(inventory)
               for identity in _identities(synced_objects(view, role), name)]
    else:
        out = _identities(synced_objects(inventory), None)
    return out + _identities([obj for objects in bootstrap_objects(inventory).values() for obj in objects],
                             _manager(inventory))


def refused(data: dict) -> InventoryInvalid:
    with pytest.raises(InventoryInvalid) as refusal:
        load_inventory_text(to_text(data), "inventory.yaml")
    return refusal.value


def line_of(data: dict, text: str, occurrence: int = 1) -> int:
    lines = to_text(data).splitlines()
    found = [number for number, line in enumerate(lines, 1) if line == text]
    return found[occurrence - 1]


# ------------------------------------------------------------------ collisions, each naming both places


def worker_named(name: str):
    """platform_data() with its worker ember renamed `name` (the A100s go with it)."""
    def rename(data: dict) -> None:
        data["clusters"][name] = data["clusters"].pop("ember")
        data["classes"]["a100"]["cluster"] = name
    return rename


def test_a_clusters_application_may_not_take_the_app_of_apps_name():
    """The ApplicationSet names each cluster's Application <applicationName>-<cluster>: a cluster named `platform`
    with applicationName the platform's name would overwrite the app-of-apps `<name>-platform`."""
    data = edited(platform_data(), worker_named("platform"),
                  lambda d: d["cluster"]["gitops"].update(applicationName=d["cluster"]["name"]))
    (problem,) = refused(data).problems
    assert (problem.line, problem.column, problem.field) == (line_of(data, "  platform:"), 3, "clusters.platform")
    assert problem.reason == (
        f"the ApplicationSet's Application for cluster 'platform' and the app-of-apps "
        f"(inventory.yaml:{line_of(data, '  name: flame')}:3) would both render Application argocd/flame-platform: "
        "Kubernetes keeps one object of a name; rename one of them")


def test_a_clusters_application_may_not_take_a_components_name():
    data = edited(platform_data(), worker_named("kueue"),
                  lambda d: d["cluster"]["gitops"].update(applicationName="hub"))
    (problem,) = refused(data).problems
    assert (problem.line, problem.field) == (line_of(data, "  kueue:"), "clusters.kueue")
    assert problem.reason.startswith(
        f"the ApplicationSet's Application for cluster 'kueue' and component kueue on cluster 'hub' "
        f"(inventory.yaml:{line_of(data, '  hub:')}:3) would both render Application argocd/hub-kueue")


@pytest.mark.parametrize("suffix, other", [("platform", "the app-of-apps"), ("kueue", "component kueue"),
                                           ("kyverno", "component kyverno")])
def test_the_gpugen_application_may_not_take_another_applications_name(suffix, other):
    data = edited(flame_data(), lambda d: d["cluster"]["gitops"].update(applicationName=f"flame-{suffix}"))
    (problem,) = refused(data).problems
    assert (problem.line, problem.field) == (line_of(data, f"    applicationName: flame-{suffix}"),
                                             "cluster.gitops.applicationName")
    named = line_of(data, "  name: flame")
    assert problem.reason.startswith(f"the gpugen Application and {other} (inventory.yaml:{named}"
                                     f":3) would both render Application argocd/flame-{suffix}")


def test_a_name_free_because_the_component_is_adopted_is_not_refused():
    """No Kueue Application when the cluster already runs Kueue: its name is free for the gpugen Application."""
    load_inventory_text(to_text(edited(flame_data(),
                                       lambda d: d["cluster"]["gitops"].update(applicationName="flame-kueue"),
                                       lambda d: d["cluster"]["components"]["kueue"].update(install=False,
                                                                                              existing=True))))


def test_two_dashboards_may_not_share_a_uid():
    """A group name too long for a Grafana uid is shortened with a hash; another group named like that shortened
    uid would take the same dashboard ConfigMap."""
    long_name = "computational-neuroscience-of-very-long-names"
    data = edited(flame_data(), lambda d: d["groups"].__setitem__(long_name, {
        "namespaces": ["neuro"], "allocations": {"gh200": {"gpus": 0, "cpu": 0, "memory": "0"}}}))
    uid = group_uid(load_inventory_text(to_text(data)), long_name)
    assert len(uid) == 40 and uid != f"gpugen-flame-{long_name}"
    clash = uid.removeprefix("gpugen-flame-")
    data["groups"][clash] = {"namespaces": ["clash"], "allocations": {"gh200": {"gpus": 0, "cpu": 0, "memory": "0"}}}
    (problem,) = refused(data).problems
    assert problem.field == f"groups.{clash}"
    assert problem.reason.startswith(f"the dashboard of group {clash!r} and the dashboard of group {long_name!r} "
                                     f"(inventory.yaml:{line_of(data, f'  {long_name}:')}:3) would both render "
                                     f"ConfigMap monitoring/{uid}")


def test_an_application_the_applicationset_makes_fits_kubernetes_name_length():
    data = edited(platform_data(), lambda d: d["cluster"]["gitops"].update(applicationName="a" * 248))
    problems = refused(data).problems
    assert [p.field for p in problems] == ["clusters.flame", "clusters.ember"]  # <248 a>-hub is 252 characters
    assert "(254 characters); Kubernetes allows 253" in problems[0].reason


def test_the_cli_refuses_naming_both_lines_and_writes_nothing(tmp_path):
    from generator.cli import main
    inventory = tmp_path / "gpu_classes.yaml"
    data = edited(platform_data(), worker_named("platform"),
                  lambda d: d["cluster"]["gitops"].update(applicationName=d["cluster"]["name"]))
    inventory.write_text(to_text(data))
    result = CliRunner().invoke(main, ["render", "--inventory", str(inventory), "--out", str(tmp_path / "out"),
                                       "--bootstrap-out", str(tmp_path / "boot"), "--docs-out", str(tmp_path / "d.md")])
    assert result.exit_code == 2
    first, summary = result.stderr.splitlines()
    path = re.escape(str(inventory))
    assert re.fullmatch(rf"{path}:{line_of(data, '  platform:')}:3: clusters.platform: .* "
                        rf"\({path}:{line_of(data, '  name: flame')}:3\) would both render .*", first)
    assert summary.endswith("1 problem(s); nothing written.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu_classes.yaml"]


# ------------------------------------------------------------------ the list is the render's


@pytest.mark.parametrize("data", [
    flame_data(), edited(flame_data(), lambda d: d["cluster"].update(createNamespaces=False, chartMirror={
        "url": "registry.example.org/charts"}), lambda d: d["cluster"]["monitoring"].update(scrape="none")),
    edited(flame_data(), lambda d: d["cluster"]["components"]["kyverno"].update(install=False, existing=True)),
    platform_data(), edited(platform_data(), own_components)], ids=["flame", "flame-variant", "flame-adopted",
                                                                     "platform", "platform-own-components"])
def test_the_names_listed_are_exactly_the_rendered_ones_the_inventory_names(data):
    inventory = load_inventory_text(to_text(data))
    assert_listed_exactly(inventory, rendered(inventory))


def assert_listed_exactly(inventory: Inventory, identities: list[Identity]) -> None:
    """Every rendered object the inventory names is listed (on its cluster, or as part of the manager's tree on a
    worker), and nothing is listed that is not rendered."""
    listed = {entry.key for entry in rendered_names(inventory)}
    manager = _manager(inventory)
    missing = [identity for identity in identities if not named_by_the_code(identity) and identity not in listed
               and (manager,) + identity[1:] not in listed]
    assert missing == []
    assert listed - set(identities) == set()


# ------------------------------------------------------------------ the property

EXAMPLES = max(20, int(os.environ.get("GPUGEN_PROPERTY_EXAMPLES", "300")) // 4)
# Names chosen to meet: the platform's, components', the app-of-apps' suffix, groups' and namespaces'.
NAMES = ["flame", "hub", "platform", "kueue", "kyverno", "gpugen", "a", "a-b", "vision-lab", "flame-platform",
         "hub-kueue", "gpugen-hub"]
SUFFIXES = ["platform", "bootstrap", "gpugen", *COMPONENTS]


@st.composite
def random_inventory(draw) -> dict:
    """FLAME's cluster settings under random names, one to three classes and groups, on one cluster or several."""
    data = flame_data()
    cluster = data["cluster"]
    name = cluster["name"] = draw(st.sampled_from(NAMES))
    several = draw(st.booleans())
    members = draw(st.lists(st.sampled_from(NAMES + ["ember"]), min_size=2, max_size=3, unique=True)) if several else []
    cluster["gitops"]["applicationName"] = draw(st.one_of(
        st.sampled_from(NAMES), st.sampled_from([f"{prefix}-{suffix}" for prefix in [name, *members]
                                                 for suffix in SUFFIXES])))
    cluster["createNamespaces"] = draw(st.booleans())
    for component in COMPONENTS:
        if draw(st.integers(0, 4)) == 0:
            cluster["components"].setdefault(component, {"namespace": COMPONENTS[component].default_namespace}).update(
                install=False, existing=True)
    if several or draw(st.booleans()):
        cluster.pop("monitoring")
    label = cluster["gpuClassLabel"]
    template = data["classes"]["gh200"]
    class_names = draw(st.lists(st.sampled_from(["gh200", "a100", "h100", "platform", "a"]), min_size=1, max_size=3,
                                unique=True))
    data["classes"] = {}
    for index, class_name in enumerate(class_names):
        data["classes"][class_name] = {**template, "nodeSelector": {label: f"GPU-{index}"}}
        flavor = draw(st.sampled_from([None, "gh200", "shared", class_name]))
        if flavor:
            data["classes"][class_name]["flavor"] = flavor
    group_names = draw(st.lists(st.sampled_from(["vision-lab", "nlp-lab", "platform", "hub", "a"]), min_size=1,
                                max_size=3, unique=True))
    data["groups"] = {}
    for group_name in group_names:
        data["groups"][group_name] = {
            "namespaces": draw(st.lists(st.sampled_from([group_name, f"{group_name}-2", "shared", "flame"]),
                                        min_size=1, max_size=2)),
            "identities": {"groups": [f"oidc:{group_name}"]} if draw(st.booleans()) else {},
            "allocations": {class_name: {"gpus": 0, "cpu": 0, "memory": "0"} for class_name in class_names}}
    data["priorities"] = {priority: {"value": index, "default": index == 0} for index, priority in enumerate(
        draw(st.lists(st.sampled_from(["normal", "a", "platform"]), max_size=2, unique=True)))}
    if several:
        manager, *workers = members
        data["clusters"] = {member: {"role": "manager" if member == manager else "worker",
                                     "server": f"https://{member}.example.org:6443"} for member in members}
        for index, class_name in enumerate(class_names):
            data["classes"][class_name]["cluster"] = workers[index % len(workers)]
        if draw(st.booleans()):
            data["clusters"][workers[-1]]["components"] = {"kueue": {"namespace": "kueue"}}
    return data


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=bool(os.environ.get("CI")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=random_inventory())
def test_random_inventories_never_render_two_objects_of_one_name(data):
    inventory = Inventory.model_validate(yaml.safe_load(to_text(data)))
    collisions = list(_check_rendered_names(inventory))
    others = [finding for finding in check_inventory(inventory) if finding not in collisions]
    if others:
        event("refused by another rule")
        return
    if collisions:
        event("refused: names collide")
        assert {identity for identity, count in Counter(built(inventory)).items() if count > 1}, (
            "refused, but no two objects would share a name", collisions)
        with pytest.raises(InventoryInvalid):
            load_inventory_text(to_text(data))
        return
    event("rendered")
    identities = rendered(load_inventory_text(to_text(data)))
    assert [identity for identity, count in Counter(identities).items() if count > 1] == []
    assert_listed_exactly(inventory, identities)
